#!/usr/bin/env bash
# Runs the whole GPU test suite under compute-sanitizer (memcheck, racecheck,
# synccheck) on the GPU machine, every tool over every test, the tests split
# into gtest shards that run as parallel processes on the one GPU (the
# sanitizers are CPU bound). Stage first with scripts/device-stage-tests.sh;
# then, on the device with carry [".device"]:
#   bash scripts/device-sanitize.sh $OUT "memcheck racecheck synccheck" 5 [filter] [seconds]
# Writes OUT/sanitize_<tool>.log (the shards' logs one after another) and
# prints per shard: tests passed / failed, the tool's summary line, the exit
# status. Exit status 0 only when every shard of every tool finished with
# all tests passed and zero errors / hazards.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?output directory}
tools=${2:-"memcheck racecheck synccheck"}
shards=${3:-4}
filter=${4:-*}
limit=${5:-560}
source .device/env.sh
export FAISS_EXT_DATA_DIR=$PWD/.device/extra
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
work=$(mktemp -d)
start=$(date +%s)
for t in $tools; do
  for s in $(seq 0 $((shards - 1))); do
    (
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$s timeout "$limit" \
        "$cs" --tool "$t" --error-exitcode 9 --print-limit 100 \
        .device/bin/tests/gpu_tests --gtest_filter="$filter" >"$work/$t.$s.log" 2>&1
      echo $? >"$work/$t.$s.rc"
    ) &
  done
done
wait
status=0
for t in $tools; do
  : >"$out/sanitize_$t.log"
  for s in $(seq 0 $((shards - 1))); do
    f=$work/$t.$s.log
    rc=$(cat "$work/$t.$s.rc")
    passed=$(grep -m1 -o '\[  PASSED  \] [0-9]* test' "$f" | grep -o '[0-9]*' || echo 0)
    failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$f" || true)
    skipped=$(grep -m1 -o '\[  SKIPPED \] [0-9]* test' "$f" | grep -o '[0-9]*' || echo 0)
    summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY' "$f" | tail -1)
    echo "$t shard $s/$shards: rc $rc, passed $passed, skipped $skipped, failed $failed; $summary"
    { echo "===== $t shard $s/$shards (rc $rc) ====="; cat "$f"; } >>"$out/sanitize_$t.log"
    [ "$rc" = 0 ] || status=1
  done
done
echo "elapsed $(( $(date +%s) - start )) s; exit $status"
rm -rf "$work"
exit $status
