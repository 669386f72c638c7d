#!/usr/bin/env bash
# Runs the Python test suite (GPU tests included, torch / CuPy inputs too) on
# the GPU machine, whose python3 is 3.12 with torch and CuPy but without
# FAISS 1.7.3. faiss_ext takes FAISS from `import faiss` (docs/one-faiss.md),
# so that FAISS must be the one libfaiss_ext is compiled against: Debian's
# FAISS 1.7.3, whose SWIG module is built here for python 3.12
# (make-faiss173-py312.sh). The faiss-cpu wheel now only lends its OpenBLAS
# (Debian's libfaiss.a wants libblas.so.3 / liblapack.so.3); its own `faiss`
# package is deleted there. Our module is built there with g++ against the
# staged libfaiss_ext and headers.
#
# Here (once per change), from the repository root, after building build-gpu
# (cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#  && cmake --build build-gpu -j2):
#   scripts/device/stage-python-tests.sh build-gpu
# which writes (git-ignored): .pyd (libfaiss_ext.so.0, /usr/include/faiss,
# pybind11 2.13.6's headers: numpy 2 is on the GPU machine and Debian's 2.10
# predates it, SWIG's swigpyrun.h from the build), .whl (cp312 wheels of
# faiss-cpu, for its OpenBLAS, and of pytest, pluggy, iniconfig, packaging,
# pygments) and .pyfaiss (make-faiss173-py312.sh: FAISS 1.7.3 for python 3.12).
# There (device run, carry [".pyd", ".whl", ".pyfaiss"]):
#   bash scripts/device/device-python-tests.sh [PYTEST ARGS...]   (default: python_bindings/tests)
# Writes $OUT/pytest_full.log and $OUT/conversion.jsonl (512 MB flat index
# CPU -> GPU -> CPU, against FAISS's own copy).
# FX_DEVICE_TMP: where it builds (default /tmp; another folder for a dry run here
# with a python 3.12 first on PATH).
set -euo pipefail
T=${FX_DEVICE_TMP:-/tmp}
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target $T/site .whl/*.whl
rm -rf $T/site/faiss  # faiss-cpu's FAISS: another version; `import faiss` must be 1.7.3's
mkdir -p $T/lib $T/pkg/faiss_ext $T/obj
ob=$(ls $T/site/faiss_cpu.libs/libopenblas*.so)
ln -sf "$ob" $T/lib/libblas.so.3
ln -sf "$ob" $T/lib/liblapack.so.3
ldconfig -p | grep -q libgomp.so.1 || ln -sf "$(ls $T/site/faiss_cpu.libs/libgomp*.so*)" $T/lib/libgomp.so.1
cp .pyd/lib/libfaiss_ext.so.0 $T/lib/
cp python_bindings/faiss_ext/*.py $T/pkg/faiss_ext/
ext=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
# FAISS 1.7.3's headers rely on <cstdint> arriving transitively (g++ 12); newer g++ needs it named.
# public headers are included as <faiss_ext/gpu/...>: the gpu/ folder under that name, as the build tree has it
mkdir -p $T/inc/faiss_ext && ln -sfn "$PWD/gpu" $T/inc/faiss_ext/gpu
ls python_bindings/src/*.cpp | xargs -P 8 -I{} sh -c "g++ -O1 -fPIC -std=c++17 -fopenmp -include cstdint -I. -I$T/inc -I.pyd/include -I$inc -I/usr/local/cuda/include -c {} -o $T/obj/\$(basename {}).o"
# two modules, as CMake builds them; neither links FAISS (it comes from `import faiss`)
common=($T/obj/bind_common.cpp.o $T/obj/swig_bridge.cpp.o)
link=(-L$T/lib -l:libfaiss_ext.so.0 -Wl,-rpath,$T/lib:/usr/local/cuda/lib64 -fopenmp)
# every bind_*.cpp but the common one goes into the main module (a new one is picked up)
binds=($(ls $T/obj/bind_*.cpp.o | grep -v '/bind_common\.cpp\.o$'))
g++ -shared $T/obj/module.cpp.o "${binds[@]}" "${common[@]}" \
    -o "$T/pkg/faiss_ext/_faiss_ext$ext" "${link[@]}"
g++ -shared $T/obj/testing_module.cpp.o "${common[@]}" -o "$T/pkg/faiss_ext/_faiss_ext_testing$ext" "${link[@]}"
# the wheel's OpenBLAS needs the libgfortran beside it
export LD_LIBRARY_PATH=$T/lib:$T/site/faiss_cpu.libs:/usr/local/cuda/lib64
export PYTHONPATH=$PWD/.pyfaiss:$T/pkg:$T/site${FX_EXTRA_PYTHONPATH:+:$FX_EXTRA_PYTHONPATH}  # FX_EXTRA_PYTHONPATH: e.g. /tmp/ray-site (make-ray-kit.sh)
python3 -c "import faiss, faiss_ext; print('faiss', faiss.__version__, faiss.__file__, 'GPUs', faiss_ext.get_num_gpus())"
set +e
python3 -m pytest -q -rs -p no:cacheprovider "${@:-python_bindings/tests}" 2>&1 | tee "${OUT:-$T}/pytest_full.log" | tail -5
status=${PIPESTATUS[0]}
[ "${FX_SKIP_CONVERSION:-0}" = 1 ] || python3 bench/conversion_cost.py --gpu --repeat 3 | tee "${OUT:-$T}/conversion.jsonl"
exit "$status"
