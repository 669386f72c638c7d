#!/usr/bin/env bash
# Stages gpu_tests, bench_flat, bench_filter and gen_clustered for the GPU machine with the
# faiss-gpu anchor kit, inside the device tool's 64 MiB, for
# bench/run_flat_scale_device.sh and bench/run_bounded_offset.sh (issue 39):
#   bash bench/stage_flat_scale.sh BUILD_DIR KIT_DIR   # KIT_DIR: ../shared/tools/faiss-gpu-anchor/make-kit's output
# then, with carry [".device"]:
#   source .device/env.sh; export FAISS_EXT_DATA_DIR=$PWD/.device/extra
#   .device/bin/tests/gpu_tests --gtest_filter='GpuFlatBf16x3*:GpuFlatBounded*'
#   FX_SCALE_NB=10000000 GITSHA=... bash bench/run_flat_scale_device.sh
# The libraries travel xz-compressed (.device/env.sh unpacks them); OpenBLAS is
# kept (the benches' CPU reference needs its speed); siftsmall and the point
# cloud's small files are the tests' real data (Fashion-MNIST is left out: its
# tests skip, visibly).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/device/pack-device-libs.sh
build=${1:?BUILD_DIR}; kit=${2:?KIT_DIR (make-kit output)}
data=${FAISS_EXT_SHARED_DATA:-../shared/data}
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mkdir -p "$w/tests" "$w/bench"
cp -L "$build/libfaiss_ext.so.0" "$w/"
cp "$build/tests/gpu_tests" "$w/tests/"
cp "$build/bench/bench_flat" "$build/bench/bench_filter" "$build/bench/gen_clustered" "$w/bench/"
strip "$w/tests/gpu_tests" "$w"/bench/* "$w/libfaiss_ext.so.0"
../shared/tools/device-stage "$w" >/dev/null
x=.device/extra
mkdir -p $x/siftsmall $x/pointcloud-rs
for f in siftsmall/siftsmall_base.fvecs siftsmall/siftsmall_base_knn100_l2.ivecs \
         siftsmall/siftsmall_query.fvecs siftsmall/siftsmall_query_gt100_l2.ivecs \
         siftsmall/siftsmall_query_gt100_l2_dist.fvecs pointcloud-rs/rs22_query.fvecs \
         pointcloud-rs/rs1_base.fvecs; do
  [ -f "$data/$f" ] && cp "$data/$f" "$x/$f" || echo "absent: $data/$f (its tests will skip)"
done
cp "$w/libfaiss_ext.so.0" .device/lib/
fx_pack_device_libs
fx_add_anchor_kit "$kit"
du -sb .device
