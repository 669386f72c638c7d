// GpuKnnGraphGNND's GNND build (Wang, Zhao & Zeng 2021, docs/references.md):
// recall@10 against exact brute force (faiss::IndexFlat on the CPU, or the
// data sets' stored exact graphs) on real and generated data; the structure
// of the graph; metrics; degrees; edge cases; the memory estimate; bad input.
// GnndSanitize.BuildMergeSearch: a small build, merge and search for
// compute-sanitizer runs. Recall as defined in GnndTestUtils.h; no test
// asserts a time.
#include "TestUtils.h"
#include "GnndTestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <gtest/gtest.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/impl/FaissException.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuKnnGraphGNND;
using faiss_ext::gpu::GpuKnnGraphGNNDConfig;
using faiss_ext::gpu::SearchParametersGNND;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;
using namespace faiss_ext::gnndtest;

namespace {

struct RecallCase {
    std::string data;
    int k;
};

class GpuGnndRecall : public ::testing::TestWithParam<RecallCase> {};

std::string recallCaseName(const ::testing::TestParamInfo<RecallCase>& info) {
    std::string s = info.param.data + "_k" + std::to_string(info.param.k);
    for (auto& c : s)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
    return s;
}

}  // namespace

// ---- recall on real and generated data, default configuration ----

TEST_P(GpuGnndRecall, DefaultConfigRecallAt10) {
    FAISS_EXT_REQUIRE_GPU();
    const RecallCase c = GetParam();
    const Dataset& ds = dataset(c.data);
    if (!ds.missing.empty()) GTEST_SKIP() << c.data << ": " << ds.missing;
    StandardGpuResources res;
    const std::string what = describe(ds.name, ds.n, ds.d, c.k, FlatMetric::L2);
    const double recall = buildAndScore(res, ds.x, ds.n, ds.d, c.k, FlatMetric::L2, ds.gt.data(), ds.kGt, what);
    std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), recall);
    EXPECT_GE(recall, 0.95) << what;
}

INSTANTIATE_TEST_SUITE_P(Data, GpuGnndRecall,
                         ::testing::Values(RecallCase{"siftsmall", 32}, RecallCase{"siftsmall", 64},
                                           RecallCase{"fashion-mnist", 32}, RecallCase{"fashion-mnist", 64},
                                           RecallCase{"pointcloud-rs", 32}, RecallCase{"pointcloud-rs", 64},
                                           RecallCase{"clustered", 32}, RecallCase{"clustered", 64}),
                         recallCaseName);

// ---- structure of getGraph ----

TEST(GpuGnnd, GraphStructureAndAccessors) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(10000, 2000);
    const int64_t nAgain = sized<int64_t>(2000, 1000);  // the build after reset()
    const int d = 32, k = 32;
    auto x = clusteredVectors(n, d, 20, kSeed);
    GpuKnnGraphGNND index(&res, d, k);
    EXPECT_EQ(index.getGraphDegree(), k);
    EXPECT_EQ(index.getBuildDegree(), 32);
    EXPECT_EQ(index.getFlatMetric(), FlatMetric::L2);
    EXPECT_EQ(index.metric_type, faiss::METRIC_L2);
    index.add(n, x.data());
    ASSERT_EQ(index.ntotal, n);
    EXPECT_TRUE(index.is_trained);

    const Graph g = fetchGraph(index);
    EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.ids.data(), g.dist.data(), k));

    // Labels alone, 32-bit ids, device outputs: the same graph.
    std::vector<int64_t> labels(size_t(n) * k);
    index.getGraph(labels.data());
    EXPECT_EQ(labels, g.ids);
    const std::vector<int> ids32 = index.getGraphInt();
    ASSERT_EQ(ids32.size(), size_t(n) * k);
    EXPECT_TRUE(std::equal(ids32.begin(), ids32.end(), g.ids.begin()));
    int64_t* dI = nullptr;
    float* dD = nullptr;
    ASSERT_EQ(cudaMalloc((void**)&dI, sizeof(int64_t) * n * k), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void**)&dD, sizeof(float) * n * k), cudaSuccess);
    index.getGraph(dI, dD);
    std::vector<int64_t> devI(size_t(n) * k);
    std::vector<float> devD(size_t(n) * k);
    cudaMemcpy(devI.data(), dI, sizeof(int64_t) * n * k, cudaMemcpyDeviceToHost);
    cudaMemcpy(devD.data(), dD, sizeof(float) * n * k, cudaMemcpyDeviceToHost);
    cudaFree(dI);
    cudaFree(dD);
    EXPECT_EQ(devI, g.ids);
    EXPECT_EQ(devD, g.dist);

    // Stored vectors: reconstruct and the device pointer give them back.
    std::vector<float> v(d);
    index.reconstruct(n - 1, v.data());
    EXPECT_TRUE(std::equal(v.begin(), v.end(), x.begin() + size_t(n - 1) * d));
    const float* dv = index.getVectorsDevice();
    ASSERT_NE(dv, nullptr);
    std::vector<float> first(d);
    cudaMemcpy(first.data(), dv, sizeof(float) * d, cudaMemcpyDeviceToHost);
    EXPECT_TRUE(std::equal(first.begin(), first.end(), x.begin()));

    // One build's log: iterations numbered from 1, no merge.
    const auto& log = index.getBuildLog();
    ASSERT_FALSE(log.empty());
    EXPECT_LE(int(log.size()), index.getConfig().maxIterations);
    for (size_t i = 0; i < log.size(); ++i) {
        EXPECT_EQ(log[i].iteration, int(i) + 1);
        EXPECT_FALSE(log[i].merge);
        EXPECT_GE(log[i].updates, 0);
    }

    // reset() empties the index; it builds again afterwards.
    index.reset();
    EXPECT_EQ(index.ntotal, 0);
    EXPECT_TRUE(index.getGraphInt().empty());
    index.add(nAgain, x.data());
    EXPECT_EQ(index.ntotal, nAgain);
    const Graph g2 = fetchGraph(index);
    EXPECT_EQ("", checkStructure(x.data(), nAgain, d, false, g2.ids.data(), g2.dist.data(), k));
}

// ---- metrics: inner product, cosine, Pearson ----

TEST(GpuGnnd, MetricsAgainstExactBruteForce) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(10000, 1000);
    const int d = 48, k = 32;
    auto x = clusteredVectors(n, d, 20, kSeed + 7);
    for (FlatMetric m : {FlatMetric::InnerProduct, FlatMetric::Cosine, FlatMetric::Pearson}) {
        const std::string what = describe("clustered", n, d, k, m);
        auto xp = prepared(m, x, n, d);
        auto ref = referenceGraph(xp.data(), n, d, kR, true);
        GpuKnnGraphGNND index(&res, d, k, m);
        EXPECT_EQ(index.metric_type, faiss::METRIC_INNER_PRODUCT) << what;
        index.add(n, x.data());
        const double recall = checkIndex(index, xp, ref.data(), kR, what);
        std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), recall);
        // Inner product is not a metric (no triangle inequality): NN-Descent's
        // premise holds less well there, so its bar is lower.
        EXPECT_GE(recall, m == FlatMetric::InnerProduct ? 0.9 : 0.95) << what;
    }
    // The FAISS-metric constructor: inner product.
    GpuKnnGraphGNND ip(&res, d, k, faiss::METRIC_INNER_PRODUCT);
    EXPECT_EQ(ip.getFlatMetric(), FlatMetric::InnerProduct);
}

// ---- degrees ----

TEST(GpuGnnd, DegreeSweep) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: still past 2 x 256 (the longest list), else that build is the exact small-set path
    const int64_t n = sized<int64_t>(6000, 520);
    const int d = 32;
    auto x = clusteredVectors(n, d, 12, kSeed + 11);
    auto ref = referenceGraph(x.data(), n, d, kR, false);
    for (int k : {1, 10, 31, 32, 33, 100, 256}) {
        const std::string what = describe("clustered", n, d, k, FlatMetric::L2);
        GpuKnnGraphGNND index(&res, d, k);
        EXPECT_EQ(index.getBuildDegree(), std::max(32, (k + 31) / 32 * 32)) << what;
        index.add(n, x.data());
        const double recall = checkIndex(index, x, ref.data(), kR, what);
        std::printf("[gnnd] %s: recall@%d %.4f\n", what.c_str(), std::min(k, kR), recall);
        EXPECT_GE(recall, 0.9) << what;
    }
    // A longer build list than the degree.
    GpuKnnGraphGNNDConfig cfg;
    cfg.buildDegree = 64;
    GpuKnnGraphGNND index(&res, d, 10, FlatMetric::L2, cfg);
    EXPECT_EQ(index.getBuildDegree(), 64);
    index.add(n, x.data());
    const double recall = checkIndex(index, x, ref.data(), kR, "k=10 buildDegree=64");
    EXPECT_GE(recall, 0.95) << "k=10 buildDegree=64 seed=" << kSeed;
}

// ---- edge cases ----

TEST(GpuGnnd, TooFewVectorsIsAnError) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8, k = 32;
    auto x = clusteredVectors(200, d, 4, kSeed);
    GpuKnnGraphGNND index(&res, d, k);
    for (int64_t n : {int64_t(1), int64_t(k - 1), int64_t(k)}) {
        EXPECT_THROW(index.add(n, x.data()), faiss::FaissException) << "n=" << n << " k=" << k;
        EXPECT_EQ(index.ntotal, 0) << "n=" << n;
        EXPECT_TRUE(index.getGraphInt().empty()) << "n=" << n;
        EXPECT_TRUE(index.getBuildLog().empty()) << "n=" << n;
    }
    index.add(200, x.data());  // still usable
    EXPECT_EQ(index.ntotal, 200);
}

TEST(GpuGnnd, ExactGraphWhenNIsKPlusOne) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (int k : {1, 32, 64}) {
        const int64_t n = k + 1;
        const int d = 16;
        auto x = randomVectors(n, d, kSeed + k);
        GpuKnnGraphGNND index(&res, d, k);
        index.add(n, x.data());
        const Graph g = fetchGraph(index);
        // Every list holds all the other vectors, sorted: the exact graph.
        EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.ids.data(), g.dist.data(), k)) << "k=" << k;
        auto ref = exactGraph(x.data(), n, d, k, false);
        EXPECT_EQ(graphRecall(x.data(), n, d, false, g.ids.data(), k, ref.data(), k, k), 1.0) << "k=" << k;
    }
}

TEST(GpuGnnd, NMultipleOfTheDegree) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: still multiples of the degree, and of 2^9 and 2^7 as 64 * 200 and 32 * 100
    for (auto [n, k] : {std::pair<int64_t, int>{64 * sized(200, 24), 64},
                        std::pair<int64_t, int>{32 * sized(100, 28), 32}}) {
        const int d = 32;
        auto x = clusteredVectors(n, d, 16, kSeed + n);
        auto ref = referenceGraph(x.data(), n, d, kR, false);
        const std::string what = describe("clustered", n, d, k, FlatMetric::L2);
        const double recall = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR, what);
        EXPECT_GE(recall, 0.95) << what;
    }
}

TEST(GpuGnnd, DuplicatedPoints) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t m = sized<int64_t>(2000, 600), n = 3 * m;
    const int d = 16, k = 32;
    auto base = clusteredVectors(m, d, 10, kSeed + 3);
    std::vector<float> x;
    for (int rep = 0; rep < 3; ++rep) x.insert(x.end(), base.begin(), base.end());
    auto ref = referenceGraph(x.data(), n, d, kR, false);
    const std::string what = describe("clustered x3 copies", n, d, k, FlatMetric::L2);
    GpuKnnGraphGNND index(&res, d, k);
    index.add(n, x.data());
    // checkIndex: no self loop and no repeated id although copies tie at 0.
    const double recall = checkIndex(index, x, ref.data(), kR, what);
    std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), recall);
    EXPECT_GE(recall, 0.9) << what;
    // Each vector's two copies are at distance 0: they lead its list.
    const Graph g = fetchGraph(index);
    int64_t copiesFirst = 0;
    for (int64_t i = 0; i < n; ++i) {
        std::set<int64_t> head{g.ids[size_t(i) * k], g.ids[size_t(i) * k + 1]};
        std::set<int64_t> copies;
        for (int rep = 0; rep < 3; ++rep)
            if (rep * m + i % m != i) copies.insert(rep * m + i % m);
        copiesFirst += head == copies;
    }
    EXPECT_GE(double(copiesFirst) / n, 0.95) << what;
}

TEST(GpuGnnd, OneDimension) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 5000;
    const int d = 1, k = 32;
    auto x = randomVectors(n, d, kSeed + 1);
    auto ref = exactGraph(x.data(), n, d, kR, false);
    const std::string what = describe("uniform", n, d, k, FlatMetric::L2);
    const double recall = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR, what);
    std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), recall);
    EXPECT_GE(recall, 0.9) << what;
}

// ---- memory estimate ----

TEST(GpuGnnd, MemoryEstimate) {
    FAISS_EXT_REQUIRE_GPU();
    const auto small = GpuKnnGraphGNND::estimateMemory(100000, 128, 64);
    const auto big = GpuKnnGraphGNND::estimateMemory(1000000, 128, 64);
    EXPECT_GE(small.vectors, size_t(100000) * 128 * 4);
    EXPECT_GE(small.graph, size_t(100000) * 64 * 4);
    EXPECT_GT(small.buildTemp, 0u);
    EXPECT_EQ(small.total(), small.vectors + small.graph + small.buildTemp);
    EXPECT_GT(big.total(), small.total());
    StandardGpuResources res;
    GpuKnnGraphGNND index(&res, 128, 64);
    EXPECT_TRUE(index.addFits(10000));
    StandardGpuResources tight;
    tight.setDeviceMemoryLimit(size_t(1) << 20);
    GpuKnnGraphGNND limited(&tight, 128, 64);
    EXPECT_FALSE(limited.addFits(1000000));
}

// The estimate is what the build takes: a fresh one-shot build runs within
// exactly its estimated temporary memory, and not within 90% of it (the
// estimate once counted the raw lists twice, a third too much).
TEST(GpuGnnd, BuildRunsWithinItsEstimatedTemporaryMemory) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t n = 20000;
    const int d = 32, k = 32;
    const std::vector<float> x = clusteredVectors(n, d, 50, kSeed);
    const size_t temp = GpuKnnGraphGNND::estimateMemory(n, d, k).buildTemp;
    StandardGpuResources exact;
    exact.setTempMemory(temp);
    GpuKnnGraphGNND fits(&exact, d, k);
    EXPECT_TRUE(fits.addFits(n));
    EXPECT_NO_THROW(fits.add(n, x.data()));
    EXPECT_EQ(fits.ntotal, n);
    StandardGpuResources tight;
    tight.setTempMemory(temp / 10 * 9);
    GpuKnnGraphGNND tooTight(&tight, d, k);
    EXPECT_FALSE(tooTight.addFits(n));
    EXPECT_THROW(tooTight.add(n, x.data()), faiss::FaissException);
    EXPECT_EQ(tooTight.ntotal, 0);
}

// ---- bad input ----

TEST(GpuGnnd, BadInputIsAClearError) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    for (int k : {0, -1, 1025}) EXPECT_THROW(GpuKnnGraphGNND(&res, d, k), faiss::FaissException) << "k=" << k;
    EXPECT_THROW(GpuKnnGraphGNND(&res, 0, 32), faiss::FaissException);
    EXPECT_THROW(GpuKnnGraphGNND(&res, d, 32, faiss::METRIC_L1), faiss::FaissException);
    auto badConfig = [&](auto&& edit, const char* what) {
        GpuKnnGraphGNNDConfig cfg;
        edit(cfg);
        EXPECT_THROW(GpuKnnGraphGNND(&res, d, 32, FlatMetric::L2, cfg), faiss::FaissException) << what;
        GpuKnnGraphGNND index(&res, d, 32);
        const int before = index.getConfig().samples;
        EXPECT_THROW(index.setConfig(cfg), faiss::FaissException) << "setConfig: " << what;
        EXPECT_EQ(index.getConfig().samples, before) << "setConfig changed the index: " << what;
    };
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.samples = 0; }, "samples 0");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.samples = 33; }, "samples 33");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.maxIterations = 0; }, "maxIterations 0");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.terminationThreshold = -0.1f; }, "threshold -0.1");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.terminationThreshold = 1.0f; }, "threshold 1");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.buildDegree = 40; }, "buildDegree 40");
    {
        GpuKnnGraphGNNDConfig cfg;
        cfg.buildDegree = 32;
        EXPECT_THROW(GpuKnnGraphGNND(&res, d, 64, FlatMetric::L2, cfg), faiss::FaissException)
                << "buildDegree below the degree";
        GpuKnnGraphGNNDConfig neg;
        neg.searchL = -1;
        EXPECT_THROW(GpuKnnGraphGNND(&res, d, 32, FlatMetric::L2, neg), faiss::FaissException) << "searchL -1";
    }

    // Valid config changes are taken; buildDegree only while empty.
    auto x = clusteredVectors(500, d, 4, kSeed);
    GpuKnnGraphGNND index(&res, d, 32);
    GpuKnnGraphGNNDConfig cfg = index.getConfig();
    cfg.samples = 16;
    index.setConfig(cfg);
    EXPECT_EQ(index.getConfig().samples, 16);
    index.add(500, x.data());
    cfg.buildDegree = 64;
    EXPECT_THROW(index.setConfig(cfg), faiss::FaissException) << "buildDegree changed on a built index";
    EXPECT_EQ(index.getBuildDegree(), 32);

    // null x, wrong d in copyFrom: errors, the index unchanged.
    const std::vector<int> graph = index.getGraphInt();
    EXPECT_THROW(index.add(10, nullptr), faiss::FaissException);
    EXPECT_EQ(index.ntotal, 500);
    faiss::IndexNNDescentFlat wrongD(d + 1, 32);
    EXPECT_THROW(index.copyFrom(&wrongD), faiss::FaissException);
    EXPECT_EQ(index.ntotal, 500);
    EXPECT_EQ(index.getGraphInt(), graph);
    EXPECT_THROW(index.copyFrom(nullptr), faiss::FaissException);
    EXPECT_EQ(index.getGraphInt(), graph);
    std::vector<float> v(d);
    EXPECT_THROW(index.reconstruct(500, v.data()), faiss::FaissException);
    EXPECT_THROW(index.reconstruct(-1, v.data()), faiss::FaissException);
    EXPECT_THROW(index.add_with_ids(1, x.data(), nullptr), faiss::FaissException);
}

// ---- small shapes for compute-sanitizer (memcheck, racecheck, synccheck) ----

TEST(GnndSanitize, BuildMergeSearch) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 3000, nq = 50;
    const int d = 32, k = 32, kq = 10;
    auto all = clusteredVectors(n + nq, d, 8, kSeed + 23);
    std::vector<float> x(all.begin(), all.begin() + size_t(n) * d);
    std::vector<float> q(all.begin() + size_t(n) * d, all.end());
    auto ref = exactGraph(x.data(), n, d, kR, false);
    GpuKnnGraphGNND index(&res, d, k);
    index.add(2000, x.data());                      // one GNND build
    index.add(n - 2000, x.data() + size_t(2000) * d);  // one GGM merge
    const auto& log = index.getBuildLog();
    EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const auto& s) { return s.merge; }));
    const double recall = checkIndex(index, x, ref.data(), kR, "sanitize build + merge");
    EXPECT_GE(recall, 0.9);
    auto qref = exactSearch(x.data(), n, q.data(), nq, d, kq, false);
    std::vector<float> D(size_t(nq) * kq);
    std::vector<int64_t> I(size_t(nq) * kq);
    SearchParametersGNND params;
    params.searchL = 32;
    index.search(nq, q.data(), kq, D.data(), I.data(), &params);
    EXPECT_GE(searchRecall(x.data(), n, q.data(), nq, d, false, I.data(), kq, qref.data(), kq, kq), 0.9);
}
