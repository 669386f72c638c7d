#include "faiss_ext/gpu/impl/gnnd/GnndRemove.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cmath>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

constexpr int kWarpsPerBlock = 8;

/// One warp per surviving row: a ballot per 32 entries places the kept
/// ones, so their order (nearest first) is unchanged.
__global__ void compactListsKernel(const int* ids, const float* dists, int K,
                                   const uint32_t* kept, int64_t m, const int* newId, int* outIds,
                                   float* outDists) {
    const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= m) return;
    const int* in = ids + size_t(kept[row]) * K;
    const float* inD = dists + size_t(kept[row]) * K;
    int* out = outIds + size_t(row) * K;
    float* outD = outDists + size_t(row) * K;
    int filled = 0;
    for (int base = 0; base < K; base += 32) {
        const int e = base + lane;
        const int id = e < K ? in[e] : -1;
        const int mapped = id >= 0 ? newId[id] : -1;
        const unsigned keep = __ballot_sync(0xffffffffu, mapped >= 0);
        if (mapped >= 0) {
            const int at = filled + __popc(keep & ((1u << lane) - 1u));
            out[at] = mapped;
            outD[at] = inD[e];
        }
        filled += __popc(keep);
    }
    for (int e = filled + lane; e < K; e += 32) {
        out[e] = -1;
        outD[e] = INFINITY;
    }
}

}  // namespace

void compactLists(cudaStream_t stream, const int* ids, const float* dists, int K,
                  const uint32_t* kept, int64_t m, const int* newId, int* outIds,
                  float* outDists) {
    if (m == 0) return;
    const int64_t blocks = (m + kWarpsPerBlock - 1) / kWarpsPerBlock;
    compactListsKernel<<<unsigned(blocks), kWarpsPerBlock * 32, 0, stream>>>(
            ids, dists, K, kept, m, newId, outIds, outDists);
    FAISS_EXT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
