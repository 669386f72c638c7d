// The test-splitting helper of the sanitizer runs (PartUnits, TestUtils.h):
// the N parts of a test together run every unit exactly once, and a block
// skipped with anyOfNext / skip holds none of the part's units.

#include "TestUtils.h"

#include <gtest/gtest.h>

#include <vector>

using faiss_ext::test::PartUnits;
using faiss_ext::test::TestPart;

namespace {

TestPart part(int index, int count) {
    TestPart p;
    p.index = index;
    p.count = count;
    return p;
}

}  // namespace

TEST(TestParts, PartsRunEveryUnitOnce) {
    for (int n : {1, 2, 3, 8, 16, 20}) {
        const int units = 83;  // not a multiple of any n
        std::vector<int> runs(units, 0);
        for (int p = 0; p < n; ++p) {
            PartUnits u(part(p, n));
            for (int i = 0; i < units; ++i)
                if (u.next()) ++runs[i];
        }
        for (int i = 0; i < units; ++i) EXPECT_EQ(runs[i], 1) << "unit " << i << " of " << n << " parts";
    }
}

// A test of blocks (a block: shared set-up, then `block` units) that skips
// the blocks anyOfNext says hold none of its units runs the same units as
// one that walks every unit.
TEST(TestParts, SkippedBlocksHoldNoneOfThePartsUnits) {
    for (int n : {1, 3, 16, 20}) {
        for (int block : {1, 4, 10, 25}) {
            for (int p = 0; p < n; ++p) {
                PartUnits walked(part(p, n)), skipping(part(p, n));
                std::vector<int> a, b;
                int setUps = 0;
                for (int blk = 0; blk < 7; ++blk) {
                    for (int j = 0; j < block; ++j)
                        if (walked.next()) a.push_back(blk * block + j);
                    if (!skipping.anyOfNext(block)) {
                        skipping.skip(block);
                        continue;
                    }
                    ++setUps;
                    for (int j = 0; j < block; ++j)
                        if (skipping.next()) b.push_back(blk * block + j);
                }
                EXPECT_EQ(a, b) << "part " << p << "/" << n << ", blocks of " << block;
                // every block set up holds at least one of the part's units
                int blocksWithUnits = 0;
                for (int blk = 0; blk < 7; ++blk) {
                    bool any = false;
                    for (int u : a) any = any || (u / block == blk);
                    blocksWithUnits += any;
                }
                EXPECT_EQ(setUps, blocksWithUnits) << "part " << p << "/" << n << ", blocks of " << block;
            }
        }
    }
    EXPECT_FALSE(PartUnits(part(0, 2)).anyOfNext(0));
}
