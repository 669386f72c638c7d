#include "faiss_ext/gpu/impl/gnnd/FileBuildProgress.h"

#include <algorithm>
#include <cstdio>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

FileBuildProgress::FileBuildProgress(int shards, int merges, int workers, bool verbose,
                                     const char* who)
        : shards_(shards),
          merges_(merges),
          workers_(std::max(1, workers)),
          verbose_(verbose),
          who_(who),
          t0_(std::chrono::steady_clock::now()) {}

double FileBuildProgress::elapsed_() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

double FileBuildProgress::secondsLeft_() const {
    const double perBuild = built_ ? buildSeconds_ / built_ : 0;
    const double perMerge = merged_ ? mergeSeconds_ / merged_ : 2 * perBuild;
    const double work = (shards_ - built_) * perBuild + (merges_ - merged_) * perMerge;
    return work / workers_;
}

void FileBuildProgress::record_(GnndFileBuildStep s, const char* what) {
    s.finishedAt = elapsed_();
    s.secondsLeft = secondsLeft_();
    steps_.push_back(s);
    if (!verbose_) return;
    std::printf("%s: GPU %d %s in %.2f s; %.1f s elapsed, about %.1f s left\n", who_, s.device,
                what, s.seconds, s.finishedAt, s.secondsLeft);
    std::fflush(stdout);
}

void FileBuildProgress::shardBuilt(int shard, int device, int64_t rows, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    recordBuild_(GnndFileBuildStep::ShardBuild, shard, device, rows, seconds);
}

void FileBuildProgress::clusterBuilt(int cluster, int device, int64_t rows, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    recordBuild_(GnndFileBuildStep::ClusterBuild, cluster, device, rows, seconds);
}

void FileBuildProgress::recordBuild_(GnndFileBuildStep::Kind kind, int index, int device,
                                      int64_t rows, double seconds) {
    ++built_;
    buildSeconds_ += seconds;
    GnndFileBuildStep s;
    s.kind = kind;
    s.shardA = index;
    s.device = device;
    s.seconds = seconds;
    char what[128];
    std::snprintf(what, sizeof(what), "built %s %d (%d/%d, %lld vectors)",
                  kind == GnndFileBuildStep::ClusterBuild ? "cluster" : "shard", index, built_,
                  shards_, (long long)rows);
    record_(s, what);
}

void FileBuildProgress::pairMerged(int a, int b, int device, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    recordMerge_(a, b, device, seconds, "shards");
}

void FileBuildProgress::clustersMerged(int a, int b, int device, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    recordMerge_(a, b, device, seconds, "clusters");
}

void FileBuildProgress::recordMerge_(int a, int b, int device, double seconds, const char* what) {
    ++merged_;
    mergeSeconds_ += seconds;
    GnndFileBuildStep s;
    s.kind = GnndFileBuildStep::Merge;
    s.shardA = a;
    s.shardB = b;
    s.device = device;
    s.seconds = seconds;
    char line[128];
    std::snprintf(line, sizeof(line), "merged %s %d and %d (%d/%d)", what, a, b, merged_,
                  merges_);
    record_(s, line);
}

std::vector<GnndFileBuildStep> FileBuildProgress::steps() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return steps_;
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
