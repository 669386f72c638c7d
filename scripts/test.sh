#!/usr/bin/env bash
# The second of the README's two commands: installs what is missing, builds
# (same build dir as scripts/demo.sh) and runs every test:
#   1. the C++ suites through ctest (tests/cpu_tests, tests/gpu_tests; GPU
#      tests skip visibly on a machine without a GPU)
#   2. the Python tests with Debian's /usr/bin/python3 (it has python3-faiss)
#   3. the installed package: cmake --install, then the out-of-tree example
#      in examples/ built against it with find_package(faiss_ext) and run
#   4. one FAISS per process, checked with nm (scripts/check-one-faiss.sh):
#      the example program and the Python module each see one FAISS
#   5. `python3 -m pip install .` into a venv under the build dir (Debian's
#      python with its site-packages: python3-faiss), then the installed
#      package is imported and used from outside the repository
#      (FX_SKIP_PIP=1 skips this step)
#   6. a small run of the demo that must reach recall 1 (exact search)
#   7. fuzz: fuzz/run.sh, a short libFuzzer run over faiss_ext::read_index
#      (FX_FUZZ_SECONDS, default 60; its clang build is build-fuzz)
#   8. links: scripts/check-links.py, every relative link and #anchor of
#      README.md and docs/*.md must name a file / heading that exists
#   9. distributed: Ray (from PyPI) in a venv of Debian's python under the
#      build dir, then the faiss_ext.distributed tests on a local multi-node
#      Ray cluster (loopback); SKIP, named in the summary, where Ray cannot be
#      installed (no network), FX_SKIP_RAY=1 skips it
# Every step runs even when an earlier one fails; the exit status is non-zero
# when any failed, and the last line is a summary.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh
set -e
fx_install_deps
fx_check_nvcc
fx_build
set +e

root=$PWD
jobs=${FX_JOBS:-$(nproc)}
results=()
failed=0
record() {  # record NAME STATUS
  if [ "$2" -eq 0 ]; then results+=("$1 PASS"); else results+=("$1 FAIL($2)"); failed=1; fi
}

fx_log "C++ tests (ctest)"
# The Python suite, which CMake also registers as a ctest, runs in the next step
# with the interpreter and path it needs; here only the C++ suites.
ctest --test-dir "$FX_BUILD_DIR" --output-on-failure --no-tests=error -j "$jobs" -E '^python_bindings$' 
record ctest $?

fx_log "Python tests (/usr/bin/python3 -m pytest, PYTHONPATH=$FX_BUILD_DIR/python)"
PYTHONPATH="$root/$FX_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 -m pytest -v python_bindings/tests
st=$?
[ $st -eq 5 ] && echo "pytest collected no tests: that counts as a failure"
record pytest $st

fx_log "Install + out-of-tree example (find_package(faiss_ext))"
(
  set -e
  rm -rf "$FX_BUILD_DIR/install" "$FX_BUILD_DIR/example"
  cmake --install "$FX_BUILD_DIR" --prefix "$FX_BUILD_DIR/install"
  cmake -S examples -B "$FX_BUILD_DIR/example" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$root/$FX_BUILD_DIR/install"
  cmake --build "$FX_BUILD_DIR/example" -j "$jobs"
  "$FX_BUILD_DIR/example/faiss_ext_example"
)
record example $?

fx_log "One FAISS per process (nm: the example program, the C++ tests, the Python module)"
scripts/check-one-faiss.sh "$FX_BUILD_DIR" "$FX_BUILD_DIR/example/faiss_ext_example" \
  "$FX_BUILD_DIR/tests/cpu_tests"
record one-faiss $?

if [ "${FX_SKIP_PIP:-0}" = 1 ]; then
  fx_log "pip install . skipped (FX_SKIP_PIP=1)"
else
  fx_log "pip install . (venv $FX_BUILD_DIR/pip-venv, builds into build/pip-*)"
  (
    set -e
    venv="$root/$FX_BUILD_DIR/pip-venv"
    rm -rf "$venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    # a second build of the library (scikit-build-core's own build dir): ccache,
    # when installed, spares what it already compiled
    launchers=""
    command -v ccache >/dev/null &&
      launchers="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
    CMAKE_ARGS="${CMAKE_ARGS:-} $launchers" CMAKE_BUILD_PARALLEL_LEVEL=$jobs \
      "$venv/bin/python" -m pip install -q .
    cd /   # away from the sources: the installed package must be the one imported
    "$venv/bin/python" - <<'PY'
import os, faiss, faiss_ext, numpy as np
pkg = os.path.dirname(faiss_ext.__file__)
assert "pip-venv" in pkg, pkg
for name in ("__init__.pyi", "py.typed"):
    assert os.path.exists(os.path.join(pkg, name)), name
lsh = faiss_ext.index_factory(8, "BiLSH4x4_t1")
idmap = faiss.IndexIDMap(lsh)               # our index inside FAISS's wrapper
x = np.random.default_rng(0).random((500, 8), dtype=np.float32)
idmap.train(x)
idmap.add_with_ids(x, np.arange(500) + 1000)
assert idmap.search(x[:3], 1)[1][:, 0].tolist() == [1000, 1001, 1002]
assert isinstance(faiss_ext.index_factory(8, "QSFlat"), faiss.IndexFlat)
print("installed faiss_ext at", pkg, "works with the FAISS of import faiss")
PY
  )
  record pip $?
fi

fx_log "Demo smoke run (exact search must give recall 1)"
"$FX_BUILD_DIR/bench/faiss_ext_demo" --nb 20000 --nq 200 --k 10 --min-recall 0.999
record demo $?

fx_log "Fuzz read_index for ${FX_FUZZ_SECONDS:-60}s (clang, libFuzzer + ASan + UBSan; docs/fuzzing.md)"
FX_JOBS=$jobs fuzz/run.sh "${FX_FUZZ_SECONDS:-60}"
record fuzz $?

fx_log "Links of README.md and docs/*.md (scripts/check-links.py)"
/usr/bin/python3 scripts/check-links.py
record links $?

if [ "${FX_SKIP_RAY:-0}" = 1 ]; then
  fx_log "faiss_ext.distributed tests skipped (FX_SKIP_RAY=1)"
  results+=("distributed SKIP")
else
  fx_log "faiss_ext.distributed on a local Ray cluster (venv $FX_BUILD_DIR/ray-venv)"
  rayvenv="$root/$FX_BUILD_DIR/ray-venv"
  if [ -x "$rayvenv/bin/python" ] && "$rayvenv/bin/python" -c "import ray" 2>/dev/null ||
     { rm -rf "$rayvenv" && /usr/bin/python3 -m venv --system-site-packages "$rayvenv" &&
       timeout 300 "$rayvenv/bin/python" -m pip install -q "ray>=2,<3"; }; then
    # (SIGINT at the limit, so that pytest still prints which tests failed and why; a test
    # stuck for 120 s has every thread's stack dumped: a hang at 2026-12-05 left no trace)
    PYTHONPATH="$root/$FX_BUILD_DIR/python" timeout -s INT -k 30 300 "$rayvenv/bin/python" \
      -m pytest -v -rfE -o faulthandler_timeout=120 \
      -k distributed python_bindings/tests/test_cpu_distributed.py \
      python_bindings/tests/test_doc_examples.py
    record distributed $?
  else
    echo "SKIPPED: Ray could not be installed from PyPI (no network?): the distributed tests did not run"
    results+=("distributed SKIP")
  fi
fi

echo
echo "test.sh summary: ${results[*]} => $([ $failed -eq 0 ] && echo 'ALL PASSED' || echo 'FAILED')"
exit $failed
