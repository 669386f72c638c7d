// Device helpers shared by the GNND kernels (the warp sort they share with
// other algorithms is utils/WarpSort.cuh).
#pragma once

#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"
#include "faiss_ext/gpu/utils/WarpSort.cuh"

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// Raw list entries: bit 31 marks NEW; kEmptyId is an empty slot.
constexpr uint32_t kNewFlag = 0x80000000u;
constexpr uint32_t kIdMask = 0x7FFFFFFFu;
constexpr uint32_t kEmptyId = 0x7FFFFFFFu;
constexpr unsigned kFull = 0xFFFFFFFFu;

__device__ __forceinline__ float warpSumF(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
}

/// Exact distance between rows a and b of x, computed by a whole warp
/// (every lane gets the result): squared L2 via norms, or -<a, b>.
__device__ __forceinline__ float warpDistance(const float* x, const float* norms, int d, int64_t a,
                                              int64_t b, bool ip, int lane) {
    const float* xa = x + a * d;
    const float* xb = x + b * d;
    float s = 0.f;
    if (ip) {
        for (int j = lane; j < d; j += 32) s += xa[j] * xb[j];
        return -warpSumF(s);
    }
    for (int j = lane; j < d; j += 32) {
        float t = xa[j] - xb[j];
        s += t * t;
    }
    return warpSumF(s);
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
