#!/usr/bin/env bash
# Bi-level LSH on the four benchmark data sets, one device call (DEVICE.md;
# stage with bench/stage_ann.sh first, carry [".device"]):
#   GITSHA=$(git rev-parse --short HEAD) bash bench/run_lsh_device.sh
# 1. bench_ann --methods lsh on clustered 1M x 128, hard 1M x 100, Fashion-MNIST
#    60k (9,000 measured queries: the last 1,000 test images are the tuner's)
#    and augmented Fashion-MNIST 1M PCA-128, one process: our exact index, then
#    GpuIndexBiLevelLSH with the defaults and autotuned (on the GPU) to recall
#    0.95 and 0.9, each with an nprobe sweep; writes the data for the anchors;
# 2. ANCHORS=1 (default): FAISS GPU IVF-Flat and FAISS CPU IndexLSH in their own
#    process on the same files (faiss-gpu anchor kit); HNSW=1 adds FAISS CPU
#    HNSWFlat (about a minute per 1M set to build: past the ~150 s budget).
# TUNE_ARGS: extra bench_ann options, e.g. TUNE_ARGS="--tune-lm 16x12 --tune-lattices 0"
# for a shorter run (a third of the tuner's builds; no E8 on the GPU).
# Timeouts (400 s + 150 s) keep one device call under its 600 s.
# Output: $OUT/lsh_ann.jsonl, $OUT/lsh_anchors.jsonl (+ .err).
set -u
source .device/env.sh
mkdir -p "$OUT" /tmp/lshann/clustered /tmp/lshann/hard /tmp/lshann/fmnist /tmp/lshann/fmnist-aug-pca
G=${GITSHA:-unknown}
export FAISS_EXT_GIT=$G
t0=$(date +%s)
timeout 400 .device/bin/bench/bench_ann --data clustered,hard,fmnist,fmnist-aug-pca --methods lsh \
  --fmnist-dir .device/extra --tune-queries 1000 --runs 5 --latency 50 --write-root /tmp/lshann ${TUNE_ARGS:-} \
  >> "$OUT/lsh_ann.jsonl" 2>> "$OUT/lsh_ann.err"
echo "bench_ann rc=$? ($(( $(date +%s) - t0 )) s)"
grep -h "autotune\|lsh " "$OUT/lsh_ann.err"
if [ "${ANCHORS:-1}" = 1 ]; then
  mkdir -p /tmp/fcl
  for pair in libopenblaso-r0-d77a1985.3.15.so:libopenblas.so.0 libgfortran-83c28eba.so.5.0.0:libgfortran.so.5 \
              libgomp-e985bcbb.so.1.0.0:libgomp.so.1 libquadmath-2284e583.so.0.0.0:libquadmath.so.0; do
    ln -sf /tmp/devlib/${pair#*:} /tmp/fcl/${pair%%:*}
  done
  which=ivf,lsh
  [ "${HNSW:-0}" = 1 ] && which=ivf,lsh,hnsw
  (source .device/anchor/faiss-gpu-anchor-env.sh .device/anchor/faiss-gpu-anchor.tgz /tmp/fcl &&
   timeout 150 python3 bench/anchor_ann.py --git "$G" --anchors $which \
     --dirs /tmp/lshann/clustered,/tmp/lshann/hard,/tmp/lshann/fmnist,/tmp/lshann/fmnist-aug-pca \
     >> "$OUT/lsh_anchors.jsonl" 2>> "$OUT/lsh_anchors.err"; echo "anchors rc=$?")
  tail -3 "$OUT/lsh_anchors.err"
fi
python3 - "$OUT/lsh_ann.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["method"].endswith(("-build", "-sweep", "-tune-point")):
        continue
    p = r.get("params", {})
    print("%-15s %-24s recall %.4f  qps %9.0f  x exact %5.2f  %s" % (
        r["dataset"], r["method"], r.get("recall", 0), r.get("qps", 0), r.get("speedup_vs_exact", 1),
        {k: p[k] for k in ("depth", "L", "M", "bucket_width", "nprobe", "group_probes", "group_margin") if k in p}))
PY
