#!/usr/bin/env bash
# Stages, here, what scripts/device/device-python-tests.sh needs on the GPU
# machine (its header explains each piece): .pyd (libfaiss_ext, FAISS's and
# pybind11 2.13's headers, SWIG's runtime header), .whl (faiss-cpu for its
# OpenBLAS, pytest and its dependencies, for python 3.12) and .pyfaiss
# (Debian's FAISS 1.7.3 for python 3.12, make-faiss173-py312.sh). All three
# are git-ignored; together about 40 MB of the 64 MiB a device call carries.
#   scripts/device/stage-python-tests.sh [BUILD_DIR]    (default build-gpu)
# then a device run with carry [".pyd", ".whl", ".pyfaiss"]:
#   bash scripts/device/device-python-tests.sh 2>&1 | tail -40
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build-gpu}
lib=$(ls "$build"/libfaiss_ext.so.*.*.* | head -1)
runtime=$build/python_bindings/swig_runtime/swigpyrun.h
[ -f "$lib" ] && [ -f "$runtime" ] || { echo "build $build first (libfaiss_ext and the Python module)"; exit 1; }
rm -rf .pyd .whl && mkdir -p .pyd/lib .pyd/include .whl
cp "$lib" .pyd/lib/libfaiss_ext.so.0
cp -r /usr/include/faiss .pyd/include/
cp "$runtime" .pyd/include/
# pybind11 >= 2.12 (numpy 2 is on the GPU machine; Debian's 2.10 predates it)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" pybind11==2.13.6
/usr/bin/python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
[z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith('pybind11/include/')]" \
  "$(ls "$tmp"/pybind11-*.whl)" "$tmp/x"
cp -r "$tmp/x/pybind11/include/pybind11" .pyd/include/
/usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 -d .whl \
  faiss-cpu pytest pluggy iniconfig packaging pygments
[ -f .pyfaiss/faiss/_swigfaiss.cpython-312-x86_64-linux-gnu.so ] || scripts/device/make-faiss173-py312.sh
du -sh .pyd .whl .pyfaiss
