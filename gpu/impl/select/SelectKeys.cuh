// Keys of the k-selection: a 64-bit word holding an order-preserving image
// of the float distance in the high half and the column (vector id) in the
// low half. Comparing keys compares distances and breaks ties by the smaller
// id, so all keys of a row are distinct: every partition makes progress and
// results are deterministic (the ground-truth convention of shared/data).
#pragma once

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace select {

/// The largest key: compares >= every key (used as "take everything").
constexpr uint64_t kMaxKey = ~uint64_t(0);

/// Order-preserving bits of a float (NaN sorts last).
__device__ __forceinline__ uint32_t orderedFloatBits(float f) {
    if (f != f) return 0xFFFFFFFFu;
    uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Inverse of orderedFloatBits.
__device__ __forceinline__ float floatFromOrderedBits(uint32_t o) {
    uint32_t u = (o & 0x80000000u) ? (o & 0x7FFFFFFFu) : ~o;
    return __uint_as_float(u);
}

/// Key of distance v at id idx.
__device__ __forceinline__ uint64_t makeKey(float v, uint32_t idx) {
    return (uint64_t(orderedFloatBits(v)) << 32) | idx;
}

/// Distance of a key.
__device__ __forceinline__ float keyValue(uint64_t key) {
    return floatFromOrderedBits(uint32_t(key >> 32));
}

/// Id of a key.
__device__ __forceinline__ uint32_t keyIndex(uint64_t key) { return uint32_t(key); }

/// Whether the key (ob, idx) -- ordered distance bits and id -- is <= the key
/// whose halves are pHi, pLo, without building the 64-bit key: the one
/// comparison every first pass makes per element.
__device__ __forceinline__ bool keyAtMost(uint32_t ob, uint32_t idx, uint32_t pHi, uint32_t pLo) {
    return ob < pHi || (ob == pHi && idx <= pLo);
}

/// A cheap integer hash for sample positions.
__device__ __forceinline__ uint32_t hashMix(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
