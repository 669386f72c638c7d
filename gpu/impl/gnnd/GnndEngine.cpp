// Host side of GNND (Algorithm 1) and GGM (Algorithm 3): buffers, the
// iteration loop, the termination test and progress.
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

/// The raw lists (ids and distances) of n nodes.
size_t rawListBytes(int64_t n, const Params& p) {
    return size_t(n) * p.K * (sizeof(uint32_t) + sizeof(float));
}

/// The iterations' own buffers (the raw lists apart).
size_t iterationBytes(int64_t n, const Params& p) {
    size_t nn = size_t(n);
    return nn * 2 * p.p * sizeof(int) * 2                 // G_new, G_old
           + nn * 4 * sizeof(int)                           // counts
           + nn * (p.K / kSegment) * sizeof(int)            // spinlocks
           + 256;                                           // update counter
}

void checkParams(const Params& p, int64_t n, int d) {
    FAISS_THROW_IF_NOT_FMT(p.K >= kSegment && p.K <= kMaxBuildDegree && p.K % kSegment == 0,
                           "GNND: list length K = %d must be a multiple of %d in [%d, %d]", p.K,
                           kSegment, kSegment, kMaxBuildDegree);
    FAISS_THROW_IF_NOT_FMT(p.p >= 1 && p.p <= kMaxSamples, "GNND: samples p = %d not in [1, %d]",
                           p.p, kMaxSamples);
    FAISS_THROW_IF_NOT_FMT(p.maxIter >= 1, "GNND: maxIterations = %d must be >= 1", p.maxIter);
    FAISS_THROW_IF_NOT_FMT(n >= 0 && n < int64_t(0x7FFFFFFF), "GNND: n = %lld out of range",
                           (long long)n);
    FAISS_THROW_IF_NOT_FMT(d >= 1, "GNND: d = %d must be >= 1", d);
}

/// The GNND iterations on raw lists; crossBoundary >= 0 for GGM.
void iterate(GpuResources* res, int device, cudaStream_t stream, const float* x,
             const float* norms, int64_t n, int d, const Params& params, int64_t crossBoundary,
             uint32_t* gIds, float* gDists, const IterationCallback& cb) {
    TempBuffer<int> newList(res, device, size_t(n) * 2 * params.p, stream);
    TempBuffer<int> oldList(res, device, size_t(n) * 2 * params.p, stream);
    TempBuffer<int> counts(res, device, size_t(n) * 4, stream);
    TempBuffer<int> locks(res, device, size_t(n) * (params.K / kSegment), stream);
    TempBuffer<unsigned long long> updates(res, device, 1, stream);
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(locks.data(), 0,
                                         sizeof(int) * size_t(n) * (params.K / kSegment), stream));
    double threshold = double(params.delta) * double(n) * double(params.K);
    cudaEvent_t ev[3] = {nullptr, nullptr, nullptr};
    struct EventGuard {
        cudaEvent_t* e;
        ~EventGuard() {
            for (int i = 0; i < 3; ++i)
                if (e[i]) cudaEventDestroy(e[i]);
        }
    } guard{ev};
    if (params.verbose) {
        for (auto& e : ev) FAISS_EXT_CUDA_CHECK(cudaEventCreate(&e));
    }
    for (int it = 1; it <= params.maxIter; ++it) {
        auto t0 = std::chrono::steady_clock::now();
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(updates.data(), 0, sizeof(unsigned long long), stream));
        if (params.verbose) FAISS_EXT_CUDA_CHECK(cudaEventRecord(ev[0], stream));
        launchSample(stream, n, params.K, params.p, gIds, newList.data(), oldList.data(),
                     counts.data());
        if (params.verbose) FAISS_EXT_CUDA_CHECK(cudaEventRecord(ev[1], stream));
        launchJoin(stream, x, norms, n, d, params.K, params.p, params.innerProduct, crossBoundary,
                   newList.data(), oldList.data(), counts.data(), gIds, gDists, locks.data(),
                   updates.data());
        unsigned long long upd = 0;
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(&upd, updates.data(), sizeof(upd),
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        GnndIterationStats st;
        st.iteration = it;
        st.updates = int64_t(upd);
        st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        st.merge = crossBoundary >= 0;
        if (params.verbose) {
            float msSample = 0, msJoin = 0;
            FAISS_EXT_CUDA_CHECK(cudaEventRecord(ev[2], stream));
            FAISS_EXT_CUDA_CHECK(cudaEventSynchronize(ev[2]));
            cudaEventElapsedTime(&msSample, ev[0], ev[1]);
            cudaEventElapsedTime(&msJoin, ev[1], ev[2]);
            std::printf("GNND %s iteration %d: %llu updates (%.4f of n*K), %.3f s "
                        "(sampling %.1f ms, local join %.1f ms)\n",
                        st.merge ? "merge" : "build", it, upd,
                        double(upd) / (double(n) * params.K), st.seconds, msSample, msJoin);
            std::fflush(stdout);
        }
        if (cb) cb(st);
        if (double(upd) < threshold) break;
    }
}

}  // namespace

int resolveBuildDegree(int k, int buildDegree) {
    return buildDegree > 0 ? buildDegree : std::max(kSegment, (k + kSegment - 1) / kSegment * kSegment);
}

void checkBuildConfig(const GpuKnnGraphGNNDConfig& c, int k, const char* who) {
    FAISS_THROW_IF_NOT_FMT(k >= 1 && k <= kMaxBuildDegree, "%s: graph degree k = %d must be in [1, %d]",
                           who, k, kMaxBuildDegree);
    FAISS_THROW_IF_NOT_FMT(c.samples >= 1 && c.samples <= kMaxSamples,
                           "%s: samples = %d must be in [1, %d]", who, c.samples, kMaxSamples);
    FAISS_THROW_IF_NOT_FMT(c.maxIterations >= 1, "%s: maxIterations = %d must be >= 1", who,
                           c.maxIterations);
    FAISS_THROW_IF_NOT_FMT(c.terminationThreshold >= 0.f && c.terminationThreshold < 1.f,
                           "%s: terminationThreshold = %g must be in [0, 1)", who,
                           double(c.terminationThreshold));
    FAISS_THROW_IF_NOT_FMT(c.buildDegree == 0 || (c.buildDegree % kSegment == 0 &&
                                                  c.buildDegree >= k &&
                                                  c.buildDegree <= kMaxBuildDegree),
                           "%s: buildDegree = %d must be 0 or a multiple of 32 in [k = %d, %d]", who,
                           c.buildDegree, k, kMaxBuildDegree);
    FAISS_THROW_IF_NOT_FMT(c.addBuild == GnndAddBuild::Auto || c.addBuild == GnndAddBuild::OneShot ||
                                   c.addBuild == GnndAddBuild::Partitioned ||
                                   c.addBuild == GnndAddBuild::OneShotWhereItFits,
                           "%s: unknown addBuild %d", who, int(c.addBuild));
}

Params makeParams(const GpuKnnGraphGNNDConfig& c, int K, bool innerProduct, bool verbose) {
    Params p;
    p.K = K;
    p.p = c.samples;
    p.maxIter = c.maxIterations;
    p.delta = c.terminationThreshold;
    p.seed = c.seed;
    p.innerProduct = innerProduct;
    p.verbose = verbose;
    return p;
}

size_t buildTempBytes(int64_t n, const Params& p) {
    return iterationBytes(n, p) + 4096;
}

size_t mergeTempBytes(int64_t nAB, const Params& p) {
    return rawListBytes(nAB, p) + iterationBytes(nAB, p) + 4096;
}

void build(GpuResources* res, int device, cudaStream_t stream, const float* x,
           const float* norms, int64_t n, int d, const Params& params, int64_t idOffset,
           int* ids, float* dists, const IterationCallback& cb) {
    checkParams(params, n, d);
    if (n == 0) return;
    DeviceScope scope(device);
    if (n <= 2 * int64_t(params.K)) {
        // small sets: the exact graph (segments could not hold every neighbour)
        launchExactSmall(stream, x, n, d, params.K, params.innerProduct, idOffset, ids, dists);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }
    // The output rows hold the raw lists (ids with their flag bits) and are
    // finalised in place: each warp of the finalisation reads its node's raw
    // row before it writes the final one, and reads no other row. A second
    // n x K lists would cost 8 K bytes a vector (51 GB at 100M x K 64).
    uint32_t* gIds = reinterpret_cast<uint32_t*>(ids);
    float* gDists = dists;
    auto t0 = std::chrono::steady_clock::now();
    launchRandomInit(stream, x, norms, n, d, params.K, params.innerProduct, params.seed, gIds,
                     gDists);
    if (params.verbose) {
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        std::printf("GNND build of %lld vectors (K = %d, p = %d): random initial graph %.3f s\n",
                    (long long)n, params.K, params.p,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (n > 2) {
        iterate(res, device, stream, x, norms, n, d, params, -1, gIds, gDists, cb);
    }
    auto t1 = std::chrono::steady_clock::now();
    launchFinalize(stream, x, norms, n, d, params.K, params.innerProduct, gIds, n, idOffset,
                   idOffset, ids, dists, false);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (params.verbose) {
        std::printf("GNND build: final sorted lists with exact distances %.3f s\n",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
        std::fflush(stdout);
    }
}

namespace {
std::atomic<bool> peerAccessIgnored{false};
std::mutex peerMutex;
std::set<std::pair<int, int>> peerEnabled;  ///< (from, to) pairs enabled by us
}  // namespace

void setPeerAccessIgnoredForTesting(bool ignored) {
    peerAccessIgnored = ignored;
}

bool enablePeerAccess(const std::vector<int>& devices) {
    bool all = !peerAccessIgnored;
    for (int a : devices) {
        for (int b : devices) {
            int can = 0;
            if (a == b) continue;
            if (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || !can) {
                cudaGetLastError();
                all = false;
                continue;
            }
            std::lock_guard<std::mutex> lock(peerMutex);
            if (peerEnabled.count({a, b})) continue;
            DeviceScope scope(a);
            // once per pair and process (CUDA has no query; a second enable
            // is an error, benign, that the sanitizers would report)
            cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) {
                cudaGetLastError();  // enabled by someone else: clear it
            } else if (e != cudaSuccess) {
                FAISS_EXT_CUDA_CHECK(e);
            }
            cudaMemPool_t pool;
            if (cudaDeviceGetDefaultMemPool(&pool, b) == cudaSuccess) {
                cudaMemAccessDesc desc = {};
                desc.location.type = cudaMemLocationTypeDevice;
                desc.location.id = a;
                desc.flags = cudaMemAccessFlagsProtReadWrite;
                FAISS_EXT_CUDA_CHECK(cudaMemPoolSetAccess(pool, &desc, 1));
            }
            peerEnabled.insert({a, b});
        }
    }
    return all;
}

namespace {

/// The data-parallel build of buildSplit (Gnnd.h): G >= 2 devices, each
/// with a full copy of the raw lists. Device g owns rows [rowBegin(g),
/// rowBegin(g + 1)) of the exchange: it merges those rows of every other
/// copy into its own, then every device copies the merged rows of the others
/// (both directions of each link at once, the merges split G ways).
class SplitBuild {
public:
    /// Checks nothing (buildSplit did); allocates every device's buffers.
    SplitBuild(const std::vector<GpuResources*>& res, const std::vector<int>& devices,
               const std::vector<cudaStream_t>& streams, const std::vector<const float*>& x,
               const std::vector<const float*>& norms, int64_t n, int d, const Params& params)
            : devices_(devices), streams_(streams), x_(x), norms_(norms), n_(n), d_(d),
              params_(params), G_(devices.size()), nseg_(params.K / kSegment),
              // with peer access everywhere the merges read the other copies in place
              direct_(enablePeerAccess(devices)), dev_(G_) {
        for (size_t g = 0; g < G_; ++g) maxRows_ = std::max(maxRows_, rowBegin(g + 1) - rowBegin(g));
        for (size_t g = 0; g < G_; ++g) allocate_(g, res[g]);
    }

    /// Random initial lists, iterations until the termination test, the
    /// canonical lists of devices[0] into ids / dists. Runs with devices[0]
    /// current.
    void run(int64_t idOffset, int* ids, float* dists, const IterationCallback& cb) {
        auto t0 = std::chrono::steady_clock::now();
        initialLists_();
        if (params_.verbose) {
            std::printf("GNND split build of %lld vectors over %zu devices (K = %d, p = %d): "
                        "random initial graph %.3f s\n",
                        (long long)n_, G_, params_.K, params_.p,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                                .count());
        }
        const double threshold = double(params_.delta) * double(n_) * double(params_.K);
        for (int it = 1; it <= params_.maxIter; ++it) {
            auto ti = std::chrono::steady_clock::now();
            sampleAndJoin_();
            double secJoin = 0;
            if (params_.verbose) {
                syncAll_();
                secJoin = std::chrono::duration<double>(std::chrono::steady_clock::now() - ti)
                                  .count();
            }
            exchange_();
            const unsigned long long total = countUpdates_();
            GnndIterationStats st;
            st.iteration = it;
            st.updates = int64_t(total);
            st.seconds =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - ti).count();
            st.merge = false;
            if (params_.verbose) {
                std::printf("GNND split build iteration %d: %llu updates (%.4f of n*K), %.3f s "
                            "(sampling and local join %.3f s, exchange %.3f s)\n",
                            it, total, double(total) / (double(n_) * params_.K), st.seconds,
                            secJoin, st.seconds - secJoin);
                std::fflush(stdout);
            }
            if (cb) cb(st);
            if (double(total) < threshold) break;
        }
        DeviceScope scope(devices_[0]);
        launchFinalize(streams_[0], x_[0], norms_[0], n_, d_, params_.K, params_.innerProduct,
                       dev_[0].gIds->data(), n_, idOffset, idOffset, ids, dists, false);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(streams_[0]));
    }

private:
    /// One device's lists, work buffers and events.
    struct Dev {
        std::unique_ptr<TempBuffer<uint32_t>> gIds, oIds;
        std::unique_ptr<TempBuffer<float>> gDists, oDists;
        std::unique_ptr<TempBuffer<int>> newList, oldList, counts, locks;
        std::unique_ptr<TempBuffer<unsigned long long>> updates;
        cudaEvent_t joined = nullptr, merged = nullptr;
        int device = 0;
        ~Dev() {
            DeviceScope scope(device);
            if (joined) cudaEventDestroy(joined);
            if (merged) cudaEventDestroy(merged);
        }
    };

    int64_t rowBegin(size_t g) const { return int64_t(g) * n_ / int64_t(G_); }

    void allocate_(size_t g, GpuResources* r) {
        DeviceScope scope(devices_[g]);
        Dev& v = dev_[g];
        v.device = devices_[g];
        const cudaStream_t st = streams_[g];
        const size_t nK = size_t(n_) * params_.K;
        const size_t own = size_t(maxRows_) * params_.K;
        v.gIds.reset(new TempBuffer<uint32_t>(r, devices_[g], nK, st));
        v.gDists.reset(new TempBuffer<float>(r, devices_[g], nK, st));
        if (!direct_) {
            v.oIds.reset(new TempBuffer<uint32_t>(r, devices_[g], own, st));
            v.oDists.reset(new TempBuffer<float>(r, devices_[g], own, st));
        }
        v.newList.reset(new TempBuffer<int>(r, devices_[g], size_t(n_) * 2 * params_.p, st));
        v.oldList.reset(new TempBuffer<int>(r, devices_[g], size_t(n_) * 2 * params_.p, st));
        v.counts.reset(new TempBuffer<int>(r, devices_[g], size_t(n_) * 4, st));
        v.locks.reset(new TempBuffer<int>(r, devices_[g], size_t(n_) * nseg_, st));
        v.updates.reset(new TempBuffer<unsigned long long>(r, devices_[g], 1, st));
        FAISS_EXT_CUDA_CHECK(
                cudaMemsetAsync(v.locks->data(), 0, sizeof(int) * size_t(n_) * nseg_, st));
        FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&v.joined, cudaEventDisableTiming));
        FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&v.merged, cudaEventDisableTiming));
    }

    void syncAll_() {
        for (size_t g = 0; g < G_; ++g) {
            DeviceScope scope(devices_[g]);
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(streams_[g]));
        }
    }

    /// Rows [b, b + rows) of device h's lists into device g's buffers.
    void copyRows_(size_t g, uint32_t* dIds, float* dDists, size_t h, int64_t b, int64_t rows) {
        const size_t off = size_t(b) * params_.K, cnt = size_t(rows) * params_.K;
        FAISS_EXT_CUDA_CHECK(cudaMemcpyPeerAsync(dIds, devices_[g], dev_[h].gIds->data() + off,
                                                 devices_[h], sizeof(uint32_t) * cnt, streams_[g]));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyPeerAsync(dDists, devices_[g], dev_[h].gDists->data() + off,
                                                 devices_[h], sizeof(float) * cnt, streams_[g]));
    }

    /// Every device's rows of the others' lists, after their events.
    void gatherOwnedRows_(cudaEvent_t Dev::*ready) {
        for (size_t g = 0; g < G_; ++g) {
            DeviceScope scope(devices_[g]);
            FAISS_EXT_CUDA_CHECK(cudaEventRecord(dev_[g].*ready, streams_[g]));
        }
        for (size_t g = 0; g < G_; ++g) {
            DeviceScope scope(devices_[g]);
            for (size_t h = 0; h < G_; ++h) {
                if (h == g) continue;
                FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(streams_[g], dev_[h].*ready, 0));
                const int64_t b = rowBegin(h), rows = rowBegin(h + 1) - b;
                const size_t off = size_t(b) * params_.K;
                copyRows_(g, dev_[g].gIds->data() + off, dev_[g].gDists->data() + off, h, b, rows);
            }
        }
        syncAll_();
    }

    /// The same random initial lists on every device.
    void initialLists_() {
        {
            DeviceScope scope(devices_[0]);
            launchRandomInit(streams_[0], x_[0], norms_[0], n_, d_, params_.K,
                             params_.innerProduct, params_.seed, dev_[0].gIds->data(),
                             dev_[0].gDists->data());
            FAISS_EXT_CUDA_CHECK(cudaEventRecord(dev_[0].merged, streams_[0]));
        }
        for (size_t g = 1; g < G_; ++g) {
            DeviceScope scope(devices_[g]);
            FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(streams_[g], dev_[0].merged, 0));
            copyRows_(g, dev_[g].gIds->data(), dev_[g].gDists->data(), 0, 0, n_);
        }
        syncAll_();
    }

    /// Every device samples its copy and joins its own nodes into it.
    void sampleAndJoin_() {
        for (size_t g = 0; g < G_; ++g) {
            DeviceScope scope(devices_[g]);
            Dev& v = dev_[g];
            FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(v.updates->data(), 0,
                                                 sizeof(unsigned long long), streams_[g]));
            launchSample(streams_[g], n_, params_.K, params_.p, v.gIds->data(),
                         v.newList->data(), v.oldList->data(), v.counts->data());
            launchJoin(streams_[g], x_[g], norms_[g], n_, d_, params_.K, params_.p,
                       params_.innerProduct, -1, v.newList->data(), v.oldList->data(),
                       v.counts->data(), v.gIds->data(), v.gDists->data(), v.locks->data(),
                       v.updates->data(), rowBegin(g), rowBegin(g + 1));
            FAISS_EXT_CUDA_CHECK(cudaEventRecord(v.joined, streams_[g]));
        }
    }

    /// Device g folds its rows of every other copy into its own (in place
    /// over peer access: with two devices the same kernel writes the merged
    /// rows back into the other copy); then every device has the merged rows
    /// of the others, all streams idle, the counters final.
    void exchange_() {
        const bool writeBack = direct_ && G_ == 2;
        for (size_t g = 0; g < G_; ++g) {
            DeviceScope scope(devices_[g]);
            Dev& v = dev_[g];
            const int64_t b = rowBegin(g), rows = rowBegin(g + 1) - b;
            const size_t off = size_t(b) * params_.K;
            for (size_t h = 0; h < G_; ++h) {
                if (h == g) continue;
                FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(streams_[g], dev_[h].joined, 0));
                if (direct_) {
                    launchMergeCopies(streams_[g], rows, params_.K, v.gIds->data() + off,
                                      v.gDists->data() + off, dev_[h].gIds->data() + off,
                                      dev_[h].gDists->data() + off, writeBack);
                } else {
                    copyRows_(g, v.oIds->data(), v.oDists->data(), h, b, rows);
                    launchMergeCopies(streams_[g], rows, params_.K, v.gIds->data() + off,
                                      v.gDists->data() + off, v.oIds->data(), v.oDists->data());
                }
            }
        }
        if (writeBack) {
            syncAll_();
        } else {
            gatherOwnedRows_(&Dev::merged);
        }
    }

    /// The list updates of all devices in this iteration.
    unsigned long long countUpdates_() {
        unsigned long long total = 0;
        for (size_t g = 0; g < G_; ++g) {
            DeviceScope scope(devices_[g]);
            unsigned long long upd = 0;
            FAISS_EXT_CUDA_CHECK(cudaMemcpy(&upd, dev_[g].updates->data(),
                                            sizeof(unsigned long long), cudaMemcpyDeviceToHost));
            total += upd;
        }
        return total;
    }

    const std::vector<int>& devices_;
    const std::vector<cudaStream_t>& streams_;
    const std::vector<const float*>& x_;
    const std::vector<const float*>& norms_;
    const int64_t n_;
    const int d_;
    const Params params_;
    const size_t G_;
    const int nseg_;
    const bool direct_;
    int64_t maxRows_ = 0;
    std::vector<Dev> dev_;
};

}  // namespace

void buildSplit(const std::vector<GpuResources*>& res, const std::vector<int>& devices,
                const std::vector<cudaStream_t>& streams, const std::vector<const float*>& x,
                const std::vector<const float*>& norms, int64_t n, int d, const Params& params,
                int64_t idOffset, int* ids, float* dists, const IterationCallback& cb) {
    const size_t G = devices.size();
    FAISS_THROW_IF_NOT_MSG(G >= 1 && res.size() == G && streams.size() == G && x.size() == G &&
                                   norms.size() == G,
                           "GNND split build: one resources object, stream and vector copy per "
                           "device");
    for (size_t g = 0; g < G; ++g)
        for (size_t h = g + 1; h < G; ++h)
            FAISS_THROW_IF_NOT_FMT(devices[g] != devices[h],
                                   "GNND split build: device %d is listed twice", devices[g]);
    checkParams(params, n, d);
    if (G == 1 || n <= 2 * int64_t(params.K)) {
        build(res[0], devices[0], streams[0], x[0], norms[0], n, d, params, idOffset, ids, dists, cb);
        return;
    }
    SplitBuild split(res, devices, streams, x, norms, n, d, params);
    DeviceScope scope0(devices[0]);
    split.run(idOffset, ids, dists, cb);
}

void merge(GpuResources* res, int device, cudaStream_t stream, const float* x,
           const float* norms, int64_t nA, int64_t nB, int d, int64_t offA, int64_t offB,
           const Params& params, int* ids, float* dists, const IterationCallback& cb,
           const int* headIds, const float* headDists) {
    int64_t n = nA + nB;
    checkParams(params, n, d);
    if (nA == 0 || nB == 0) return;
    DeviceScope scope(device);
    TempBuffer<uint32_t> gIds(res, device, size_t(n) * params.K, stream);
    TempBuffer<float> gDists(res, device, size_t(n) * params.K, stream);
    launchMergeInit(stream, x, norms, nA, nB, d, offA, offB, params.K, params.innerProduct,
                    params.seed ^ 0x9e3779b97f4a7c15ull, ids, dists, headIds, headDists, gIds.data(),
                    gDists.data());
    iterate(res, device, stream, x, norms, n, d, params, nA, gIds.data(), gDists.data(), cb);
    launchFinalize(stream, x, norms, n, d, params.K, params.innerProduct, gIds.data(), nA, offA,
                   offB, ids, dists, true);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace gnnd

const char* addBuildName(GnndAddBuild b) {
    switch (b) {
        case GnndAddBuild::Auto: return "auto";
        case GnndAddBuild::OneShot: return "one-shot";
        case GnndAddBuild::Partitioned: return "partitioned";
        case GnndAddBuild::OneShotWhereItFits: return "one-shot-where-it-fits";
    }
    return "unknown";
}

}  // namespace gpu
}  // namespace faiss_ext
