// Host entry points of the quick multi-select k-selection (Komarov et al.,
// PLoS ONE 2014, docs/references.md, "GPU-based quick multi-select").
// All pointers are device pointers; all work is ordered on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace select {

/// One selection launch over `rows` rows of n elements each.
struct SelectArgs {
    /// Float source: row r, column j is dist[r * ld + j] + (colAdd ? colAdd[j] : 0),
    /// with id colBase + j. Null when the source is keys.
    const float* dist = nullptr;
    int64_t ld = 0;
    const float* colAdd = nullptr;
    uint32_t colBase = 0;
    /// Key source: row r is keys[r * keyStride .. + n). Null for a float source.
    const uint64_t* keys = nullptr;
    int64_t keyStride = 0;
    /// Elements per row, rows, and how many to select (1 <= k <= n).
    int64_t n = 0;
    int64_t rows = 0;
    int64_t k = 0;
    /// Output: the k smallest keys of row r (unsorted) go to
    /// out[r * outStride + outOffset ..].
    uint64_t* out = nullptr;
    int64_t outStride = 0;
    int64_t outOffset = 0;
    /// Two work buffers of auxStride >= n keys per row.
    uint64_t* aux1 = nullptr;
    uint64_t* aux2 = nullptr;
    int64_t auxStride = 0;
    /// Float source only, optional: counts[r] keys already written to
    /// aux1's row r by filterFloatRows (the first pass done for the whole
    /// tile at once). A row whose count is below k is redone here.
    const unsigned long long* prefilteredCount = nullptr;
};

/// The first pass of quick multi-select for a whole float tile, load-balanced
/// over (row, column chunk) work items: per row a pivot from sorted samples
/// (as selectRow chooses it), then every warp streams chunks of rows,
/// compacting the keys <= the row's pivot into aux1 and counting them in
/// counts (zeroed here). Feed the result to quickMultiSelect with
/// prefilteredCount = counts. pivots: `rows` keys of scratch.
void filterFloatRows(const SelectArgs& args, uint64_t* pivots, unsigned long long* counts,
                     cudaStream_t stream);

/// Runs quick multi-select: one warp per row when rows are many, one block
/// per row when they are few (or as forced by warpPerRow: 1 warp, 0 block,
/// -1 automatic).
void quickMultiSelect(const SelectArgs& args, cudaStream_t stream, int warpPerRow = -1);

/// One warp per row (QuickMultiSelectWarp.cu).
void quickMultiSelectWarp(const SelectArgs& args, cudaStream_t stream);
/// One block per row (QuickMultiSelectBlock.cu).
void quickMultiSelectBlock(const SelectArgs& args, cudaStream_t stream);

/// Bytes of temporary memory sortKeyRows needs for rows x k keys.
size_t sortKeyRowsTempBytes(int64_t rows, int64_t k);

/// Sorts each row of rows x k keys ascending, in place. temp: at least
/// sortKeyRowsTempBytes(rows, k) bytes (may be null when that is 0).
void sortKeyRows(uint64_t* keys, int64_t rows, int64_t k, void* temp, size_t tempBytes,
                 cudaStream_t stream);

/// How keys decode to the results FAISS returns.
enum class KeyDecode : int {
    L2 = 0,       ///< distance = max(0, value + rowAdd[r])
    Negated = 1,  ///< similarity = -value (inner product metrics)
    Identity = 2, ///< value as it is
};

/// Writes sorted keys (rows x kk; row r starts at keys[r * keyStride],
/// keyStride 0 meaning kk) as distances and labels (rows x k, k >= kk),
/// padding columns kk..k-1 with label -1 and +inf (L2, Identity) / -inf
/// (similarities). Either output may be null.
void decodeKeys(const uint64_t* keys, int64_t rows, int64_t kk, int64_t k, KeyDecode decode,
                const float* rowAdd, float* distances, int64_t* labels, cudaStream_t stream,
                int64_t keyStride = 0);

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
