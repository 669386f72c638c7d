// Entry points of the beam search: a seeded random sample of the nodes, whose
// vectors an exact index holds, so that each query starts from the sampled
// nodes nearest to it rather than from random ones. On data of many
// separated clusters a k-NN graph has few edges between clusters, and a
// search started at random stays in the wrong one (CAGRA, Ootomo et al.,
// ICDE 2024, arXiv 2308.15136, seeds from random samples only).
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

std::vector<int> sampleEntryPoints(int64_t n, int count, uint64_t seed) {
    count = int(std::min<int64_t>(count, n));
    std::vector<int> ids;
    ids.reserve(count);
    if (count == 0) return ids;
    std::mt19937_64 rng(seed);
    if (int64_t(count) * 4 >= n) {
        std::vector<int> all(n);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        ids.assign(all.begin(), all.begin() + count);
    } else {
        // Floyd's sample: count distinct ids without an n-sized array
        std::vector<int> chosen;
        for (int64_t j = n - count; j < n; ++j) {
            int64_t t = int64_t(rng() % uint64_t(j + 1));
            bool seen = std::find(chosen.begin(), chosen.end(), int(t)) != chosen.end();
            chosen.push_back(seen ? int(j) : int(t));
        }
        ids = chosen;
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

namespace {
__global__ void gatherRowsKernel(const float* x, int d, const int* rows, int count, float* out) {
    int r = blockIdx.x;
    if (r >= count) return;
    const float* src = x + int64_t(rows[r]) * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) out[int64_t(r) * d + j] = src[j];
}
}  // namespace

void gatherRows(cudaStream_t stream, const float* x, int d, const int* rows, int count,
                float* out) {
    if (count == 0) return;
    gatherRowsKernel<<<unsigned(count), 128, 0, stream>>>(x, d, rows, count, out);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
