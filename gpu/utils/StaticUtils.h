// Small integer and random-number helpers shared by host code and kernels
// (GNND's, Bi-level LSH's and the search graph's). Host code includes it as plain C++; .cu
// files get the same functions for the device, force-inlined.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define FAISS_EXT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FAISS_EXT_HOST_DEVICE inline
#endif

namespace faiss_ext {
namespace gpu {

/// The smallest power of two >= v (1 for v <= 1).
FAISS_EXT_HOST_DEVICE int nextPow2(int v) {
    int p = 1;
    while (p < v) p <<= 1;
    return p;
}

/// splitmix64: the seeded random numbers of GNND's initial graphs and GGM
/// and of the beam search's entry points.
FAISS_EXT_HOST_DEVICE uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// Blocks of `threads` threads covering n items (a kernel's grid size).
inline unsigned blocksFor(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

/// The grid of a grid-stride loop over n items with `perBlock` items a
/// block per pass: enough blocks for one pass, at least 1, at most 65,535
/// (the loop covers the rest).
inline unsigned gridStrideBlocks(int64_t n, int64_t perBlock = 256) {
    const int64_t blocks = (n + perBlock - 1) / perBlock;
    return unsigned(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

#ifdef __CUDACC__
/// +infinity as a float, in device code.
__device__ __forceinline__ float infinity() { return __int_as_float(0x7f800000); }

/// The first row of this warp in a warp-per-row grid-stride loop, and the
/// stride (the warps of the grid).
__device__ __forceinline__ int64_t firstWarpRow() {
    return int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
}
__device__ __forceinline__ int64_t gridWarps() { return int64_t(gridDim.x) * (blockDim.x >> 5); }
#endif

}  // namespace gpu
}  // namespace faiss_ext
