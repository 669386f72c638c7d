#!/usr/bin/env bash
# One device run (one GPU is enough; carry [".device"], staged with
# scripts/device/device-stage-tests.sh) for what racecheck had left of the GPU suite
# on 2026-11-22 (README, "Sanitizers"; it made
# sanitize_racecheck_small_left_h100_run2.log), all at once within
# SECONDS (560):
#   - scripts/device/sanitize-lists/racecheck-left.txt (sanitizer-sized, kernel filter);
#   - GpuReliabilityThreads.SharedResourcesAcrossThreadsAndIndexes again, with
#     CUDA_MODULE_LOADING=EAGER (every module loaded when the context is made),
#     the one test where racecheck reported a tool-internal error;
#   - that test plain at full size, first (it changed).
# Usage there: bash scripts/device/device-racecheck-left.sh $OUT [SECONDS]
# Writes OUT/{left,eager}/sanitize_racecheck.log and OUT/plain.log, and prints
# the summaries and every "Internal Sanitizer Error" line with the phase
# marks around it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:?output directory}
secs=${2:-560}
filt=(-- --kernel-name kns=faiss_ext)
shared=GpuReliabilityThreads.SharedResourcesAcrossThreadsAndIndexes
mkdir -p "$out/left" "$out/eager"
( source .device/env.sh; export FAISS_EXT_DATA_DIR=$PWD/.device/extra
  .device/bin/tests/gpu_tests --gtest_filter="$shared" ) >"$out/plain.log" 2>&1
echo "plain, full size: $(grep -E '^\[  (PASSED|FAILED) ' "$out/plain.log" | tr '\n' ' ')"
bash scripts/device/device-sanitize.sh "$out/left" racecheck 4 @scripts/device/sanitize-lists/racecheck-left.txt \
  "$secs" "${filt[@]}" >"$out/left.txt" 2>&1 &
CUDA_MODULE_LOADING=EAGER bash scripts/device/device-sanitize.sh "$out/eager" racecheck 1 "$shared" \
  "$secs" "${filt[@]}" >"$out/eager.txt" 2>&1 &
wait
for f in left eager; do
  echo "=== $f"; cat "$out/$f.txt"; rm -f "$out/$f.txt"
done
grep -h -E 'Internal Sanitizer Error|\[faiss_ext tests\] .* at \+' "$out"/*/sanitize_racecheck.log
