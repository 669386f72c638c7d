#include "faiss_ext/gpu/impl/select/SelectUtils.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace select {

namespace {

__global__ void negateKernel(const float* src, float* dst, int64_t count) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += int64_t(gridDim.x) * blockDim.x) {
        dst[i] = -src[i];
    }
}

__global__ void gatherKernel(const int64_t* in, int64_t n, int64_t* labels, int64_t rows, int64_t k) {
    int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * k) return;
    int64_t l = labels[i];
    if (l >= 0) labels[i] = in[(i / k) * n + l];
}

}  // namespace

void negateCopy(const float* src, float* dst, int64_t count, cudaStream_t stream) {
    if (count <= 0) return;
    int64_t blocks = std::min<int64_t>((count + 255) / 256, 65535 * 8);
    negateKernel<<<unsigned(blocks), 256, 0, stream>>>(src, dst, count);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void gatherIndices(const int64_t* inIndices, int64_t n, int64_t* labels, int64_t rows, int64_t k,
                   cudaStream_t stream) {
    if (rows * k <= 0) return;
    gatherKernel<<<unsigned((rows * k + 255) / 256), 256, 0, stream>>>(inIndices, n, labels, rows, k);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
