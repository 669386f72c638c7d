// The search graph of the survivors of a small removal, patched instead of
// pruned again. CAGRA's optimisation (Ootomo et al., ICDE 2024,
// arXiv 2308.15136, section IV-B) is a pass over every node's k-NN list; a
// removal of a few percent changes few edges (with degree 32, 1% removed
// touches 0.32 edges a node on average), so each survivor keeps its pruned
// edges to survivors and fills the slots of the removed ones from its own
// k-NN list, nearest first. See SearchGraph.h for the contract.
#include <faiss/impl/FaissAssert.h>

#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

__device__ bool rowContains(const int* row, int m, int id) {
    for (int i = 0; i < m; ++i)
        if (row[i] == id) return true;
    return false;
}

/// One thread per survivor j (old node kept[j]): its old edges to survivors,
/// renumbered and in order, then its k-NN list's nodes not yet in the row.
__global__ void repairKernel(const int* oldGraph, int degree, const uint32_t* kept, int64_t n,
                             const int* newId, const int* knn, int stride, int K, int* out,
                             unsigned long long* shortRows) {
    const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const int* src = oldGraph + size_t(kept[j]) * degree;
    int* dst = out + size_t(j) * degree;
    int m = 0;
    // The old row has no duplicates and no self loop; renumbering keeps both.
    for (int r = 0; r < degree; ++r) {
        const int e = src[r];
        const int ne = e < 0 ? -1 : newId[e];
        if (ne >= 0) dst[m++] = ne;
    }
    const int* list = knn + size_t(j) * stride;
    for (int t = 0; t < K && m < degree; ++t) {
        const int c = list[t];
        if (c >= 0 && c != int(j) && !rowContains(dst, m, c)) dst[m++] = c;
    }
    if (m < degree) atomicAdd(shortRows, 1ull);
    for (; m < degree; ++m) dst[m] = -1;
}

}  // namespace

void repairGraphAfterRemoval(cudaStream_t stream, const int* oldGraph, int degree,
                             const uint32_t* kept, int64_t n, const int* newId, const int* knn,
                             int stride, int K, int* out, unsigned long long* shortRows) {
    FAISS_THROW_IF_NOT_FMT(degree >= 1 && degree <= kMaxSearchDegree && K >= 1 && stride >= K,
                           "repairGraphAfterRemoval: degree %d, K %d, stride %d", degree, K,
                           stride);
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(shortRows, 0, sizeof(unsigned long long), stream));
    if (n == 0) return;
    repairKernel<<<blocksFor(n, 256), 256, 0, stream>>>(oldGraph, degree, kept, n, newId, knn,
                                                        stride, K, out, shortRows);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
