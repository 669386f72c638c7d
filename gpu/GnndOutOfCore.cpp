#include "faiss_ext/gpu/GnndOutOfCore.h"

#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildProgress.h"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"
#include "faiss_ext/gpu/impl/gnnd/PartitionedBuild.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace faiss_ext {
namespace gpu {

namespace {

using gnnd::Clock;
using gnnd::File;
using gnnd::VectorFile;
using gnnd::dirOf;
using gnnd::fileSize;
using gnnd::openFile;
using gnnd::since;

/// Host copy of one shard: vectors and its canonical graph.
struct ShardData {
    int index = -1;
    int64_t n = 0;
    std::vector<float> x;
    std::vector<int> ids;      ///< global lists (canonical)
    std::vector<float> dists;
    std::vector<int> headIds;  ///< the shard's own graph (GNND), read-only
    std::vector<float> headDists;
};

/// Where the shards live between the build and the merges: in host memory
/// when they fit the budget, else in files of the work directory (the
/// global lists, and the shard's own graph after its build). Shards in
/// flight are disjoint (each merge round is a set of disjoint pairs), so a
/// shard has one owner at a time.
class ShardStore {
public:
    /// nShards shards of shardSize rows (the last one shorter) of `file`,
    /// lists of length K.
    ShardStore(const VectorFile& file, int64_t shardSize, int nShards, int K, bool inRam,
               const std::string& workDir)
            : file_(file), S_(shardSize), n_(file.n()), d_(file.d()), nShards_(nShards), K_(K),
              inRam_(inRam), workDir_(workDir) {
        if (inRam_) store_.resize(nShards_);
    }

    /// Whether the shards are kept in host memory (else in files).
    bool inRam() const { return inRam_; }
    /// First row of shard i.
    int64_t begin(int i) const { return int64_t(i) * S_; }
    /// Rows of shard i.
    int64_t rows(int i) const { return std::min(S_, n_ - begin(i)); }

    /// A shard's data: taken from the host store once it holds the shard,
    /// else read from the files (the vectors from the input file).
    void load(int i, ShardData& s, bool withGraph) {
        if (inRam_ && store_[i].n > 0) {
            s = std::move(store_[i]);
            store_[i] = ShardData();
            return;
        }
        s.index = i;
        s.n = rows(i);
        s.x.resize(size_t(s.n) * d_);
        file_.read(begin(i), s.n, s.x.data());
        if (!withGraph) return;
        readLists_(path_(i), size_t(s.n) * K_, s.ids, s.dists);
        readLists_(path_(i, "head"), size_t(s.n) * K_, s.headIds, s.headDists);
    }

    /// Writes the global lists (and the shard's own graph after its build),
    /// or gives the shard back to the host store.
    void save(ShardData& s, bool withHead) {
        if (inRam_) {
            if (withHead) {
                s.headIds = s.ids;
                s.headDists = s.dists;
            }
            const int i = s.index;
            store_[i] = std::move(s);
            return;
        }
        writeLists_(path_(s.index), s.ids, s.dists);
        if (withHead) writeLists_(path_(s.index, "head"), s.ids, s.dists);
    }

    /// The final lists of shard i: in the host store, or read from its file
    /// into `fromFile`.
    const ShardData& finalLists(int i, ShardData& fromFile) const {
        if (!inRam_) {
            fromFile.index = i;
            fromFile.n = rows(i);
            readLists_(path_(i), size_t(fromFile.n) * K_, fromFile.ids, fromFile.dists);
        }
        return inRam_ ? store_[i] : fromFile;
    }

    /// Removes the shard files (those that exist).
    void removeFiles() const {
        for (int i = 0; i < nShards_; ++i) {
            std::remove(path_(i).c_str());
            std::remove(path_(i, "head").c_str());
        }
    }

private:
    std::string path_(int i, const char* kind = "graph") const {
        char name[112];
        std::snprintf(name, sizeof(name), "/.gnnd_shard_%p_%d.%s", (const void*)this, i, kind);
        return workDir_ + name;
    }

    void readLists_(const std::string& path, size_t count, std::vector<int>& ids,
                    std::vector<float>& dists) const {
        ids.resize(count);
        dists.resize(count);
        File f = openFile(path, "rb");
        bool ok = std::fread(ids.data(), sizeof(int), count, f.get()) == count &&
                  std::fread(dists.data(), sizeof(float), count, f.get()) == count;
        FAISS_THROW_IF_NOT_FMT(ok, "gnndBuildFromFile: short read of '%s'", path.c_str());
    }

    void writeLists_(const std::string& path, const std::vector<int>& ids,
                     const std::vector<float>& dists) const {
        File f = openFile(path, "wb");
        bool ok = std::fwrite(ids.data(), sizeof(int), ids.size(), f.get()) == ids.size() &&
                  std::fwrite(dists.data(), sizeof(float), dists.size(), f.get()) == dists.size();
        FAISS_THROW_IF_NOT_FMT(ok, "gnndBuildFromFile: cannot write '%s' (disk full?)",
                               path.c_str());
    }

    const VectorFile& file_;
    const int64_t S_;
    const int64_t n_;
    const int d_;
    const int nShards_;
    const int K_;
    const bool inRam_;
    const std::string workDir_;
    /// The shards between merges when they are kept in host memory.
    std::vector<ShardData> store_;
};

/// One worker's device buffers for two shards, and its own stream (so that
/// workers sharing a device overlap).
struct ShardWorker {
    int device;
    GpuResources* res;
    cudaStream_t stream = nullptr;
    int d = 0;  ///< dimension
    int K = 0;  ///< list length
    DeviceVector<float> x, norms, dists, headDists;
    DeviceVector<int> ids, headIds;
    ~ShardWorker() {
        if (stream) {
            DeviceScope scope(device);
            cudaStreamSynchronize(stream);
            cudaStreamDestroy(stream);
        }
    }

    /// A worker on `device` with room for `rows` vectors and, with `lists`,
    /// for the lists and own graphs of listRows rows.
    static std::unique_ptr<ShardWorker> make(int device, GpuResources* res, int d, int K,
                                             int64_t rows, int64_t listRows, bool lists) {
        std::unique_ptr<ShardWorker> wk(new ShardWorker());
        wk->device = device;
        wk->res = res;
        wk->d = d;
        wk->K = K;
        DeviceScope scope(wk->device);
        FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&wk->stream, cudaStreamNonBlocking));
        wk->x.allocate(res, device, size_t(rows) * d, "gnndBuildFromFile", "vectors");
        wk->norms.allocate(res, device, size_t(rows), "gnndBuildFromFile", "norms");
        if (!lists) return wk;
        wk->ids.allocate(res, device, size_t(listRows) * K, "gnndBuildFromFile", "graph ids");
        wk->dists.allocate(res, device, size_t(listRows) * K, "gnndBuildFromFile",
                           "graph distances");
        wk->headIds.allocate(res, device, size_t(listRows) * K, "gnndBuildFromFile",
                             "shard graph ids");
        wk->headDists.allocate(res, device, size_t(listRows) * K, "gnndBuildFromFile",
                               "shard graph distances");
        return wk;
    }

    /// Shard s's vectors (prepared for the metric, with their norms) and,
    /// withGraph, its lists and own graph, to rows row0.. of the buffers.
    void upload(const ShardData& s, int64_t row0, bool withGraph, FlatMetric metric) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(x.data() + size_t(row0) * d, s.x.data(),
                                             sizeof(float) * s.x.size(), cudaMemcpyHostToDevice,
                                             stream));
        prepareVectorsDevice(metric, x.data() + size_t(row0) * d, s.n, d, stream);
        rowSquaredNorms(x.data() + size_t(row0) * d, s.n, d, norms.data() + row0, stream);
        if (withGraph) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(ids.data() + size_t(row0) * K, s.ids.data(),
                                                 sizeof(int) * s.ids.size(),
                                                 cudaMemcpyHostToDevice, stream));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dists.data() + size_t(row0) * K, s.dists.data(),
                                                 sizeof(float) * s.dists.size(),
                                                 cudaMemcpyHostToDevice, stream));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(headIds.data() + size_t(row0) * K,
                                                 s.headIds.data(), sizeof(int) * s.headIds.size(),
                                                 cudaMemcpyHostToDevice, stream));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(headDists.data() + size_t(row0) * K,
                                                 s.headDists.data(),
                                                 sizeof(float) * s.headDists.size(),
                                                 cudaMemcpyHostToDevice, stream));
        }
    }

    /// The lists of rows row0.. back into shard s (waits for them).
    void download(ShardData& s, int64_t row0) {
        s.ids.resize(size_t(s.n) * K);
        s.dists.resize(size_t(s.n) * K);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.ids.data(), ids.data() + size_t(row0) * K,
                                             sizeof(int) * s.ids.size(), cudaMemcpyDeviceToHost,
                                             stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.dists.data(), dists.data() + size_t(row0) * K,
                                             sizeof(float) * s.dists.size(),
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
};

/// Round-robin tournament (circle method) of nShards shards: each round is
/// a set of disjoint pairs; every pair of shards meets once.
std::vector<std::vector<std::pair<int, int>>> mergeRounds(int nShards) {
    int m = nShards + (nShards % 2);
    std::vector<int> ring(m);
    for (int i = 0; i < m; ++i) ring[i] = i;
    std::vector<std::vector<std::pair<int, int>>> out;
    for (int r = 0; r < m - 1; ++r) {
        std::vector<std::pair<int, int>> pairs;
        for (int i = 0; i < m / 2; ++i) {
            int a = ring[i], b = ring[m - 1 - i];
            if (a < nShards && b < nShards) pairs.emplace_back(std::min(a, b), std::max(a, b));
        }
        out.push_back(pairs);
        // rotate all but the first
        int last = ring[m - 1];
        for (int i = m - 1; i > 1; --i) ring[i] = ring[i - 1];
        ring[1] = last;
    }
    return out;
}

/// gnndBuildFromFile (GnndOutOfCore.h): GNND builds of the shards, then GGM
/// merges of every pair of shards, round by round, on one thread per
/// device entry; the shards in a ShardStore between the steps.
class Builder {
public:
    Builder(const std::vector<GpuResourcesProvider*>& providers, const VectorFile& file, int k,
            FlatMetric metric, const GnndFileBuildOptions& opt, const std::string& graphPath)
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
        K_ = gnnd::resolveBuildDegree(k, c.buildDegree > 0 ? c.buildDegree : gnnd::fileBuildDegree(k));
        params_ = gnnd::makeParams(c, K_, toFaissMetric(metric) == faiss::METRIC_INNER_PRODUCT,
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
        const size_t budget = gnnd::hostBudget(opt.hostMemoryBytes);
        shards_.reset(new ShardStore(file, S_, nShards_, K_, need <= budget, workDir_));
    }

    /// The schedule that runs: opt.schedule, or for Auto AllPairs up to
    /// kAutoAllPairsMaxShards shards and kAutoPartitionAbove vectors, and when the partitioned schedule's
    /// lists and memberships would not fit the host budget (AllPairs can
    /// keep its shards in files), Partitioned otherwise.
    GnndFileSchedule schedule() const {
        if (opt_.schedule != GnndFileSchedule::Auto) return opt_.schedule;
        if (nShards_ <= kAutoAllPairsMaxShards && n_ <= kAutoPartitionAbove)
            return GnndFileSchedule::AllPairs;
        const size_t lists = size_t(n_) * k_ * (sizeof(int) + sizeof(float)) +
                             2 * size_t(n_) * opt_.overlap * sizeof(int);
        return lists <= gnnd::hostBudget(opt_.hostMemoryBytes) ? GnndFileSchedule::Partitioned
                                                              : GnndFileSchedule::AllPairs;
    }

    /// The partitioned schedule (PartitionedBuild.h) with this build's
    /// devices and parameters; a given shardSize sets the cluster count.
    GnndFileBuildReport runPartitioned() const {
        gnnd::PartitionedInput in;
        in.file = &file_;
        in.k = k_;
        in.metric = metric_;
        in.options = &opt_;
        in.graphPath = graphPath_;
        in.devices = devices_;
        in.res = res_;
        in.params = params_;
        in.shards = opt_.shardSize > 0 ? nShards_ : 0;
        return gnnd::buildPartitioned(in);
    }

    GnndFileBuildReport run() {
        auto t0 = Clock::now();
        GnndFileBuildReport rep;
        rep.n = n_;
        rep.d = d_;
        rep.shardSize = S_;
        rep.shards = nShards_;
        rep.inHostMemory = shards_->inRam();
        rep.buildDegree = K_;
        progress_.reset(new gnnd::FileBuildProgress(nShards_, nShards_ * (nShards_ - 1) / 2,
                                                    int(devices_.size()), opt_.verbose));
        // probe the output's directory (and the work directory when shard
        // files are used) before any GPU work; the output itself is not
        // touched before the graph is complete
        gnnd::probeDir(outDir_);
        if (!shards_->inRam() && workDir_ != outDir_) gnnd::probeDir(workDir_);
        if (!opt_.distancesPath.empty()) gnnd::probeDir(dirOf(opt_.distancesPath));
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

private:
    size_t pairResidentBytes_(int64_t S) const {
        return size_t(2 * S) * (sizeof(float) * (d_ + 1) + 2 * (sizeof(int) + sizeof(float)) * K_);
    }
    size_t pairTempBytes_(int64_t S) const {
        return size_t(2 * S) * K_ * (sizeof(uint32_t) + sizeof(float)) +
               gnnd::mergeTempBytes(2 * S, params_) + (size_t(1) << 20);
    }

    void chooseShardSize_() {
        int64_t minShard = K_ + 1;
        if (opt_.shardSize > 0) {
            FAISS_THROW_IF_NOT_FMT(opt_.shardSize > k_,
                                   "gnndBuildFromFile: shardSize %lld must be > k = %d",
                                   (long long)opt_.shardSize, k_);
            S_ = std::min<int64_t>(opt_.shardSize, n_);
        } else {
            size_t budget = 0, temp = 0;
            gnnd::deviceBudget(devices_, res_, &budget, &temp);
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

    /// A worker for entry w of devices_ with room for `rows` vectors (-1: a
    /// pair of shards) and, with `lists`, their lists and own graphs.
    std::unique_ptr<ShardWorker> makeWorker_(size_t w, int64_t rows = -1, bool lists = true) const {
        return ShardWorker::make(devices_[w], res_[w].get(), d_, K_, rows < 0 ? 2 * S_ : rows,
                                 2 * S_, lists);
    }

    /// Runs fn(worker index) on one thread per device; rethrows the first error.
    template <typename Fn>
    void onWorkers_(Fn fn) {
        gnnd::runOnWorkers(devices_, &failed_, fn);
    }

    void buildShards_() {
        std::atomic<int> next(0);
        onWorkers_([&](size_t w) {
            auto wk = makeWorker_(w);
            ShardData cur;
            int i = next++;
            std::future<ShardData> pre;
            if (i < nShards_) {
                shards_->load(i, cur, false);
            }
            std::future<void> writing;
            while (i < nShards_ && !failed_) {
                int j = next++;
                if (j < nShards_) {
                    pre = std::async(std::launch::async, [this, j] {
                        ShardData s;
                        shards_->load(j, s, false);
                        return s;
                    });
                }
                auto t = Clock::now();
                wk->upload(cur, 0, false, metric_);
                gnnd::build(wk->res, wk->device, wk->stream, wk->x.data(), wk->norms.data(), cur.n, d_,
                            params_, shards_->begin(i), wk->ids.data(), wk->dists.data(), nullptr);
                wk->download(cur, 0);
                if (writing.valid()) writing.get();
                if (!shards_->inRam()) cur.x.clear();
                writing = std::async(std::launch::async,
                                     [this, s = std::move(cur)]() mutable { shards_->save(s, true); });
                progress_->shardBuilt(i, wk->device, shards_->rows(i), since(t));
                i = j;
                if (j < nShards_) cur = pre.get();
            }
            if (writing.valid()) writing.get();
        });
    }

    /// The one shard built by all the distinct devices at once
    /// (gnnd::buildSplit): every device gets the vectors; the lists come
    /// back from the first.
    void buildSplit_(const std::vector<int>& distinct) {
        ShardData s;
        shards_->load(0, s, false);
        const size_t G = distinct.size();
        std::vector<std::unique_ptr<ShardWorker>> copies;
        std::vector<GpuResources*> res;
        std::vector<cudaStream_t> streams;
        std::vector<const float*> xs, norms;
        for (int dv : distinct) {
            const size_t w = size_t(std::find(devices_.begin(), devices_.end(), dv) - devices_.begin());
            copies.push_back(makeWorker_(w, s.n, false));
            ShardWorker& c = *copies.back();
            DeviceScope scope(dv);
            c.upload(s, 0, false, metric_);
            res.push_back(c.res);
            streams.push_back(c.stream);
            xs.push_back(c.x.data());
            norms.push_back(c.norms.data());
        }
        DeviceVector<int> ids;
        DeviceVector<float> dists;
        {
            DeviceScope scope(distinct[0]);
            ids.allocate(res[0], distinct[0], size_t(s.n) * K_, "gnndBuildFromFile", "graph ids");
            dists.allocate(res[0], distinct[0], size_t(s.n) * K_, "gnndBuildFromFile",
                           "graph distances");
        }
        auto t = Clock::now();
        gnnd::buildSplit(res, distinct, streams, xs, norms, s.n, d_, params_, 0, ids.data(),
                         dists.data(), nullptr);
        {
            DeviceScope scope(distinct[0]);
            s.ids.resize(size_t(s.n) * K_);
            s.dists.resize(size_t(s.n) * K_);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.ids.data(), ids.data(), sizeof(int) * s.ids.size(),
                                                 cudaMemcpyDeviceToHost, streams[0]));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.dists.data(), dists.data(),
                                                 sizeof(float) * s.dists.size(),
                                                 cudaMemcpyDeviceToHost, streams[0]));
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(streams[0]));
        }
        if (opt_.verbose) {
            std::printf("gnndBuildFromFile: one shard split over %zu GPUs:\n", G);
            std::fflush(stdout);
        }
        progress_->shardBuilt(0, distinct[0], s.n, since(t));
        if (!shards_->inRam()) s.x.clear();
        shards_->save(s, false);
    }

    int mergeAll_() {
        if (nShards_ < 2) return 0;
        auto rounds = mergeRounds(nShards_);
        std::atomic<int> done(0);
        size_t W = devices_.size();
        std::vector<std::unique_ptr<ShardWorker>> workers(W);
        for (auto& pairs : rounds) {
            onWorkers_([&](size_t w) {
                if (!workers[w]) workers[w] = makeWorker_(w);
                ShardWorker& wk = *workers[w];
                std::vector<std::pair<int, int>> mine;
                for (size_t t = w; t < pairs.size(); t += W) mine.push_back(pairs[t]);
                auto loadPair = [this](std::pair<int, int> pr) {
                    std::pair<ShardData, ShardData> d;
                    shards_->load(pr.first, d.first, true);
                    shards_->load(pr.second, d.second, true);
                    return d;
                };
                std::future<std::pair<ShardData, ShardData>> pre;
                std::vector<std::future<void>> writes;
                if (!mine.empty()) {
                    pre = std::async(std::launch::async, loadPair, mine[0]);
                }
                for (size_t t = 0; t < mine.size() && !failed_; ++t) {
                    auto data = pre.get();
                    if (t + 1 < mine.size()) pre = std::async(std::launch::async, loadPair, mine[t + 1]);
                    auto tm = Clock::now();
                    ShardData& a = data.first;
                    ShardData& b = data.second;
                    wk.upload(a, 0, true, metric_);
                    wk.upload(b, a.n, true, metric_);
                    gnnd::merge(wk.res, wk.device, wk.stream, wk.x.data(), wk.norms.data(), a.n, b.n, d_,
                                shards_->begin(a.index), shards_->begin(b.index), params_, wk.ids.data(),
                                wk.dists.data(), nullptr, wk.headIds.data(), wk.headDists.data());
                    // the next pair may start loading while this one is written
                    if (!shards_->inRam()) {
                        a.headIds.clear();
                        b.headIds.clear();
                    }
                    wk.download(a, 0);
                    wk.download(b, a.n);
                    if (!shards_->inRam()) {
                        a.x.clear();
                        b.x.clear();
                    }
                    writes.push_back(std::async(std::launch::async, [this, s = std::move(a)]() mutable {
                        shards_->save(s, false);
                    }));
                    writes.push_back(std::async(std::launch::async, [this, s = std::move(b)]() mutable {
                        shards_->save(s, false);
                    }));
                    ++done;
                    progress_->pairMerged(mine[t].first, mine[t].second, wk.device, since(tm));
                }
                for (auto& f : writes) f.get();  // the round's graphs are on disk
            });
        }
        return done.load();
    }

    void writeOutput_() {
        gnnd::GraphWriter out(graphPath_, opt_.distancesPath, k_, params_.innerProduct);
        for (int i = 0; i < nShards_; ++i) {
            ShardData fromFile;
            const ShardData& s = shards_->finalLists(i, fromFile);
            FAISS_THROW_IF_NOT_FMT(s.n == shards_->rows(i) && s.ids.size() == size_t(s.n) * K_,
                                   "gnndBuildFromFile: internal error: shard %d is incomplete", i);
            out.write(s.ids.data(), s.dists.data(), s.n, K_);
        }
        out.commit();
    }

    const VectorFile& file_;
    int k_;
    FlatMetric metric_;
    GnndFileBuildOptions opt_;
    std::string graphPath_;
    std::vector<int> devices_;
    std::vector<std::shared_ptr<GpuResources>> res_;
    gnnd::Params params_;
    int K_ = 0;
    int d_ = 0;
    int64_t n_ = 0;
    int64_t S_ = 0;
    int nShards_ = 0;
    std::string workDir_;
    std::string outDir_;
    std::unique_ptr<ShardStore> shards_;
    std::unique_ptr<gnnd::FileBuildProgress> progress_;
    std::atomic<bool> failed_{false};
};

}  // namespace

GnndFileBuildReport gnndBuildFromFile(const std::vector<GpuResourcesProvider*>& providers,
                                      const std::string& vectorsPath, VectorFileFormat format,
                                      int d, int k, FlatMetric metric,
                                      const std::string& graphPath,
                                      const GnndFileBuildOptions& options) {
    gnnd::checkBuildConfig(options.config, k, "gnndBuildFromFile");
    FAISS_THROW_IF_NOT_MSG(!graphPath.empty(), "gnndBuildFromFile: empty graph path");
    FAISS_THROW_IF_NOT_MSG(format == VectorFileFormat::Fvecs ||
                                   format == VectorFileFormat::RawFloat32,
                           "gnndBuildFromFile: unknown vector file format");
    FAISS_THROW_IF_NOT_FMT(options.shardSize >= 0, "gnndBuildFromFile: shardSize = %lld < 0",
                           (long long)options.shardSize);
    FAISS_THROW_IF_NOT_FMT(options.hostMemoryBytes >= -1,
                           "gnndBuildFromFile: hostMemoryBytes = %lld (give -1 for automatic, 0 "
                           "for shard files, or a byte count)",
                           (long long)options.hostMemoryBytes);
    FAISS_THROW_IF_NOT_FMT(options.schedule == GnndFileSchedule::Auto ||
                                   options.schedule == GnndFileSchedule::AllPairs ||
                                   options.schedule == GnndFileSchedule::Partitioned,
                           "gnndBuildFromFile: unknown schedule %d", int(options.schedule));
    FAISS_THROW_IF_NOT_FMT(options.overlap >= 1 && options.overlap <= kMaxOverlap,
                           "gnndBuildFromFile: overlap = %d (clusters per vector: 1..%d)",
                           options.overlap, kMaxOverlap);
    FAISS_THROW_IF_NOT_FMT(options.sampleRows >= 0,
                           "gnndBuildFromFile: sampleRows = %lld < 0 (0: automatic)",
                           (long long)options.sampleRows);
    FAISS_THROW_IF_NOT_FMT(options.neighbourMerges >= -1 &&
                                   options.neighbourMerges <= kMaxNeighbourMerges,
                           "gnndBuildFromFile: neighbourMerges = %d (merges per cluster: -1 "
                           "automatic, 0 off, 1..%d)",
                           options.neighbourMerges, kMaxNeighbourMerges);
    FAISS_THROW_IF_NOT_FMT(options.clusterBuild == GnndClusterBuild::Auto ||
                                   options.clusterBuild == GnndClusterBuild::NNDescent ||
                                   options.clusterBuild == GnndClusterBuild::Exact,
                           "gnndBuildFromFile: unknown clusterBuild %d", int(options.clusterBuild));
    FAISS_THROW_IF_NOT_FMT(options.exactClusterRows == 0 ||
                                   options.exactClusterRows >= int64_t(k) + 1,
                           "gnndBuildFromFile: exactClusterRows = %lld (0: automatic, else at "
                           "least k + 1 = %d)",
                           (long long)options.exactClusterRows, k + 1);
    VectorFile file(vectorsPath, format, d);
    Builder b(providers, file, k, metric, options, graphPath);
    return b.schedule() == GnndFileSchedule::Partitioned ? b.runPartitioned() : b.run();
}

const char* fileScheduleName(GnndFileSchedule s) {
    switch (s) {
        case GnndFileSchedule::Auto: return "auto";
        case GnndFileSchedule::AllPairs: return "all-pairs";
        case GnndFileSchedule::Partitioned: return "partitioned";
    }
    return "unknown";
}

const char* clusterBuildName(GnndClusterBuild b) {
    switch (b) {
        case GnndClusterBuild::Auto: return "auto";
        case GnndClusterBuild::NNDescent: return "nn-descent";
        case GnndClusterBuild::Exact: return "exact";
    }
    return "unknown";
}

std::vector<int> readGraphIvecs(const std::string& path, int64_t* n, int* k) {
    File f = openFile(path, "rb", "readGraphIvecs");
    int64_t size = fileSize(f.get());
    int32_t k0 = 0;
    FAISS_THROW_IF_NOT_FMT(size >= 4 && std::fread(&k0, 4, 1, f.get()) == 1,
                           "readGraphIvecs: '%s' is empty", path.c_str());
    FAISS_THROW_IF_NOT_FMT(k0 > 0 && size % (4 * (int64_t(k0) + 1)) == 0,
                           "readGraphIvecs: '%s' is not an ivecs file of equal rows", path.c_str());
    int64_t rows = size / (4 * (int64_t(k0) + 1));
    std::fseek(f.get(), 0, SEEK_SET);
    std::vector<int> out(size_t(rows) * k0);
    std::vector<int32_t> row(size_t(k0) + 1);
    for (int64_t r = 0; r < rows; ++r) {
        FAISS_THROW_IF_NOT_FMT(std::fread(row.data(), 4, row.size(), f.get()) == row.size() &&
                                       row[0] == k0,
                               "readGraphIvecs: '%s' row %lld is corrupt", path.c_str(),
                               (long long)r);
        std::memcpy(out.data() + size_t(r) * k0, row.data() + 1, sizeof(int) * k0);
    }
    if (n) *n = rows;
    if (k) *k = k0;
    return out;
}

}  // namespace gpu
}  // namespace faiss_ext
