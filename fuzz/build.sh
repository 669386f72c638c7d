#!/usr/bin/env bash
# Builds the read_index fuzzer (docs/fuzzing.md) into $FX_FUZZ_BUILD_DIR
# (default build-fuzz) with clang, libFuzzer, ASan and UBSan: the host sources
# of faiss_ext only (no CUDA), against Debian's static libfaiss.
#   fuzz/build.sh [TARGET...]   configure when needed, then build (FX_JOBS jobs;
#                               all targets: fuzz_read_index, fuzz_read_index_faiss,
#                               make_seeds)
# Needs Debian's clang, libclang-rt-14-dev (libFuzzer and the sanitizer
# runtimes) and libomp-dev (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${FX_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${FX_JOBS:-$(nproc)}
cc=${FX_FUZZ_CC:-clang}
cxx=${FX_FUZZ_CXX:-clang++}
command -v "$cxx" >/dev/null || {
  echo "fuzz/build.sh: $cxx not found (apt-get install clang libclang-rt-14-dev libomp-dev)" >&2
  exit 1
}
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=$cc CXX=$cxx cmake -S fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
