#!/usr/bin/env bash
# The ann suite on the GPU machine, one device call (DEVICE.md; stage with
# bench/stage_ann.sh first, carry [".device"]):
#   GITSHA=$(git rev-parse --short HEAD) bash bench/run_ann_device.sh
# 1. bench_ann on the five data sets (clustered, hard, Fashion-MNIST, augmented
#    Fashion-MNIST at 784-d and PCA 128-d), search graph at degrees 32 and 64,
#    our exact index in the same process; writes the data for the anchors;
# 2. the FAISS anchors (GPU IVF-Flat, CPU HNSW) in their own process on the
#    same files, through the faiss-gpu anchor kit.
# Output: $OUT/ann.jsonl, $OUT/anchors.jsonl (+ .err), and a summary.
set -u
source .device/env.sh
mkdir -p "$OUT" /tmp/ann
G=${GITSHA:-unknown}
export FAISS_EXT_GIT=$G
for ds in clustered hard fmnist fmnist-aug-pca fmnist-aug; do
  mkdir -p /tmp/ann/$ds
  extra=""
  [ $ds = hard ] && extra="--entry-seeds 0,8"
  timeout 150 .device/bin/bench/bench_ann --data $ds --fmnist-dir .device/extra --write-dir /tmp/ann/$ds \
    --degrees 32:64,64:128 --itopk 16,32,64,128,256 --latency 100 --latency-blocks 0,1 $extra >> "$OUT/ann.jsonl" 2>> "$OUT/ann.err"
  echo "$ds rc=$?"
done
source "$(dirname "${BASH_SOURCE[0]}")/anchor_libs.sh" && fx_anchor_libs /tmp/fcl
(source .device/anchor/faiss-gpu-anchor-env.sh .device/anchor/faiss-gpu-anchor.tgz /tmp/fcl &&
 timeout 330 python3 bench/anchor_ann.py --git "$G" \
   --dirs /tmp/ann/clustered,/tmp/ann/hard,/tmp/ann/fmnist,/tmp/ann/fmnist-aug-pca,/tmp/ann/fmnist-aug \
   >> "$OUT/anchors.jsonl" 2>> "$OUT/anchors.err"; echo "anchors rc=$?")
tail -3 "$OUT/anchors.err" "$OUT/ann.err"
python3 bench/ann_summary.py "$OUT/ann.jsonl" "$OUT/anchors.jsonl"
