#!/usr/bin/env bash
# The bounded TF32 path on data far from the origin (issue 39), on the GPU
# machine after scripts/device/device-stage-tests.sh: a clustered 1M x 128
# set (gen_clustered, seed 777) as generated and moved by +10 and +100 in
# every coordinate, and siftsmall's byte descriptors; bench_flat at fp32,
# tf32-bounded and bf16x3-bounded (FX_OFFSET_PRECISION; certified / fallback
# counts in each line's params) with the TF32 and BF16x3 GEMM floors. JSON lines to $OUT/bounded_offset.jsonl.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .device/env.sh
out=${OUT:-/tmp}/bounded_offset.jsonl
tmp=${FX_BENCH_TMP:-/tmp/fx_offset}
mkdir -p "$tmp"
bin=.device/bin/bench
$bin/gen_clustered --nb 1000000 --nq 10000 --d 128 --seed 777 --out "$tmp/c" >/dev/null
for off in 10 100; do
  for part in base query; do
    python3 - "$tmp/c_$part.fbin" "$tmp/c$off""_$part.fbin" "$off" <<'PY'
import sys, numpy as np
src, dst, off = sys.argv[1], sys.argv[2], float(sys.argv[3])
hdr = np.fromfile(src, dtype=np.int32, count=2)
x = np.fromfile(src, dtype=np.float32, offset=8).reshape(hdr[0], hdr[1]) + np.float32(off)
with open(dst, "wb") as f:
    hdr.tofile(f); x.tofile(f)
PY
  done
done
run() {  # name base query
  $bin/bench_flat --base "$2" --query "$3" --dataset "$1" --k 10,100 --methods ours,floor \
    --precision "${FX_OFFSET_PRECISION:-fp32,tf32-bounded,bf16x3-bounded}" --reps 5 >> "$out" 2> "$tmp/err.log" || tail -5 "$tmp/err.log"
}
run clustered-1M-128-seed777 "$tmp/c_base.fbin" "$tmp/c_query.fbin"
run clustered-1M-128-seed777-plus10 "$tmp/c10_base.fbin" "$tmp/c10_query.fbin"
run clustered-1M-128-seed777-plus100 "$tmp/c100_base.fbin" "$tmp/c100_query.fbin"
s=.device/extra/siftsmall
[ -f $s/siftsmall_base.fvecs ] && run siftsmall $s/siftsmall_base.fvecs $s/siftsmall_query.fvecs
rm -rf "$tmp"
