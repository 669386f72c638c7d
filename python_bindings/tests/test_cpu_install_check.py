"""The build checks its Python first: configuring the module for an
interpreter that cannot `import faiss` fails at once with a message that says
which Python to use, instead of after the whole CUDA build (issue 37)."""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NVCC = "/usr/local/cuda/bin/nvcc"


@pytest.mark.skipif(shutil.which("cmake") is None or not os.path.exists(NVCC)
                    or not os.path.exists("/usr/include/faiss/Index.h"),
                    reason="needs cmake, CUDA's nvcc and FAISS's headers (the project's "
                           "configure step; the GPU machine has no FAISS development files)")
def test_configure_refuses_a_python_without_faiss_within_seconds():
    with tempfile.TemporaryDirectory() as tmp:
        # Debian's python without its site directories: the same interpreter, no faiss
        fake = os.path.join(tmp, "python-without-faiss")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nexec %s -S -I \"$@\"\n" % sys.executable)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
        start = time.monotonic()
        run = subprocess.run(
            ["cmake", "-S", ROOT, "-B", os.path.join(tmp, "build"), "-DCMAKE_CUDA_ARCHITECTURES=90",
             "-DCMAKE_CUDA_COMPILER=" + NVCC, "-DFAISS_EXT_BUILD_TESTS=OFF",
             "-DFAISS_EXT_BUILD_BENCH=OFF", "-DPYTHON_EXECUTABLE=" + fake],
            capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - start
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "cannot (No module named faiss)" in out, out
    assert "python3-faiss" in out and "--system-site-packages" in out, out
    assert elapsed < 60, "configure took %.0f s before refusing" % elapsed
