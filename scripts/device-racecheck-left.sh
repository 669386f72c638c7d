#!/usr/bin/env bash
# One device run (nvidia-h200-x4, carry [".device"], staged with
# scripts/device-stage-tests.sh) for what racecheck has left of the GPU suite
# (README, "Sanitizers"), all at once within SECONDS (560):
#   - scripts/sanitize-lists/racecheck-left.txt, its parts spread over GPUs 0-3;
#   - racecheck-two-gpus-left.txt with GPUs 2 and 3 visible to every process;
#   - GpuReliabilityThreads.SharedResourcesAcrossThreadsAndIndexes, where
#     racecheck reported a tool-internal error ("failure to track a kernel
#     launch"), three ways: racecheck with no kernel filter, racecheck with
#     CUDA_MODULE_LOADING=EAGER, and memcheck;
#   - memcheck and synccheck of memcheck-synccheck-left.txt (the two-GPU
#     tests, which skipped in the whole-suite runs, and two tests added
#     since), GPUs 0 and 1 visible to every process, sanitizer-sized.
# Usage there: bash scripts/device-racecheck-left.sh $OUT [SECONDS]
# Writes OUT/{left,two,diag_nofilter,diag_eager,diag_memcheck,mem,sync}/sanitize_*.log
# (7 files: the device tool brings back only a few) and prints the summaries.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?output directory}
secs=${2:-560}
filt=(-- --kernel-name kns=faiss_ext)
shared=GpuReliabilityThreads.SharedResourcesAcrossThreadsAndIndexes
for d in left two diag_nofilter diag_eager diag_memcheck mem sync; do mkdir -p "$out/$d"; done
SAN_GPUS="0 1 2 3" bash scripts/device-sanitize.sh "$out/left" racecheck 48 \
  @scripts/sanitize-lists/racecheck-left.txt "$secs" "${filt[@]}" >"$out/left.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=2,3 SAN_GPUS=2,3 bash scripts/device-sanitize.sh "$out/two" racecheck 4 \
  @scripts/sanitize-lists/racecheck-two-gpus-left.txt "$secs" "${filt[@]}" >"$out/two.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=1 SAN_GPUS=1 bash scripts/device-sanitize.sh "$out/diag_nofilter" racecheck 1 \
  "$shared" "$secs" >"$out/diag_nofilter.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=0 SAN_GPUS=0 CUDA_MODULE_LOADING=EAGER bash scripts/device-sanitize.sh \
  "$out/diag_eager" racecheck 1 "$shared" "$secs" "${filt[@]}" >"$out/diag_eager.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=3 SAN_GPUS=3 SAN_SMALL=1 bash scripts/device-sanitize.sh "$out/diag_memcheck" memcheck 1 \
  "$shared" "$secs" >"$out/diag_memcheck.txt" 2>&1 &
for t in mem sync; do
  CUDA_VISIBLE_DEVICES=0,1 SAN_GPUS=0,1 SAN_SMALL=1 bash scripts/device-sanitize.sh "$out/$t" ${t}check 10 \
    @scripts/sanitize-lists/memcheck-synccheck-left.txt "$secs" >"$out/$t.txt" 2>&1 &
done
wait
for f in left two diag_nofilter diag_eager diag_memcheck mem sync; do
  echo "=== $f"; cat "$out/$f.txt"; rm -f "$out/$f.txt"
done
grep -h 'Internal Sanitizer Error' "$out"/*/sanitize_*.log | sort | uniq -c
