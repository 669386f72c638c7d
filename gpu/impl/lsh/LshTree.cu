// Level one of Bi-level LSH on the GPU (Pan & Manocha 2011, docs/references.md,
// section 5.1): the RP-tree, level by level (Algorithm 2), all groups of a
// level at once. Primitives of section 4.2:
//   clustered mean / sum: per-chunk double sums (kClusteredChunk positions,
//     one block per chunk), then per-group sums of the chunk partials in
//     order (deterministic, the same numbers as the CPU twin);
//   approximate diameter (Algorithm 1, Egecioglu & Kalantari): farthest
//     point of every group from its current point P by a packed
//     (distance, position) atomicMax, then from that point Q, and
//     P <- Q + (Psi / Psi') (P - Q);
//   clustered sort: one radix sort of (group << 32 | key bits), stable, so
//     each group is ordered by its split key and the median splits it.
#include "faiss_ext/gpu/impl/lsh/LshEngine.h"

#include <faiss/impl/FaissAssert.h>

#include <cub/cub.cuh>

#include <cstdio>
#include <limits>

namespace faiss_ext {
namespace gpu {
namespace lsh_impl {

namespace {

using namespace faiss_ext::lsh;

__global__ void iotaKernel(int32_t* p, int64_t n) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) p[i] = int32_t(i);
}

/// Group of each position, by binary search in starts[0..G].
__global__ void posGroupKernel(const int64_t* __restrict__ starts, int G, int64_t n,
                               int32_t* __restrict__ posGroup) {
    const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= n) return;
    int lo = 0, hi = G - 1;  // last g with starts[g] <= r
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (starts[mid] <= r) lo = mid; else hi = mid - 1;
    }
    posGroup[r] = lo;
}

__global__ void chunkSumsKernel(const float* __restrict__ x, int d, const int32_t* __restrict__ perm,
                                const int64_t* __restrict__ chunkBegin,
                                const int64_t* __restrict__ chunkEnd, double* __restrict__ partial) {
    const int c = blockIdx.x;
    const int64_t b = chunkBegin[c], e = chunkEnd[c];
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        double s = 0.0;
        for (int64_t r = b; r < e; ++r) s += double(x[size_t(perm[r]) * d + j]);
        partial[size_t(c) * d + j] = s;
    }
}

__global__ void groupMeansKernel(const double* __restrict__ partial,
                                 const int32_t* __restrict__ chunkOff,
                                 const int64_t* __restrict__ starts, int G, int d,
                                 float* __restrict__ mean) {
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= int64_t(G) * d) return;
    const int g = int(t / d), j = int(t % d);
    const int64_t cnt = starts[g + 1] - starts[g];
    double total = 0.0;
    for (int c = chunkOff[g]; c < chunkOff[g + 1]; ++c) total += partial[size_t(c) * d + j];
    mean[t] = cnt > 0 ? float(total / double(cnt)) : 0.f;
}

__global__ void sqdKernel(const float* __restrict__ x, int d, const int32_t* __restrict__ perm,
                          const int32_t* __restrict__ posGroup, const float* __restrict__ mean,
                          int64_t n, float* __restrict__ sqd) {
    const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= n) return;
    sqd[r] = canonicalL2Sq(x + size_t(perm[r]) * d, mean + size_t(posGroup[r]) * d, d);
}

__global__ void chunkScalarSumsKernel(const float* __restrict__ v,
                                      const int64_t* __restrict__ chunkBegin,
                                      const int64_t* __restrict__ chunkEnd, int nChunks,
                                      double* __restrict__ partial) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nChunks) return;
    double s = 0.0;
    for (int64_t r = chunkBegin[c]; r < chunkEnd[c]; ++r) s += double(v[r]);
    partial[c] = s;
}

__global__ void groupAverageKernel(const double* __restrict__ partial,
                                   const int32_t* __restrict__ chunkOff,
                                   const int64_t* __restrict__ starts, int G,
                                   double* __restrict__ avg) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= G) return;
    const int64_t cnt = starts[g + 1] - starts[g];
    double total = 0.0;
    for (int c = chunkOff[g]; c < chunkOff[g + 1]; ++c) total += partial[c];
    avg[g] = cnt > 0 ? total / double(cnt) : 0.0;
}

/// Farthest position of each active group from ref[g]: max of
/// (distance bits << 32 | ~position), ties to the first position.
__global__ void farthestKernel(const float* __restrict__ x, int d, const int32_t* __restrict__ perm,
                               const int32_t* __restrict__ posGroup, int64_t n,
                               const float* __restrict__ ref, const uint8_t* __restrict__ active,
                               unsigned long long* __restrict__ amax) {
    const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int g = posGroup[r];
    if (!active[g]) return;
    const float dist = canonicalL2Sq(x + size_t(perm[r]) * d, ref + size_t(g) * d, d);
    const unsigned long long packed =
        (static_cast<unsigned long long>(orderedFloatBits(dist)) << 32) |
        static_cast<unsigned long long>(0xffffffffu - uint32_t(r));
    atomicMax(&amax[g], packed);
}

__global__ void gatherRowsKernel(const float* __restrict__ x, int d,
                                 const int32_t* __restrict__ perm, const int64_t* __restrict__ pos,
                                 const uint8_t* __restrict__ active, float* __restrict__ out) {
    const int g = blockIdx.x;
    if (!active[g]) return;
    const float* row = x + size_t(perm[pos[g]]) * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) out[size_t(g) * d + j] = row[j];
}

__global__ void updatePointKernel(float* __restrict__ P, const float* __restrict__ Q,
                                  const float* __restrict__ ratio,
                                  const uint8_t* __restrict__ active, int d) {
    const int g = blockIdx.x;
    if (!active[g]) return;
    const float rt = ratio[g];
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const size_t i = size_t(g) * d + j;
        P[i] = addRn(Q[i], mulRn(rt, subRn(P[i], Q[i])));
    }
}

__global__ void splitKeysKernel(const float* __restrict__ x, int d, const int32_t* __restrict__ perm,
                                const int32_t* __restrict__ posGroup, int64_t n,
                                const uint8_t* __restrict__ rule, const float* __restrict__ vec,
                                const float* __restrict__ sqd, uint64_t* __restrict__ keys) {
    const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int g = posGroup[r];
    const float key = rule[g] == kRuleProjection
                          ? canonicalDot(vec + size_t(g) * d, x + size_t(perm[r]) * d, d)
                          : sqd[r];
    keys[r] = (uint64_t(uint32_t(g)) << 32) | uint64_t(orderedFloatBits(key));
}

__global__ void gatherKeysKernel(const uint64_t* __restrict__ keys, const int64_t* __restrict__ pos,
                                 int m, uint64_t* __restrict__ out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) out[i] = pos[i] >= 0 ? keys[pos[i]] : 0;
}


template <typename T>
void download(std::vector<T>* dst, const T* src, size_t n, cudaStream_t stream) {
    dst->resize(n);
    if (n == 0) return;
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(dst->data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

/// Device buffers of the tree training: n training vectors of dimension d,
/// at most maxG groups per level.
struct TreeBuffers {
    DeviceVector<int32_t> perm, permAlt, posGroup;
    DeviceVector<uint64_t> keys, keysAlt, gathered;
    DeviceVector<float> sqd, mean, P, Q, ratio, levelVec;
    DeviceVector<double> partial, avg;
    DeviceVector<int64_t> dStarts, chunkBegin, chunkEnd, pos;
    DeviceVector<int32_t> chunkOff;
    DeviceVector<uint8_t> active, levelRule;
    DeviceVector<unsigned long long> amax;
    DeviceVector<char> sortTemp;

    void allocate(int64_t n, int d, int maxG, cudaStream_t stream, const char* who) {
        perm.allocate(n, who, "permutation");
        permAlt.allocate(n, who, "permutation");
        posGroup.allocate(n, who, "groups");
        keys.allocate(n, who, "split keys");
        keysAlt.allocate(n, who, "split keys");
        sqd.allocate(n, who, "distances");
        const int64_t maxChunks = n / kClusteredChunk + maxG + 1;
        partial.allocate(size_t(maxChunks) * d, who, "clustered sums");
        mean.allocate(size_t(maxG) * d, who, "means");
        P.allocate(size_t(maxG) * d, who, "diameter points");
        Q.allocate(size_t(maxG) * d, who, "diameter points");
        levelVec.allocate(size_t(maxG) * d, who, "split vectors");
        ratio.allocate(maxG, who, "ratios");
        avg.allocate(maxG, who, "averages");
        amax.allocate(maxG, who, "farthest");
        active.allocate(maxG, who, "flags");
        levelRule.allocate(maxG, who, "rules");
        pos.allocate(2 * maxG, who, "positions");
        gathered.allocate(2 * maxG, who, "keys");
        dStarts.allocate(maxG + 1, who, "groups");
        chunkOff.allocate(maxG + 1, who, "chunks");
        chunkBegin.allocate(maxChunks, who, "chunks");
        chunkEnd.allocate(maxChunks, who, "chunks");
        size_t sortBytes = 0;
        {
            cub::DoubleBuffer<uint64_t> kb(keys.data(), keysAlt.data());
            cub::DoubleBuffer<int32_t> vb(perm.data(), permAlt.data());
            FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, kb, vb, int(n),
                                                                 0, 64, stream));
        }
        sortTemp.allocate(std::max<size_t>(sortBytes, 1), who, "sort");
    }
};

/// The G groups of a level (group g: positions starts[g] .. starts[g + 1] of
/// the permutation) on the device, cut into chunks of kClusteredChunk
/// positions, and every position's group. Returns the number of chunks.
int uploadGroups(TreeBuffers& b, const std::vector<int64_t>& starts, int G, int64_t n,
                 cudaStream_t stream) {
    std::vector<int64_t> cb, ce;
    std::vector<int32_t> coff(G + 1, 0);
    for (int g = 0; g < G; ++g) {
        coff[g] = int32_t(cb.size());
        for (int64_t c0 = starts[g]; c0 < starts[g + 1]; c0 += kClusteredChunk) {
            cb.push_back(c0);
            ce.push_back(std::min<int64_t>(starts[g + 1], c0 + kClusteredChunk));
        }
    }
    coff[G] = int32_t(cb.size());
    const int nChunks = int(cb.size());
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.dStarts.data(), starts.data(), (G + 1) * sizeof(int64_t),
                                         cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.chunkOff.data(), coff.data(), (G + 1) * sizeof(int32_t),
                                         cudaMemcpyHostToDevice, stream));
    if (nChunks > 0) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.chunkBegin.data(), cb.data(),
                                             nChunks * sizeof(int64_t), cudaMemcpyHostToDevice,
                                             stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.chunkEnd.data(), ce.data(),
                                             nChunks * sizeof(int64_t), cudaMemcpyHostToDevice,
                                             stream));
    }
    posGroupKernel<<<blocksFor(n, 256), 256, 0, stream>>>(b.dStarts.data(), G, n, b.posGroup.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    return nChunks;
}

/// Clustered mean of every group (into b.mean), each vector's squared
/// distance to its group's mean (b.sqd), and their clustered average per
/// group, returned.
std::vector<double> groupMeansAndSpread(TreeBuffers& b, const float* dX, int d, int64_t n, int G,
                                        int nChunks, cudaStream_t stream) {
    if (nChunks > 0) {
        chunkSumsKernel<<<nChunks, 128, 0, stream>>>(dX, d, b.perm.data(), b.chunkBegin.data(),
                                                     b.chunkEnd.data(), b.partial.data());
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
    groupMeansKernel<<<blocksFor(int64_t(G) * d, 256), 256, 0, stream>>>(
        b.partial.data(), b.chunkOff.data(), b.dStarts.data(), G, d, b.mean.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    sqdKernel<<<blocksFor(n, 128), 128, 0, stream>>>(dX, d, b.perm.data(), b.posGroup.data(),
                                                     b.mean.data(), n, b.sqd.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    // clustered average of the squared distances to the mean
    if (nChunks > 0) {
        chunkScalarSumsKernel<<<blocksFor(nChunks, 128), 128, 0, stream>>>(
            b.sqd.data(), b.chunkBegin.data(), b.chunkEnd.data(), nChunks, b.partial.data());
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
    groupAverageKernel<<<blocksFor(G, 128), 128, 0, stream>>>(b.partial.data(), b.chunkOff.data(),
                                                              b.dStarts.data(), G, b.avg.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    std::vector<double> avgSq;
    download(&avgSq, b.avg.data(), G, stream);
    return avgSq;
}

/// Approximate diameter of every group with >= 2 vectors (Algorithm 1):
/// returns each group's best diameter estimate (0 for the others).
std::vector<float> approximateDiameters(TreeBuffers& b, const BiLevelLSHConfig& config,
                                        const float* dX, int d, int64_t n, int level, int G,
                                        const std::vector<int64_t>& starts,
                                        const std::vector<int64_t>& counts, cudaStream_t stream) {
    std::vector<uint8_t> act(G, 0);
    std::vector<int64_t> startPos(2 * G, 0);
    for (int g = 0; g < G; ++g) {
        act[g] = counts[g] >= 2;
        startPos[g] = starts[g] + BiLevelLSHModel::diameterStart(config.seed, level, g, counts[g]);
    }
    std::vector<float> best(G, 0.f), ratioHost(G, 0.f), psi(G, 0.f);
    auto anyActive = [&]() {
        for (uint8_t a : act)
            if (a) return true;
        return false;
    };
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.active.data(), act.data(), G, cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.pos.data(), startPos.data(), G * sizeof(int64_t),
                                         cudaMemcpyHostToDevice, stream));
    gatherRowsKernel<<<G, 128, 0, stream>>>(dX, d, b.perm.data(), b.pos.data(), b.active.data(),
                                            b.P.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    std::vector<unsigned long long> am;
    // per active group, the packed (distance, position) of its vector
    // farthest from its row of `from`, into am
    auto farthestFrom = [&](const float* from) {
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(b.amax.data(), 0, G * sizeof(unsigned long long), stream));
        farthestKernel<<<blocksFor(n, 128), 128, 0, stream>>>(
            dX, d, b.perm.data(), b.posGroup.data(), n, from, b.active.data(), b.amax.data());
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        download(&am, b.amax.data(), G, stream);
    };
    for (int it = 0; it < config.diameterIterations && anyActive(); ++it) {
        farthestFrom(b.P.data());
        for (int g = 0; g < G; ++g) {
            if (!act[g]) continue;
            psi[g] = sqrtRn(floatFromOrderedBits(uint32_t(am[g] >> 32)));
            startPos[g] = int64_t(0xffffffffu - uint32_t(am[g] & 0xffffffffu));
        }
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.pos.data(), startPos.data(), G * sizeof(int64_t),
                                             cudaMemcpyHostToDevice, stream));
        gatherRowsKernel<<<G, 128, 0, stream>>>(dX, d, b.perm.data(), b.pos.data(), b.active.data(),
                                                b.Q.data());
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        farthestFrom(b.Q.data());
        for (int g = 0; g < G; ++g) {
            if (!act[g]) continue;
            const float psi2 = sqrtRn(floatFromOrderedBits(uint32_t(am[g] >> 32)));
            if (!(psi2 > best[g])) {
                act[g] = 0;
                continue;
            }
            best[g] = psi2;
            ratioHost[g] = divRn(psi[g], psi2);
        }
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.active.data(), act.data(), G, cudaMemcpyHostToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.ratio.data(), ratioHost.data(), G * sizeof(float),
                                             cudaMemcpyHostToDevice, stream));
        updatePointKernel<<<G, 128, 0, stream>>>(b.P.data(), b.Q.data(), b.ratio.data(),
                                                 b.active.data(), d);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
    return best;
}

/// The RP-tree mean rule: each group's split rule (projection or distance
/// to the mean) and split vector into the model's nodes of this level and
/// onto the device (b.levelRule, b.levelVec). Returns the number of
/// projection splits.
int chooseSplitRules(BiLevelLSHModel* model, TreeBuffers& b, const BiLevelLSHConfig& config,
                     int d, int G, const std::vector<int64_t>& counts,
                     const std::vector<float>& best, const std::vector<double>& avgSq,
                     cudaStream_t stream) {
    std::vector<uint8_t> rules(G, kRuleProjection);
    int projectionSplits = 0;
    bool anyDistance = false;
    for (int g = 0; g < G; ++g) {
        const int node = G - 1 + g;
        if (counts[g] < 2) {
            model->nodeRule[node] = kRuleProjection;
            model->nodeThreshold[node] = std::numeric_limits<float>::infinity();
            continue;
        }
        rules[g] = BiLevelLSHModel::splitRule(best[g], avgSq[g], config.meanRuleC);
        model->nodeRule[node] = rules[g];
        if (rules[g] == kRuleProjection) ++projectionSplits; else anyDistance = true;
    }
    if (anyDistance) {
        std::vector<float> meansHost;
        download(&meansHost, b.mean.data(), size_t(G) * d, stream);
        for (int g = 0; g < G; ++g)
            if (counts[g] >= 2 && rules[g] == kRuleDistance)
                std::copy(meansHost.begin() + size_t(g) * d, meansHost.begin() + size_t(g + 1) * d,
                          model->nodeVec.begin() + size_t(G - 1 + g) * d);
    }
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.levelRule.data(), rules.data(), G, cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.levelVec.data(), model->nodeVec.data() + size_t(G - 1) * d,
                                         size_t(G) * d * sizeof(float), cudaMemcpyHostToDevice,
                                         stream));
    return projectionSplits;
}

/// Each vector's split key under its group's rule, then the clustered sort:
/// the permutation ordered by (group, key), stable.
void sortBySplitKeys(TreeBuffers& b, const float* dX, int d, int64_t n, int G,
                     cudaStream_t stream) {
    splitKeysKernel<<<blocksFor(n, 128), 128, 0, stream>>>(dX, d, b.perm.data(), b.posGroup.data(), n,
                                                           b.levelRule.data(), b.levelVec.data(),
                                                           b.sqd.data(), b.keys.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    int groupBits = 0;
    while ((1 << groupBits) < G) ++groupBits;
    cub::DoubleBuffer<uint64_t> kb(b.keys.data(), b.keysAlt.data());
    cub::DoubleBuffer<int32_t> vb(b.perm.data(), b.permAlt.data());
    size_t bytes = b.sortTemp.size();
    FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(b.sortTemp.data(), bytes, kb, vb, int(n),
                                                         0, 32 + groupBits, stream));
    if (kb.Current() != b.keys.data()) b.keys.swap(b.keysAlt);
    if (vb.Current() != b.perm.data()) b.perm.swap(b.permAlt);
}

/// Splits every sorted group with >= 2 vectors at its median: the
/// thresholds into the model's nodes of this level; returns the 2 G groups
/// of the next level (their starts, n last).
std::vector<int64_t> splitAtMedians(BiLevelLSHModel* model, TreeBuffers& b, int64_t n, int G,
                                    const std::vector<int64_t>& starts,
                                    const std::vector<int64_t>& counts, cudaStream_t stream) {
    std::vector<int64_t> midPos(2 * G, -1);
    for (int g = 0; g < G; ++g) {
        if (counts[g] < 2) continue;
        const int64_t mid = counts[g] / 2;
        midPos[2 * g] = starts[g] + mid - 1;
        midPos[2 * g + 1] = starts[g] + mid;
    }
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(b.pos.data(), midPos.data(), 2 * G * sizeof(int64_t),
                                         cudaMemcpyHostToDevice, stream));
    gatherKeysKernel<<<blocksFor(2 * G, 128), 128, 0, stream>>>(b.keys.data(), b.pos.data(), 2 * G,
                                                                b.gathered.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    std::vector<uint64_t> mids;
    download(&mids, b.gathered.data(), 2 * G, stream);
    std::vector<int64_t> next(2 * G + 1);
    for (int g = 0; g < G; ++g) {
        next[2 * g] = starts[g];
        if (counts[g] < 2) {
            next[2 * g + 1] = starts[g + 1];
            continue;
        }
        const float a = floatFromOrderedBits(uint32_t(mids[2 * g] & 0xffffffffu));
        const float c = floatFromOrderedBits(uint32_t(mids[2 * g + 1] & 0xffffffffu));
        model->nodeThreshold[G - 1 + g] = splitThreshold(a, c);
        next[2 * g + 1] = starts[g] + counts[g] / 2;
    }
    next[2 * G] = n;
    return next;
}

}  // namespace

void trainTreeGpu(BiLevelLSHModel* model, const BiLevelLSHConfig& config, int64_t n,
                  const float* dX, cudaStream_t stream, bool verbose) {
    const char* who = "GpuIndexBiLevelLSH::train";
    const int d = model->d;
    const int depth = model->depth;
    FAISS_THROW_IF_NOT_FMT(n < (int64_t(1) << 31) - 1, "%s: at most 2^31 - 2 training vectors",
                           who);
    TreeBuffers b;
    b.allocate(n, d, 1 << depth, stream, who);

    iotaKernel<<<blocksFor(n, 256), 256, 0, stream>>>(b.perm.data(), n);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    std::vector<int64_t> starts = {0, n};
    for (int level = 0; level <= depth; ++level) {
        const double t0 = lshWallSeconds();
        const int G = 1 << level;
        const int nChunks = uploadGroups(b, starts, G, n, stream);
        std::vector<double> avgSq = groupMeansAndSpread(b, dX, d, n, G, nChunks, stream);
        std::vector<int64_t> counts(G);
        for (int g = 0; g < G; ++g) counts[g] = starts[g + 1] - starts[g];
        if (level == depth) {
            std::vector<float> meansHost;
            download(&meansHost, b.mean.data(), size_t(G) * d, stream);
            model->setLeaves(meansHost, avgSq, counts, config.bucketWidth);
            break;
        }
        std::vector<float> best =
                approximateDiameters(b, config, dX, d, n, level, G, starts, counts, stream);
        const int projectionSplits =
                chooseSplitRules(model, b, config, d, G, counts, best, avgSq, stream);
        sortBySplitKeys(b, dX, d, n, G, stream);
        starts = splitAtMedians(model, b, n, G, starts, counts, stream);
        if (verbose)
            std::printf("GpuIndexBiLevelLSH train: level %d: %d groups split (%d by projection, %d "
                        "by distance to the mean) in %.3f s\n",
                        level, G, projectionSplits, G - projectionSplits, lshWallSeconds() - t0);
    }
}

}  // namespace lsh_impl
}  // namespace gpu
}  // namespace faiss_ext
