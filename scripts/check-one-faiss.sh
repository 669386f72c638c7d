#!/usr/bin/env bash
# One FAISS in the process (docs/one-faiss.md), checked with nm on the built
# binaries:
#   1. libfaiss_ext.so and our Python extension modules define no FAISS
#      symbol of their own (only weak copies of inline FAISS code and of the
#      vtables of FAISS classes whose virtual functions are all inline, which
#      the dynamic linker resolves to the process's copy).
#   2. Each C++ program given holds FAISS (from libfaiss.a) and exports every
#      FAISS symbol libfaiss_ext.so leaves undefined, and no other library it
#      loads defines FAISS: the library binds to the program's one copy.
#   3. python3-faiss's _swigfaiss module (the FAISS of `import faiss`) exports
#      every FAISS symbol libfaiss_ext.so and our modules leave undefined.
# Usage: scripts/check-one-faiss.sh BUILD_DIR [PROGRAM...]   (exit 1 on failure)
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR [PROGRAM...]}
shift
lib=$build/libfaiss_ext.so
modules=("$build"/python/faiss_ext/_faiss_ext*.so)
swigfaiss=$(/usr/bin/python3 -c 'import faiss; print(faiss._swigfaiss.__file__)') || {
  echo "one-faiss: cannot import Debian's python3-faiss"; exit 1; }
failed=0
fail() { echo "one-faiss: FAIL: $*"; failed=1; }

# FAISS's own symbols, demangled: faiss::..., and the vtables / typeinfo /
# VTTs of faiss:: classes (not faiss_ext::, whose name also starts "faiss").
faiss_names() { grep -E '(^| for )faiss::'; }
# strong definitions (not weak W/V/w/v, not undefined U) of FAISS symbols in $1's dynamic table
strong_faiss() { nm -DC --defined-only "$1" | awk '$2 !~ /^[WVwv]$/ {$1=""; $2=""; sub(/^  /, ""); print}' | faiss_names; }
# mangled FAISS symbols $1 leaves undefined
undefined_faiss() { nm -D --undefined-only "$1" | awk '{print $2}' | c++filt -p | paste -d' ' - <(nm -D --undefined-only "$1" | awk '{print $2}') | faiss_names | awk '{print $NF}' | sort -u; }
defined_dynamic() { nm -D --defined-only "$1" | awk '{print $3}' | sort -u; }

for so in "$lib" "${modules[@]}"; do
  n=$(strong_faiss "$so" | wc -l)
  weak=$(nm -DC --defined-only "$so" | awk '$2 ~ /^[WVwv]$/' | faiss_names | wc -l)
  [ "$n" -eq 0 ] || fail "$(basename "$so") defines $n FAISS symbols of its own: $(strong_faiss "$so" | head -3 | tr '\n' ';')"
  echo "one-faiss: $(basename "$so"): $n FAISS definitions of its own ($weak weak inline copies), $(undefined_faiss "$so" | wc -l) FAISS symbols left to the process"
done

swig_defs=$(mktemp); trap 'rm -f "$swig_defs" "$prog_defs"' EXIT
defined_dynamic "$swigfaiss" > "$swig_defs"
for so in "$lib" "${modules[@]}"; do
  missing=$(undefined_faiss "$so" | comm -23 - "$swig_defs")
  [ -z "$missing" ] || fail "$(basename "$so") needs FAISS symbols python3-faiss does not export: $(echo "$missing" | c++filt | head -3 | tr '\n' ';')"
done
echo "one-faiss: Python: $(basename "$swigfaiss") exports every FAISS symbol libfaiss_ext.so and our modules need"

prog_defs=$(mktemp)
for prog in "$@"; do
  [ -x "$prog" ] || { fail "$prog: no such program"; continue; }
  defined_dynamic "$prog" > "$prog_defs"
  missing=$(undefined_faiss "$lib" | comm -23 - "$prog_defs")
  [ -z "$missing" ] || fail "$prog does not export FAISS symbols libfaiss_ext.so needs: $(echo "$missing" | c++filt | head -3 | tr '\n' ';')"
  own=$(nm -C "$prog" | awk '$2 ~ /^[Tt]$/' | grep -cE ' faiss::' || true)
  [ "$own" -gt 0 ] || fail "$prog holds no FAISS code"
  others=""
  for dep in $(ldd "$prog" | awk '/=> \//{print $3}'); do
    [ "$(basename "$dep")" = "$(basename "$(readlink -f "$lib")")" ] && continue
    [ -n "$(strong_faiss "$dep" | head -1)" ] && others="$others $dep"
  done
  [ -z "$others" ] || fail "$prog loads other libraries that define FAISS:$others"
  echo "one-faiss: $(basename "$prog"): one FAISS ($own FAISS functions of its own, from libfaiss.a), exporting the $(undefined_faiss "$lib" | wc -l) libfaiss_ext.so needs; no other library defines FAISS"
done
[ $failed -eq 0 ] && echo "one-faiss: OK"
exit $failed
