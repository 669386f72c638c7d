#!/usr/bin/env bash
# One device run (one GPU; carry [".device"], staged with
# scripts/device/device-stage-tests.sh) for the GPU code written in sittings
# that had no GPU: the tests of those areas plain at full size, then
# sanitizer-sized (FAISS_EXT_TEST_SMALL) under memcheck and racecheck side by side
# (scripts/device/device-sanitize.sh), the tests listed in
# scripts/device/sanitize-lists/unrun-changes.txt (the probe of queries
# unlike the data, their detection, host-query results of the graph search,
# the residual corpus and its bounded search).
# Usage there: bash scripts/device/device-unrun-changes.sh $OUT [SECONDS (300)]
# Writes OUT/plain.log, OUT/memcheck/sanitize_memcheck.log and
# OUT/racecheck/sanitize_racecheck.log; prints each part's summary.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:?output directory}
secs=${2:-300}
plain='GpuProbe*:GpuSearchGraph*:GpuHostQueries.*:GpuFilteredGraphSearch.*:GpuFilteredSearchPaths.*'
plain+=':GpuRangeSearch.*:GpuGraphRemoveIds.*:GpuResidualCorpus.*:GpuFlatBoundedResidual.*'
plain+=':GpuFusedCandidates.*:GpuFlatBounded*:GpuFlatBf16x3*:GpuEntrySample*'
list=@scripts/device/sanitize-lists/unrun-changes.txt
mkdir -p "$out/memcheck" "$out/racecheck"
( source .device/env.sh; export FAISS_EXT_DATA_DIR=$PWD/.device/extra
  timeout "$secs" .device/bin/tests/gpu_tests --gtest_brief=1 --gtest_filter="$plain" ) \
  >"$out/plain.log" 2>&1
echo "plain (rc $?): $(grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]' "$out/plain.log" | tr '\n' ' ')"
SAN_SMALL=1 bash scripts/device/device-sanitize.sh "$out/memcheck" memcheck 6 "$list" "$secs" \
  >"$out/memcheck.txt" 2>&1 &
bash scripts/device/device-sanitize.sh "$out/racecheck" racecheck 6 "$list" "$secs" \
  -- --kernel-name kns=faiss_ext >"$out/racecheck.txt" 2>&1 &
wait
for t in memcheck racecheck; do echo "== $t"; tail -8 "$out/$t.txt"; done
