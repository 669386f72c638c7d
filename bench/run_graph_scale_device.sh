#!/usr/bin/env bash
# Graph search at 1M and 10M with the anchors, in one device call (issue 38):
# bench_ann (ours with numpy and with device queries, our exact index) on the
# bench's clustered 1M x 128, the hard 1M x 100, Fashion-MNIST augmented to
# 1M (128-d by PCA and 784-d), the hard 1M with queries from another mixture
# and a hard 10M x 96 of 3,000 clusters; then, in their own processes on the same files, cuVS CAGRA
# (bench/anchor_cagra.py: NN-Descent and IVF-PQ builds) and FAISS GPU
# IVF-Flat (bench/anchor_ann.py).
# Stage first: bench/stage_ann.sh BUILD FAISS_KIT (then move .device to
# STAGE); the cuVS kit unpacked into /tmp/cuvs-site and /tmp/njl by the two
# calls ../shared/tools/cuvs-anchor/make-kit describes, just before.
#   STAGE=build-devb CUVS_ENV=build-kit2/cuvs-anchor-env.sh GITSHA=$(git rev-parse --short HEAD) \
#     bash bench/run_graph_scale_device.sh
# FX_ANN_EXTRA adds bench_ann options to our runs (issue 38's next step at 10M:
# FX_ANN_EXTRA="--knn-iterations 9 --width 1,2" beside CAGRA in one sitting).
# Output: $OUT/ann.jsonl, $OUT/cagra.jsonl, $OUT/ivf.jsonl (+ .err files).
set -u
S=${STAGE:-.device}
source "$S/env.sh"
mkdir -p "$OUT" /tmp/ann
G=${GITSHA:-unknown}
export FAISS_EXT_GIT=$G
# FX_ANN_SETS: the sets to run (default all six; the 10M set and CAGRA's
# builds of it take most of the call: run it in a call of its own when the
# 1M sets are many)
SETS=${FX_ANN_SETS:-clustered hard fmnist-aug-pca fmnist-aug hard-ood hard-c3000}
ours() {
  local name=$1 limit=$2; shift 2
  case " $SETS " in *" $name "*) ;; *) return 0 ;; esac
  mkdir -p /tmp/ann/$name
  # FX_ANN_EXTRA: more bench_ann options for our runs, e.g. "--knn-iterations 9 --width 1,2"
  timeout "$limit" "$S/bin/bench/bench_ann" "$@" --write-dir /tmp/ann/$name --device-queries \
    --latency 100 ${FX_ANN_EXTRA:-} >> "$OUT/ann.jsonl" 2>> "$OUT/ann.err"
  echo "$name rc=$? $(date +%T)"
}
ours clustered 120 --data clustered --degrees 32:64,64:128 --itopk 16,32,64,128,256
ours hard 120 --data hard --degrees 32:64,64:128 --itopk 16,32,64,128,256,512
# real-derived (Fashion-MNIST IDX files staged by bench/stage_ann.sh) and
# queries unlike the data (another mixture of the hard generator)
ours fmnist-aug-pca 150 --data fmnist-aug-pca --fmnist-dir "$S/extra" --degrees 64:128 --itopk 16,32,48,64,96,128
ours fmnist-aug 200 --data fmnist-aug --fmnist-dir "$S/extra" --degrees 64:128 --itopk 16,32,48,64,96,128
ours hard-ood 150 --data hard --hard-query-seed 777 --degrees 64:128 --entry-points 65536 --entry-seeds 8,32 \
  --itopk 64,128,256,512 --methods graph,exact
# detection of queries unlike the data (GpuIndexSearchGraphConfig::unlikeQueryRatio):
# the same queries answered by the probe (32 / 48 / 64 lists) or exactly (0)
# once flagged, and an in-distribution set with it on (the flagged and
# answered counts are in each line)
ours hard-ood 150 --data hard --hard-query-seed 777 --degrees 64:128 --unlike-ratio 3 --itopk 16,32 \
  --unlike-probes 32,48,64,0
ours hard 90 --data hard --degrees 64:128 --unlike-ratio 3 --itopk 16,32,64
ours hard-c3000 180 --data hard --hard-d 96 --hard-clusters 3000 --nb 10000000 --degrees 64:128 \
  --itopk 32,64,128,256,512 --runs 5
sets=$(for n in $SETS; do printf '/tmp/ann/%s,' "$n"; done); sets=${sets%,}
(source "${CUVS_ENV:?}" && timeout 300 python3 bench/anchor_cagra.py --git "$G" --dirs $sets \
   >> "$OUT/cagra.jsonl" 2>> "$OUT/cagra.err"; echo "cagra rc=$? $(date +%T)")
source "$(dirname "${BASH_SOURCE[0]}")/anchor_libs.sh" && fx_anchor_libs /tmp/fcl
(source "$S/anchor/faiss-gpu-anchor-env.sh" "$S/anchor/faiss-gpu-anchor.tgz" /tmp/fcl &&
 timeout 150 python3 bench/anchor_ann.py --git "$G" --anchors ivf --dirs $sets \
   >> "$OUT/ivf.jsonl" 2>> "$OUT/ivf.err"; echo "ivf rc=$? $(date +%T)")
tail -3 "$OUT"/*.err
