// Host entry points of Tang et al.'s k-selection (IPDPS 2015; docs/references.md):
// the Merge Queue (levels m, m, 2m, 4m, ... sorted decreasing, level heads
// decreasing, lazy update, reverse bitonic merge), Buffered Search
// (candidate buffering through intra-warp ballots, local sort of the
// buffer) and Hierarchical Partition (group minima of G elements built
// bottom-up, searched top-down). One warp per row; m = 32 (one element per
// lane: levels 0 and 1 live in registers, the others in shared memory).
// All pointers are device pointers; all work is ordered on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace select {

/// The largest k the merge queue handles (its queue lives in shared memory).
constexpr int64_t kMergeQueueMaxK = 8192;

/// One merge-queue selection over `rows` rows of a float tile, folded into a
/// running list of the k smallest keys per row.
struct MergeQueueArgs {
    /// Row r, column j is dist[r * ld + j] + (colAdd ? colAdd[j] : 0), id colBase + j.
    const float* dist = nullptr;
    int64_t ld = 0;
    const float* colAdd = nullptr;
    uint32_t colBase = 0;
    int64_t n = 0;     ///< columns of the tile (>= 1)
    int64_t rows = 0;  ///< rows of the tile
    int64_t k = 0;     ///< 1 <= k <= kMergeQueueMaxK (k may exceed n)
    /// The running list: row r is run[r * runStride .. + k), sorted
    /// ascending, padded at the end with kMaxKey. Read as the initial queue
    /// when hasInit, and overwritten with the k smallest of (itself, tile).
    uint64_t* run = nullptr;
    int64_t runStride = 0;
    bool hasInit = false;
    /// Hierarchical partition group size G (2..16); a row of n <= G * k
    /// elements is searched flat.
    int group = 4;
    /// Scratch of at least mergeQueueScratchBytes(rows, n, k, group) bytes.
    void* scratch = nullptr;
    size_t scratchBytes = 0;
};

/// Bytes of scratch mergeQueueSelect needs.
size_t mergeQueueScratchBytes(int64_t rows, int64_t n, int64_t k, int group);

/// Runs the merge-queue selection described by `args`.
void mergeQueueSelect(const MergeQueueArgs& args, cudaStream_t stream);

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
