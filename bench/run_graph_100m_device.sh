#!/usr/bin/env bash
# The search graph at 100M (issue 38) on the GPU machine, in one device call:
# bench_ann on the hard set of 3,000 clusters at 100M x 96 (made on the
# host, about 180 s on the H200 machine's 16 cores), our exact index for the
# ground truth, then the graph with the given degrees, samples and
# temporary memory, the device's and the process's memory sampled every
# second (peaks printed at the end).
# Stage here: bash bench/stage_flat_scale.sh build-gpu KIT, then
#   cp build-gpu/bench/bench_ann .device/bin/bench/ && strip .device/bin/bench/bench_ann
# and on the device (carry [".device"]):
#   bash bench/run_graph_100m_device.sh $OUT [DEGREES (32:32)] [SAMPLES (16)] [TEMP_GB (100)] [NB (100M)]
# FX_EXTRA adds bench_ann options, e.g. FX_EXTRA="--fp16-traversal 0 --knn-iterations 12".
# Device memory of a first add, 100M x 96 (docs/search-graph.md, the plan):
# graph 64 from k-NN lists of 64 with the FP16 copy fits since 14161c7
# (peak 135.6 GB): 64:64 16 100.
# Writes OUT/ann_100m.jsonl (bench_ann's lines), OUT/ann_100m.err,
# OUT/mem_trace.txt (time, device MiB, process RSS KiB) and OUT/mem_peak.txt.
# Measured 2026-12-04 (commit 14161c7, 64:64, 16, 100): 266 s in all, build
# 81.1 s, peak 135.6 GB device and 38.2 GB host.
set -u
out=${1:?OUT}; degrees=${2:-32:32}; samples=${3:-16}; temp=${4:-100}; nb=${5:-100000000}
source .device/env.sh >/dev/null
(
  peak=0; hpeak=0
  while sleep 1; do
    m=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    p=$(pgrep -x bench_ann | head -1); h=0
    [ -n "$p" ] && h=$(awk '/VmRSS/{print $2}' /proc/"$p"/status 2>/dev/null || echo 0)
    [ "${m:-0}" -gt "$peak" ] && peak=$m
    [ "${h:-0}" -gt "$hpeak" ] && hpeak=$h
    echo "$(date +%s) $m $h" >> "$out/mem_trace.txt"
    echo "peak device MiB $peak, peak host RSS KiB $hpeak" > "$out/mem_peak.txt"
  done
) &
monitor=$!
# FX_CACHE (default /tmp/ann100m): the first call writes the generated set
# there (38 GB of the GPU machine's 64 GB disk, /tmp survives between calls
# made back to back); later calls read it instead of making it again
# (about 115 s of the host's time at 100M).
cache=${FX_CACHE:-/tmp/ann100m}
if [ -f "$cache/base.fbin" ] && [ "$(stat -c %s "$cache/base.fbin")" = "$(( nb * 96 * 4 + 8 ))" ]; then
  data=(--data files --base "$cache/base.fbin" --query "$cache/query.fbin" --name hard-c3000)
else
  rm -rf "$cache"; mkdir -p "$cache"
  data=(--data hard --hard-d 96 --hard-clusters 3000 --nb "$nb" --write-dir "$cache")
fi
timeout 560 .device/bin/bench/bench_ann "${data[@]}" \
  --nq 10000 --degrees "$degrees" --knn-samples "$samples" --temp-gb "$temp" \
  --itopk 32,64,128,256 --device-queries --runs 3 --latency 100 --verbose ${FX_EXTRA:-} \
  > "$out/ann_100m.txt" 2> "$out/ann_100m.err"
echo "bench_ann exit $?"
kill $monitor
grep '^{' "$out/ann_100m.txt" > "$out/ann_100m.jsonl"
cat "$out/mem_peak.txt"; tail -3 "$out/ann_100m.err"
python3 - "$out/ann_100m.jsonl" <<'P'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); p = r.get("params", {})
    print(r["method"], p.get("itopk"), r.get("recall"), r.get("qps"), r.get("qps_device_queries"),
          r.get("seconds"), p.get("knn_seconds"), p.get("add_build"))
P
