// Tile plans of the exact flat search: how many queries a row block holds
// and how wide a corpus tile is, from the temporary memory budget. Shared by
// the FP32 search (FlatSearch.cu) and the bounded TF32 search
// (BoundedFlatSearch.cu), which also keeps per-row buffers of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

/// Host-stored vectors searched by the bounded path (HostBoundedSearch.cu):
/// staging takes at most 1 / kHostStagingShare of the temporary memory left
/// (two tiles in flight and a centred copy of one; the rest is the bounded
/// search's), and tiles of fewer than kHostBoundedMinTileRows rows are not
/// worth a bounded pass of their own (the FP32 path streams the vectors
/// instead, only under a tiny temporary memory).
constexpr size_t kHostStagingShare = 3;
constexpr int64_t kHostBoundedMinTileRows = 16384;

/// The most rows a tile of nb vectors (rowBytes each as staged) may take
/// under `tempBytes` of temporary memory: three tile buffers in
/// 1 / kHostStagingShare of it, a multiple of 4 (the GEMMs' width); 0 when
/// no tile worth a bounded pass fits.
int64_t hostTileRows(size_t tempBytes, int64_t nb, size_t rowBytes);

/// The first host tile is 1 / kHostFirstTileShare of a full one (its copy
/// is the only one no search hides); each next tile is kHostTileGrowthNum /
/// kHostTileGrowthDen times the one before, so that its copy fits in the
/// search of the tile before (on an H200, 10,000 queries at d 96 search a
/// million device rows in about 12 ms; their copy at the link's 50 GB/s
/// takes about 8 ms), up to a full tile.
constexpr int64_t kHostFirstTileShare = 8;
constexpr int64_t kHostTileGrowthNum = 3, kHostTileGrowthDen = 2;

/// Where the tiles of nb vectors start (the last entry nb), none longer
/// than `most` rows (a multiple of 4): growing tiles from a short first one
/// (where that is at least kHostBoundedMinTileRows; 10M x 96, nq 10k: 0.90x /
/// 0.87x the q/s of the same vectors on the device at k 10 / 100 on an H100,
/// against 0.84x / 0.83x with a quarter-size first tile and equal tiles after),
/// then equal tiles for the rest, multiples of 4 but the last: a last tile
/// of a few rows would pay the bounded pass's fixed costs for little work.
std::vector<int64_t> hostTileStarts(int64_t nb, int64_t most);

}  // namespace gpu
}  // namespace faiss_ext
