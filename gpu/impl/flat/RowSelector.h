// Per-tile k-selection by any of our algorithms, folded over the column
// tiles of a row block into each row's k smallest keys, sorted ascending.
// Used by the flat search (GEMM tiles), the k-NN graph and selectK.
//
//   RowSelector sel(res, device, stream, algo, maxRows, cols, colTiles, kk, group, thFactor);
//   sel.begin(rows);
//   for each column tile: sel.addTile(dist, ld, colAdd, colBase, w);
//   const uint64_t* keys = sel.finish();   // rows x kk on the device
#pragma once

#include "faiss_ext/MinMaxHeap.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/SelectOptions.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {

class RowSelector {
public:
    /// algo: QuickMultiSelect, MergeQueue or THHeap (resolved). Tiles have
    /// at most `cols` columns, a row block spans `colTiles` of them over
    /// `nTotal` columns, and kk <= nTotal keys are selected per row.
    RowSelector(GpuResources* res, int device, cudaStream_t stream, SelectAlgo algo,
                int64_t maxRows, int64_t cols, int64_t colTiles, int64_t nTotal, int64_t kk,
                int group, int thFactor);
    ~RowSelector();
    RowSelector(const RowSelector&) = delete;
    RowSelector& operator=(const RowSelector&) = delete;

    /// Device bytes one row of a row block needs (the planner's unit).
    static size_t bytesPerRow(SelectAlgo algo, int64_t cols, int64_t colTiles, int64_t nTotal,
                              int64_t kk, int group, int thFactor);

    /// Starts a row block of `rows` <= maxRows rows.
    void begin(int64_t rows);

    /// Selects from a tile of w columns: entry (r, j) is dist[r * ld + j] +
    /// (colAdd ? colAdd[j] : 0) with id colBase + j.
    void addTile(const float* dist, int64_t ld, const float* colAdd, uint32_t colBase, int64_t w);

    /// The block's sorted keys, rows x kk, on the device (valid until begin()).
    const uint64_t* finish();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpu
}  // namespace faiss_ext
