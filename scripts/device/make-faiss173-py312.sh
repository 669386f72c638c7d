#!/usr/bin/env bash
# Builds, here, the FAISS that `import faiss` gives on the GPU machine: Debian's
# FAISS 1.7.3 (libfaiss.a, the FAISS libfaiss_ext is compiled against) in its
# SWIG Python module, for the GPU machine's python 3.12. Since faiss_ext takes
# FAISS from `import faiss` (docs/one-faiss.md), the faiss-cpu wheel (another
# FAISS version, another ABI) can no longer serve the Python tests there.
#
# Writes .pyfaiss/faiss/ (git-ignored): python3-faiss's Python files, the
# SWIG-generated swigfaiss.py and _swigfaiss.cpython-312-x86_64-linux-gnu.so.
# Needs: Debian's libfaiss-dev, swig (4.1, as Debian's python3-faiss), g++,
# python 3.12 headers (pyenv's 3.12 here; PY312_INCLUDE to override), and
# downloads, once: FAISS 1.7.3's Debian source (`apt-get source`, for
# swigfaiss.swig) and a cp312 numpy wheel (its C headers: the module must match
# numpy 2 at run time). Takes a few minutes (the SWIG wrapper is large).
#   scripts/device/make-faiss173-py312.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
work=${FX_FAISS_KIT_WORK:-/tmp/faiss173-py312}
out=.pyfaiss/faiss
py312_include=${PY312_INCLUDE:-$(ls -d "$HOME"/.pyenv/versions/3.12*/include/python3.12 | tail -1)}
[ -f "$py312_include/Python.h" ] || { echo "no Python 3.12 headers (set PY312_INCLUDE)"; exit 1; }
mkdir -p "$work"

# FAISS 1.7.3's SWIG interface, from Debian's source package
src=$(ls -d "$work"/faiss-1.7.3 2>/dev/null || true)
if [ -z "$src" ]; then
  list=/etc/apt/sources.list.d/zz-faiss-ext-debsrc.sources
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$list"
  apt-get update -q -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- \
    -o APT::Get::List-Cleanup=0 >/dev/null
  (cd "$work" && apt-get source -q faiss=1.7.3-2 >/dev/null 2>&1) || true
  rm -f "$list"
  src="$work/faiss-1.7.3"
  [ -f "$src/faiss/python/swigfaiss.swig" ] || { echo "apt-get source faiss failed"; exit 1; }
fi

# numpy's C headers for cp312
if [ ! -d "$work/numpy/numpy/_core/include" ]; then
  /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 -d "$work/wheels" "numpy>=2,<3"
  /usr/bin/python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
[z.extract(n, sys.argv[2]) for n in z.namelist() if '/include/' in n]" \
    "$(ls "$work"/wheels/numpy-*.whl)" "$work/numpy"
fi

# the wrapper, as Debian's build makes it (SWIG 4.1, 64-bit words)
rm -rf "$out" && mkdir -p "$out"
swig -python -c++ -doxygen -DSWIGWORDSIZE64 -I"$src" -I/usr/include \
  -o "$work/swigfaiss_wrap.cxx" -outdir "$out" "$src/faiss/python/swigfaiss.swig"
flags=(-O1 -fPIC -std=c++17 -fopenmp -include cstdint -I"$src" -I"$src/faiss/python"
       -I"$py312_include" -I"$work/numpy/numpy/_core/include")
g++ "${flags[@]}" -c "$work/swigfaiss_wrap.cxx" -o "$work/swigfaiss_wrap.o"
g++ "${flags[@]}" -c "$src/faiss/python/python_callbacks.cpp" -o "$work/python_callbacks.o"
g++ -shared -o "$out/_swigfaiss.cpython-312-x86_64-linux-gnu.so" "$work/swigfaiss_wrap.o" \
  "$work/python_callbacks.o" /usr/lib/x86_64-linux-gnu/libfaiss.a -lblas -llapack -fopenmp
strip --strip-unneeded "$out/_swigfaiss.cpython-312-x86_64-linux-gnu.so"

# python3-faiss's Python files; its loader needs distutils (gone in 3.12) to
# pick an AVX2 variant, which Debian does not build: load the one module
cp "$src"/faiss/python/{__init__,array_conversions,class_wrappers,extra_wrappers,gpu_wrappers}.py "$out/"
cp -r "$src/contrib" "$out/contrib"
printf '# faiss_ext device kit: Debian builds one variant of the module\nfrom .swigfaiss import *\n' \
  > "$out/loader.py"
ls -la "$out"
