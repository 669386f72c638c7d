// Radix selection of the k smallest entries of each row of a float matrix,
// for large k and few rows: histogram passes over the bits of the keys find
// each row's k-th key, then one pass keeps the keys at or below it. Every
// pass spreads each row over many blocks, so a few hundred rows of a
// million columns fill the GPU. The idea of radix (digit by digit)
// selection with histograms is that of AIR Top-K (Zhang et al., "Parallel
// Top-K Algorithms on GPU: A Comprehensive Study and New Methods", SC 2023,
// doi:10.1145/3581784.3607062), here in its plainest form: fixed passes,
// no candidate buffers.
//
// The key of column j is (orderedFloatBits(value) << 32) | j, value =
// dist[r * ld + j] + colAdd[j] as the other selections form it: the same
// order as select::makeKey(value, colBase + j), ties broken by the smaller
// id, so the kept set is exactly the k smallest keys.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace select {

/// Bytes of device scratch radixSelectRows needs for `rows` rows.
size_t radixSelectScratchBytes(int64_t rows);

/// The kk smallest keys (select::makeKey(dist[r * ld + j] + (colAdd ?
/// colAdd[j] : 0), colBase + j), j < w) of each of `rows` rows, unsorted,
/// to out[r * kk .. r * kk + kk). Device pointers; 1 <= kk <= w; scratch:
/// radixSelectScratchBytes(rows) bytes. Ordered on `stream`.
void radixSelectRows(const float* dist, int64_t ld, const float* colAdd, uint32_t colBase,
                     int64_t rows, int64_t w, int64_t kk, uint64_t* out, void* scratch,
                     size_t scratchBytes, cudaStream_t stream);

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
