// Progress of gnndBuildFromFile (GnndOutOfCore.h): every shard build, every
// merge and every cluster build (partitioned schedule) is recorded as a step, with the time it took, when it ended,
// and the estimate of the time then left; with `verbose` each step is also
// printed. The estimate: the steps left of each kind times the mean time of
// that kind so far (a merge, before the first one ends, counted as twice a
// shard build: it joins two shards), divided by the workers. Thread safe
// (the workers of a build report from their own threads).
#pragma once

#include "faiss_ext/gpu/GnndOutOfCoreOptions.h"

#include <chrono>
#include <mutex>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

class FileBuildProgress {
public:
    /// A build of `shards` shards and `merges` merges on `workers` workers.
    FileBuildProgress(int shards, int merges, int workers, bool verbose,
                      const char* who = "gnndBuildFromFile");

    /// Shard `shard` (`rows` vectors) was built on `device` in `seconds`.
    void shardBuilt(int shard, int device, int64_t rows, double seconds);

    /// Cluster `cluster` (`rows` vectors) of a partitioned build was built
    /// and folded on `device` in `seconds` (counted as a build: `shards` is
    /// then the number of clusters).
    void clusterBuilt(int cluster, int device, int64_t rows, double seconds);

    /// Shards a and b were merged on `device` in `seconds`.
    void pairMerged(int a, int b, int device, double seconds);

    /// Clusters a and b of a partitioned build (or a piece of each) were
    /// merged and folded on `device` in `seconds` (neighbour merges).
    void clustersMerged(int a, int b, int device, double seconds);

    /// The steps so far, in the order they ended.
    std::vector<GnndFileBuildStep> steps() const;

private:
    double elapsed_() const;
    double secondsLeft_() const;
    void record_(GnndFileBuildStep s, const char* what);
    void recordMerge_(int a, int b, int device, double seconds, const char* what);
    void recordBuild_(GnndFileBuildStep::Kind kind, int index, int device, int64_t rows,
                       double seconds);

    const int shards_, merges_, workers_;
    const bool verbose_;
    const char* const who_;  ///< the build, in verbose lines
    const std::chrono::steady_clock::time_point t0_;
    mutable std::mutex mutex_;
    std::vector<GnndFileBuildStep> steps_;
    int built_ = 0, merged_ = 0;
    double buildSeconds_ = 0, mergeSeconds_ = 0;
};

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
