// The rule that flags queries unlike the data (gpu/impl/graph/
// UnlikeQueryRule.h): its parts on hand-made lists, then the defaults of
// GpuIndexSearchGraphConfig with the suggested ratio on real data with exact neighbours (the shared
// data sets' k-NN lists and ground truth): in-distribution queries stay
// below the share that triggers exact search, queries from another scan of
// a scene are flagged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/impl/graph/UnlikeQueryRule.h"

using namespace faiss_ext::gpu;
using namespace faiss_ext::gpu::graph;

namespace {

bool fileExists(const std::string& path) { return std::ifstream(path).good(); }

/// An .ivecs file as ints (the same layout as .fvecs).
std::vector<int> readIvecsInts(const std::string& path, int* k) {
    const std::vector<float> raw = faiss_ext::test::readFvecs(path, k);
    std::vector<int> ids(raw.size());
    std::memcpy(ids.data(), raw.data(), raw.size() * sizeof(int));
    return ids;
}

/// Share of the queries of a data set that the default rule flags, from
/// the base set's exact k-NN lists (K a row) and the queries' exact nearest
/// neighbours (first column of the ground truth); -1 when the files are
/// absent.
double flaggedShare(const std::string& base, const std::string& query, int K, float ratio) {
    const std::string dir = faiss_ext::test::dataDir();
    const std::string lists = dir + "/" + base + "_knn" + std::to_string(K) + "_l2";
    const std::string gt = dir + "/" + query + "_gt100_l2";
    if (dir.empty() || !fileExists(lists + ".ivecs")) return -1;
    int k1 = 0, k2 = 0, k3 = 0, k4 = 0;
    const std::vector<int> ids = readIvecsInts(lists + ".ivecs", &k1);
    const std::vector<float> dists = faiss_ext::test::readFvecs(lists + "_dist.fvecs", &k2);
    const std::vector<int> nn = readIvecsInts(gt + ".ivecs", &k3);
    const std::vector<float> nnDist = faiss_ext::test::readFvecs(gt + "_dist.fvecs", &k4);
    EXPECT_EQ(k1, K);
    EXPECT_EQ(k3, k4);
    const size_t nq = nn.size() / size_t(k3);
    size_t flagged = 0;
    for (size_t q = 0; q < nq; ++q) {
        const int v = nn[q * k3];
        const float r = neighbourRadius(ids.data() + size_t(v) * K, dists.data() + size_t(v) * K, K,
                                        kUnlikeQueryNeighbour, false);
        flagged += isUnlikeQuery(nnDist[q * k4], r, ratio);
    }
    return double(flagged) / double(nq);
}

}  // namespace

TEST(UnlikeQueryRule, ReportedDistancesBecomeSquaredDistances) {
    EXPECT_EQ(squaredDistanceOfReported(7.5f, false), 7.5f);
    // unit vectors: |q - x|^2 = 2 - 2 q.x
    EXPECT_FLOAT_EQ(squaredDistanceOfReported(0.25f, true), 1.5f);
    EXPECT_EQ(squaredDistanceOfReported(1.0000001f, true), 0.f);  // rounding past 1
    // GNND lists keep minus the inner product
    EXPECT_FLOAT_EQ(squaredDistanceOfListEntry(-0.25f, true), 1.5f);
    EXPECT_EQ(squaredDistanceOfListEntry(3.f, false), 3.f);
}

TEST(UnlikeQueryRule, RadiusIsTheTenthNeighbour) {
    std::vector<int> ids(16);
    std::vector<float> dists(16);
    for (int j = 0; j < 16; ++j) {
        ids[j] = 100 + j;
        dists[j] = float(j + 1);  // squared distances 1, 2, ...
    }
    EXPECT_EQ(neighbourRadius(ids.data(), dists.data(), 16, 10, false), 10.f);
    // a list shortened by removals (-1 padded, +inf): its last entry
    for (int j = 5; j < 16; ++j) {
        ids[j] = -1;
        dists[j] = INFINITY;
    }
    EXPECT_EQ(neighbourRadius(ids.data(), dists.data(), 16, 10, false), 5.f);
    // knnDegree below 10: the last of K
    EXPECT_EQ(neighbourRadius(ids.data(), dists.data(), 3, 3, false), 3.f);
    ids[0] = -1;
    EXPECT_EQ(neighbourRadius(ids.data(), dists.data(), 16, 10, false), 0.f);
}

TEST(UnlikeQueryRule, DuplicatesLookPastZeroRadii) {
    std::vector<int> ids(16);
    std::vector<float> dists(16, 0.f);
    for (int j = 0; j < 16; ++j) ids[j] = j;
    dists[12] = 4.f;  // twelve copies, then a neighbour at squared distance 4
    dists[13] = 9.f;
    EXPECT_EQ(neighbourRadius(ids.data(), dists.data(), 16, 10, false), 4.f);
    std::fill(dists.begin(), dists.end(), 0.f);  // every neighbour a copy
    const float r = neighbourRadius(ids.data(), dists.data(), 16, 10, false);
    EXPECT_EQ(r, 0.f);
    EXPECT_FALSE(isUnlikeQuery(1e9f, r, 3.f));  // no scale: never flagged
}

TEST(UnlikeQueryRule, RatioAndShare) {
    EXPECT_FALSE(isUnlikeQuery(30.f, 10.f, 3.f));  // strictly past the ratio
    EXPECT_TRUE(isUnlikeQuery(30.5f, 10.f, 3.f));
    EXPECT_FALSE(answerUnlikeQueriesExactly(0, 100, 0.f));
    EXPECT_TRUE(answerUnlikeQueriesExactly(1, 100, 0.f));
    EXPECT_FALSE(answerUnlikeQueriesExactly(1, 100, 0.02f));
    EXPECT_TRUE(answerUnlikeQueriesExactly(2, 100, 0.02f));
    EXPECT_TRUE(answerUnlikeQueriesExactly(1, 1, 0.02f));  // a single query
}

// Fashion-MNIST (60,000 x 784 base, 10,000 held-out queries of the same
// distribution) and SIFT small (10,000 x 128, 100 queries): the suggested
// ratio flags fewer than the default share, so batches of these queries
// keep the graph's answers and pay no exact search. A rule flagging twice as
// much (ratio 2) would pass the share on Fashion-MNIST.
TEST(UnlikeQueryRule, SuggestedRatioLeavesInDistributionRealQueries) {
    const GpuIndexSearchGraphConfig defaults;
    const double fmnist =
        flaggedShare("fashion-mnist/fashion-mnist_base", "fashion-mnist/fashion-mnist_query", 100,
                     kSuggestedUnlikeQueryRatio);
    const double sift = flaggedShare("siftsmall/siftsmall_base", "siftsmall/siftsmall_query", 100,
                                     kSuggestedUnlikeQueryRatio);
    if (fmnist < 0 || sift < 0) GTEST_SKIP() << "shared data sets absent: test skipped";
    EXPECT_LT(fmnist, defaults.unlikeQueryShare);
    EXPECT_LE(sift, defaults.unlikeQueryShare);
    EXPECT_GT(flaggedShare("fashion-mnist/fashion-mnist_base", "fashion-mnist/fashion-mnist_query",
                           100, 2.f),
              defaults.unlikeQueryShare);
}

// A point cloud (114,373 points of one scan) queried with the points of
// another scan of the scene: most queries lie off the scanned surface.
TEST(UnlikeQueryRule, SuggestedRatioFlagsQueriesFromAnotherScan) {
    const double share = flaggedShare("pointcloud-rs/rs1_base", "pointcloud-rs/rs22_query", 32,
                                      kSuggestedUnlikeQueryRatio);
    if (share < 0) GTEST_SKIP() << "shared data sets absent: test skipped";
    EXPECT_GT(share, 0.5);
}
