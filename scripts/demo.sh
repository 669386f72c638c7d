#!/usr/bin/env bash
# The first of the README's two commands: installs what is missing (Debian 12),
# builds, and runs the main job, bench/faiss_ext_demo: exact k-NN on a seeded
# clustered data set (200k x 128 base, 1k queries, k = 10), on the GPU with
# GpuIndexQuickSelectFlat when there is one and otherwise on the CPU twin,
# printing recall@k against exact ground truth and queries/s.
#
#   scripts/demo.sh                          the default generated set
#   scripts/demo.sh --nb 1M --k 100          other sizes (see --help)
#   scripts/demo.sh --fashion-mnist          Fashion-MNIST from Debian's dataset-fashion-mnist
#   scripts/demo.sh --base B.fvecs --query Q.fvecs [--gt G.ivecs]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh

fx_install_deps
fx_check_nvcc
fx_build
fx_log "Running $FX_BUILD_DIR/bench/faiss_ext_demo $*"
exec "$FX_BUILD_DIR/bench/faiss_ext_demo" "$@"
