#include <cmath>

#include "faiss_ext/gpu/impl/graph/FilteredResults.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr int kThreads = 128;

/// One thread per query: its candidates are read in order (sorted, so the
/// kept ones are the k nearest selected candidates).
__global__ void keepSelectedKernel(const float* candD, const int64_t* candI, int64_t nq, int kWide,
                                   const uint32_t* keepBits, int k, bool similarity,
                                   float* distances, int64_t* labels, uint8_t* shortRows) {
    const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (q >= nq) return;
    const float* d = candD + q * kWide;
    const int64_t* ids = candI + q * kWide;
    float* outD = distances + q * k;
    int64_t* outI = labels + q * k;
    int kept = 0;
    for (int j = 0; j < kWide && kept < k; ++j) {
        const int64_t id = ids[j];
        if (id < 0) break;
        if ((keepBits[id >> 5] >> (id & 31)) & 1u) {
            outD[kept] = d[j];
            outI[kept] = id;
            ++kept;
        }
    }
    shortRows[q] = kept < k;
    for (int j = kept; j < k; ++j) {
        outD[j] = similarity ? -INFINITY : INFINITY;
        outI[j] = -1;
    }
}

/// Scatter: row rows[j] of dst = row j of src; gather: row j of dst = row
/// rows[j] of src (k values a row).
template <bool kScatter>
__global__ void moveRowsKernel(const float* srcD, const int64_t* srcI, const uint32_t* rows,
                               int64_t n, int k, float* dstD, int64_t* dstI) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n * k) return;
    const int64_t j = i / k, c = i % k;
    const int64_t other = int64_t(rows[j]) * k + c;
    const int64_t from = kScatter ? i : other, to = kScatter ? other : i;
    dstD[to] = srcD[from];
    dstI[to] = srcI[from];
}

}  // namespace

void keepSelectedCandidates(const float* candD, const int64_t* candI, int64_t nq, int kWide,
                            const uint32_t* keepBits, int k, bool similarity, float* distances,
                            int64_t* labels, uint8_t* shortRows, cudaStream_t stream) {
    if (nq == 0) return;
    keepSelectedKernel<<<unsigned((nq + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        candD, candI, nq, kWide, keepBits, k, similarity, distances, labels, shortRows);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void scatterResultRows(const float* srcD, const int64_t* srcI, const uint32_t* rows, int64_t n,
                       int k, float* dstD, int64_t* dstI, cudaStream_t stream) {
    if (n == 0) return;
    const int64_t total = n * k;
    moveRowsKernel<true>
        <<<unsigned((total + 255) / 256), 256, 0, stream>>>(srcD, srcI, rows, n, k, dstD, dstI);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void gatherResultRows(const float* srcD, const int64_t* srcI, const uint32_t* rows, int64_t n,
                      int k, float* dstD, int64_t* dstI, cudaStream_t stream) {
    if (n == 0) return;
    const int64_t total = n * k;
    moveRowsKernel<false>
        <<<unsigned((total + 255) / 256), 256, 0, stream>>>(srcD, srcI, rows, n, k, dstD, dstI);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
