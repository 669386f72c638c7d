#!/usr/bin/env bash
# Runs the read_index fuzzer (docs/fuzzing.md) for SECONDS seconds; exits
# non-zero when it finds a crash, a sanitizer report, a leak, a timeout or an
# out-of-memory, and then keeps the input in $FX_FUZZ_BUILD_DIR/artifacts.
#   fuzz/run.sh [SECONDS] [TARGET]     (default 60, fuzz_read_index)
# Builds first (fuzz/build.sh), writes fresh seeds with make_seeds, and fuzzes
# a copy of fuzz/corpus/seeds + the fresh seeds + tests/data/fuzz_regress in a
# temporary directory (nothing in the repository changes). One job, one
# thread. FX_FUZZ_LOG=FILE keeps the whole log; FX_FUZZ_ARGS adds libFuzzer
# options (e.g. -seed=1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs=${1:-60}
target=${2:-fuzz_read_index}
build=${FX_FUZZ_BUILD_DIR:-build-fuzz}

fuzz/build.sh "$target" make_seeds

work=$(mktemp -d "${TMPDIR:-/tmp}/fx_fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/seeds" "$work/artifacts"
OMP_NUM_THREADS=1 "$build/make_seeds" "$work/seeds" >/dev/null 2>"$work/make_seeds.err" || {
  cat "$work/make_seeds.err" >&2
  echo "fuzz/run.sh: make_seeds failed" >&2
  exit 1
}
cp fuzz/corpus/seeds/* "$work/seeds"/* "$work/corpus/" 2>/dev/null || true
[ -d tests/data/fuzz_regress ] && cp tests/data/fuzz_regress/* "$work/corpus/" 2>/dev/null
nseeds=$(ls "$work/corpus" | wc -l)
biggest=$(find "$work/seeds" fuzz/corpus/seeds -type f -printf '%s\n' | sort -n | tail -n 1)
maxlen=$((2 * ${biggest:-4096}))

sym=$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0${sym:+:external_symbolizer_path=$sym}}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0}

echo "fuzz/run.sh: $target for ${secs}s over $nseeds inputs (-max_len=$maxlen)"
log=${FX_FUZZ_LOG:-$work/fuzz.log}
set +e
# shellcheck disable=SC2086
"$build/$target" -max_total_time="$secs" -max_len="$maxlen" -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  ${FX_FUZZ_ARGS:-} "$work/corpus" >"$log" 2>&1
rc=$?
set -e
grep -v '^WARNING clustering' "$log" | tail -n 25
echo "fuzz/run.sh: corpus now $(ls "$work/corpus" | wc -l) inputs; libFuzzer exit status $rc"
if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
  mkdir -p "$build/artifacts"
  cp "$work/artifacts"/* "$build/artifacts/" 2>/dev/null || true
  echo "fuzz/run.sh: FAILED: inputs kept in $build/artifacts: $(ls "$work/artifacts" | tr '\n' ' ')" >&2
  exit 1
fi
echo "fuzz/run.sh: no crash in ${secs}s"
