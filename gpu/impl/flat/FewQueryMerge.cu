// The warp merge (FewQueryMerge.h). Each warp keeps a sorted list of the 32
// smallest keys it has accepted, one per lane. A batch of 32 keys (one per
// lane) is first filtered against the list's kk-th key -- the chunk lists
// are mostly far above it, so most batches end there with one vote --;
// otherwise it is sorted across the lanes (bitonic, 15 shuffle steps),
// merged with the list by taking min(list[i], batch[31 - i]) (a bitonic
// sequence holding the 32 smallest of both) and sorted again (5 steps).
// At the end warp 0 merges the other warps' lists the same way. Keys are
// distinct (ids in the low half), so the result is the exact kk smallest.
#include "faiss_ext/gpu/impl/flat/FewQueryMerge.h"

#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

constexpr int kWarps = 16;         ///< warps of a block (one block per row)
constexpr int kBatchesAtOnce = 4;  ///< batches a warp loads before merging them
constexpr unsigned kFull = 0xFFFFFFFFu;

__device__ __forceinline__ uint64_t minKey(uint64_t a, uint64_t b) { return a < b ? a : b; }
__device__ __forceinline__ uint64_t maxKey(uint64_t a, uint64_t b) { return a < b ? b : a; }

/// One compare-exchange step across lanes at distance `stride`: the lower
/// lane of each pair keeps the smaller key when `ascending`.
__device__ __forceinline__ uint64_t exchange(uint64_t v, int lane, int stride, bool ascending) {
    const uint64_t other = __shfl_xor_sync(kFull, v, stride);
    const bool lower = (lane & stride) == 0;
    return lower == ascending ? minKey(v, other) : maxKey(v, other);
}

/// The 32 keys of the warp sorted ascending by lane.
__device__ __forceinline__ uint64_t warpSort(uint64_t v, int lane) {
#pragma unroll
    for (int size = 2; size <= 32; size <<= 1) {
#pragma unroll
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            v = exchange(v, lane, stride, (lane & size) == 0);
        }
    }
    return v;
}

/// The 32 smallest of two ascending lists `a` and `b`, ascending.
__device__ __forceinline__ uint64_t mergeSorted(uint64_t a, uint64_t b, int lane) {
    uint64_t v = minKey(a, __shfl_sync(kFull, b, 31 - lane));
#pragma unroll
    for (int stride = 16; stride > 0; stride >>= 1) v = exchange(v, lane, stride, true);
    return v;
}

/// Offers one key per lane to the warp's list `best`; `thresh` is its kk-th
/// key (keys at or above it cannot be among the kk smallest).
__device__ __forceinline__ void offerBatch(uint64_t v, int kk, int lane, uint64_t& best,
                                           uint64_t& thresh) {
    const bool pass = v < thresh;
    if (!__any_sync(kFull, pass)) return;
    best = mergeSorted(best, warpSort(pass ? v : select::kMaxKey, lane), lane);
    thresh = __shfl_sync(kFull, best, kk - 1);
}

__global__ void __launch_bounds__(kWarps * 32)
        warpMergeKernel(const uint64_t* lists, int64_t n, int kk, uint64_t* out) {
    __shared__ uint64_t warpBest[kWarps][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint64_t* row = lists + int64_t(blockIdx.x) * n;
    uint64_t best = select::kMaxKey, thresh = select::kMaxKey;
    const int64_t batches = (n + 31) / 32;
    // Several loads in flight per lane before the dependent merges.
    for (int64_t b0 = warp; b0 < batches; b0 += int64_t(kWarps) * kBatchesAtOnce) {
        uint64_t v[kBatchesAtOnce];
#pragma unroll
        for (int j = 0; j < kBatchesAtOnce; ++j) {
            const int64_t i = (b0 + int64_t(j) * kWarps) * 32 + lane;
            v[j] = i < n ? row[i] : select::kMaxKey;
        }
#pragma unroll
        for (int j = 0; j < kBatchesAtOnce; ++j) offerBatch(v[j], kk, lane, best, thresh);
    }
    warpBest[warp][lane] = best;
    __syncthreads();
    if (warp != 0) return;
    for (int w = 1; w < kWarps; ++w) best = mergeSorted(best, warpBest[w][lane], lane);
    if (lane < kk) out[int64_t(blockIdx.x) * kk + lane] = best;
}

}  // namespace

void warpMergeLists(const uint64_t* lists, int64_t rows, int64_t n, int64_t kk, uint64_t* out,
                    cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(kk >= 1 && kk <= kWarpMergeMaxK && kk <= n,
                           "warpMergeLists: k = %lld not in [1, min(%lld, n = %lld)]",
                           (long long)kk, (long long)kWarpMergeMaxK, (long long)n);
    if (rows == 0) return;
    FAISS_THROW_IF_NOT_FMT(rows < (int64_t(1) << 31), "warpMergeLists: %lld rows",
                           (long long)rows);
    warpMergeKernel<<<unsigned(rows), kWarps * 32, 0, stream>>>(lists, n, int(kk), out);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace faiss_ext
