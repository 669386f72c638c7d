#!/usr/bin/env bash
# Where a bounded search's time goes, on the GPU machine, after
# bench/stage_flat_scale.sh; carry [".device"]:
#   FX_PROFILE_NB=10000000 FX_PROFILE_PRECISION=auto bash bench/profile_fused_device.sh
# Generates issue 39's hard set far from the origin (bench/gen_far_clusters.py;
# FX_PROFILE_DATA=clustered: bench/gen_clustered's, d FX_PROFILE_D), runs one
# bench_flat search after its warm-up under ncu, and prints the summed
# gpu__time_duration of every kernel of the timed search (FX_PROFILE_SKIP:
# launches to skip, the warm-up's; FX_PROFILE_COUNT: launches to profile),
# so that the fused kernel's share can be set against the search's time.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py_ld_path=${LD_LIBRARY_PATH:-}
source .device/env.sh
nb=${FX_PROFILE_NB:-10000000}
nq=${FX_PROFILE_NQ:-10000}
d=${FX_PROFILE_D:-96}
tmp=${FX_BENCH_TMP:-/tmp/fx_profile}
mkdir -p "$tmp"
source bench/flat_scale_set.sh
flat_scale_set "$tmp/set" "${FX_PROFILE_DATA:-far}" "$nb" "$nq" "$d" 6161 "$tmp/gen.err" ||
  { tail -5 "$tmp/gen.err"; exit 1; }
ncu --print-units base --metrics gpu__time_duration.sum --csv \
  --launch-skip "${FX_PROFILE_SKIP:-0}" --launch-count "${FX_PROFILE_COUNT:-400}" \
  .device/bin/bench/bench_flat --base "$tmp/set_base.fbin" --query "$tmp/set_query.fbin" \
  --dataset profile --k "${FX_PROFILE_K:-10}" --methods ours --reps 1 --recall-nq 8 \
  --precision "${FX_PROFILE_PRECISION:-auto}" 2> "$tmp/bench.err" |
  python3 -c '
import csv, sys, collections
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith("\""))][1:]
total = collections.defaultdict(float); count = collections.Counter()
for r in rows:
    name = r[4].split("(")[0][:80]; total[name] += float(r[-1].replace(",", "")); count[name] += 1
for name, ns in sorted(total.items(), key=lambda kv: -kv[1])[:25]:
    print(f"{ns / 1e6:10.3f} ms {count[name]:5d}  {name}")
print(f"{sum(total.values()) / 1e6:10.3f} ms in all ({len(rows)} launches)")'
grep "q/s" "$tmp/bench.err" | tail -2
rm -rf "$tmp"
