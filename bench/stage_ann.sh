#!/usr/bin/env bash
# Stages bench_ann (and gpu_tests) for bench/run_ann_device.sh inside the
# device tool's 64 MiB: the libraries xz-compressed (.device/env.sh unpacks
# them), Debian's Fashion-MNIST IDX files, the faiss-gpu anchor kit
# (../shared/tools/faiss-gpu-anchor/make-kit KIT_DIR, built once).
#   bash bench/stage_ann.sh BUILD_DIR KIT_DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?BUILD_DIR}; kit=${2:?KIT_DIR (make-kit output)}
fm=/usr/share/datasets/fashion-mnist
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mkdir -p "$w/tests" "$w/bench"
cp -a "$build"/libfaiss_ext.so* "$w/"
cp "$build/tests/gpu_tests" "$w/tests/"
cp "$build/bench/bench_ann" "$w/bench/"
../shared/tools/device-stage "$w" "$fm/train-images-idx3-ubyte.gz" "$fm/t10k-images-idx3-ubyte.gz" >/dev/null
rm -f .device/bin/libfaiss_ext.so*
tar -cJf .device/libs.tar.xz -C .device/lib . && rm -rf .device/lib
cat > .device/env.sh <<'ENV'
d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf /tmp/devlib && mkdir -p /tmp/devlib && tar -xJf "$d/libs.tar.xz" -C /tmp/devlib
export LD_LIBRARY_PATH="/tmp/devlib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$d/bin:$PATH"
ENV
mkdir -p .device/anchor && cp "$kit/faiss-gpu-anchor.tgz" "$kit/faiss-gpu-anchor-env.sh" .device/anchor/
du -sh .device
