// A hash of a query's values, computed by one warp (every lane gets it):
// the graph searches draw their random entry points from it rather than
// from the query's row in the batch, so that a query is searched the same
// way whatever batch, or chunk of a paged host batch
// (gpu/GpuIndexHostSearch.cpp), it comes in: host and device queries agree.
#pragma once

#include <cstdint>

#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

/// The d values at q (shared or global memory), hashed by the calling warp,
/// all of whose 32 lanes must be active.
__device__ inline uint64_t warpQueryHash(const float* q, int d) {
    uint64_t h = 0;
    for (int j = threadIdx.x & 31; j < d; j += 32)
        h ^= mix64((uint64_t(__float_as_uint(q[j])) << 32) ^ uint64_t(j));
    for (int o = 16; o > 0; o >>= 1) h ^= __shfl_xor_sync(0xFFFFFFFFu, h, o);
    return h;
}

}  // namespace gpu
}  // namespace faiss_ext
