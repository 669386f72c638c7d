#include "faiss_ext/gpu/impl/flat/FlatTilePlan.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>

#include "faiss_ext/gpu/impl/flat/RowSelector.h"

namespace faiss_ext {
namespace gpu {

namespace {

/// The smallest corpus tile worth a GEMM launch.
constexpr int64_t kMinTileCols = 8192;

/// Rows a tile aims for: enough for one warp per row to fill the GPU. With
/// the vectors on the host every row block streams the whole corpus over
/// PCIe, so row blocks are then made as tall as memory allows.
constexpr int64_t kTargetTileRows = 4096;
constexpr int64_t kTargetTileRowsHost = 65536;

TilePlan planFor(int64_t nb, int64_t kk, int64_t cols, int d, bool onHost, bool l2,
                 const TileSelection& sel, size_t extraBytesPerRow) {
    TilePlan p;
    cols = std::min(nb, (cols + 3) / 4 * 4);  // rows of a tile start 16-byte aligned
    p.cols = cols;
    p.colTiles = (nb + cols - 1) / cols;
    p.bytesPerRow =
        sizeof(float) * ((cols + 3) / 4 * 4) +
        RowSelector::bytesPerRow(sel.algo, cols, p.colTiles, nb, kk, sel.group, sel.thFactor) +
        extraBytesPerRow;
    // Two staging tiles of vectors (and norms) when they come from the host.
    p.fixedBytes =
        onHost ? 2 * (sizeof(float) * size_t(cols) * d + (l2 ? sizeof(float) * cols : 0)) + 4096
               : 0;
    return p;
}

}  // namespace

TilePlan planSearch(size_t budget, int64_t nb, int64_t nq, int64_t k, int64_t kk, int d,
                    bool onHost, bool l2, const TileSelection& sel, size_t extraBytesPerRow) {
    const int64_t wantRows = std::min(nq, onHost ? kTargetTileRowsHost : kTargetTileRows);
    TilePlan best;
    int64_t bestRows = 0;
    for (int64_t cols = nb;; cols = (cols + 1) / 2) {
        TilePlan p = planFor(nb, kk, cols, d, onHost, l2, sel, extraBytesPerRow);
        int64_t rows = budget > p.fixedBytes ? int64_t((budget - p.fixedBytes) / p.bytesPerRow) : 0;
        rows = std::min<int64_t>(rows, nq);
        rows = std::min<int64_t>(rows, (int64_t(1) << 31) / std::max<int64_t>(p.cols, 1));
        if (rows > bestRows) {
            best = p;
            bestRows = rows;
        }
        if (rows >= wantRows || p.cols <= kMinTileCols) break;
    }
    if (bestRows < 1) {
        const TilePlan least =
            planFor(nb, kk, std::min(nb, kMinTileCols), d, onHost, l2, sel, extraBytesPerRow);
        FAISS_THROW_FMT(
            "GPU temporary memory too small for a search with k = %lld over %lld "
            "vectors: %zu bytes available, at least %zu needed for one query tile "
            "(raise StandardGpuResources::setTempMemory)",
            (long long)k, (long long)nb, budget, least.bytesPerRow + least.fixedBytes);
    }
    best.rows = bestRows;
    return best;
}

int64_t hostTileRows(size_t tempBytes, int64_t nb, size_t rowBytes) {
    const int64_t most = int64_t(tempBytes / kHostStagingShare / (3 * rowBytes)) / 4 * 4;
    if (most < 4 || most < std::min<int64_t>(nb, kHostBoundedMinTileRows)) return 0;
    return most;
}

std::vector<int64_t> hostTileStarts(int64_t nb, int64_t most) {
    std::vector<int64_t> starts{0};
    int64_t row = 0;
    int64_t size = std::min(most, nb) / kHostFirstTileShare / 4 * 4;
    if (size >= kHostBoundedMinTileRows) {
        // growing tiles while a whole one and half another remain (no
        // sliver of a tile behind them)
        while (size < most && nb - row >= size + size / 2) {
            row += size;
            starts.push_back(row);
            size = std::min(most, (size * kHostTileGrowthNum / kHostTileGrowthDen + 3) / 4 * 4);
        }
    }
    const int64_t rest = nb - row;
    const int64_t tiles = (rest + most - 1) / most;
    const int64_t each = ((rest + tiles - 1) / tiles + 3) / 4 * 4;
    for (int64_t r = row + each; r < nb; r += each) starts.push_back(r);
    starts.push_back(nb);
    return starts;
}

}  // namespace gpu
}  // namespace faiss_ext
