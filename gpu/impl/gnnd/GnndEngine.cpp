// Host side of GNND (Algorithm 1) and GGM (Algorithm 3): buffers, the
// iteration loop, the termination test and progress.
#include "gpu/impl/gnnd/Gnnd.h"

#include "gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

size_t iterationBytes(int64_t n, const Params& p) {
    size_t nn = size_t(n);
    return nn * p.K * (sizeof(uint32_t) + sizeof(float))  // raw lists
           + nn * 2 * p.p * sizeof(int) * 2                 // G_new, G_old
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
    return iterationBytes(nAB, p) + 4096;
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
    TempBuffer<uint32_t> gIds(res, device, size_t(n) * params.K, stream);
    TempBuffer<float> gDists(res, device, size_t(n) * params.K, stream);
    auto t0 = std::chrono::steady_clock::now();
    launchRandomInit(stream, x, norms, n, d, params.K, params.innerProduct, params.seed,
                     gIds.data(), gDists.data());
    if (params.verbose) {
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        std::printf("GNND build of %lld vectors (K = %d, p = %d): random initial graph %.3f s\n",
                    (long long)n, params.K, params.p,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (n > 2) {
        iterate(res, device, stream, x, norms, n, d, params, -1, gIds.data(), gDists.data(), cb);
    }
    auto t1 = std::chrono::steady_clock::now();
    launchFinalize(stream, x, norms, n, d, params.K, params.innerProduct, gIds.data(), n, idOffset,
                   idOffset, ids, dists, false);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (params.verbose) {
        std::printf("GNND build: final sorted lists with exact distances %.3f s\n",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
        std::fflush(stdout);
    }
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
}  // namespace gpu
}  // namespace faiss_ext
