"""Every C++ example of README.md and docs/*.md compiles against the headers
as written (issue 37): a doc example that names a function, a field or a
signature that no longer exists fails here.

The examples are fragments of a program (they use `d`, `xb`, `nq`, ...), so
each one is compiled inside a function of its own, after a prelude that
declares those names with small sizes; a name the block declares itself
shadows the prelude's. Their #include lines go to the top, and #line
directives make the compiler's messages point at the page and line of the
example (doc_cpp_programs.py). Compile-only here (g++ -fsyntax-only); the
doc_examples test program (tests/gen_doc_examples.py) runs them, on a GPU.
Skipped, visibly, without g++ or the build's include folder (build/include,
made by cmake)."""

import os
import shutil
import subprocess

import pytest

from doc_blocks import ROOT
from doc_cpp_programs import BLOCKS, program

BUILD_INCLUDE = os.path.join(os.environ.get("FX_BUILD_DIR_ABS", os.path.join(ROOT, "build")), "include")

def test_the_pages_have_cpp_examples():
    assert len(BLOCKS) >= 5, "the C++ examples were not found: %d blocks" % len(BLOCKS)


@pytest.mark.skipif(shutil.which("g++") is None or not os.path.isdir(BUILD_INCLUDE),
                    reason="needs g++ and the build's include folder (%s: run cmake first)"
                           % BUILD_INCLUDE)
@pytest.mark.parametrize("page,line,body", BLOCKS, ids=["%s:%d" % (p, l) for p, l, _ in BLOCKS])
def test_cpp_example_compiles(page, line, body, tmp_path):
    src = tmp_path / "example.cpp"
    src.write_text(program(page, line, body))
    run = subprocess.run(
        ["g++", "-std=c++17", "-fsyntax-only", "-fopenmp", "-include", "cstdint",
         "-I" + ROOT, "-I" + BUILD_INCLUDE, "-isystem", "/usr/local/cuda/include", str(src)],
        capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert run.returncode == 0, "%s:%d does not compile:\n%s" % (page, line, run.stderr[-4000:])
