// The tiles a bounded search of host-stored vectors streams
// (FlatTilePlan.h: hostTileRows, hostTileStarts): they cover every row once,
// in order, none longer than the staging holds, GEMM widths stay multiples
// of 4, and the first tile (whose copy no search hides) is the short one,
// the next ones growing so that each copy hides behind the search before it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "faiss_ext/gpu/impl/flat/FlatTilePlan.h"

using faiss_ext::gpu::hostTileRows;
using faiss_ext::gpu::hostTileStarts;
using faiss_ext::gpu::kHostBoundedMinTileRows;

namespace {

void expectTiling(int64_t nb, int64_t most) {
    const std::vector<int64_t> s = hostTileStarts(nb, most);
    SCOPED_TRACE("nb " + std::to_string(nb) + ", most " + std::to_string(most));
    ASSERT_GE(s.size(), 2u);
    EXPECT_EQ(s.front(), 0);
    EXPECT_EQ(s.back(), nb);
    for (size_t t = 0; t + 1 < s.size(); ++t) {
        const int64_t w = s[t + 1] - s[t];
        EXPECT_GT(w, 0) << "tile " << t;
        EXPECT_LE((w + 3) / 4 * 4, most) << "tile " << t << " past the staging";
        if (t + 2 < s.size()) EXPECT_EQ(w % 4, 0) << "tile " << t;
    }
    if (s.size() > 2) EXPECT_LE(s[1], s[2] - s[1]) << "the first tile is the short one";
}

}  // namespace

TEST(CpuHostTiles, TilesCoverEveryRowOnceWithinTheStaging) {
    const int64_t most = 4000000;
    for (int64_t nb : {int64_t(1), int64_t(5), kHostBoundedMinTileRows, int64_t(40000),
                       int64_t(1000000), most, most + 1, int64_t(10000000), int64_t(100000001)}) {
        expectTiling(nb, most);
    }
    for (int64_t m : {kHostBoundedMinTileRows, int64_t(21180), int64_t(65536)}) {
        expectTiling(60000, m);
        expectTiling(1000003, m);
        EXPECT_EQ(hostTileStarts(60000, m)[1] % 4, 0);
    }
}

TEST(CpuHostTiles, ShortFirstTileThenGrowingOnes) {
    using faiss_ext::gpu::kHostFirstTileShare;
    const int64_t most = 4000000;
    const std::vector<int64_t> s = hostTileStarts(10000000, most);
    ASSERT_GE(s.size(), 4u);
    EXPECT_EQ(s[1], most / kHostFirstTileShare);
    for (size_t t = 1; t + 2 < s.size(); ++t) {
        const int64_t before = s[t] - s[t - 1], w = s[t + 1] - s[t];
        EXPECT_GE(w, before) << "tile " << t << " shorter than the one before";
        EXPECT_LE(w, before * faiss_ext::gpu::kHostTileGrowthNum /
                                     faiss_ext::gpu::kHostTileGrowthDen + 4)
                << "tile " << t << ": its copy would outlast the search before it";
    }
    const int64_t last = s[s.size() - 1] - s[s.size() - 2];
    EXPECT_GE(last, s[1]) << "no sliver of a tile at the end";
    // one tile's worth of rows is split the same way
    const std::vector<int64_t> one = hostTileStarts(1000000, most);
    ASSERT_GE(one.size(), 3u);
    EXPECT_EQ(one[1], 1000000 / kHostFirstTileShare);
}

TEST(CpuHostTiles, StagingRowsFromTheTemporaryMemory) {
    const size_t row = sizeof(float) * 97;  // d 96 and a norm
    const int64_t most = hostTileRows(size_t(16) << 30, 10000000, row);
    EXPECT_EQ(most % 4, 0);
    EXPECT_LE(3 * size_t(most) * row, (size_t(16) << 30) / faiss_ext::gpu::kHostStagingShare);
    EXPECT_GT(3 * size_t(most + 4) * row, (size_t(16) << 30) / faiss_ext::gpu::kHostStagingShare)
            << "the staging share is used, not a fraction of it";
    EXPECT_EQ(hostTileRows(size_t(1) << 20, 10000000, row), 0) << "no tile worth a bounded pass";
    EXPECT_GT(hostTileRows(size_t(1) << 20, 100, row), 0) << "a small corpus fits whole";
}
