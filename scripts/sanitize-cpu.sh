#!/usr/bin/env bash
# cpu_tests under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, on the
# CPU machine: a build of its own in build-asan (RelWithDebInfo, CUDA arch 90; about 6 minutes
# on 2 cores), then the whole CPU suite (about 2 minutes). Leaks inside FAISS 1.7.3's own readers,
# which leak what they built when they throw on a corrupt file, are suppressed as for the fuzzer
# (fuzz/lsan.supp); any other report fails the run.
#   bash scripts/sanitize-cpu.sh [GTEST_FILTER]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${FX_ASAN_BUILD_DIR:-build-asan}
flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "${FX_JOBS:-$(nproc)}" --target cpu_tests
# protect_shadow_gap=0: the CUDA runtime maps memory where ASan's shadow gap would be
ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1:halt_on_error=1 \
LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$build/tests/cpu_tests" --gtest_brief=1 --gtest_filter="${1:-*}"
