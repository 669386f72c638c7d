#include "faiss_ext/gpu/impl/gnnd/OutOfCoreBuilder.h"

#include "faiss_ext/gpu/impl/gnnd/PartitionedBuild.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstdio>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

OutOfCoreBuilder::OutOfCoreBuilder(const std::vector<GpuResourcesProvider*>& providers,
                                   const VectorFile& file, int k, FlatMetric metric,
                                   const GnndFileBuildOptions& opt, const std::string& graphPath)
        : file_(file), k_(k), metric_(metric), opt_(opt), graphPath_(graphPath) {
    devices_ = opt.devices.empty() ? std::vector<int>{0} : opt.devices;
    FAISS_THROW_IF_NOT_MSG(!providers.empty(), "gnndBuildFromFile: no resources provider");
    FAISS_THROW_IF_NOT_FMT(providers.size() == 1 || providers.size() == devices_.size(),
                           "gnndBuildFromFile: %zu providers for %zu devices (give one, or "
                           "one per device)",
                           providers.size(), devices_.size());
    for (size_t w = 0; w < devices_.size(); ++w) {
        checkDevice(devices_[w]);
        auto* prov = providers.size() == 1 ? providers[0] : providers[w];
        FAISS_THROW_IF_NOT_MSG(prov, "gnndBuildFromFile: null resources provider");
        auto res = prov->getResources();
        FAISS_THROW_IF_NOT_MSG(res, "gnndBuildFromFile: the provider returned no resources");
        res->initializeForDevice(devices_[w]);
        res_.push_back(res);
    }
    const auto& c = opt.config;
    K_ = resolveBuildDegree(k, c.buildDegree > 0 ? c.buildDegree : fileBuildDegree(k));
    params_ = makeParams(c, K_, toFaissMetric(metric) == faiss::METRIC_INNER_PRODUCT,
                         opt.verbose);
    d_ = file.d();
    n_ = file.n();
    FAISS_THROW_IF_NOT_FMT(n_ > k, "gnndBuildFromFile: %lld vectors are too few for k = %d",
                           (long long)n_, k);
    chooseShardSize_();
    workDir_ = opt.workDir;
    outDir_ = dirOf(graphPath);
    if (workDir_.empty()) workDir_ = outDir_;
    // every shard in host memory when it fits the budget
    const size_t need = size_t(n_) * (sizeof(float) * d_ + 2 * (sizeof(int) + sizeof(float)) * K_);
    const size_t budget = hostBudget(opt.hostMemoryBytes);
    shards_.reset(new ShardStore(file, S_, nShards_, K_, need <= budget, workDir_));
}

GnndFileSchedule OutOfCoreBuilder::schedule() const {
    if (opt_.schedule != GnndFileSchedule::Auto) return opt_.schedule;
    if (nShards_ <= kAutoAllPairsMaxShards && n_ <= kAutoPartitionAbove)
        return GnndFileSchedule::AllPairs;
    const size_t lists = size_t(n_) * k_ * (sizeof(int) + sizeof(float)) +
                         2 * size_t(n_) * opt_.overlap * sizeof(int);
    return lists <= hostBudget(opt_.hostMemoryBytes) ? GnndFileSchedule::Partitioned
                                                     : GnndFileSchedule::AllPairs;
}

GnndFileBuildReport OutOfCoreBuilder::runPartitioned() const {
    PartitionedInput in;
    in.file = &file_;
    in.k = k_;
    in.metric = metric_;
    in.options = &opt_;
    in.graphPath = graphPath_;
    in.devices = devices_;
    in.res = res_;
    in.params = params_;
    in.shards = opt_.shardSize > 0 ? nShards_ : 0;
    return buildPartitioned(in);
}

GnndFileBuildReport OutOfCoreBuilder::run() {
    auto t0 = Clock::now();
    GnndFileBuildReport rep;
    rep.n = n_;
    rep.d = d_;
    rep.shardSize = S_;
    rep.shards = nShards_;
    rep.inHostMemory = shards_->inRam();
    rep.buildDegree = K_;
    progress_.reset(new FileBuildProgress(nShards_, nShards_ * (nShards_ - 1) / 2,
                                          int(devices_.size()), opt_.verbose));
    // probe the output's directory (and the work directory when shard
    // files are used) before any GPU work; the output itself is not
    // touched before the graph is complete
    probeDir(outDir_);
    if (!shards_->inRam() && workDir_ != outDir_) probeDir(workDir_);
    if (!opt_.distancesPath.empty()) probeDir(dirOf(opt_.distancesPath));
    try {
        auto tb = Clock::now();
        std::vector<int> distinct;
        for (int dv : devices_)
            if (std::find(distinct.begin(), distinct.end(), dv) == distinct.end())
                distinct.push_back(dv);
        if (opt_.splitOneShard && nShards_ == 1 && distinct.size() > 1) {
            buildSplit_(distinct);
            rep.buildDevices = int(distinct.size());
        } else {
            buildShards_();
        }
        rep.buildSeconds = since(tb);
        auto tm = Clock::now();
        rep.merges = mergeAll_();
        rep.mergeSeconds = since(tm);
        writeOutput_();
    } catch (...) {
        shards_->removeFiles();
        throw;
    }
    shards_->removeFiles();
    rep.totalSeconds = since(t0);
    rep.steps = progress_->steps();
    if (opt_.verbose) {
        std::printf("gnndBuildFromFile: %lld x %d, %d shards of %lld (%s), %d merges: build "
                    "%.2f s, merges %.2f s, total %.2f s\n",
                    (long long)n_, d_, nShards_, (long long)S_,
                    shards_->inRam() ? "kept in host memory" : "shard files", rep.merges,
                    rep.buildSeconds, rep.mergeSeconds, rep.totalSeconds);
        std::fflush(stdout);
    }
    return rep;
}

size_t OutOfCoreBuilder::pairResidentBytes_(int64_t S) const {
    return size_t(2 * S) * (sizeof(float) * (d_ + 1) + 2 * (sizeof(int) + sizeof(float)) * K_);
}

size_t OutOfCoreBuilder::pairTempBytes_(int64_t S) const {
    return size_t(2 * S) * K_ * (sizeof(uint32_t) + sizeof(float)) +
           mergeTempBytes(2 * S, params_) + (size_t(1) << 20);
}

void OutOfCoreBuilder::chooseShardSize_() {
    int64_t minShard = K_ + 1;
    if (opt_.shardSize > 0) {
        FAISS_THROW_IF_NOT_FMT(opt_.shardSize > k_,
                               "gnndBuildFromFile: shardSize %lld must be > k = %d",
                               (long long)opt_.shardSize, k_);
        S_ = std::min<int64_t>(opt_.shardSize, n_);
    } else {
        size_t budget = 0, temp = 0;
        deviceBudget(devices_, res_, &budget, &temp);
        int64_t lo = minShard, hi = n_;
        FAISS_THROW_IF_NOT_FMT(pairResidentBytes_(lo) <= budget && pairTempBytes_(lo) <= temp,
                               "gnndBuildFromFile: even shards of %lld vectors do not fit the "
                               "device memory limit (%zu bytes resident, %zu temporary)",
                               (long long)lo, budget, temp);
        while (lo < hi) {  // the largest S that fits
            int64_t mid = lo + (hi - lo + 1) / 2;
            if (pairResidentBytes_(mid) <= budget && pairTempBytes_(mid) <= temp) lo = mid;
            else hi = mid - 1;
        }
        S_ = lo;
    }
    nShards_ = int((n_ + S_ - 1) / S_);
    // balance: equal shards of at most S_
    S_ = (n_ + nShards_ - 1) / nShards_;
    FAISS_THROW_IF_NOT_FMT(n_ - (nShards_ - 1) * S_ > k_ || nShards_ == 1,
                           "gnndBuildFromFile: the last shard would hold %lld vectors, too "
                           "few for k = %d (use another shardSize)",
                           (long long)(n_ - (nShards_ - 1) * S_), k_);
}

std::unique_ptr<ShardWorker> OutOfCoreBuilder::makeWorker_(size_t w, int64_t rows,
                                                           bool lists) const {
    return ShardWorker::make(devices_[w], res_[w].get(), d_, K_, rows < 0 ? 2 * S_ : rows,
                             2 * S_, lists);
}

void OutOfCoreBuilder::writeOutput_() {
    GraphWriter out(graphPath_, opt_.distancesPath, k_, params_.innerProduct);
    for (int i = 0; i < nShards_; ++i) {
        ShardData fromFile;
        const ShardData& s = shards_->finalLists(i, fromFile);
        FAISS_THROW_IF_NOT_FMT(s.n == shards_->rows(i) && s.ids.size() == size_t(s.n) * K_,
                               "gnndBuildFromFile: internal error: shard %d is incomplete", i);
        out.write(s.ids.data(), s.dists.data(), s.n, K_);
    }
    out.commit();
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
