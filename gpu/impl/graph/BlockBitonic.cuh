// Block-wide bitonic sorting of (distance, id) pairs in shared memory, for
// the beam search's candidate buffers and the merge of several blocks'
// buffers (SearchGraph.h). Ids carry a flag in their top bit (kExpanded),
// which the order ignores; kNoId (all other bits set) sorts after every
// node of the same distance, and entries without a node hold +inf.
#pragma once

#include <cstdint>

#include "faiss_ext/gpu/utils/WarpSort.cuh"

namespace faiss_ext {
namespace gpu {
namespace graph {

constexpr uint32_t kExpanded = 0x80000000u;
constexpr uint32_t kIdMask = 0x7FFFFFFFu;
constexpr uint32_t kNoId = 0x7FFFFFFFu;

/// (distance, id) order of buffer entries, ignoring the expanded flag.
__device__ __forceinline__ bool pairBefore(float da, uint32_t ia, float db, uint32_t ib) {
    return pairLess(da, ia & kIdMask, db, ib & kIdMask);
}

__device__ __forceinline__ void compareSwap(float* key, uint32_t* id, int i, int j, bool up) {
    float ki = key[i], kj = key[j];
    uint32_t ii = id[i], ij = id[j];
    if (pairBefore(kj, ij, ki, ii) == up) {
        key[i] = kj;
        key[j] = ki;
        id[i] = ij;
        id[j] = ii;
    }
}

/// One compare-exchange of a bitonic network between lanes `stride` apart,
/// in registers: the lower lane keeps the first of the pair when `up`.
__device__ __forceinline__ void shuffleCompareSwap(float& k, uint32_t& v, int lane, int stride,
                                                   bool up) {
    float ok = __shfl_xor_sync(0xFFFFFFFFu, k, stride);
    uint32_t ov = __shfl_xor_sync(0xFFFFFFFFu, v, stride);
    bool lower = (lane & stride) == 0;
    bool take = lower == up ? pairBefore(ok, ov, k, v) : pairBefore(k, v, ok, ov);
    if (take) {
        k = ok;
        v = ov;
    }
}

/// The stages of strides 16 .. 1 of bitonic step `size` (size 0: a whole
/// sort of each 32-element chunk) over n pairs, each warp taking chunks of
/// 32 in registers; `ascending` forces every chunk upwards (a merge).
__device__ inline void registerStages(float* key, uint32_t* id, int n, int size, bool ascending) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    for (int c = warp; c < n / 32; c += warps) {
        int i = c * 32 + lane;
        float k = key[i];
        uint32_t v = id[i];
        if (size == 0) {
            for (int sz = 2; sz <= 32; sz <<= 1)
                for (int stride = sz >> 1; stride > 0; stride >>= 1)
                    shuffleCompareSwap(k, v, lane, stride, ascending || (i & sz) == 0);
        } else {
            for (int stride = 16; stride > 0; stride >>= 1)
                shuffleCompareSwap(k, v, lane, stride, ascending || (i & size) == 0);
        }
        key[i] = k;
        id[i] = v;
    }
}

/// The stage of stride `stride` (>= 32) of bitonic step `size` in shared
/// memory (size 0: ascending everywhere, a merge).
__device__ inline void sharedStage(float* key, uint32_t* id, int n, int size, int stride) {
    for (int t = threadIdx.x; t < n / 2; t += blockDim.x) {
        int i = 2 * t - (t & (stride - 1));
        compareSwap(key, id, i, i + stride, size == 0 || (i & size) == 0);
    }
}

/// Bitonic sort of n (a power of two, >= 32) pairs, ascending, by the whole
/// block: strides below 32 in registers (warp shuffles, no barrier), the
/// others in shared memory.
__device__ inline void blockBitonicSort(float* key, uint32_t* id, int n) {
    registerStages(key, id, n, 0, false);
    __syncthreads();
    for (int size = 64; size <= n; size <<= 1) {
        for (int stride = size >> 1; stride >= 32; stride >>= 1) {
            sharedStage(key, id, n, size, stride);
            __syncthreads();
        }
        registerStages(key, id, n, size, false);
        __syncthreads();
    }
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
