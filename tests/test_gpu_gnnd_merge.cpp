// GpuKnnGraphGNND's GGM merges (Wang, Zhao & Zeng 2021, Algorithm 3,
// docs/references.md): incremental adds, small batches added to a large
// index. Recall as defined in GnndTestUtils.h.
#include "TestUtils.h"
#include "GnndTestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuKnnGraphGNND;
using faiss_ext::gpu::GpuKnnGraphGNNDConfig;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;
using namespace faiss_ext::gnndtest;

// ---- GGM: incremental adds ----

// Small batches added to a large index (found by the soak): the GGM merge
// used to seed each list with K/2 own-set entries and K/2 of the other set,
// so the lists of a batch smaller than K/2 started short, and the
// iterations could stop before they were filled: -1 entries in a graph of
// more than k + 1 vectors. Every list must hold k real neighbours.
TEST(GpuGnnd, SmallBatchesAddedToALargeIndexKeepFullLists) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32, k = 32;
    const int64_t base = sized<int64_t>(6000, 300);  // small: still 7x the largest batch
    const std::vector<int64_t> batches = {1, 2, 5, 9, 15, 40, 1, 3};
    int64_t total = base;
    for (int64_t b : batches) total += b;
    auto x = clusteredVectors(total, d, 16, kSeed + 23);
    for (int degree : {0, 64}) {
        GpuKnnGraphGNNDConfig cfg;
        cfg.buildDegree = degree;
        GpuKnnGraphGNND index(&res, d, k, FlatMetric::L2, cfg);
        index.add(base, x.data());
        int64_t off = base;
        for (int64_t b : batches) {
            index.add(b, x.data() + size_t(off) * d);
            off += b;
            std::vector<int64_t> I(size_t(off) * k);
            std::vector<float> D(size_t(off) * k);
            index.getGraph(I.data(), D.data());
            const std::string problem = checkStructure(x.data(), off, d, false, I.data(), D.data(), k);
            EXPECT_EQ("", problem) << "buildDegree " << degree << ", after adding " << b << " to "
                                   << off - b;
            if (!problem.empty()) break;
        }
    }
}

TEST(GpuGnnd, IncrementalAddsMergeWithGgm) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(20000, 600);  // small: the smallest part (150) still past 2 K
    const int d = 64, k = 32;
    auto x = clusteredVectors(n, d, 40, kSeed + 5);
    auto ref = referenceGraph(x.data(), n, d, kR, false);
    const std::string what = describe("clustered", n, d, k, FlatMetric::L2);
    const double oneShot = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR, what + " one add");

    auto merged = [&](const std::vector<int64_t>& parts, const std::string& label) {
        GpuKnnGraphGNND index(&res, d, k);
        int64_t off = 0;
        for (int64_t p : parts) {
            index.add(p, x.data() + size_t(off) * d);
            off += p;
            EXPECT_EQ(index.ntotal, off) << label;
        }
        const auto& log = index.getBuildLog();
        const auto merges = std::count_if(log.begin(), log.end(), [](const auto& s) { return s.merge; });
        EXPECT_GT(merges, 0) << label << ": no merge iteration in the build log";
        EXPECT_GT(int64_t(log.size()), merges) << label << ": no build iteration in the build log";
        const double r = checkIndex(index, x, ref.data(), kR, label);
        std::printf("[gnnd] %s: recall@10 %.4f (one add: %.4f)\n", label.c_str(), r, oneShot);
        return r;
    };
    const double two = merged({n / 2, n / 2}, what + " two adds");
    EXPECT_GE(two, oneShot - 0.01) << what;
    const double three = merged({n * 8 / 20, n * 7 / 20, n - n * 15 / 20}, what + " three adds");
    EXPECT_GE(three, oneShot - 0.01) << what;
    EXPECT_GE(three, 0.95) << what;
}
