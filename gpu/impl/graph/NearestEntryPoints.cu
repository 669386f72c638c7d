// The entry points of each query (SearchGraph.h, nearestEntryPoints): the
// sampled nodes nearest to it, found by one TF32 GEMM of the queries with
// the sample and a warp-wide selection per query. Seeds need only be near
// the query, not exact: before, the exact engine's bounded search (GEMM,
// multi-pass selection, FP32 re-scoring, sort, certificate: some twenty
// launches) took 0.85 ms of a 2.3 ms search of 10,000 queries at itopk 16
// on a 1M x 128 set (H200, bench/trace_search), and the beam search 1.2 ms.
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>

#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/graph/NearestEntryPoints.h"
#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/WarpSort.cuh"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kWarpsPerBlock = 4;
/// The id of an empty slot (sorts after every entry point of the same key).
constexpr uint32_t kNoEntry = 0xFFFFFFFFu;

/// Lane `lane` of a warp-distributed sequence keeps, of itself and its
/// partner `stride` lanes away, the first (ascending order) when it is the
/// lower lane of an ascending pair; the second otherwise.
__device__ __forceinline__ void exchange(float& key, uint32_t& id, int lane, int stride,
                                         bool ascending) {
    const float otherKey = __shfl_xor_sync(kFull, key, stride);
    const uint32_t otherId = __shfl_xor_sync(kFull, id, stride);
    const bool lower = (lane & stride) == 0;
    const bool otherFirst = pairLess(otherKey, otherId, key, id);
    if (otherFirst == (lower == ascending)) {
        key = otherKey;
        id = otherId;
    }
}

/// Sorts the warp's 32 (key, id) pairs ascending, lane i holding rank i.
__device__ __forceinline__ void warpSortAscending(float& key, uint32_t& id, int lane) {
    for (int size = 2; size <= 32; size <<= 1) {
        const bool ascending = (lane & size) == 0 || size == 32;
        for (int stride = size >> 1; stride > 0; stride >>= 1)
            exchange(key, id, lane, stride, ascending);
    }
}

/// One warp per query row of `dots` (alpha x q.x, ld floats a row): keys
/// dots + sqNorms[j] (L2) or dots (inner product, already negated); keeps
/// the 32 smallest in registers (lane i: rank i), merging a chunk of 32
/// columns only when one of them beats the current 32nd.
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
        nearestEntryPointsKernel(const float* dots, int64_t ld, const float* sqNorms, int count,
                                 int64_t rows, int perQuery, int64_t* out) {
    const int lane = threadIdx.x & 31;
    const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= rows) return;  // whole warps leave together
    const float* r = dots + row * ld;
    float bestKey = INFINITY;
    uint32_t bestId = kNoEntry;
    for (int j0 = 0; j0 < count; j0 += 32) {
        const int j = j0 + lane;
        float key = INFINITY;
        if (j < count) key = sqNorms ? r[j] + sqNorms[j] : r[j];
        if (!(key == key)) key = INFINITY;  // NaN never selected
        const float worst = __shfl_sync(kFull, bestKey, 31);
        if (!__any_sync(kFull, key < worst)) continue;
        uint32_t id = j < count ? uint32_t(j) : kNoEntry;
        warpSortAscending(key, id, lane);
        // best ascending, the chunk reversed: their lane-wise minima form a
        // bitonic sequence holding the 32 smallest of both; merge it
        const float revKey = __shfl_sync(kFull, key, 31 - lane);
        const uint32_t revId = __shfl_sync(kFull, id, 31 - lane);
        if (pairLess(revKey, revId, bestKey, bestId)) {
            bestKey = revKey;
            bestId = revId;
        }
        for (int stride = 16; stride > 0; stride >>= 1)
            exchange(bestKey, bestId, lane, stride, true);
    }
    if (lane < perQuery)
        out[row * perQuery + lane] = bestId == kNoEntry || bestKey == INFINITY ? -1 : int64_t(bestId);
}

}  // namespace

int64_t entryDotsLd(int count) { return (int64_t(count) + 3) / 4 * 4; }

void nearestEntryPoints(cublasHandle_t blas, cudaStream_t stream, const float* entries,
                        const float* sqNorms, int count, int d, const float* q, int64_t nq,
                        int perQuery, float* dots, int64_t* out) {
    FAISS_THROW_IF_NOT_FMT(count >= 1 && d >= 1 && nq >= 0 && perQuery >= 1 &&
                                   perQuery <= kMaxNearestEntrySeeds,
                           "nearestEntryPoints: bad arguments (count %d, d %d, nq %lld, "
                           "perQuery %d <= %d)",
                           count, d, (long long)nq, perQuery, kMaxNearestEntrySeeds);
    if (nq == 0) return;
    const int64_t ld = entryDotsLd(count);
    // L2: |x|^2 - 2 q.x ranks as |q - x|^2; inner products: -q.x, smaller first
    gemmDotProductsTf32(blas, q, nq, entries, count, d, sqNorms ? -2.f : -1.f, dots, ld);
    const unsigned blocks = unsigned((nq + kWarpsPerBlock - 1) / kWarpsPerBlock);
    nearestEntryPointsKernel<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(dots, ld, sqNorms, count,
                                                                         nq, perQuery, out);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
