// gnndBuildFromFile at 4 and 8 shards keeps the recall of the in-memory
// build (its longer lists while merging: GnndFileBuildOptions::config);
// odd shard counts merge every pair once; the report's progress steps; a
// failed build leaves no partial output and an older graph untouched.
#include "GnndTestUtils.h"
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GnndFileBuildOptions;
using faiss_ext::gpu::GnndFileBuildReport;
using faiss_ext::gpu::GnndFileBuildStep;
using faiss_ext::gpu::StandardGpuResources;
using faiss_ext::gpu::VectorFileFormat;
using namespace faiss_ext::test;
using namespace faiss_ext::gnndtest;

namespace {

struct ShardedSet {
    int64_t n = sized<int64_t>(64000, 4000);
    int d = 32, k = 32;
    std::vector<float> x;
    std::vector<int64_t> ref;
    TempDir tmp;
    std::string fvecs;
    double memRecall = 0;

    ShardedSet() {
        x = clusteredVectors(n, d, 200, kSeed + 31);
        ref = referenceGraph(x.data(), n, d, kR, false);
        fvecs = tmp.file("base.fvecs");
        writeFvecs(fvecs, x.data(), n, d);
        StandardGpuResources res;
        memRecall = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR,
                                  describe("in memory", n, d, k, FlatMetric::L2));
    }

    GnndFileBuildReport build(int shards, const std::string& out) const {
        StandardGpuResources res;
        GnndFileBuildOptions opt;
        opt.shardSize = (n + shards - 1) / shards;
        opt.schedule = faiss_ext::gpu::GnndFileSchedule::AllPairs;  // the schedule under test
        return faiss_ext::gpu::gnndBuildFromFile({&res}, fvecs, VectorFileFormat::Fvecs, d, k,
                                                 FlatMetric::L2, out, opt);
    }
};

/// Every pair of shards merged exactly once, and one build per shard.
void expectEveryPairOnce(const GnndFileBuildReport& rep) {
    std::set<std::pair<int, int>> pairs;
    std::set<int> built;
    for (const GnndFileBuildStep& s : rep.steps) {
        EXPECT_GE(s.seconds, 0);
        EXPECT_GE(s.secondsLeft, 0);
        if (s.kind == GnndFileBuildStep::ShardBuild) {
            EXPECT_TRUE(built.insert(s.shardA).second) << "shard " << s.shardA << " built twice";
        } else {
            ASSERT_LT(s.shardA, s.shardB);
            EXPECT_TRUE(pairs.insert({s.shardA, s.shardB}).second)
                    << "shards " << s.shardA << " and " << s.shardB << " merged twice";
        }
    }
    EXPECT_EQ(int(built.size()), rep.shards);
    EXPECT_EQ(int(pairs.size()), rep.shards * (rep.shards - 1) / 2);
    EXPECT_EQ(rep.merges, int(pairs.size()));
    ASSERT_FALSE(rep.steps.empty());
    EXPECT_EQ(rep.steps.back().secondsLeft, 0) << "nothing is left after the last step";
    for (size_t i = 1; i < rep.steps.size(); ++i)
        EXPECT_GE(rep.steps[i].finishedAt, rep.steps[i - 1].finishedAt);
}

}  // namespace

TEST(GpuGnndOutOfCoreQuality, FourAndEightShardsKeepTheInMemoryRecall) {
    FAISS_EXT_REQUIRE_GPU();
    ShardedSet set;
    for (int shards : {4, 8}) {
        const std::string out = set.tmp.file("graph_" + std::to_string(shards) + ".ivecs");
        const GnndFileBuildReport rep = set.build(shards, out);
        const std::string what = std::to_string(shards) + " shards";
        EXPECT_EQ(rep.shards, shards) << what;
        EXPECT_EQ(rep.buildDegree, 64) << what << ": twice k = 32 while merging";
        expectEveryPairOnce(rep);
        const double r = fileGraphRecall(out, set.x, set.n, set.d, set.k, set.ref, what);
        // the bar: within 0.005 of the one-shot build
        EXPECT_GE(r, set.memRecall - 0.005) << what << " (in memory: " << set.memRecall << ")";
    }
}

TEST(GpuGnndOutOfCoreQuality, OddShardCountsMergeEveryPairOnce) {
    FAISS_EXT_REQUIRE_GPU();
    ShardedSet set;
    for (int shards : {3, 5}) {
        const std::string out = set.tmp.file("graph_odd_" + std::to_string(shards) + ".ivecs");
        const GnndFileBuildReport rep = set.build(shards, out);
        const std::string what = std::to_string(shards) + " shards";
        EXPECT_EQ(rep.shards, shards) << what;
        expectEveryPairOnce(rep);
        const double r = fileGraphRecall(out, set.x, set.n, set.d, set.k, set.ref, what);
        EXPECT_GE(r, set.memRecall - 0.005) << what << " (in memory: " << set.memRecall << ")";
    }
}

TEST(GpuGnndOutOfCoreQuality, FailedBuildLeavesNoPartialOutput) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t n = 3000;
    const int d = 16, k = 16;
    auto x = clusteredVectors(n, d, 20, kSeed + 41);
    TempDir tmp;
    const std::string fvecs = tmp.file("base.fvecs");
    writeFvecs(fvecs, x.data(), n, d);
    // an older graph at the output path
    const std::string out = tmp.file("graph.ivecs");
    const std::string older = "an older graph";
    std::ofstream(out) << older;
    // the distances' path is a directory: the build runs to the end and
    // fails when it gives the distances their name
    const std::string distDir = tmp.file("dist_is_a_directory");
    ASSERT_TRUE(std::filesystem::create_directory(distDir));
    StandardGpuResources res;
    GnndFileBuildOptions opt;
    opt.shardSize = n / 3;
    opt.schedule = faiss_ext::gpu::GnndFileSchedule::AllPairs;
    opt.distancesPath = distDir;
    EXPECT_THROW(faiss_ext::gpu::gnndBuildFromFile({&res}, fvecs, VectorFileFormat::Fvecs, d, k,
                                                   FlatMetric::L2, out, opt),
                 faiss::FaissException);
    std::ifstream in(out);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(content, older) << "the failed build replaced the older graph";
    EXPECT_TRUE(std::filesystem::is_directory(distDir));
    for (const auto& e : std::filesystem::directory_iterator(tmp.path))
        EXPECT_EQ(e.path().string().find(".partial"), std::string::npos)
                << e.path() << " left behind";
    // the same build with a usable distances path replaces the graph
    opt.distancesPath = tmp.file("dist.fvecs");
    GnndFileBuildReport rep = faiss_ext::gpu::gnndBuildFromFile(
            {&res}, fvecs, VectorFileFormat::Fvecs, d, k, FlatMetric::L2, out, opt);
    EXPECT_EQ(rep.shards, 3);
    int64_t gn = 0;
    int gk = 0;
    EXPECT_EQ(faiss_ext::gpu::readGraphIvecs(out, &gn, &gk).size(), size_t(n) * k);
}
