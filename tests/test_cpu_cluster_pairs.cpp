// The host logic of the partitioned file build's neighbour merges
// (gpu/impl/gnnd/ClusterPairs.h, GnndFileBuildOptions::neighbourMerges):
// which cluster pairs are merged (the m sharing the most members per
// cluster, each pair once), how a pair too large for one merge is cut into
// pieces that still compare every cross pair, the second side's rows not
// in the first, the pair-local lists, and the merge capacity. No GPU needed.
#include <gtest/gtest.h>

#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "faiss_ext/gpu/impl/gnnd/ClusterPairs.h"
#include "faiss_ext/gpu/impl/gnnd/PartitionPlan.h"

using namespace faiss_ext::gpu::gnnd;

namespace {

/// Member lists of `clusters` clusters where row r is in clusters
/// memberships[r] (as rowClusters would give, -1 padded to `overlap`).
std::vector<std::vector<int>> groupsOf(const std::vector<std::vector<int>>& memberships,
                                       int clusters) {
    std::vector<std::vector<int>> g(static_cast<size_t>(clusters));
    for (int r = 0; r < int(memberships.size()); ++r)
        for (int c : memberships[r]) g[c].push_back(r);
    return g;
}

}  // namespace

TEST(CpuClusterPairs, NeighbourPairsPickTheClustersSharingTheMostMembers) {
    // 5 clusters; shared rows: 0-1: 3, 1-2: 2, 0-2: 1, 2-3: 1, 3-4: 4
    std::vector<std::vector<int>> mem = {{0, 1}, {0, 1}, {0, 1}, {1, 2}, {1, 2}, {0, 2},
                                         {2, 3}, {3, 4}, {3, 4}, {3, 4}, {3, 4}, {4}};
    const int overlap = 2;
    const auto groups = groupsOf(mem, 5);
    const std::vector<int> rows = rowClusters(groups, int64_t(mem.size()), overlap);
    // m = 1: 0 -> 1, 1 -> 0, 2 -> 1, 3 -> 4, 4 -> 3
    EXPECT_EQ(neighbourPairs(groups, rows, overlap, 1),
              (std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {3, 4}}));
    // m = 2: 0 -> 1, 2; 1 -> 0, 2; 2 -> 1, then 0 and 3 tie at 1 (the smaller: 0);
    // 3 -> 4, 2; 4 -> 3 only (no other cluster shares a row with 4)
    EXPECT_EQ(neighbourPairs(groups, rows, overlap, 2),
              (std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 4}}));
    // m past every neighbour: every pair sharing a member, and no other
    EXPECT_EQ(neighbourPairs(groups, rows, overlap, 10),
              (std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 4}}));
    EXPECT_THROW(neighbourPairs(groups, rows, overlap, 0), faiss::FaissException);
}

TEST(CpuClusterPairs, NeighbourPairsGrowLinearlyAndCoverEveryCluster) {
    // random memberships: 3 distinct clusters of 40 per row
    const int C = 40, overlap = 3, m = 3;
    std::mt19937 rng(7);
    std::vector<std::vector<int>> mem(20000);
    for (auto& r : mem) {
        std::set<int> s;
        while (int(s.size()) < overlap) s.insert(int(rng() % C));
        r.assign(s.begin(), s.end());
    }
    const auto groups = groupsOf(mem, C);
    const auto pairs = neighbourPairs(groups, rowClusters(groups, int64_t(mem.size()), overlap),
                                      overlap, m);
    EXPECT_LE(int(pairs.size()), m * C) << "at most m pairs per cluster";
    EXPECT_GE(int(pairs.size()), (m * C + 1) / 2) << "each cluster picks m";
    std::vector<int> degree(C, 0);
    for (size_t i = 0; i < pairs.size(); ++i) {
        EXPECT_LT(pairs[i].first, pairs[i].second);
        if (i > 0) EXPECT_LT(pairs[i - 1], pairs[i]) << "sorted, each pair once";
        ++degree[pairs[i].first];
        ++degree[pairs[i].second];
    }
    for (int c = 0; c < C; ++c) EXPECT_GE(degree[c], m) << "cluster " << c;
}

TEST(CpuClusterPairs, OverlapOneSharesNothingSoNoPairs) {
    // each row in one cluster: no shared members, no adjacency known
    std::vector<std::vector<int>> mem = {{0}, {1}, {2}, {0}, {1}};
    const auto groups = groupsOf(mem, 3);
    EXPECT_TRUE(neighbourPairs(groups, rowClusters(groups, 5, 1), 1, 2).empty());
}

TEST(CpuClusterPairs, MergePiecesCoverEveryCrossPairOnce) {
    EXPECT_TRUE(mergePieces(0, 10, 100).empty());
    EXPECT_TRUE(mergePieces(10, 0, 100).empty());
    const auto one = mergePieces(60, 40, 100);
    ASSERT_EQ(one.size(), 1u) << "fits one merge";
    EXPECT_EQ(one[0].rows(), 100);
    for (auto t : {std::make_tuple(int64_t(70), int64_t(50), int64_t(100)),
                   std::make_tuple(int64_t(1000), int64_t(7), int64_t(100)),
                   std::make_tuple(int64_t(301), int64_t(299), int64_t(101))}) {
        const int64_t nA = std::get<0>(t), nB = std::get<1>(t), cap = std::get<2>(t);
        const auto pieces = mergePieces(nA, nB, cap);
        std::vector<int> seen(size_t(nA * nB), 0);
        for (const MergePiece& q : pieces) {
            EXPECT_LE(q.rows(), cap) << nA << " x " << nB;
            EXPECT_GT(q.a1, q.a0);
            EXPECT_GT(q.b1, q.b0);
            for (int64_t i = q.a0; i < q.a1; ++i)
                for (int64_t j = q.b0; j < q.b1; ++j) ++seen[size_t(i * nB + j)];
        }
        EXPECT_EQ(*std::min_element(seen.begin(), seen.end()), 1) << nA << " x " << nB;
        EXPECT_EQ(*std::max_element(seen.begin(), seen.end()), 1) << nA << " x " << nB;
    }
    EXPECT_THROW(mergePieces(10, 10, 1), faiss::FaissException);
}

TEST(CpuClusterPairs, PositionsNotInGiveTheSecondSidesOwnRows) {
    const std::vector<int> a = {1, 4, 5, 9}, b = {0, 1, 2, 5, 8, 9, 12};
    EXPECT_EQ(positionsNotIn(b, a), (std::vector<int64_t>{0, 2, 4, 6}));
    EXPECT_TRUE(positionsNotIn(a, a).empty());
    EXPECT_EQ(positionsNotIn(a, {}), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(CpuClusterPairs, PairLocalListsKeepThePairsEntriesInOrder) {
    const float inf = std::numeric_limits<float>::infinity();
    const int n = 10, kIn = 3, kOut = 4;
    // global lists of rows 2 and 7 (the pair's rows: 7 then 2, then 5)
    std::vector<int> gi(size_t(n) * kIn, -1);
    std::vector<float> gd(size_t(n) * kIn, inf);
    const int row2[] = {5, 3, 7}, row7[] = {8, 2, -1}, row5[] = {1, 6, 9};
    const float d2[] = {0.1f, 0.2f, 0.3f}, d7[] = {0.5f, 0.6f, inf}, d5[] = {1, 2, 3};
    for (int j = 0; j < kIn; ++j) {
        gi[2 * kIn + j] = row2[j], gd[2 * kIn + j] = d2[j];
        gi[7 * kIn + j] = row7[j], gd[7 * kIn + j] = d7[j];
        gi[5 * kIn + j] = row5[j], gd[5 * kIn + j] = d5[j];
    }
    const std::vector<int> rows = {7, 2, 5};
    std::vector<int> localOf(n, -1);
    for (int r = 0; r < 3; ++r) localOf[rows[r]] = r;
    std::vector<int> oi(3 * kOut);
    std::vector<float> od(3 * kOut);
    pairLocalLists(gi.data(), gd.data(), kIn, rows, localOf, kOut, oi.data(), od.data());
    // row 7: 8 is outside, 2 -> local 1; row 2: 5 -> 2, 3 outside, 7 -> 0; row 5: none inside
    EXPECT_EQ(std::vector<int>(oi.begin(), oi.begin() + 4), (std::vector<int>{1, -1, -1, -1}));
    EXPECT_EQ(std::vector<int>(oi.begin() + 4, oi.begin() + 8), (std::vector<int>{2, 0, -1, -1}));
    EXPECT_EQ(std::vector<int>(oi.begin() + 8, oi.end()), (std::vector<int>{-1, -1, -1, -1}));
    EXPECT_EQ(od[0], 0.6f);
    EXPECT_EQ(od[4], 0.1f);
    EXPECT_EQ(od[5], 0.3f);
    EXPECT_EQ(od[6], inf);
    EXPECT_EQ(od[11], inf);
    EXPECT_THROW(pairLocalLists(gi.data(), gd.data(), kIn, rows, localOf, 2, oi.data(), od.data()),
                 faiss::FaissException);
}

TEST(CpuClusterPairs, MergeCapacityFitsTheBudgetAndIsTheLargest) {
    Params p;
    p.K = 64;
    p.p = 32;
    const int d = 128;
    const size_t resident = size_t(8) << 30, temp = size_t(4) << 30;
    const int64_t cap = largestMergeThatFits(2, int64_t(1) << 30, d, p, resident, temp);
    ASSERT_GT(cap, 2);
    EXPECT_LE(clusterResidentBytes(cap, d, p.K), resident);
    EXPECT_LE(mergeTempBytesOf(cap, p), temp);
    EXPECT_TRUE(clusterResidentBytes(cap + 1, d, p.K) > resident ||
                mergeTempBytesOf(cap + 1, p) > temp)
            << "not the largest";
    // a merge holds its raw work lists besides GNND's iteration buffers:
    // more temporary memory than a build of as many rows
    EXPECT_GT(mergeTempBytesOf(1000000, p), clusterTempBytes(1000000, p));
    EXPECT_EQ(largestMergeThatFits(2, 1000, d, p, 100, temp), 0) << "nothing fits 100 bytes";
    EXPECT_EQ(largestMergeThatFits(2, 1000, d, p, resident, temp), 1000) << "capped by maxRows";
}
