#!/usr/bin/env bash
# Stages build-gpu's test programs for the GPU machine (../shared/tools/
# device-stage) with the real data sets the GPU tests read, inside the device
# tool's 64 MiB: reference BLAS / LAPACK instead of OpenBLAS (35 MB; the
# tests' CPU brute force does not need its speed), the first 20k rows of
# fashion-mnist (the GNND tests read no more; the LSH tests take their
# fashion-mnist queries from rows past 18k then). Then run on the device with
# carry [".device"]:
#   source .device/env.sh; export FAISS_EXT_DATA_DIR=$PWD/.device/extra
#   .device/bin/tests/gpu_tests --gtest_brief=1
#   .device/bin/tests/doc_examples --gtest_brief=1    # the C++ doc examples
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build-gpu}
data=${FAISS_EXT_SHARED_DATA:-../shared/data}
../shared/tools/device-stage "$build" >/dev/null
rm -f .device/bin/libfaiss_ext.so* .device/bin/probe .device/lib/libopenblas.so.0
cp -L /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 /usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3 .device/lib/
find .device/bin -maxdepth 1 -type f ! -path '*/tests/*' -delete 2>/dev/null || true
x=.device/extra
mkdir -p $x/siftsmall $x/pointcloud-rs $x/fashion-mnist
for f in siftsmall/siftsmall_base.fvecs siftsmall/siftsmall_base_knn100_l2.ivecs \
         siftsmall/siftsmall_query.fvecs siftsmall/siftsmall_query_gt100_l2.ivecs \
         siftsmall/siftsmall_query_gt100_l2_dist.fvecs pointcloud-rs/rs22_query.fvecs \
         pointcloud-rs/rs1_base.fvecs pointcloud-rs/rs1_base_knn32_l2.ivecs; do
  [ -f "$data/$f" ] && cp "$data/$f" "$x/$f" || echo "absent: $data/$f (its tests will skip)"
done
fm=$data/fashion-mnist/fashion-mnist_base.bvecs
[ -f "$fm" ] && head -c $((20000 * (784 + 4))) "$fm" > $x/fashion-mnist/fashion-mnist_base.bvecs
du -sh .device
