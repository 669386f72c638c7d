#!/usr/bin/env bash
# Exact search at scale (issue 39) on the GPU machine, one device call, after
# bench/stage_flat_scale.sh (bench_flat, the libraries and the faiss-gpu anchor
# kit in .device); carry [".device"].
#   FX_SCALE_NB=10000000 FX_SCALE_NQ=10000 GITSHA=$(git rev-parse --short HEAD) \
#       bash bench/run_flat_scale_device.sh
# 1. a hard set far from the origin (bench/gen_far_clusters.py, on the GPU):
#    FX_SCALE_NB x 96, 3,000 Zipf-sized clusters, centre norms about 50;
# 2. bench_flat: ours at fp32, tf32-bounded and bf16x3-bounded
#    (FX_SCALE_PRECISION; certified / fallback counts), the FP32, TF32 and
#    BF16x3 GEMM floors (best tile shape), k 10 and 100;
# 3. torch mm + topk and FAISS GPU GpuIndexFlatL2 on the same files, each in
#    its own process, in the same call.
# FX_SCALE_DATA=clustered: bench/gen_clustered's data instead (FX_SCALE_D, default 96;
# FX_SCALE_SEED, default 6161), near the origin, where TF32 certifies.
# FX_SCALE_KEEP=1: keep the generated files (in FX_BENCH_TMP, default /tmp/fx_scale) for a
# later command of the same call. FX_SCALE_SKIP_ANCHORS=1: ours and the floors only; FX_SCALE_ANCHOR_TIMEOUT:
# seconds for each anchor (default 300).
# Output: $OUT/flat_scale.jsonl (+ .err).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py_ld_path=${LD_LIBRARY_PATH:-}
source .device/env.sh
nb=${FX_SCALE_NB:-10000000}
nq=${FX_SCALE_NQ:-10000}
reps=${FX_SCALE_REPS:-3}
G=${GITSHA:-unknown}
export FAISS_EXT_GIT=$G
# The CPU reference (FAISS IndexFlatL2 on all cores): passive OpenMP waiting,
# or OpenMP's idle threads spin against OpenBLAS's (168 s for 256 queries of
# a 10M set without it, on 16 cores); fewer queries scored past 10M.
ncpu=$(nproc)
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$ncpu OPENBLAS_NUM_THREADS=$ncpu
recall_nq=${FX_SCALE_RECALL_NQ:-$((nb > 10000000 ? 32 : 256))}
tmp=${FX_BENCH_TMP:-/tmp/fx_scale}
mkdir -p "$tmp" "$OUT"
out=$OUT/flat_scale.jsonl
err=$OUT/flat_scale.err
source bench/flat_scale_set.sh
# clustered: near the origin, the bounded TF32 path's own ground
flat_scale_set "$tmp/far" "${FX_SCALE_DATA:-far}" "$nb" "$nq" "${FX_SCALE_D:-96}" \
  "${FX_SCALE_SEED:-6161}" "$err"
echo "gen $name rc=$? $(date +%T)"
timeout "${FX_SCALE_OURS_TIMEOUT:-400}" .device/bin/bench/bench_flat --base "$tmp/far_base.fbin" \
  --query "$tmp/far_query.fbin" --dataset "$name" --k 10,100 --methods ours,floor \
  --precision "${FX_SCALE_PRECISION:-fp32,tf32-bounded,bf16x3-bounded}" --reps "$reps" --recall-nq "$recall_nq" --ref-out "$tmp/ref" \
  --floor-mem-gib 8 >> "$out" 2>> "$err"
echo "ours rc=$? $(date +%T)"
if [ "${FX_SCALE_SKIP_ANCHORS:-0}" = 1 ]; then  # ours only (anchors measured earlier on the same seed)
  grep -h "fallback\|floor\|qps" "$err" | tail -20; [ "${FX_SCALE_KEEP:-0}" = 1 ] || rm -rf "$tmp"; exit 0
fi
ref=(); [ -f "$tmp/ref.ivecs" ] && ref=(--ref "$tmp/ref.ivecs")  # none if bench_flat failed
at=${FX_SCALE_ANCHOR_TIMEOUT:-300}
env LD_LIBRARY_PATH="$py_ld_path" timeout "$at" python3 bench/torch_flat.py --base "$tmp/far_base.fbin" \
  --query "$tmp/far_query.fbin" --dataset "$name" --k 10,100 --reps "$reps" "${ref[@]}" \
  >> "$out" 2>> "$err"
echo "torch rc=$? $(date +%T)"
source "$(dirname "${BASH_SOURCE[0]}")/anchor_libs.sh" && fx_anchor_libs /tmp/fcl
(source .device/anchor/faiss-gpu-anchor-env.sh .device/anchor/faiss-gpu-anchor.tgz /tmp/fcl &&
 timeout "$at" python3 bench/anchor_flat.py --base "$tmp/far_base.fbin" --query "$tmp/far_query.fbin" \
   --dataset "$name" --k 10,100 --reps "$reps" >> "$out" 2>> "$err"; echo "faiss-gpu rc=$? $(date +%T)")
grep -h "fallback\|floor\|qps" "$err" | tail -20
[ "${FX_SCALE_KEEP:-0}" = 1 ] || rm -rf "$tmp"
