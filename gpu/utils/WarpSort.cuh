// Sorting by one warp: a bitonic sort of (key, id) pairs in shared memory,
// used by the GNND kernels (list segments) and the LSH short-list search.
// Included only from .cu files.
#pragma once

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// (distance, id) order: smaller distance, then smaller id.
__device__ __forceinline__ bool pairLess(float da, uint32_t ia, float db, uint32_t ib) {
    return da < db || (da == db && ia < ib);
}

/// Bitonic sort of n (a power of two, <= 32 * 64) (key, id) pairs in shared
/// memory by one warp, ascending by before(ka, ia, kb, ib).
template <typename Before>
__device__ __forceinline__ void warpBitonicSortBy(float* keys, uint32_t* ids, int n, int lane,
                                                  Before before) {
    for (int size = 2; size <= n; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = lane; i < n / 2; i += 32) {
                int lo = 2 * i - (i & (stride - 1));
                int hi = lo + stride;
                bool asc = (lo & size) == 0;
                float ka = keys[lo], kb = keys[hi];
                uint32_t ia = ids[lo], ib = ids[hi];
                bool swap = asc ? before(kb, ib, ka, ia) : before(ka, ia, kb, ib);
                if (swap) {
                    keys[lo] = kb;
                    keys[hi] = ka;
                    ids[lo] = ib;
                    ids[hi] = ia;
                }
            }
            __syncwarp();
        }
    }
}

/// warpBitonicSortBy ascending by pairLess (distance, then id).
__device__ __forceinline__ void warpBitonicSort(float* keys, uint32_t* ids, int n, int lane) {
    warpBitonicSortBy(keys, ids, n, lane, pairLess);
}

}  // namespace gpu
}  // namespace faiss_ext
