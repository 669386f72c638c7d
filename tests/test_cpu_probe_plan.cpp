// The host side of the probe search's plan (impl/graph/ProbePlan.h): the
// number of k-means lists by corpus size, the selections a filtered search
// probes, and the work items of a batch, which must hand every query-list
// pair to exactly one block, a block's pairs all of one list and at most
// perItem of them.
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "faiss_ext/gpu/impl/graph/ProbePlan.h"

using namespace faiss_ext::gpu::graph;

TEST(CpuProbePlan, ListCountFollowsFourSqrtNWithinItsBounds) {
    EXPECT_EQ(probeListCount(1), 1);
    EXPECT_EQ(probeListCount(2), 2);    // round(5.66) = 6, at most n
    EXPECT_EQ(probeListCount(20), 18);  // round(17.9)
    EXPECT_EQ(probeListCount(20000), 566);
    EXPECT_EQ(probeListCount(1000000), 4000);
    EXPECT_EQ(probeListCount(10000000), 12649);
    EXPECT_EQ(probeListCount(100000000), 40000);
    EXPECT_EQ(probeListCount(int64_t(1) << 40), 65536);  // the cap
    for (int64_t n : {int64_t(3), int64_t(777), int64_t(123456)}) {
        EXPECT_EQ(probeListCount(n),
                  std::min<int64_t>(n, std::llround(4.0 * std::sqrt(double(n)))));
    }
}

TEST(CpuProbePlan, WorkItemsHandEveryPairToOneBlock) {
    std::mt19937 rng(7);
    for (int perItem : {1, 8, 32}) {
        std::vector<unsigned> counts(300);
        for (unsigned& c : counts) c = rng() % 4 == 0 ? 0u : rng() % 200;  // some lists unprobed
        counts.back() = 0;
        std::vector<unsigned> firsts;
        const std::vector<ProbeWorkItem> items = probeWorkItems(counts, perItem, firsts);
        ASSERT_EQ(firsts.size(), counts.size());
        unsigned total = 0;
        for (size_t l = 0; l < counts.size(); ++l) {
            EXPECT_EQ(firsts[l], total) << "list " << l;
            total += counts[l];
        }
        std::vector<int> covered(total, 0);
        for (const ProbeWorkItem& w : items) {
            ASSERT_GE(w.list, 0);
            ASSERT_LT(size_t(w.list), counts.size());
            EXPECT_GE(w.count, 1u);
            EXPECT_LE(w.count, unsigned(perItem));
            // the item's pairs lie within its list's
            EXPECT_GE(w.first, firsts[size_t(w.list)]);
            EXPECT_LE(w.first + w.count, firsts[size_t(w.list)] + counts[size_t(w.list)]);
            for (unsigned p = w.first; p < w.first + w.count; ++p) ++covered[p];
        }
        for (unsigned p = 0; p < total; ++p) ASSERT_EQ(covered[p], 1) << "pair " << p;
        // only the last item of a list may be short
        for (size_t i = 0; i + 1 < items.size(); ++i) {
            if (items[i].list == items[i + 1].list) EXPECT_EQ(items[i].count, unsigned(perItem));
        }
    }
    std::vector<unsigned> firsts;
    EXPECT_TRUE(probeWorkItems({0, 0, 0}, 32, firsts).empty());
    EXPECT_THROW(probeWorkItems({1}, 0, firsts), faiss::FaissException);
}

TEST(CpuProbePlan, FilteredSearchesProbeSelectionsOfHalfTheVectorsOrMore) {
    EXPECT_TRUE(probeServesSelection(1000, 1000));
    EXPECT_TRUE(probeServesSelection(500, 1000));
    EXPECT_FALSE(probeServesSelection(499, 1000));
    EXPECT_TRUE(probeServesSelection(1, 1));
    EXPECT_TRUE(probeServesSelection(1, 2));
    EXPECT_FALSE(probeServesSelection(0, 10));  // nothing selected: nothing to probe
}
