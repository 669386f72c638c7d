"""Every C++ example of README.md and docs/*.md compiles against the headers
as written (issue 37): a doc example that names a function, a field or a
signature that no longer exists fails here.

The examples are fragments of a program (they use `d`, `xb`, `nq`, ...), so
each one is compiled inside a function of its own, after a prelude that
declares those names with small sizes; a name the block declares itself
shadows the prelude's. Their #include lines go to the top, and #line
directives make the compiler's messages point at the page and line of the
example. Compile-only (g++ -fsyntax-only): running them needs a GPU and
files the examples name; skipped, visibly, without g++ or the build's
include folder (build/include, made by cmake)."""

import os
import shutil
import subprocess

import pytest

from doc_blocks import ROOT, fenced_blocks

BUILD_INCLUDE = os.path.join(os.environ.get("FX_BUILD_DIR_ABS", os.path.join(ROOT, "build")), "include")

PRELUDE = r"""
#include <faiss/Index.h>
#include <faiss/IndexFlat.h>
#include <faiss_ext/BiLevelLSHAutoTune.h>
#include <faiss_ext/IndexBiLevelLSH.h>
#include <faiss_ext/index_factory.h>
#include <faiss_ext/index_io.h>
#include <faiss_ext/gpu/GnndOutOfCore.h>
#include <faiss_ext/gpu/GpuBiLevelLSHTuneEvaluator.h>
#include <faiss_ext/gpu/GpuCloner.h>
#include <faiss_ext/gpu/GpuIndexBiLevelLSH.h>
#include <faiss_ext/gpu/GpuIndexQuickSelectFlat.h>
#include <faiss_ext/gpu/GpuIndexSearchGraph.h>
#include <faiss_ext/gpu/GpuKnnGraphGNND.h>
#include <faiss_ext/gpu/GpuSelect.h>
#include <faiss_ext/gpu/StandardGpuResources.h>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>
"""

# the names the examples take from their surroundings
LOCALS = r"""
    const int d = 16;
    const int64_t nb = 1000, nq = 10, n = 1000, nt = 1000, nheld = 100, rows = 4;
    const int k = 10;
    std::vector<float> buf(size_t(nb) * d * 8);
    float *xb = buf.data(), *xq = xb + nb * d, *x = xq + nb * d, *xt = x + nb * d;
    float *xheld = xt + nb * d, *dist = xheld + nb * d;
    std::vector<float> outD(size_t(nb) * 64);
    std::vector<int64_t> outI(size_t(nb) * 64);
    float *distances = outD.data(), *D = distances, *graphD = distances, *vals = distances;
    int64_t *labels = outI.data(), *I = labels, *graphI = labels, *ids = labels;
    faiss_ext::gpu::StandardGpuResources res, res0, res1;
    std::unique_ptr<faiss::Index> cpu(new faiss::IndexFlatL2(d));
    (void)xb; (void)xq; (void)x; (void)xt; (void)xheld; (void)dist; (void)D; (void)I;
    (void)graphD; (void)graphI; (void)vals; (void)ids; (void)distances; (void)labels;
"""


BLOCKS = [(page, line, body) for page, line, body, _ in fenced_blocks(("```cpp", "```c++"))]


def _program(page, first_line, body):
    includes = [l for l in body if l.strip().startswith("#include")]
    code = []
    for offset, line in enumerate(body):
        if line.strip().startswith("#include"):
            line = ""  # moved to the top; the line numbers stay
        code.append(line)
    return "\n".join(
        [PRELUDE] + includes +
        ["void docExample() {", LOCALS, "{", '#line %d "%s"' % (first_line, page)] + code +
        ["}", "}"]) + "\n"


def test_the_pages_have_cpp_examples():
    assert len(BLOCKS) >= 5, "the C++ examples were not found: %d blocks" % len(BLOCKS)


@pytest.mark.skipif(shutil.which("g++") is None or not os.path.isdir(BUILD_INCLUDE),
                    reason="needs g++ and the build's include folder (%s: run cmake first)"
                           % BUILD_INCLUDE)
@pytest.mark.parametrize("page,line,body", BLOCKS, ids=["%s:%d" % (p, l) for p, l, _ in BLOCKS])
def test_cpp_example_compiles(page, line, body, tmp_path):
    src = tmp_path / "example.cpp"
    src.write_text(_program(page, line, body))
    run = subprocess.run(
        ["g++", "-std=c++17", "-fsyntax-only", "-fopenmp", "-include", "cstdint",
         "-I" + ROOT, "-I" + BUILD_INCLUDE, "-isystem", "/usr/local/cuda/include", str(src)],
        capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert run.returncode == 0, "%s:%d does not compile:\n%s" % (page, line, run.stderr[-4000:])
