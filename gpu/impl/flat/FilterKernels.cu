#include "faiss_ext/gpu/impl/flat/FilterKernels.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cmath>

namespace faiss_ext {
namespace gpu {

namespace {

constexpr int kThreads = 256;

unsigned blocksOf(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

/// One warp per gathered row.
__global__ void gatherRowsKernel(const float* src, const float* srcNorms, const uint32_t* ids,
                                 int64_t n, int d, float* dst, float* dstNorms) {
    const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= n) return;
    const int64_t from = ids[row];
    const float* s = src + from * d;
    float* t = dst + row * d;
    for (int j = lane; j < d; j += 32) t[j] = s[j];
    if (lane == 0 && srcNorms && dstNorms) dstNorms[row] = srcNorms[from];
}

__global__ void mapLabelsKernel(int64_t* labels, int64_t n, const uint32_t* ids) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n && labels[i] >= 0) labels[i] = ids[labels[i]];
}

__global__ void offsetLabelsKernel(int64_t* labels, int64_t n, int64_t offset) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n && labels[i] >= 0) labels[i] += offset;
}

/// One thread per tile column, looping over the rows: the bit is read once.
__global__ void maskColumnsKernel(float* dist, int64_t ld, int64_t rows, int64_t cols,
                                  int64_t col0, const uint32_t* bits) {
    const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    const int64_t c = col0 + j;
    if ((bits[c >> 5] >> (c & 31)) & 1u) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) dist[r * ld + j] = NAN;
}

__global__ void padExcludedKernel(float* distances, int64_t* labels, int64_t n, bool similarity) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n || !isnan(distances[i])) return;
    distances[i] = similarity ? -INFINITY : INFINITY;
    labels[i] = -1;
}

}  // namespace

void gatherSelectedRows(const float* src, const float* srcNorms, const uint32_t* ids, int64_t n,
                        int d, float* dst, float* dstNorms, cudaStream_t stream) {
    if (n == 0) return;
    gatherRowsKernel<<<unsigned((n * 32 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
            src, srcNorms, ids, n, d, dst, dstNorms);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void mapSelectedLabels(int64_t* labels, int64_t n, const uint32_t* ids, cudaStream_t stream) {
    if (n == 0) return;
    mapLabelsKernel<<<blocksOf(n), kThreads, 0, stream>>>(labels, n, ids);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void offsetLabels(int64_t* labels, int64_t n, int64_t offset, cudaStream_t stream) {
    if (n == 0 || offset == 0) return;
    offsetLabelsKernel<<<blocksOf(n), kThreads, 0, stream>>>(labels, n, offset);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void maskExcludedColumns(float* dist, int64_t ld, int64_t rows, int64_t cols, int64_t col0,
                         const uint32_t* bits, cudaStream_t stream) {
    if (rows == 0 || cols == 0) return;
    const dim3 grid(blocksOf(cols), unsigned(rows < 64 ? rows : 64));
    maskColumnsKernel<<<grid, kThreads, 0, stream>>>(dist, ld, rows, cols, col0, bits);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void padExcludedResults(float* distances, int64_t* labels, int64_t n, bool similarity,
                        cudaStream_t stream) {
    if (n == 0) return;
    padExcludedKernel<<<blocksOf(n), kThreads, 0, stream>>>(distances, labels, n, similarity);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace faiss_ext
