// The merge step of the several-blocks-per-query beam search (SearchGraph.h,
// BeamSearchParams::blocksPerQuery): each query's blocks searched
// independently and each left its k best; one block per query sorts the
// blocks x k entries, drops repeats (a node several blocks found) and keeps
// the first k. A repeated node has the same key in every list (each block
// scores its final buffer in FP32 with the same code), so after sorting by
// (key, id) its copies are adjacent.
#include <faiss/impl/FaissAssert.h>

#include <algorithm>

#include "faiss_ext/gpu/impl/graph/BlockBitonic.cuh"
#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr int kMergeThreads = 256;

/// Warp 0 writes the first k distinct entries of the sorted list (n
/// entries) to the query's output row, padding with -1 / +inf.
__device__ void writeDistinct(const float* key, const uint32_t* id, int n, int k, bool ip,
                              float* outD, int64_t* outI) {
    if (threadIdx.x >= 32) return;
    int lane = threadIdx.x, written = 0;
    for (int i0 = 0; i0 < n && written < k; i0 += 32) {
        int i = i0 + lane;
        bool keep = i < n && id[i] != kNoId && (i == 0 || id[i - 1] != id[i]);
        unsigned mask = __ballot_sync(0xFFFFFFFFu, keep);
        int slot = written + __popc(mask & ((1u << lane) - 1));
        if (keep && slot < k) {
            outD[slot] = ip ? -key[i] : key[i];
            outI[slot] = int64_t(id[i]);
        }
        written += __popc(mask);
    }
    for (int slot = written + lane; slot < k; slot += 32) {
        outD[slot] = ip ? -infinity() : infinity();
        outI[slot] = -1;
    }
}

__global__ void __launch_bounds__(kMergeThreads)
    mergeBlockResultsKernel(const float* keys, const int64_t* ids, int perQuery, int n, int k,
                            bool ip, float* outD, int64_t* outI) {
    extern __shared__ __align__(16) unsigned char smem[];
    float* key = reinterpret_cast<float*>(smem);
    uint32_t* id = reinterpret_cast<uint32_t*>(key + n);
    int64_t qi = blockIdx.x;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int64_t v = i < perQuery ? ids[qi * perQuery + i] : -1;
        key[i] = v >= 0 ? keys[qi * perQuery + i] : infinity();
        id[i] = v >= 0 ? uint32_t(v) : kNoId;
    }
    __syncthreads();
    blockBitonicSort(key, id, n);
    writeDistinct(key, id, n, k, ip, outD + qi * k, outI + qi * k);
}

}  // namespace

void mergeBlockResults(cudaStream_t stream, const float* keys, const int64_t* ids, int64_t nq,
                       int blocks, int k, bool innerProduct, float* outD, int64_t* outI) {
    FAISS_THROW_IF_NOT_FMT(
        blocks >= 1 && k >= 1 && int64_t(blocks) * nextPow2(std::max(k, 32)) <= kMaxMergedResults,
        "mergeBlockResults: %d blocks x k = %d over %d results", blocks, k, kMaxMergedResults);
    if (nq == 0) return;
    int perQuery = blocks * k;
    int n = nextPow2(std::max(perQuery, 32));
    size_t smem = size_t(n) * (sizeof(float) + sizeof(uint32_t));
    for (int64_t q0 = 0; q0 < nq; q0 += 65535) {
        int64_t cnt = std::min<int64_t>(nq - q0, 65535);
        mergeBlockResultsKernel<<<unsigned(cnt), kMergeThreads, smem, stream>>>(
            keys + q0 * perQuery, ids + q0 * perQuery, perQuery, n, k, innerProduct, outD + q0 * k,
            outI + q0 * k);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
