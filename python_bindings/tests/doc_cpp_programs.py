"""The C++ examples of README.md and docs/*.md as programs: a prelude of
includes, the names the examples take from their surroundings (small sizes,
buffers of random values), and each block inside a function of its own,
with #line directives that point the compiler's messages at the page and
line of the example. Used by test_doc_examples_cpp.py (compile-only, here)
and by tests/gen_doc_examples.py (the doc_examples test program, which runs
them on a GPU)."""

from doc_blocks import fenced_blocks

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

/// The examples' input buffers: fixed pseudo-random values in [0, 1).
inline void fillDocExampleInputs(std::vector<float>& v) {
    uint64_t s = 42;
    for (float& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = float(s >> 40) / float(1 << 24);
    }
}
"""

# the names the examples take from their surroundings
LOCALS = r"""
    const int d = 16;
    const int64_t nb = 1000, nq = 10, n = 1000, nt = 1000, nheld = 100, rows = 4;
    const int k = 10;
    std::vector<float> buf(size_t(nb) * d * 8);
    fillDocExampleInputs(buf);
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


def program_body(page, first_line, body, name="docExample"):
    """The block's #include lines, then a function `name` running the block
    after the names it takes from its surroundings."""
    includes = [l for l in body if l.strip().startswith("#include")]
    code = []
    for line in body:
        if line.strip().startswith("#include"):
            line = ""  # moved to the top; the line numbers stay
        code.append(line)
    return "\n".join(
        includes +
        ["void %s() {" % name, LOCALS, "{", '#line %d "%s"' % (first_line, page)] + code +
        ["}", "}"]) + "\n"


def program(page, first_line, body):
    """One example as a translation unit of its own."""
    return PRELUDE + "\n" + program_body(page, first_line, body)
