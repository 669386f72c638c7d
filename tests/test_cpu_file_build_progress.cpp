// FileBuildProgress (gnndBuildFromFile's progress, gpu/impl/gnnd): the steps
// it records and its estimate of the time left, which needs no GPU.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "faiss_ext/gpu/impl/gnnd/FileBuildProgress.h"

using faiss_ext::gpu::GnndFileBuildStep;
using faiss_ext::gpu::gnnd::FileBuildProgress;

TEST(CpuFileBuildProgress, RecordsEveryStepInOrder) {
    FileBuildProgress p(3, 3, 1, false);
    p.shardBuilt(0, 0, 100, 1.0);
    p.shardBuilt(2, 0, 100, 1.0);
    p.pairMerged(0, 2, 1, 2.0);
    std::vector<GnndFileBuildStep> s = p.steps();
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].kind, GnndFileBuildStep::ShardBuild);
    EXPECT_EQ(s[1].shardA, 2);
    EXPECT_EQ(s[2].kind, GnndFileBuildStep::Merge);
    EXPECT_EQ(s[2].shardA, 0);
    EXPECT_EQ(s[2].shardB, 2);
    EXPECT_EQ(s[2].device, 1);
    EXPECT_DOUBLE_EQ(s[2].seconds, 2.0);
    for (size_t i = 1; i < s.size(); ++i) EXPECT_GE(s[i].finishedAt, s[i - 1].finishedAt);
}

TEST(CpuFileBuildProgress, EstimatesTheTimeLeftFromTheMeanStep) {
    // 4 shards, 6 merges, 2 workers
    FileBuildProgress p(4, 6, 2, false);
    p.shardBuilt(0, 0, 10, 2.0);
    // 3 builds of 2 s left, and 6 merges counted as two builds each (4 s)
    // before any merge ended: (3 * 2 + 6 * 4) / 2 workers
    EXPECT_DOUBLE_EQ(p.steps().back().secondsLeft, 15.0);
    p.shardBuilt(1, 1, 10, 4.0);
    // mean build 3 s: (2 * 3 + 6 * 6) / 2
    EXPECT_DOUBLE_EQ(p.steps().back().secondsLeft, 21.0);
    p.shardBuilt(2, 0, 10, 3.0);
    p.shardBuilt(3, 1, 10, 3.0);
    p.pairMerged(0, 1, 0, 1.0);
    // all built; 5 merges of the measured 1 s left: 5 / 2
    EXPECT_DOUBLE_EQ(p.steps().back().secondsLeft, 2.5);
    for (int i = 0; i < 5; ++i) p.pairMerged(i % 4, 3, 0, 1.0);
    EXPECT_DOUBLE_EQ(p.steps().back().secondsLeft, 0.0);
}

TEST(CpuFileBuildProgress, TakesStepsFromSeveralThreads) {
    const int shards = 64;
    FileBuildProgress p(shards, 0, 4, false);
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w)
        workers.emplace_back([&p, w] {
            for (int i = w; i < shards; i += 4) p.shardBuilt(i, w, 1, 0.001);
        });
    for (auto& t : workers) t.join();
    std::vector<GnndFileBuildStep> s = p.steps();
    ASSERT_EQ(int(s.size()), shards);
    std::vector<bool> seen(shards, false);
    for (const auto& step : s) {
        ASSERT_TRUE(step.shardA >= 0 && step.shardA < shards);
        EXPECT_FALSE(seen[step.shardA]) << "shard " << step.shardA << " twice";
        seen[step.shardA] = true;
    }
    EXPECT_DOUBLE_EQ(s.back().secondsLeft, 0.0);
}

TEST(CpuFileBuildProgress, CountsClusterBuildsAsBuilds) {
    // a partitioned build: 3 clusters, no merges, one worker
    FileBuildProgress p(3, 0, 1, false);
    p.clusterBuilt(2, 0, 500, 2.0);
    std::vector<GnndFileBuildStep> s = p.steps();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].kind, GnndFileBuildStep::ClusterBuild);
    EXPECT_EQ(s[0].shardA, 2);
    EXPECT_EQ(s[0].shardB, -1);
    EXPECT_DOUBLE_EQ(s[0].secondsLeft, 4.0);  // two clusters of the mean 2 s left
    p.clusterBuilt(0, 0, 500, 1.0);
    p.clusterBuilt(1, 0, 500, 1.0);
    EXPECT_DOUBLE_EQ(p.steps().back().secondsLeft, 0.0);
}
