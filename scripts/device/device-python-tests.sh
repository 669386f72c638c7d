#!/usr/bin/env bash
# Runs the Python test suite (GPU tests included) on the GPU machine, whose
# python3 is 3.12 without FAISS: the module is built there with g++ against
# the staged libfaiss_ext, and faiss-cpu / pytest come as wheels.
#
# Here (once per change), from the repository root:
#   echo /.pyd/ >> .git/info/exclude; echo /.whl/ >> .git/info/exclude
#   rm -rf .pyd && mkdir -p .pyd/lib .pyd/include
#   cp build-gpu/libfaiss_ext.so.0.1.0 .pyd/lib/libfaiss_ext.so.0
#   cp -r /usr/include/faiss .pyd/include/
#   # pybind11 >= 2.12 (numpy 2 is on the GPU machine; Debian's 2.10 predates it):
#   python3 -m pip download --no-deps --only-binary=:all: -d /tmp/pbw pybind11==2.13.6
#   unzip -q -o /tmp/pbw/pybind11-*.whl -d /tmp/pbw/x && cp -r /tmp/pbw/x/pybind11/include/pybind11 .pyd/include/
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 -d .whl faiss-cpu pytest pluggy iniconfig packaging
# There (device run, carry [".pyd", ".whl"]):
#   bash scripts/device/device-python-tests.sh
set -euo pipefail
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
mkdir -p /tmp/lib /tmp/pkg/faiss_ext
ob=$(ls /tmp/site/faiss_cpu.libs/libopenblas*.so)
# libfaiss_ext (Debian build) wants libblas.so.3 / liblapack.so.3: the wheel's OpenBLAS has both.
ln -sf "$ob" /tmp/lib/libblas.so.3
ln -sf "$ob" /tmp/lib/liblapack.so.3
ldconfig -p | grep -q libgomp.so.1 || ln -sf "$(ls /tmp/site/faiss_cpu.libs/libgomp*.so*)" /tmp/lib/libgomp.so.1
cp .pyd/lib/libfaiss_ext.so.0 /tmp/lib/
cp python_bindings/faiss_ext/*.py /tmp/pkg/faiss_ext/
ext=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
# FAISS 1.7.3's headers rely on <cstdint> arriving transitively (g++ 12); newer g++ needs it named.
# public headers are included as <faiss_ext/gpu/...>: the gpu/ folder under that name, as the build tree has it
mkdir -p /tmp/inc/faiss_ext && ln -sfn "$PWD/gpu" /tmp/inc/faiss_ext/gpu
ls python_bindings/src/*.cpp | xargs -P 8 -I{} sh -c "g++ -O1 -fPIC -std=c++17 -fopenmp -include cstdint -I. -I/tmp/inc -I.pyd/include -I$inc -I/usr/local/cuda/include -c {} -o /tmp/pkg/\$(basename {}).o"
g++ -shared /tmp/pkg/*.o -o "/tmp/pkg/faiss_ext/_faiss_ext$ext" -L/tmp/lib -l:libfaiss_ext.so.0 \
    -Wl,-rpath,/tmp/lib:/usr/local/cuda/lib64 -fopenmp
export LD_LIBRARY_PATH=/tmp/lib:/usr/local/cuda/lib64
PYTHONPATH=/tmp/pkg:/tmp/site python3 -c "import faiss, faiss_ext; print('faiss', faiss.__version__, 'GPUs', faiss_ext.get_num_gpus())"
PYTHONPATH=/tmp/pkg:/tmp/site python3 -m pytest -q -rs -p no:cacheprovider python_bindings/tests 2>&1 | tee "${OUT:-/tmp}/pytest_full.log" | tail -5
