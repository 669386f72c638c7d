// The host logic of the partitioned file build (gpu/impl/gnnd/PartitionPlan.h):
// folding a cluster's lists into the global lists (union, one entry per id,
// best k kept), splitting and packing member lists, cluster counts and the
// largest build that fits a memory budget. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <faiss/impl/FaissException.h>

#include "faiss_ext/gpu/impl/gnnd/PartitionPlan.h"

using namespace faiss_ext::gpu::gnnd;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

/// The k best (distance, id) of the union of two lists, each id once.
std::vector<std::pair<float, int>> bruteFold(const std::vector<int>& a, const std::vector<float>& da,
                                             const std::vector<int>& b, const std::vector<float>& db,
                                             int k) {
    std::map<int, float> best;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] >= 0) best[a[i]] = da[i];
    for (size_t i = 0; i < b.size(); ++i)
        if (b[i] >= 0 && !best.count(b[i])) best[b[i]] = db[i];
    std::vector<std::pair<float, int>> all;
    for (auto& e : best) all.push_back({e.second, e.first});
    std::sort(all.begin(), all.end());
    if (int(all.size()) > k) all.resize(k);
    return all;
}

}  // namespace

TEST(CpuPartitionPlan, FoldRowKeepsTheBestOfTheUnionOnce) {
    // global: ids 5, 7, 9 (one empty slot); incoming: 7 again, 2, 8
    std::vector<int> g = {5, 7, 9, -1};
    std::vector<float> gd = {1.f, 2.f, 4.f, kInf};
    const std::vector<int> in = {2, 7, 8};
    const std::vector<float> ind = {0.5f, 2.f, 3.f};
    foldRow(g.data(), gd.data(), 4, in.data(), ind.data(), 3);
    EXPECT_EQ(g, (std::vector<int>{2, 5, 7, 8}));
    EXPECT_EQ(gd, (std::vector<float>{0.5f, 1.f, 2.f, 3.f}));
}

TEST(CpuPartitionPlan, FoldRowIntoAnEmptyListAndWithEmptyEntries) {
    std::vector<int> g(3, -1);
    std::vector<float> gd(3, kInf);
    const std::vector<int> in = {4, -1, -1, -1};
    const std::vector<float> ind = {1.f, kInf, kInf, kInf};
    foldRow(g.data(), gd.data(), 3, in.data(), ind.data(), 4);
    EXPECT_EQ(g, (std::vector<int>{4, -1, -1}));
    EXPECT_EQ(gd[0], 1.f);
    EXPECT_EQ(gd[1], kInf);
}

TEST(CpuPartitionPlan, FoldRowMatchesABruteForceUnionOnRandomLists) {
    std::mt19937 rng(17);
    for (int trial = 0; trial < 200; ++trial) {
        const int kOut = 1 + int(rng() % 40), kIn = 1 + int(rng() % 70);
        // distances a function of the id, as for one row in two clusters
        auto dist = [](int id) { return float((id * 37) % 101) + 0.001f * id; };
        auto list = [&](int len, int fill) {
            std::set<int> ids;
            while (int(ids.size()) < fill) ids.insert(int(rng() % 150));
            std::vector<std::pair<float, int>> e;
            for (int id : ids) e.push_back({dist(id), id});
            std::sort(e.begin(), e.end());
            std::vector<int> I(len, -1);
            std::vector<float> D(len, kInf);
            for (int i = 0; i < fill; ++i) I[i] = e[i].second, D[i] = e[i].first;
            return std::make_pair(I, D);
        };
        auto g = list(kOut, int(rng() % (kOut + 1)));
        auto in = list(kIn, int(rng() % (kIn + 1)));
        const auto want = bruteFold(g.first, g.second, in.first, in.second, kOut);
        foldRow(g.first.data(), g.second.data(), kOut, in.first.data(), in.second.data(), kIn);
        for (int j = 0; j < kOut; ++j) {
            if (j < int(want.size())) {
                ASSERT_EQ(g.first[j], want[j].second) << "trial " << trial << " entry " << j;
                ASSERT_EQ(g.second[j], want[j].first) << "trial " << trial << " entry " << j;
            } else {
                ASSERT_EQ(g.first[j], -1) << "trial " << trial << " entry " << j;
            }
        }
    }
}

TEST(CpuPartitionPlan, FoldClusterMapsLocalIdsToGlobalOnes) {
    // 6 vectors, k = 2; a cluster of global rows {1, 3, 4}
    const int k = 2, K = 2;
    std::vector<int> gIds(6 * k, -1);
    std::vector<float> gD(6 * k, kInf);
    const std::vector<int> members = {1, 3, 4};
    // local lists: row 0 (global 1) -> local 2 (global 4), local 1 (global 3)
    const std::vector<int> lIds = {2, 1, 0, 2, 1, -1};
    const std::vector<float> lD = {1.f, 2.f, 2.f, 3.f, 1.f, kInf};
    foldCluster(gIds.data(), gD.data(), k, members, lIds.data(), lD.data(), K);
    EXPECT_EQ(gIds[1 * k + 0], 4);
    EXPECT_EQ(gIds[1 * k + 1], 3);
    EXPECT_EQ(gIds[3 * k + 0], 1);
    EXPECT_EQ(gIds[3 * k + 1], 4);
    EXPECT_EQ(gIds[4 * k + 0], 3);
    EXPECT_EQ(gIds[4 * k + 1], -1);
    EXPECT_EQ(gIds[0], -1) << "a row outside the cluster changed";
    // a second cluster holding row 4 adds to its list
    const std::vector<int> members2 = {0, 4};
    const std::vector<int> l2 = {1, -1, 0, -1};
    const std::vector<float> d2 = {0.5f, kInf, 0.5f, kInf};
    foldCluster(gIds.data(), gD.data(), k, members2, l2.data(), d2.data(), K);
    EXPECT_EQ(gIds[4 * k + 0], 0);
    EXPECT_EQ(gIds[4 * k + 1], 3);
}

TEST(CpuPartitionPlan, PackAndSplitKeepsEveryMemberAndTheBounds) {
    std::mt19937 rng(5);
    const int n = 5000;
    // a large list, several small ones, one empty, rows in two lists each
    std::vector<std::vector<int>> lists(9);
    for (int r = 0; r < n; ++r) {
        lists[r % 3 == 0 ? 0 : 1 + int(rng() % 7)].push_back(r);
        lists[1 + int(rng() % 3)].push_back(r);
    }
    for (auto& l : lists) {
        std::sort(l.begin(), l.end());
        l.erase(std::unique(l.begin(), l.end()), l.end());
    }
    const int64_t minRows = 500, maxRows = 1200;  // minRows <= maxRows / 2: both bounds hold
    std::vector<std::vector<int>> before = lists;
    const auto out = packAndSplit(lists, minRows, maxRows);
    std::vector<int> count(n, 0);
    for (const auto& l : out) {
        EXPECT_LE(int64_t(l.size()), maxRows);
        EXPECT_GE(int64_t(l.size()), minRows);
        EXPECT_TRUE(std::is_sorted(l.begin(), l.end()));
        EXPECT_EQ(std::adjacent_find(l.begin(), l.end()), l.end()) << "a repeated member";
        for (int r : l) count[r]++;
    }
    std::vector<int> inBefore(n, 0);
    for (const auto& l : before)
        for (int r : l) inBefore[r]++;
    for (int r = 0; r < n; ++r) {
        EXPECT_GE(count[r], 1) << "row " << r << " lost";
        EXPECT_LE(count[r], inBefore[r]) << "row " << r << " in more lists than before";
    }
    const std::vector<int> rc = rowClusters(out, n, 2);
    for (int r = 0; r < n; ++r) EXPECT_GE(rc[size_t(r) * 2], 0);
}

TEST(CpuPartitionPlan, PackAndSplitEdgeCases) {
    // all tiny: packed into one
    std::vector<std::vector<int>> tiny = {{0, 1}, {2}, {3, 4}};
    auto out = packAndSplit(tiny, 10, 100);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], (std::vector<int>{0, 1, 2, 3, 4}));
    // one list cut into equal pieces
    std::vector<int> big(10);
    for (int i = 0; i < 10; ++i) big[i] = i;
    out = packAndSplit({big}, 1, 4);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].size() + out[1].size() + out[2].size(), 10u);
    // a short leftover joins the smallest list with room
    out = packAndSplit({{0, 1, 2, 3}, {4, 5, 6, 7, 8}, {9}}, 3, 6);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0], (std::vector<int>{0, 1, 2, 3, 9}));
    EXPECT_THROW(packAndSplit({{0}}, 5, 4), faiss::FaissException);
    EXPECT_THROW(packAndSplit({{0}}, 0, 4), faiss::FaissException);
}

TEST(CpuPartitionPlan, ClusterCountAndSizing) {
    // a given shard count wins
    EXPECT_EQ(clusterCount(1000000, 2, 300000, 8), 8);
    // automatic: n x overlap memberships in clusters of capacity x kClusterFill
    EXPECT_EQ(clusterCount(1000000, 2, 200000, 0),
              int(std::ceil(2e6 / (200000 * kClusterFill))));
    EXPECT_EQ(clusterCount(1000, 2, 5000, 0), 1) << "fits one build";
    EXPECT_EQ(clusterCount(10, 2, 1, 50), 10) << "never more clusters than vectors";
    EXPECT_THROW(clusterCount(0, 2, 10, 0), faiss::FaissException);
    Params p;
    p.K = 64;
    p.p = 32;
    const int d = 128;
    const size_t resident = size_t(8) << 30, temp = size_t(16) << 30;
    const int64_t cap = largestBuildThatFits(65, int64_t(1) << 30, d, p, resident, temp);
    ASSERT_GT(cap, 65);
    EXPECT_LE(clusterResidentBytes(cap, d, p.K), resident);
    EXPECT_LE(clusterTempBytes(cap, p), temp);
    EXPECT_TRUE(clusterResidentBytes(cap + 1, d, p.K) > resident ||
                clusterTempBytes(cap + 1, p) > temp)
            << "not the largest";
    EXPECT_EQ(largestBuildThatFits(65, 1000, d, p, 1000, temp), 0) << "nothing fits 1000 bytes";
    EXPECT_EQ(largestBuildThatFits(65, 1000, d, p, resident, temp), 1000) << "capped by maxRows";
}
