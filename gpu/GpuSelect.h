// Public k-selection: the k smallest (or largest) entries of every row of a
// float matrix the caller computed, on the GPU, by the same selection
// algorithms GpuIndexQuickSelectFlat uses. For users who bring their own
// distance matrices, as FAISS's bfKnn / cuVS's select_k users do.
//
// Usage:
//   faiss_ext::gpu::StandardGpuResources res;
//   std::vector<float> vals(rows * k); std::vector<int64_t> ids(rows * k);
//   faiss_ext::gpu::selectK(&res, dist, rows, n, k, /*largest=*/false,
//                           vals.data(), ids.data());
#pragma once

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/SelectOptions.h"

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// Options of selectK beyond the matrix itself.
struct SelectKOptions {
    /// Algorithm; Auto picks by shape (see chooseSelectAlgo), and on a
    /// device matrix with 1 <= k <= 2048 and n >= max(16384, 64 k) runs the
    /// sampled-threshold filter (one read of the matrix; results identical)
    /// where chooseSelectAlgo would pick quick multi-select.
    SelectAlgo algo = SelectAlgo::Auto;
    /// Device to run on; -1: the current device.
    int device = -1;
    /// Optional ids of the input entries, rows x n (host or device); the
    /// output indices are then these ids instead of column numbers.
    const int64_t* inIndices = nullptr;
};

/// The k smallest (largest = false) or largest (largest = true) entries of
/// each row of a rows x n row-major float matrix `values` (host or device
/// pointer), sorted (ascending, respectively descending); ties go to the
/// smaller column, NaN entries come last. outValues / outIndices: rows x k,
/// host or device pointers (either may be null when not wanted, not both).
/// Requires 1 <= k <= n (k <= 8192 with SelectAlgo::MergeQueue). Host
/// matrices larger than the GPU's temporary memory are
/// streamed through it in row tiles.
void selectK(GpuResourcesProvider* provider, const float* values, int64_t rows, int64_t n,
             int64_t k, bool largest, float* outValues, int64_t* outIndices,
             const SelectKOptions& options = SelectKOptions());

}  // namespace gpu
}  // namespace faiss_ext
