#!/usr/bin/env bash
# Runs the whole GPU test suite under one compute-sanitizer tool (memcheck,
# racecheck or synccheck) on the GPU machine: every test of gpu_tests as its
# own process under the tool, JOBS processes at a time on the one GPU (the
# tools are slow and partly CPU bound), the longest tests first so that the
# pool ends together. Stage first with scripts/device/device-stage-tests.sh; then,
# on the device with carry [".device"]:
#   bash scripts/device/device-sanitize.sh $OUT memcheck [JOBS (16)] [FILTER (*)] [SECONDS (540)] [-- TOOL ARGS]
# TOOL ARGS go to compute-sanitizer as they are (for instance a kernel filter).
# On a machine with several GPUs the processes are spread over them (each
# sees one GPU through CUDA_VISIBLE_DEVICES, by xargs' process slot; the
# tests that need two GPUs then skip); SAN_GPUS="0 1" picks the GPUs.
# SAN_LIGHT_FIRST=1 starts with the short tests instead (the most tests
# within a time limit that the whole suite does not fit).
# FILTER is a gtest filter, or @FILE: the full test names listed in FILE, one
# a line (lists too long for a filter; FILE relative to the repository root).
# A line "NAME parts=N" runs that test as N processes, part P of N with
# FAISS_EXT_TEST_PART=P/N (tests/TestUtils.h: the tests that support it run
# every N-th unit of their work; the N parts together are the whole test),
# reported as NAME#P/N. Totals then count these jobs.
# Racecheck's cost grows with every shared-memory access: under it the tests
# run sanitizer-sized (FAISS_EXT_TEST_SMALL=1, tests/TestUtils.h: the heavy
# tests take the same code paths on fewer rows, queries and repetitions).
# SAN_SMALL=0 keeps the full sizes, SAN_SMALL=1 shrinks under every tool.
# Writes OUT/sanitize_<tool>.log (every test's output, one after another) and
# prints: tests clean / with sanitizer errors / failed / timed out / not
# started, the tool's summary lines counted, elapsed time. Exit status 0 only
# when every test ran to the end, passed (or skipped) and the tool reported
# zero errors for every process.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:?output directory}
tool=${2:?memcheck, racecheck or synccheck}
jobs=${3:-16}
filter=${4:-*}
limit=${5:-540}
shift $(( $# < 5 ? $# : 5 ))
[ "${1:-}" = "--" ] && shift
source .device/env.sh
export FAISS_EXT_DATA_DIR=$PWD/.device/extra
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # JOBS processes share the cores
# the tools do not follow gtest's re-executed death-test children (they
# hang): the bad-input refusals run in the test's own process here
export FAISS_EXT_TEST_IN_PROCESS=1
small=${SAN_SMALL:-$([ "$tool" = racecheck ] && echo 1 || echo 0)}
[ "$small" = 1 ] && export FAISS_EXT_TEST_SMALL=1
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
bin=$PWD/.device/bin/tests/gpu_tests
work=$(mktemp -d)
start=$(date +%s)
gpus=${SAN_GPUS:-$(nvidia-smi -L 2>/dev/null | awk '/^GPU /{sub(":", "", $2); printf "%s ", $2}')}
export SAN_CS=$cs SAN_TOOL=$tool SAN_BIN=$bin SAN_WORK=$work SAN_END=$((start + limit)) SAN_ARGS="$*"
export SAN_GPUS="$gpus"

# full test names (suite.test), parameterised ones included
if [ "${filter#@}" != "$filter" ]; then
  grep -v -e '^#' -e '^[[:space:]]*$' "${filter#@}" |
    awk '{ n = 1; for (i = 2; i <= NF; ++i) if ($i ~ /^parts=[0-9]+$/) n = substr($i, 7) + 0
           if (n <= 1) print $1; else for (p = 0; p < n; ++p) print $1 "#" p "/" n }' >"$work/all"
else
  "$bin" --gtest_list_tests --gtest_filter="$filter" |
    awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}' >"$work/all"
fi
# the long ones first (measured under the tools on an H200), then the rest
heavy='InjectedAllocationFailuresBiLevelLSH TiledSearchEqualsUntiled GraphStructureAndAccessors
HostAndDevicePointersWithInIndices ExactOnIntegerDataEveryMode HostMatrixLargerThanTempMemoryIsStreamed
HostInputPagedInChunksWithAndWithoutPinnedStaging MatchesPartialSortEveryAlgo InjectedAllocationFailuresFlat
WrappersAreWalked ConcurrentSearchesOfOneIndexEqualSerial MergeQueueGroupSizesAndTHHeapSampleFactors
EachIndexRefusesKPastItsLimit FactoryTwinBecomesGnndWithItsParameters IncrementalAddsMergeWithGgm
DefaultConfigRecallAt10 SharedResourcesAcrossThreadsAndIndexes GridOfShapesAndPatterns DegreeSweep
FileBuildMatchesInMemoryBuild TwoGpusMatchOneGpu RealDataSiftSmall'
: >"$work/order"
for h in $heavy; do grep -F ".$h" "$work/all" >>"$work/order" || true; done
grep -v -x -F -f "$work/order" "$work/all" >>"$work/order" || true
awk '!seen[$0]++' "$work/order" >"$work/order1" && mv "$work/order1" "$work/order"
# SAN_LIGHT_FIRST=1: the other way round, the most tests in a time limit
if [ "${SAN_LIGHT_FIRST:-0}" = 1 ]; then tac "$work/order" >"$work/order1" && mv "$work/order1" "$work/order"; fi
total=$(wc -l <"$work/order")
echo "$tool: $total tests (a test in parts counts each part), $jobs at a time on GPUs ${gpus:-(default)}, ${limit} s, tool args: ${SAN_ARGS:-none}," \
  "sizes: $([ "$small" = 1 ] && echo 'sanitizer-sized (FAISS_EXT_TEST_SMALL=1)' || echo full)"

run_one() {
  local t=$1 safe left
  safe=$(echo "$t" | tr '/' '_')
  left=$((SAN_END - $(date +%s)))
  if [ "$left" -le 10 ]; then
    echo notrun >"$SAN_WORK/$safe.rc"
    return
  fi
  local -a g=($SAN_GPUS)
  if [ ${#g[@]} -gt 1 ]; then export CUDA_VISIBLE_DEVICES=${g[$((SLOT % ${#g[@]}))]}; fi
  local name=${t%%#*}
  if [ "$name" != "$t" ]; then export FAISS_EXT_TEST_PART=${t#*#}; fi
  # shellcheck disable=SC2086
  timeout "$left" "$SAN_CS" --tool "$SAN_TOOL" --error-exitcode 9 --print-limit 100 $SAN_ARGS \
    "$SAN_BIN" --gtest_filter="$name" >"$SAN_WORK/$safe.log" 2>&1
  echo $? >"$SAN_WORK/$safe.rc"
}
export -f run_one
xargs -a "$work/order" -P "$jobs" --process-slot-var=SLOT -I{} bash -c 'run_one "$1"' _ {}

clean=0 errors=0 failed=0 timedout=0 notrun=0 skipped=0 nocuda=0
bad=()
: >"$out/sanitize_$tool.log"
while read -r t; do
  safe=$(echo "$t" | tr '/' '_')
  rc=$(cat "$work/$safe.rc" 2>/dev/null || echo notrun)
  f=$work/$safe.log
  if [ "$rc" = notrun ]; then
    notrun=$((notrun + 1)); bad+=("$t: not started (time)"); continue
  fi
  { echo "===== $t (rc $rc) ====="; cat "$f"; } >>"$out/sanitize_$tool.log"
  grep -q '^\[  SKIPPED \] [A-Za-z]' "$f" && skipped=$((skipped + 1))
  # a test that makes no CUDA call passes, and the tool exits 255 for want
  # of anything to check: nothing on the GPU to sanitize
  if [ "$rc" = 255 ] && grep -q 'terminated before first instrumented API call' "$f" &&
    grep -q '^\[  PASSED  \] 1 test' "$f"; then
    rc=0 nocuda=$((nocuda + 1))
  fi
  case $rc in
    0) clean=$((clean + 1)) ;;
    9) errors=$((errors + 1)); bad+=("$t: sanitizer errors") ;;
    124 | 137) timedout=$((timedout + 1)); bad+=("$t: timed out") ;;
    *) failed=$((failed + 1)); bad+=("$t: rc $rc (test failure)") ;;
  esac
done <"$work/order"
summaries=$(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY' "$work"/*.log 2>/dev/null |
  sed 's/^=* *//' | sort | uniq -c)
echo "$tool: $clean clean (of which $skipped skipped, $nocuda with no CUDA call), $errors with sanitizer errors, $failed failed," \
  "$timedout timed out, $notrun not started; of $total"
echo "$tool summary lines (count, line):"
echo "$summaries"
for b in "${bad[@]}"; do echo "  $b"; done
echo "elapsed $(($(date +%s) - start)) s"
{
  echo "===== totals: $clean clean (of which $skipped skipped, $nocuda with no CUDA call), $errors with sanitizer errors, $failed failed, $timedout timed out, $notrun not started; of $total"
  echo "$summaries"
  for b in "${bad[@]}"; do echo "  $b"; done
} >>"$out/sanitize_$tool.log"
[ "$clean" = "$total" ]
