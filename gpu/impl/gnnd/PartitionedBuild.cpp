#include "faiss_ext/gpu/impl/gnnd/PartitionedBuild.h"

#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/gnnd/ClusterGather.h"
#include "faiss_ext/gpu/impl/gnnd/ExactClusterLists.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildProgress.h"
#include "faiss_ext/gpu/impl/gnnd/FilePartition.h"
#include "faiss_ext/gpu/impl/gnnd/NeighbourMerges.h"
#include "faiss_ext/gpu/impl/gnnd/PartitionPlan.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <future>
#include <limits>
#include <mutex>
#include <utility>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

/// One worker's device buffers for a GNND build of up to `capacity` rows
/// (none for exact clusters, whose search allocates its own), its stream,
/// and two host buffers for the lists (one folding while the next cluster
/// builds).
struct ClusterWorker {
    int device = 0;
    GpuResources* res = nullptr;
    cudaStream_t stream = nullptr;
    DeviceVector<float> x, norms, dists;
    DeviceVector<int> ids;
    std::vector<int> hostIds[2];
    std::vector<float> hostDists[2];

    ClusterWorker(int dev, GpuResources* r, int64_t capacity, int d, int K, bool exact)
            : device(dev), res(r) {
        DeviceScope scope(device);
        FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        if (exact) return;
        const char* who = "gnndBuildFromFile (partitioned)";
        x.allocate(res, device, size_t(capacity) * d, who, "cluster vectors");
        norms.allocate(res, device, size_t(capacity), who, "cluster norms");
        ids.allocate(res, device, size_t(capacity) * K, who, "cluster graph ids");
        dists.allocate(res, device, size_t(capacity) * K, who, "cluster graph distances");
    }
    ~ClusterWorker() {
        DeviceScope scope(device);
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }

    /// GNND of the m rows of `vectors` (prepared for the metric here); the
    /// lists (ids local to the cluster) into host buffer `slot`.
    void build(const std::vector<float>& vectors, int64_t m, int d, FlatMetric metric,
               const Params& p, int slot) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(x.data(), vectors.data(), sizeof(float) * m * d,
                                             cudaMemcpyHostToDevice, stream));
        prepareVectorsDevice(metric, x.data(), m, d, stream);
        rowSquaredNorms(x.data(), m, d, norms.data(), stream);
        gnnd::build(res, device, stream, x.data(), norms.data(), m, d, p, 0, ids.data(),
                    dists.data(), nullptr);
        hostIds[slot].resize(size_t(m) * p.K);
        hostDists[slot].resize(size_t(m) * p.K);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostIds[slot].data(), ids.data(),
                                             sizeof(int) * hostIds[slot].size(),
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostDists[slot].data(), dists.data(),
                                             sizeof(float) * hostDists[slot].size(),
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }

    /// Exact k-NN lists (k wide) of the m rows among themselves into host
    /// buffer `slot` (ExactClusterLists.h).
    void buildExact(const std::vector<float>& vectors, int64_t m, int d, FlatMetric metric, int k,
                    int slot) {
        exactClusterLists(res, device, vectors.data(), m, d, metric, k, hostIds[slot],
                          hostDists[slot]);
    }
};

/// Auto builds clusters exactly when their size is the build's own choice
/// (kExactClusterRows); a cluster count fixed by shardSize may make
/// clusters of any size, whose exact search would grow with its square.
bool usesExactClusters(GnndClusterBuild b, int shards) {
    return b == GnndClusterBuild::Exact || (b == GnndClusterBuild::Auto && shards == 0);
}

class PartitionedBuilder {
public:
    explicit PartitionedBuilder(const PartitionedInput& in)
            : in_(in),
              opt_(*in.options),
              n_(in.file->n()),
              d_(in.file->d()),
              K_(in.params.K),
              exact_(usesExactClusters(in.options->clusterBuild, in.shards)),
              workers_(in.devices.size()) {}

    GnndFileBuildReport run() {
        const auto t0 = Clock::now();
        GnndFileBuildReport rep;
        plan_(rep);
        if (!in_.listsOut) {
            probeDir(dirOf(in_.graphPath));
            if (!opt_.distancesPath.empty()) probeDir(dirOf(opt_.distancesPath));
        }
        const auto tp = Clock::now();
        groups_ = partitionFile(*in_.file, spec_);
        rowGroups_ = rowClusters(groups_, n_, overlap_);
        rep.partitionSeconds = since(tp);
        rep.clusters = int(groups_.size());
        for (const auto& g : groups_) rep.largestCluster = std::max<int64_t>(rep.largestCluster, g.size());
        const NeighbourMergePlan merges = planMerges_(rep);
        progress_.reset(new FileBuildProgress(rep.clusters, merges.merges,
                                              int(in_.devices.size()), opt_.verbose, in_.who));
        const auto tb = Clock::now();
        initGlobalLists_();
        for (const auto& batch : batches_()) buildBatch_(batch.first, batch.second);
        workers_.clear();  // the cluster builds' device memory, before the merges take theirs
        rep.buildSeconds = since(tb);
        const auto tm = Clock::now();
        rep.merges = runMerges_(merges);
        rep.mergeSeconds = since(tm);
        output_();
        rep.steps = progress_->steps();
        rep.totalSeconds = since(t0);
        if (opt_.verbose) {
            std::printf("%s: %lld x %d, partitioned into %d clusters (%s, overlap "
                        "%d, largest %lld): partition %.2f s, builds %.2f s, %d neighbour merges "
                        "%.2f s, total %.2f s\n",
                        who_(), (long long)n_, d_, rep.clusters,
                        clusterBuildName(rep.clusterBuild),
                        overlap_, (long long)rep.largestCluster,
                        rep.partitionSeconds, rep.buildSeconds, rep.merges, rep.mergeSeconds,
                        rep.totalSeconds);
            std::fflush(stdout);
        }
        return rep;
    }

private:
    const char* who_() const { return in_.who; }

    /// The global lists to the graph file, or moved to in_.listsOut.
    void output_() {
        if (in_.listsOut) {
            in_.listsOut->ids = std::move(globalIds_);
            in_.listsOut->dists = std::move(globalDists_);
            return;
        }
        GraphWriter out(in_.graphPath, opt_.distancesPath, in_.k, in_.params.innerProduct);
        out.write(globalIds_.data(), globalDists_.data(), n_, in_.k);
        out.commit();
    }

    /// Capacity of one build, cluster count, host budget; fills the report's plan.
    void plan_(GnndFileBuildReport& rep) {
        FAISS_THROW_IF_NOT_FMT(n_ < int64_t(std::numeric_limits<int>::max()),
                               "%s: %lld vectors: the partitioned schedule keeps "
                               "int32 ids (fewer than 2^31)",
                               who_(),
                               (long long)n_);
        size_t resident = 0, temp = 0;
        deviceBudget(in_.devices, in_.res, &resident, &temp);
        const int64_t minRows = std::min<int64_t>(n_, int64_t(in_.k) + 1);
        // automatic clusters stay within GNND's quality size (kMaxAutoClusterRows),
        // exact ones within their cost (exactClusterRows)
        const int64_t exactRows = opt_.exactClusterRows > 0 ? opt_.exactClusterRows
                                                            : kExactClusterRows;
        const int64_t maxRows = in_.shards > 0 ? n_ : std::min(n_, kMaxAutoClusterRows);
        const int64_t fits = largestBuildThatFits(minRows, maxRows, d_, in_.params, resident, temp);
        capacity_ = exact_ && in_.shards == 0 ? std::min(fits, exactRows) : fits;
        // exact clusters: a list past its target is kept whole up to
        // kExactCutFactor x the target (and what fits) rather than cut
        largestList_ = exact_ ? std::min(fits, kExactCutFactor * capacity_) : capacity_;
        FAISS_THROW_IF_NOT_FMT(capacity_ > 0,
                               "%s: a GNND build of %lld vectors does not fit the "
                               "device memory limit (%zu bytes resident, %zu temporary)",
                               who_(),
                               (long long)minRows, resident, temp);
        // a merge joins two clusters: up to twice a cluster's rows, in pieces past what fits
        mergeCapacity_ = largestMergeThatFits(2, 2 * largestList_, d_, in_.params, resident, temp);
        // exact clusters join extra clusters only by the closure rule: k-means
        // is asked for clusters of capacity_ rows counting each vector once
        const int clusters = clusterCount(n_, exact_ ? 1 : opt_.overlap, capacity_, in_.shards);
        overlap_ = std::min(opt_.overlap, clusters);
        // clusters below an eighth of the target size are packed together
        const int64_t target = std::max<int64_t>(1, n_ * overlap_ / clusters);
        spec_.clusters = clusters;
        spec_.overlap = overlap_;
        spec_.sampleRows = opt_.sampleRows;
        spec_.capacity = capacity_;
        spec_.cutAbove = largestList_;
        // the closure rule for the clusters the build sizes; a cluster count
        // fixed by shardSize keeps every row in `overlap` clusters
        spec_.closure = exact_ && in_.shards == 0 ? kExactClosure : 0;
        spec_.minRows = std::min(capacity_, std::max<int64_t>(minRows, target / 8));
        spec_.metric = in_.metric;
        spec_.seed = in_.params.seed;
        spec_.verbose = opt_.verbose;
        spec_.who = in_.who;
        spec_.res = in_.res[0];
        spec_.device = in_.devices[0];
        checkHost_();
        rep.n = n_;
        rep.d = d_;
        rep.shards = in_.shards;
        rep.shardSize = in_.shards > 0 ? (n_ + in_.shards - 1) / in_.shards : capacity_;
        rep.buildDegree = K_;
        rep.inHostMemory = true;
        rep.schedule = GnndFileSchedule::Partitioned;
        rep.overlap = overlap_;
        rep.clusterBuild = exact_ ? GnndClusterBuild::Exact : GnndClusterBuild::NNDescent;
    }

    void checkHost_() {
        const size_t budget = hostBudget(opt_.hostMemoryBytes);
        const size_t fixed = partitionedFixedHostBytes(n_, in_.k, overlap_, largestList_, K_,
                                                       int(in_.devices.size()));
        const size_t oneCluster = size_t(largestList_) * d_ * sizeof(float);
        FAISS_THROW_IF_NOT_FMT(fixed + oneCluster <= budget,
                               "%s: the partitioned schedule needs %zu bytes of "
                               "host memory (global lists, memberships and one cluster of %lld "
                               "vectors), more than the host budget of %zu bytes "
                               "(hostMemoryBytes); raise it, or use the all-pairs schedule "
                               "with shard files",
                               who_(),
                               fixed + oneCluster, (long long)largestList_, budget);
        gatherBudget_ = budget - fixed;
        checkMergeResources_();
    }

    /// Whether the neighbour merges can run: a merge of two rows fits the
    /// device, and the merge workers' host buffers and one pair of clusters
    /// fit what the builds leave of the host budget. Refused (before any
    /// work) when neighbourMerges asks for them; Auto runs without them.
    void checkMergeResources_() {
        if (opt_.neighbourMerges == 0) return;
        const int64_t rows = std::max<int64_t>(mergeCapacity_, 2);
        const size_t workerBytes = in_.devices.size() * neighbourMergeHostBytes(n_, rows, d_, K_);
        const size_t pairBytes = 2 * size_t(largestList_) * d_ * sizeof(float);
        mergesFit_ = mergeCapacity_ >= 2 && workerBytes + pairBytes <= gatherBudget_;
        FAISS_THROW_IF_NOT_FMT(mergesFit_ || opt_.neighbourMerges < 0,
                               "%s: neighbourMerges = %d: the merges do not fit "
                               "(a merge of %lld rows on the device; %zu bytes of host memory "
                               "for their buffers and a pair of clusters, %zu left of the host "
                               "budget); raise hostMemoryBytes or set neighbourMerges = 0",
                               who_(),
                               opt_.neighbourMerges, (long long)mergeCapacity_,
                               workerBytes + pairBytes, gatherBudget_);
        if (mergesFit_) mergeGatherBudget_ = gatherBudget_ - workerBytes;
    }

    /// Merges per cluster: neighbourMerges, or for Auto kAutoNeighbourMerges
    /// past kAutoMergeAboveClusters clusters (GnndOutOfCore.h says why).
    int mergesPerCluster_(int clusters) const {
        if (!mergesFit_ || clusters < 2) return 0;
        if (opt_.neighbourMerges >= 0) return opt_.neighbourMerges;
        // exact clusters: the closure assignment covers the boundaries
        if (exact_) return 0;
        return clusters > kAutoMergeAboveClusters ? kAutoNeighbourMerges : 0;
    }

    NeighbourMergePlan planMerges_(GnndFileBuildReport& rep) const {
        const int m = mergesPerCluster_(rep.clusters);
        if (m == 0) return NeighbourMergePlan();
        NeighbourMergePlan plan = planNeighbourMerges(groups_, rowGroups_, overlap_, m,
                                                      mergeCapacity_);
        rep.neighbourMerges = m;
        rep.mergePairs = int(plan.pairs.size());
        return plan;
    }

    int runMerges_(const NeighbourMergePlan& plan) {
        NeighbourMergeInput mi;
        mi.file = in_.file;
        mi.groups = &groups_;
        mi.rowGroups = &rowGroups_;
        mi.overlap = overlap_;
        mi.globalIds = globalIds_.data();
        mi.globalDists = globalDists_.data();
        mi.k = in_.k;
        mi.foldMutex = &foldMutex_;
        mi.metric = in_.metric;
        mi.params = in_.params;
        mi.devices = in_.devices;
        mi.res = in_.res;
        mi.gatherBudget = mergeGatherBudget_;
        mi.progress = progress_.get();
        mi.failed = &failed_;
        return runNeighbourMerges(mi, plan);
    }

    void initGlobalLists_() {
        const size_t total = size_t(n_) * in_.k;
        globalIds_.resize(total);
        globalDists_.resize(total);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < int64_t(total); ++i) {
            globalIds_[i] = -1;
            globalDists_[i] = std::numeric_limits<float>::infinity();
        }
    }

    /// Consecutive ranges [g0, g1) of clusters whose vectors fit the gather budget.
    std::vector<std::pair<int, int>> batches_() const {
        std::vector<std::pair<int, int>> out;
        int g0 = 0;
        size_t bytes = 0;
        for (int g = 0; g < int(groups_.size()); ++g) {
            const size_t b = groups_[g].size() * d_ * sizeof(float);
            if (g > g0 && bytes + b > gatherBudget_) {
                out.emplace_back(g0, g);
                g0 = g;
                bytes = 0;
            }
            bytes += b;
        }
        out.emplace_back(g0, int(groups_.size()));
        return out;
    }

    /// Gathers clusters [g0, g1), then builds and folds them on the workers.
    void buildBatch_(int g0, int g1) {
        std::vector<int> which;
        for (int g = g0; g < g1; ++g) which.push_back(g);
        std::vector<std::vector<float>> buf =
                gatherClusters(*in_.file, groups_, rowGroups_, overlap_, which);
        std::atomic<int> next(g0);
        runOnWorkers(in_.devices, &failed_, [&](size_t w) {
            if (!workers_[w]) {
                workers_[w].reset(new ClusterWorker(in_.devices[w], in_.res[w].get(), largestList_,
                                                    d_, K_, exact_));
            }
            ClusterWorker& wk = *workers_[w];
            std::future<void> folding;
            int slot = 0;
            for (int g = next++; g < g1 && !failed_; g = next++, slot ^= 1) {
                const auto t = Clock::now();
                Params p = in_.params;
                p.seed = in_.params.seed + 7919 * uint64_t(g);  // independent samples per cluster
                const int64_t m = int64_t(groups_[g].size());
                if (exact_) {
                    wk.buildExact(buf[g - g0], m, d_, in_.metric, in_.k, slot);
                } else {
                    wk.build(buf[g - g0], m, d_, in_.metric, p, slot);
                }
                std::vector<float>().swap(buf[g - g0]);
                if (folding.valid()) folding.get();
                folding = std::async(std::launch::async, [this, &wk, g, m, slot, t] {
                    fold_(g, wk.hostIds[slot].data(), wk.hostDists[slot].data());
                    progress_->clusterBuilt(g, wk.device, m, since(t));
                });
            }
            if (folding.valid()) folding.get();
        });
    }

    void fold_(int g, const int* ids, const float* dists) {
        // clusters share rows (overlap): one fold at a time, rows in parallel
        std::lock_guard<std::mutex> lock(foldMutex_);
        foldCluster(globalIds_.data(), globalDists_.data(), in_.k, groups_[g], ids, dists,
                    exact_ ? in_.k : K_);
    }

    const PartitionedInput& in_;
    const GnndFileBuildOptions& opt_;
    const int64_t n_;
    const int d_;
    const int K_;
    const bool exact_;  ///< clusters built by exact search (else GNND)
    int64_t capacity_ = 0;     ///< the target (k-means) and, for GNND, the most rows of a build
    int64_t largestList_ = 0;  ///< the most rows of one cluster (exact: past the target)
    int64_t mergeCapacity_ = 0;  ///< most rows of one neighbour merge
    bool mergesFit_ = false;
    int overlap_ = 1;
    size_t gatherBudget_ = 0;
    size_t mergeGatherBudget_ = 0;  ///< host bytes for the clusters the merges gather at once
    PartitionSpec spec_;
    std::vector<std::vector<int>> groups_;
    std::vector<int> rowGroups_;
    std::vector<int> globalIds_;
    std::vector<float> globalDists_;
    std::vector<std::unique_ptr<ClusterWorker>> workers_;
    std::unique_ptr<FileBuildProgress> progress_;
    std::mutex foldMutex_;
    std::atomic<bool> failed_{false};
};

}  // namespace

size_t partitionedFixedHostBytes(int64_t n, int k, int overlap, int64_t capacity, int K,
                                 int workers) {
    return size_t(n) * k * (sizeof(int) + sizeof(float))      // global lists
           + 2 * size_t(n) * overlap * sizeof(int)              // member lists, row -> clusters
           + size_t(workers) * 2 * size_t(capacity) * K * (sizeof(int) + sizeof(float));
}

GnndFileBuildReport buildPartitioned(const PartitionedInput& in) {
    FAISS_THROW_IF_NOT_MSG(in.file && in.options && !in.devices.empty() &&
                                   in.res.size() == in.devices.size(),
                           "buildPartitioned: incomplete input");
    PartitionedBuilder b(in);
    return b.run();
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
