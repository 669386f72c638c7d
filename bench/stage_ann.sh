#!/usr/bin/env bash
# Stages bench_ann for bench/run_ann_device.sh and run_lsh_device.sh inside the
# device tool's 64 MiB: the libraries xz-compressed (.device/env.sh unpacks
# them), Debian's Fashion-MNIST IDX files, the faiss-gpu anchor kit
# (../shared/tools/faiss-gpu-anchor/make-kit KIT_DIR, built once).
#   bash bench/stage_ann.sh BUILD_DIR KIT_DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/device/pack-device-libs.sh
build=${1:?BUILD_DIR}; kit=${2:?KIT_DIR (make-kit output)}
fm=/usr/share/datasets/fashion-mnist
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mkdir -p "$w/bench"
cp -L "$build/libfaiss_ext.so.0" "$w/"
cp "$build/bench/bench_ann" "$w/bench/"
# Within the 64 MiB beside Fashion-MNIST and the anchor kit: stripped, and
# without gpu_tests (9 MB; bench/stage_flat_scale.sh stages those).
strip "$w/bench/bench_ann" "$w/libfaiss_ext.so.0"
../shared/tools/device-stage "$w" "$fm/train-images-idx3-ubyte.gz" "$fm/t10k-images-idx3-ubyte.gz" >/dev/null
fx_pack_device_libs
fx_add_anchor_kit "$kit"
du -sh .device
