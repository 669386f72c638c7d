// GpuKnnGraphGNND::add's partitioned build (GnndAddBuild::Partitioned,
// gpu/impl/gnnd/PartitionedAdd.h): exact lists inside k-means clusters,
// read in place from host or device memory. One cluster is the exact graph
// (every metric); several keep recall near 1 where one GNND build loses
// some; a second add merges with the first; device and host input build
// the same graph; Auto and small adds take the one-shot build; a bad
// setting is refused with the index unchanged. Recall as in
// GnndTestUtils.h.
#include "GnndTestUtils.h"
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GnndAddBuild;
using faiss_ext::gpu::GpuKnnGraphGNND;
using faiss_ext::gpu::GpuKnnGraphGNNDConfig;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;
using namespace faiss_ext::gnndtest;

namespace {

GpuKnnGraphGNNDConfig withAddBuild(GnndAddBuild how) {
    GpuKnnGraphGNNDConfig c;
    c.addBuild = how;
    return c;
}

/// The ids of an index's graph with its structure checked (ids only: the
/// distances are those of the flat engine, |x|^2 + |y|^2 - 2 <x, y>, whose
/// FP32 rounding checkStructure's tolerance does not allow for).
std::vector<int64_t> checkedIds(const GpuKnnGraphGNND& index, const std::vector<float>& xp,
                                const std::string& what) {
    const Graph g = fetchGraph(index);
    const bool ip = similarity(index.getFlatMetric());
    EXPECT_EQ("", checkStructure(xp.data(), g.n, index.d, ip, g.ids.data(), nullptr, g.k)) << what;
    for (int64_t i = 0; i < g.n; ++i)
        for (int j = 0; j < g.k; ++j) {
            const int64_t nb = g.ids[size_t(i) * g.k + j];
            const double want = pairDistance(xp.data(), index.d, i, nb, ip);
            const double scale = squaredNorm(xp.data(), index.d, i) +
                                 squaredNorm(xp.data(), index.d, nb);
            EXPECT_NEAR(g.dist[size_t(i) * g.k + j], want, 1e-5 * scale + 1e-5)
                    << what << " row " << i << " rank " << j;
        }
    return g.ids;
}

}  // namespace

TEST(GpuGnndPartitionedAdd, OneClusterIsTheExactGraph) {
    FAISS_EXT_REQUIRE_GPU();
    // fewer vectors than a cluster's target: one cluster, searched exactly
    const int64_t n = sized<int64_t>(3000, 600);
    const int d = 24, k = 10;
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct, FlatMetric::Cosine,
                              FlatMetric::Pearson}) {
        const std::string what = describe("partitioned add, one cluster", n, d, k, metric);
        auto x = clusteredVectors(n, d, 20, kSeed + 71);
        std::copy_n(x.data(), d, x.data() + 5 * d);  // a duplicate of row 0
        StandardGpuResources res;
        GpuKnnGraphGNND index(&res, d, k, metric, withAddBuild(GnndAddBuild::Partitioned));
        index.add(n, x.data());
        EXPECT_EQ(index.getLastAddBuild(), GnndAddBuild::Partitioned) << what;
        ASSERT_EQ(index.ntotal, n) << what;
        const auto xp = prepared(metric, x, n, d);
        const auto ids = checkedIds(index, xp, what);
        const bool ip = similarity(metric);
        const auto ref = referenceGraph(xp.data(), n, d, k, ip);
        EXPECT_GE(graphRecall(xp.data(), n, d, ip, ids.data(), k, ref.data(), k, k), 0.9999)
                << what << " (ties aside)";
    }
}

TEST(GpuGnndPartitionedAdd, ManyClustersKeepRecallNearOne) {
    FAISS_EXT_REQUIRE_GPU();
    // past kExactClusterRows vectors: several clusters (a sanitizer-sized
    // run has one); recall@10 at least 0.98 and not below one GNND build's
    const int64_t n = sized<int64_t>(400000, 6000);
    const int d = 32, k = 16;
    const auto x = clusteredVectors(n, d, 400, kSeed + 73);
    const auto ref = referenceGraph(x.data(), n, d, kR, false);
    StandardGpuResources res;
    const std::string what = describe("partitioned add, clustered", n, d, k, FlatMetric::L2);
    GpuKnnGraphGNND index(&res, d, k, FlatMetric::L2, withAddBuild(GnndAddBuild::Partitioned));
    index.add(n, x.data());
    EXPECT_EQ(index.getLastAddBuild(), GnndAddBuild::Partitioned);
    const double partitioned = checkIndex(index, x, ref.data(), kR, what);
    const double oneShot = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR,
                                         what + " one-shot",
                                         withAddBuild(GnndAddBuild::OneShot));
    std::printf("[partitioned add] %s: recall@10 partitioned %.4f, one-shot %.4f\n",
                what.c_str(), partitioned, oneShot);
    EXPECT_GE(partitioned, 0.98) << what;
    EXPECT_GE(partitioned, oneShot - 0.002) << what;
}

TEST(GpuGnndPartitionedAdd, SecondAddMergesWithTheFirst) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t half = sized<int64_t>(20000, 1500), n = 2 * half;
    const int d = 32, k = 16;
    const auto x = clusteredVectors(n, d, 60, kSeed + 75);
    const auto ref = referenceGraph(x.data(), n, d, kR, false);
    const std::string what = describe("one-shot then partitioned add", n, d, k, FlatMetric::L2);
    StandardGpuResources res;
    GpuKnnGraphGNND index(&res, d, k, FlatMetric::L2, withAddBuild(GnndAddBuild::OneShot));
    index.add(half, x.data());
    EXPECT_EQ(index.getLastAddBuild(), GnndAddBuild::OneShot);
    const size_t logAfterFirst = index.getBuildLog().size();
    index.setConfig(withAddBuild(GnndAddBuild::Partitioned));
    index.add(half, x.data() + size_t(half) * d);
    EXPECT_EQ(index.getLastAddBuild(), GnndAddBuild::Partitioned);
    ASSERT_EQ(index.ntotal, n);
    bool merged = false;
    for (size_t i = logAfterFirst; i < index.getBuildLog().size(); ++i)
        merged = merged || index.getBuildLog()[i].merge;
    EXPECT_TRUE(merged) << what << ": the second add ran no GGM merge";
    const double twoAdds = checkIndex(index, x, ref.data(), kR, what);
    const double oneShot = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR,
                                         what + " (one add)", withAddBuild(GnndAddBuild::OneShot));
    std::printf("[partitioned add] %s: recall@10 %.4f (one one-shot add %.4f)\n", what.c_str(),
                twoAdds, oneShot);
    EXPECT_GE(twoAdds, oneShot - 0.01) << what;
}

TEST(GpuGnndPartitionedAdd, DeviceInputBuildsTheGraphOfHostInput) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t n = sized<int64_t>(5000, 800);
    const int d = 16, k = 8;
    const auto x = clusteredVectors(n, d, 30, kSeed + 77);
    StandardGpuResources res;
    const auto cfg = withAddBuild(GnndAddBuild::Partitioned);
    GpuKnnGraphGNND fromHost(&res, d, k, FlatMetric::L2, cfg);
    fromHost.add(n, x.data());
    float* dx = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), x.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    faiss_ext::test::syncAfterHostCopy();
    GpuKnnGraphGNND fromDevice(&res, d, k, FlatMetric::L2, cfg);
    fromDevice.add(n, dx);
    cudaFree(dx);
    EXPECT_EQ(fromDevice.getLastAddBuild(), GnndAddBuild::Partitioned);
    EXPECT_EQ(fromHost.getGraphInt(), fromDevice.getGraphInt());
}

TEST(GpuGnndPartitionedAdd, AutoAndSmallAddsAreOneShot) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 8, k = 4;  // build degree 32
    const auto x = clusteredVectors(3000, d, 10, kSeed + 79);
    StandardGpuResources res;
    GpuKnnGraphGNND autoIndex(&res, d, k, FlatMetric::L2);
    EXPECT_EQ(autoIndex.getLastAddBuild(), GnndAddBuild::Auto) << "before any add";
    autoIndex.add(3000, x.data());
    EXPECT_EQ(autoIndex.getLastAddBuild(), GnndAddBuild::OneShot)
            << "Auto below kAutoPartitionedAddAbove";
    // 20 vectors: fewer than a build list of 32 others each
    GpuKnnGraphGNND small(&res, d, k, FlatMetric::L2, withAddBuild(GnndAddBuild::Partitioned));
    small.add(20, x.data());
    EXPECT_EQ(small.getLastAddBuild(), GnndAddBuild::OneShot);
    EXPECT_EQ(small.ntotal, 20);
}

TEST(GpuGnndPartitionedAdd, BadAddBuildIsRefused) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    EXPECT_THROW(GpuKnnGraphGNND(&res, 8, 4, FlatMetric::L2, withAddBuild(GnndAddBuild(7))),
                 faiss::FaissException);
    const auto x = clusteredVectors(500, 8, 5, kSeed + 81);
    GpuKnnGraphGNND index(&res, 8, 4, FlatMetric::L2);
    index.add(500, x.data());
    const auto before = index.getGraphInt();
    EXPECT_THROW(index.setConfig(withAddBuild(GnndAddBuild(-1))), faiss::FaissException);
    EXPECT_EQ(index.getConfig().addBuild, GnndAddBuild::Auto);
    EXPECT_EQ(index.getGraphInt(), before);
}
