#include <algorithm>

#include "faiss_ext/gpu/impl/graph/UnlikeQueries.h"
#include "faiss_ext/gpu/impl/graph/UnlikeQueryRule.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr int kThreads = 128;

/// One thread per query; its flags are counted per block first, so that a
/// batch costs one atomic a block.
__global__ void flagUnlikeKernel(const float* distances, const int64_t* labels, int64_t nq, int k,
                                 NeighbourLists lists, int kth, bool similarity, float ratio,
                                 uint8_t* flags, int* count) {
    __shared__ int blockCount;
    if (threadIdx.x == 0) blockCount = 0;
    __syncthreads();
    const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (q < nq) {
        const int64_t v = labels[q * k];
        bool unlike = false;
        if (v >= 0) {
            const float radius =
                neighbourRadius(lists.ids + v * lists.stride, lists.dists + v * lists.stride,
                                lists.K, kth, similarity);
            unlike = isUnlikeQuery(squaredDistanceOfReported(distances[q * k], similarity), radius,
                                   ratio);
        }
        flags[q] = unlike ? 1 : 0;
        if (unlike) atomicAdd(&blockCount, 1);
    }
    __syncthreads();
    if (threadIdx.x == 0 && blockCount > 0) atomicAdd(count, blockCount);
}

}  // namespace

void flagUnlikeQueries(const float* distances, const int64_t* labels, int64_t nq, int k,
                       const NeighbourLists& lists, bool similarity, float ratio, uint8_t* flags,
                       int* count, cudaStream_t stream) {
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(int), stream));
    if (nq == 0) return;
    const int kth = std::min(kUnlikeQueryNeighbour, lists.K);
    flagUnlikeKernel<<<unsigned((nq + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        distances, labels, nq, k, lists, kth, similarity, ratio, flags, count);
    FAISS_EXT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
