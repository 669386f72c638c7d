// The merge of the fused few-query kernel's per-chunk lists for small k:
// one block per query reads all its chunks' keys and keeps the k smallest
// in warp registers (a sorted list of one key per lane), replacing quick
// multi-select + a CUB segmented sort (several launches and three temporary
// buffers) on the path where the fixed costs are a third of the latency.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// The largest k the warp merge takes: one key per lane of a warp.
constexpr int64_t kWarpMergeMaxK = 32;

/// For each of `rows` rows of n keys (row r at lists[r * n ..], device),
/// its kk smallest keys sorted ascending to out[r * kk ..] (device).
/// Requires 1 <= kk <= min(kWarpMergeMaxK, n). Ordered on `stream`.
void warpMergeLists(const uint64_t* lists, int64_t rows, int64_t n, int64_t kk, uint64_t* out,
                    cudaStream_t stream);

}  // namespace gpu
}  // namespace faiss_ext
