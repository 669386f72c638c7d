#!/usr/bin/env bash
# Bi-level LSH on the five benchmark data sets (DEVICE.md; stage with
# bench/stage_ann.sh first, carry [".device"]). Two device calls, on the same
# machine (the second reads the files the first wrote under /tmp/lshann):
#   GITSHA=$(git rev-parse --short HEAD) SETS=clustered,hard,fmnist bash bench/run_lsh_device.sh
#   GITSHA=... SETS=fmnist-aug-pca,fmnist-aug ANCHORS=1 bash bench/run_lsh_device.sh
# 1. bench_ann --methods lsh, one process per data set (its own timeout,
#    PER_SET seconds, default 170): our exact index, then GpuIndexBiLevelLSH
#    with the defaults and autotuned (on the GPU) to recall 0.95 and 0.9,
#    each with an nprobe sweep; writes the data for the anchors. Fashion-MNIST
#    60k measures 9,000 queries (the last 1,000 test images are the tuner's).
# 2. ANCHORS=1: FAISS GPU IVF-Flat, FAISS CPU IndexLSH and HNSWFlat (HNSW
#    skipped past 2e8 floats, i.e. on the 784-d 1M set) in their own process
#    on every set written so far (faiss-gpu anchor kit).
# METHODS=exact: our exact index only, writing the same files (the tuner's
# queries held out as in the lsh run), for anchors on a fresh machine.
# TUNE_ARGS: extra bench_ann options, e.g. TUNE_ARGS="--tune-lm 16x12 --tune-lattices 0"
# for a shorter tuning (a third of the tuner's builds; no E8 on the GPU).
# Output: $OUT/lsh_ann.jsonl, $OUT/lsh_anchors.jsonl (+ .err), a summary.
set -u
source .device/env.sh
mkdir -p "$OUT"
G=${GITSHA:-unknown}
export FAISS_EXT_GIT=$G
for ds in $(echo "${SETS:-clustered,hard,fmnist,fmnist-aug-pca,fmnist-aug}" | tr , ' '); do
  mkdir -p /tmp/lshann/$ds
  t0=$(date +%s)
  timeout "${PER_SET:-170}" .device/bin/bench/bench_ann --data $ds --methods ${METHODS:-lsh} --suite ann-lsh \
    --fmnist-dir .device/extra --tune-queries 1000 --runs 5 --latency 50 --write-dir /tmp/lshann/$ds ${TUNE_ARGS:-} \
    >> "$OUT/lsh_ann.jsonl" 2>> "$OUT/lsh_ann.err"
  echo "$ds: bench_ann rc=$? ($(( $(date +%s) - t0 )) s)"
done
grep -h "autotune\|lsh " "$OUT/lsh_ann.err"
if [ "${ANCHORS:-0}" = 1 ]; then
  source "$(dirname "${BASH_SOURCE[0]}")/anchor_libs.sh" && fx_anchor_libs /tmp/fcl
  dirs=$(ls -d /tmp/lshann/*/ | sed 's#/$##' | paste -sd,)
  (source .device/anchor/faiss-gpu-anchor-env.sh .device/anchor/faiss-gpu-anchor.tgz /tmp/fcl &&
   timeout "${ANCHOR_TIMEOUT:-300}" python3 bench/anchor_ann.py --git "$G" --anchors ivf,lsh,hnsw --suite ann-lsh --dirs "$dirs" \
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
