#!/usr/bin/env bash
# Queries unlike the data (issue 38 item 5) in one device call: bench_ann on
# the hard 1M x 100 set queried around another mixture's centres
# (--hard-query-seed 777) with detection at ratio 3 and the flagged queries
# probed at 32 / 48 / 64 lists or answered exactly (0), our exact index
# beside; the same set's own queries with detection on and off (in-
# distribution q/s unchanged?); then FAISS GPU IVF-Flat (bench/anchor_ann.py)
# on the files bench_ann wrote, in the same sitting.
# Stage: bash bench/stage_ann.sh BUILD FAISS_KIT (Fashion-MNIST may be
# dropped: rm -rf .device/extra); then with carry [".device"]:
#   GITSHA=$(git rev-parse --short HEAD) bash bench/run_unlike_device.sh
# Output: $OUT/ann.jsonl, $OUT/ivf.jsonl (+ .err).
set -u
S=${STAGE:-.device}
source "$S/env.sh"
mkdir -p "$OUT" /tmp/ann
G=${GITSHA:-unknown}
export FAISS_EXT_GIT=$G
ann() {
  local name=$1 limit=$2; shift 2
  mkdir -p /tmp/ann/$name
  timeout "$limit" "$S/bin/bench/bench_ann" "$@" --write-dir /tmp/ann/$name --device-queries \
    --latency 50 --runs "${FX_RUNS:-5}" >> "$OUT/ann.jsonl" 2>> "$OUT/ann.err"
  echo "$name rc=$? $(date +%T)"
}
ann hard-ood 200 --data hard --hard-query-seed 777 --degrees 64:128 --unlike-ratio 3 \
  --itopk 16,32 --unlike-probes 32,48,64,0 --methods graph,exact
ann hard-on 100 --data hard --degrees 64:128 --unlike-ratio 3 --itopk 16,32,64
ann hard-off 100 --data hard --degrees 64:128 --itopk 16,32,64
source "$(dirname "${BASH_SOURCE[0]}")/anchor_libs.sh" && fx_anchor_libs /tmp/fcl
(source "$S/anchor/faiss-gpu-anchor-env.sh" "$S/anchor/faiss-gpu-anchor.tgz" /tmp/fcl &&
 timeout 150 python3 bench/anchor_ann.py --git "$G" --anchors ivf --dirs /tmp/ann/hard-ood \
   >> "$OUT/ivf.jsonl" 2>> "$OUT/ivf.err"; echo "ivf rc=$? $(date +%T)")
tail -3 "$OUT"/*.err
