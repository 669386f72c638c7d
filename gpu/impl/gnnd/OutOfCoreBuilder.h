// The engine of gnndBuildFromFile (GnndOutOfCore.h): the choice of the
// schedule, and the all-pairs schedule itself. The file is cut into
// balanced shards that fit a device (two shards' vectors, lists and own
// graphs per worker); GNND builds each shard's graph; GGM merges every pair
// of shards once, round by round (each round a set of disjoint pairs), on
// one worker thread per device entry, the next pair's data read (and the
// last pair's graphs written) by a host thread while the GPU merges. The
// shards live in a ShardStore between the steps (ShardStore.h), each
// worker's device buffers in a ShardWorker (ShardWorker.h). The partitioned
// schedule is PartitionedBuild.h.
//   OutOfCoreBuilder.cpp  setup, shard size, schedule, run, report, output
//   AllPairsSteps.cpp     the shard builds (one per worker, or one split
//                         over all devices) and the pair merges
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOutOfCoreOptions.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildProgress.h"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"
#include "faiss_ext/gpu/impl/gnnd/ShardStore.h"
#include "faiss_ext/gpu/impl/gnnd/ShardWorker.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// gnndBuildFromFile (GnndOutOfCore.h), its options checked: GNND builds of
/// the shards, then GGM merges of every pair of shards, round by round, on
/// one thread per device entry; the shards in a ShardStore between the
/// steps. Or the partitioned schedule (runPartitioned).
class OutOfCoreBuilder {
public:
    OutOfCoreBuilder(const std::vector<GpuResourcesProvider*>& providers, const VectorFile& file,
                     int k, FlatMetric metric, const GnndFileBuildOptions& opt,
                     const std::string& graphPath);

    /// The schedule that runs: opt.schedule, or for Auto AllPairs up to
    /// kAutoAllPairsMaxShards shards and kAutoPartitionAbove vectors, and
    /// when the partitioned schedule's lists and memberships would not fit
    /// the host budget (AllPairs can keep its shards in files), Partitioned
    /// otherwise.
    GnndFileSchedule schedule() const;

    /// The partitioned schedule (PartitionedBuild.h) with this build's
    /// devices and parameters; a given shardSize sets the cluster count.
    GnndFileBuildReport runPartitioned() const;

    /// The all-pairs schedule.
    GnndFileBuildReport run();

private:
    size_t pairResidentBytes_(int64_t S) const;
    size_t pairTempBytes_(int64_t S) const;
    void chooseShardSize_();

    /// A worker for entry w of devices_ with room for `rows` vectors (-1: a
    /// pair of shards) and, with `lists`, their lists and own graphs.
    std::unique_ptr<ShardWorker> makeWorker_(size_t w, int64_t rows = -1, bool lists = true) const;

    /// Runs fn(worker index) on one thread per device; rethrows the first error.
    template <typename Fn>
    void onWorkers_(Fn fn) {
        runOnWorkers(devices_, &failed_, fn);
    }

    // AllPairsSteps.cpp
    /// Every shard's GNND build, one shard at a time per worker.
    void buildShards_();
    /// The one shard built by all the distinct devices at once
    /// (gnnd::buildSplit): every device gets the vectors; the lists come
    /// back from the first.
    void buildSplit_(const std::vector<int>& distinct);
    /// GGM merges of every pair of shards; returns the merges run.
    int mergeAll_();

    void writeOutput_();

    const VectorFile& file_;
    int k_;
    FlatMetric metric_;
    GnndFileBuildOptions opt_;
    std::string graphPath_;
    std::vector<int> devices_;
    std::vector<std::shared_ptr<GpuResources>> res_;
    Params params_;
    int K_ = 0;
    int d_ = 0;
    int64_t n_ = 0;
    int64_t S_ = 0;
    int nShards_ = 0;
    std::string workDir_;
    std::string outDir_;
    std::unique_ptr<ShardStore> shards_;
    std::unique_ptr<FileBuildProgress> progress_;
    std::atomic<bool> failed_{false};
};

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
