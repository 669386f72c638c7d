// The steps of the all-pairs file schedule (OutOfCoreBuilder.h): the shard
// builds and the GGM merges of every pair of shards.
#include "faiss_ext/gpu/impl/gnnd/OutOfCoreBuilder.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <utility>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

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

}  // namespace

void OutOfCoreBuilder::buildShards_() {
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
            gnnd::build(wk->res, wk->device, wk->stream, wk->x.data(), wk->norms.data(), cur.n,
                        d_, params_, shards_->begin(i), wk->ids.data(), wk->dists.data(), nullptr);
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

void OutOfCoreBuilder::buildSplit_(const std::vector<int>& distinct) {
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

int OutOfCoreBuilder::mergeAll_() {
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
                if (t + 1 < mine.size())
                    pre = std::async(std::launch::async, loadPair, mine[t + 1]);
                auto tm = Clock::now();
                ShardData& a = data.first;
                ShardData& b = data.second;
                wk.upload(a, 0, true, metric_);
                wk.upload(b, a.n, true, metric_);
                gnnd::merge(wk.res, wk.device, wk.stream, wk.x.data(), wk.norms.data(), a.n, b.n,
                            d_, shards_->begin(a.index), shards_->begin(b.index), params_,
                            wk.ids.data(), wk.dists.data(), nullptr, wk.headIds.data(),
                            wk.headDists.data());
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

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
