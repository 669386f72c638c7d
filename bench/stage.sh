#!/usr/bin/env bash
# Stages the benchmark programs (bench_flat, bench_select, bench_knngraph, bench_graph,
# gen_clustered, ...) and the small real data sets for the GPU machine
# (DEVICE.md), within the 64 MiB that a device run carries; the Python
# anchors (bench/torch_*.py) travel with the working tree:
#
#   bench/stage.sh [BUILD_DIR]      (default build-bench)
#
# BUILD_DIR must be a build of the benchmarks alone (tests and Python off),
# so that only the bench programs and libfaiss_ext travel; see bench/README.md.
# Real data travel gzip-compressed (siftsmall, point cloud). Fashion-MNIST
# (26 MB compressed) does not fit beside OpenBLAS (36 MB) and is left out
# unless FX_STAGE_FASHION=1 (then the run carries more than 64 MiB and is refused
# unless something else is left out).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build-bench}
# The suites' programs (all ELF files of $build travel; these are checked):
# flat: bench_flat; select: bench_select; knngraph: bench_knngraph (+ gen_clustered); graph: bench_graph;
# lsh: bench_lsh; multigpu: bench_multi_gpu.
[ -x "$build/bench/gen_clustered" ] || { echo "$build/bench/gen_clustered not built: see bench/README.md" >&2; exit 2; }
found=0
for p in bench_flat bench_select bench_knngraph bench_graph bench_lsh bench_multi_gpu; do
  if [ -x "$build/bench/$p" ]; then found=1
  else echo "warning: $build/bench/$p not built: its suite will not run there (see bench/README.md)" >&2; fi
done
[ $found = 1 ] || { echo "no benchmark program built in $build/bench: see bench/README.md" >&2; exit 2; }
if find "$build" -name 'gpu_tests' -o -name '_faiss_ext*.so' | grep -q .; then
  echo "warning: $build also holds tests or the Python module; they travel too (size!)." >&2
fi
data=${FX_SHARED_DATA:-../shared/data}
stage=$(mktemp -d /tmp/faiss_ext_stage.XXXXXX)
trap 'rm -rf "$stage"' EXIT
for f in siftsmall/siftsmall_base.fvecs siftsmall/siftsmall_query.fvecs \
         pointcloud-rs/rs1_base.fvecs pointcloud-rs/rs22_query.fvecs; do
  if [ -f "$data/$f" ]; then gzip -9c "$data/$f" > "$stage/$(basename "$f").gz"
  else echo "note: $data/$f not found, not staged" >&2; fi
done
if [ "${FX_STAGE_FASHION:-0}" = 1 ]; then
  cp /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz \
     /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz "$stage/"
fi
shopt -s nullglob
../shared/tools/device-stage "$build" "$stage"/*
total=$(( $(du -sk .device | cut -f1) + $(git ls-files -z | xargs -0 du -ck 2>/dev/null | tail -n1 | cut -f1) ))
echo "staged: .device + tracked files = $(( total / 1024 )) MiB (a device run carries 64 MiB at most)"
