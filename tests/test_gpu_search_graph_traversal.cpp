// The copy a search graph's beam search traverses (graph/TraversalCopy.h):
// a search on the FP16 copy finds what a search on the FP32 vectors finds
// (recall within 0.01, for L2, inner product and cosine, at dimensions that
// take 8-, 4- and 1-value loads) and returns exact FP32 distances; the
// copy follows adds, removals and reset; it is centred, so that data far
// from the origin searches as well as on FP32.
#include <faiss/impl/IDSelector.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "GnndTestUtils.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

using namespace faiss_ext;
using namespace faiss_ext::gpu;

namespace {

struct Searched {
    std::vector<float> D;
    std::vector<int64_t> I;
    double recall = 0;
};

/// An index over x traversing the FP16 copy or the FP32 vectors, its search
/// of q at itopk 128, and recall@k against exact search.
Searched buildAndSearch(StandardGpuResources& res, FlatMetric metric, int d,
                        const std::vector<float>& x, const std::vector<float>& q, int k,
                        bool fp16) {
    const int64_t n = int64_t(x.size()) / d, nq = int64_t(q.size()) / d;
    GpuIndexSearchGraphConfig cfg;
    cfg.fp16Traversal = fp16;
    GpuIndexSearchGraph index(&res, d, metric, cfg);
    index.add(n, x.data());
    Searched s;
    s.D.resize(size_t(nq * k));
    s.I.resize(size_t(nq * k));
    SearchParametersSearchGraph sp;
    sp.itopk = 128;
    index.search(nq, q.data(), k, s.D.data(), s.I.data(), &sp);
    s.recall = gnndtest::recallAgainstExactIndex(res, x, n, q, nq, d, k, s.I, metric);
    return s;
}

/// The metric's distance of query row i to vector j, in double (cosine: of
/// the normalised rows, as the index stores them).
double exactDistance(FlatMetric metric, int d, const std::vector<float>& x, int64_t j,
                     const std::vector<float>& q, int64_t i) {
    double dot = 0, xx = 0, qq = 0, l2 = 0;
    for (int c = 0; c < d; ++c) {
        const double a = q[size_t(i * d + c)], b = x[size_t(j * d + c)];
        dot += a * b;
        xx += b * b;
        qq += a * a;
        l2 += (a - b) * (a - b);
    }
    if (metric == FlatMetric::L2) return l2;
    if (metric == FlatMetric::Cosine) return dot / std::sqrt(xx * qq);
    return dot;
}

/// recall@k of I (nq x k) against exact search in double (the GEMM form of
/// an FP32 exact index loses the digits of data far from the origin); a
/// returned id counts when its distance is within the k-th true one (ties).
double recallInDouble(FlatMetric metric, int d, const std::vector<float>& x,
                      const std::vector<float>& q, int k, const std::vector<int64_t>& I) {
    const int64_t n = int64_t(x.size()) / d, nq = int64_t(q.size()) / d;
    const bool larger = metric != FlatMetric::L2;  // similarities: larger is closer
    int64_t hits = 0;
    for (int64_t i = 0; i < nq; ++i) {
        std::vector<double> all(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) all[size_t(j)] = exactDistance(metric, d, x, j, q, i);
        std::vector<double> sorted = all;
        std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(),
                         [&](double a, double b) { return larger ? a > b : a < b; });
        const double kth = sorted[size_t(k - 1)];
        for (int r = 0; r < k; ++r) {
            const int64_t j = I[size_t(i * k + r)];
            if (j >= 0 && (larger ? all[size_t(j)] >= kth : all[size_t(j)] <= kth)) ++hits;
        }
    }
    return double(hits) / double(nq * k);
}

}  // namespace

TEST(GpuSearchGraphTraversal, Fp16CopyFindsWhatFp32FindsWithExactDistances) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = test::sized<int64_t>(30000, 5000), nq = 300;
    const int k = 10;
    // d 64: 8-value loads; 36: 4; 30: one at a time
    for (int d : {64, 36, 30}) {
        const auto x = test::clusteredVectors(n, d, 64, test::kSeed + uint64_t(d));
        const auto q = test::clusteredVectors(nq, d, 64, test::kSeed + 100 + uint64_t(d));
        for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct, FlatMetric::Cosine}) {
            const std::string what =
                std::string(flatMetricName(metric)) + " d " + std::to_string(d);
            const Searched full = buildAndSearch(res, metric, d, x, q, k, false);
            const Searched half = buildAndSearch(res, metric, d, x, q, k, true);
            std::printf("[search graph traversal] %s: recall@10 FP32 %.4f, FP16 %.4f\n",
                        what.c_str(), full.recall, half.recall);
            EXPECT_GE(half.recall, full.recall - 0.01) << what;
            EXPECT_GE(half.recall, 0.9) << what;
            // the final buffer is re-scored in FP32: each distance is the
            // returned vector's, to FP32 rounding
            for (int64_t i = 0; i < nq; ++i) {
                for (int r = 0; r < k; ++r) {
                    const int64_t j = half.I[size_t(i * k + r)];
                    ASSERT_GE(j, 0) << what;
                    const double want = exactDistance(metric, d, x, j, q, i);
                    const double got = half.D[size_t(i * k + r)];
                    ASSERT_NEAR(got, want, 1e-4 * (1 + std::fabs(want)))
                        << what << " query " << i << " rank " << r;
                }
            }
        }
    }
}

TEST(GpuSearchGraphTraversal, Fp16CopyFollowsAddsRemovalsAndReset) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = test::sized<int64_t>(20000, 4000), nq = 200;
    const int d = 32, k = 10;
    const auto x = test::clusteredVectors(n, d, 64, test::kSeed + 7);
    const auto q = test::clusteredVectors(nq, d, 64, test::kSeed + 8);
    GpuIndexSearchGraph index(&res, d);
    index.add(n / 2, x.data());
    index.add(n - n / 2, x.data() + size_t(n / 2) * d);
    std::vector<float> D(size_t(nq * k));
    std::vector<int64_t> I(size_t(nq * k));
    SearchParametersSearchGraph sp;
    sp.itopk = 128;
    index.search(nq, q.data(), k, D.data(), I.data(), &sp);
    const double twoAdds = gnndtest::recallAgainstExactIndex(res, x, n, q, nq, d, k, I);
    EXPECT_GE(twoAdds, 0.95);
    // remove the first tenth of the ids: the survivors keep their order, renumbered
    faiss::IDSelectorRange tenth(0, n / 10);
    ASSERT_EQ(index.remove_ids(tenth), size_t(n / 10));
    index.search(nq, q.data(), k, D.data(), I.data(), &sp);
    const std::vector<float> rest(x.begin() + size_t(n / 10) * d, x.end());
    const double afterRemoval =
        gnndtest::recallAgainstExactIndex(res, rest, n - n / 10, q, nq, d, k, I);
    std::printf("[search graph traversal] FP16: two adds %.4f, after removing 10%% %.4f\n",
                twoAdds, afterRemoval);
    EXPECT_GE(afterRemoval, 0.95);
    index.reset();
    EXPECT_EQ(index.ntotal, 0);
    index.add(n / 2, x.data());
    index.search(nq, q.data(), k, D.data(), I.data(), &sp);
    const std::vector<float> half(x.begin(), x.begin() + size_t(n / 2) * d);
    EXPECT_GE(gnndtest::recallAgainstExactIndex(res, half, n / 2, q, nq, d, k, I), 0.95);
}

TEST(GpuSearchGraphTraversal, Fp16CopyOfDataFarFromTheOriginSearchesAsFp32Does) {
    // Clusters of spread about 1 moved 3,000 from the origin in every
    // coordinate, at d 4 (a point cloud's shape): uncentred, FP16 keeps
    // steps of 2 there and neighbours become ties; centred, the copy keeps
    // its digits. L2 and inner product (whose order centring keeps too).
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = test::sized<int64_t>(30000, 5000), nq = 300;
    const int d = 4, k = 10;
    auto x = test::clusteredVectors(n, d, 64, test::kSeed + 31);
    auto q = test::clusteredVectors(nq, d, 64, test::kSeed + 32);
    for (float& v : x) v += 3000.f;
    for (float& v : q) v += 3000.f;
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        double recall[2];
        for (bool fp16 : {false, true}) {
            GpuIndexSearchGraphConfig cfg;
            cfg.fp16Traversal = fp16;
            GpuIndexSearchGraph index(&res, d, metric, cfg);
            index.add(n, x.data());
            std::vector<float> D(size_t(nq * k));
            std::vector<int64_t> I(size_t(nq * k));
            SearchParametersSearchGraph sp;
            sp.itopk = 64;
            index.search(nq, q.data(), k, D.data(), I.data(), &sp);
            recall[fp16] = recallInDouble(metric, d, x, q, k, I);
        }
        std::printf("[search graph traversal] far d 4 %s: recall@10 FP32 %.4f, FP16 %.4f\n",
                    flatMetricName(metric), recall[0], recall[1]);
        EXPECT_GE(recall[1], recall[0] - 0.01) << flatMetricName(metric);
    }
}
