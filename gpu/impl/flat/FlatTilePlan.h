// Tile plans of the exact flat search: how many queries a row block holds
// and how wide a corpus tile is, from the temporary memory budget. Shared by
// the FP32 search (FlatSearch.cu) and the bounded TF32 search
// (BoundedFlatSearch.cu), which also keeps per-row buffers of its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "faiss_ext/gpu/SelectOptions.h"

namespace faiss_ext {
namespace gpu {

/// A tiling of (queries x corpus) for one search.
struct TilePlan {
    int64_t rows = 0;      ///< queries per row block
    int64_t cols = 0;      ///< corpus vectors per tile
    int64_t colTiles = 0;  ///< tiles over the corpus
    size_t bytesPerRow = 0;
    size_t fixedBytes = 0;
};

/// What selects within the tiles: the algorithm (resolved), the merge
/// queue's G and TH-heap's n_S / k.
struct TileSelection {
    SelectAlgo algo = SelectAlgo::QuickMultiSelect;
    int group = 4;
    int thFactor = 8;
};

/// The tile plan of a search of nq queries over nb vectors (kk = min(k, nb)
/// kept per row) within `budget` bytes of temporary memory, counting
/// `extraBytesPerRow` more per query row for the caller's own buffers:
/// halves the tile width until row blocks are as tall as wanted; throws when
/// not even one query fits.
TilePlan planSearch(size_t budget, int64_t nb, int64_t nq, int64_t k, int64_t kk, int d,
                    bool onHost, bool l2, const TileSelection& sel, size_t extraBytesPerRow = 0);

}  // namespace gpu
}  // namespace faiss_ext
