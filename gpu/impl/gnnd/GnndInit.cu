// GNND list set-up and tear-down: the random initial graph (Algorithm 1,
// lines 1-5), GGM's initial graph (Algorithm 3, lines 1-9) and the final
// merge of segments and set-aside entries into sorted lists (Algorithm 3,
// line 12), with exact FP32 distances.
#include "faiss_ext/gpu/impl/gnnd/GnndCommon.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

constexpr int kInitWarps = 4;

__host__ __device__ int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/// A random start and a step coprime to m: (a + i * c) mod m visits every
/// residue once for i < m.
__device__ void randomWalk(uint64_t h, int64_t m, int64_t* a, int64_t* c) {
    if (m <= 1) {
        *a = 0;
        *c = 1;
        return;
    }
    *a = int64_t(mix64(h) % uint64_t(m));
    int64_t step = 1 + int64_t(mix64(h ^ 0x5bd1e995ull) % uint64_t(m - 1));
    while (gcd64(step, m) != 1) step = step % (m - 1) + 1;
    *c = step;
}

/// Sorts one raw 32-entry segment (in global memory) by distance, via
/// per-warp shared memory.
__device__ void sortSegment(uint32_t* ids, float* dists, float* sk, uint32_t* si, int lane) {
    sk[lane] = dists[lane];
    si[lane] = ids[lane];
    __syncwarp();
    warpBitonicSort(sk, si, 32, lane);
    dists[lane] = sk[lane];
    ids[lane] = si[lane];
    __syncwarp();
}

__global__ void randomInitKernel(const float* x, int64_t n, int d, int K, bool ip, uint64_t seed,
                                 uint32_t* gIds, float* gDists) {
    __shared__ float sk[kInitWarps][32];
    __shared__ uint32_t si[kInitWarps][32];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t s = int64_t(blockIdx.x) * kInitWarps + warp;
    if (s >= n) return;
    int nseg = K / kSegment;
    for (int j = 0; j < nseg; ++j) {
        // ids = j + r * nseg, r in [0, m)
        int64_t m = j < n ? (n - j + nseg - 1) / nseg : 0;
        int64_t a, c;
        randomWalk(seed ^ mix64(uint64_t(s) * 1315423911ull + j), m, &a, &c);
        auto candidate = [&](int64_t i) -> int64_t {
            return i < m ? j + ((a + (i % m) * c) % m) * nseg : -1;
        };
        int64_t mine = candidate(lane);
        int64_t extra = candidate(32);
        unsigned bad = __ballot_sync(kFull, mine == s);
        int64_t next = __shfl_down_sync(kFull, mine, 1);
        if (lane == 31) next = extra;
        int64_t id = mine;
        if (bad && lane >= __ffs(bad) - 1) id = next;
        uint32_t* segIds = gIds + s * K + j * kSegment;
        float* segD = gDists + s * K + j * kSegment;
        uint32_t out = kEmptyId;
        float dist = infinity();
        // distances by the whole warp, one entry at a time (coalesced rows)
        for (int e = 0; e < 32; ++e) {
            int64_t ide = __shfl_sync(kFull, id, e);
            if (ide < 0 || ide == s) continue;
            float de = warpDistance(x, nullptr, d, s, ide, ip, lane);
            if (lane == e) {
                out = uint32_t(ide) | kNewFlag;
                dist = de;
            }
        }
        segIds[lane] = out;
        segD[lane] = dist;
        __syncwarp();
        sortSegment(segIds, segD, sk[warp], si[warp], lane);
    }
}

__global__ void mergeInitKernel(const float* x, int64_t nA, int64_t nB, int d, int64_t offA,
                                int64_t offB, int K, bool ip, uint64_t seed, int* cIds,
                                float* cDists, const int* hIds, const float* hDists,
                                uint32_t* gIds, float* gDists) {
    __shared__ float sk[kInitWarps][32];
    __shared__ uint32_t si[kInitWarps][32];
    __shared__ int segCount[kInitWarps][kMaxBuildDegree / kSegment];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t n = nA + nB;
    int64_t s = int64_t(blockIdx.x) * kInitWarps + warp;
    if (s >= n) return;
    int nseg = K / kSegment;
    int* cnt = segCount[warp];
    for (int j = lane; j < nseg; j += 32) cnt[j] = 0;
    __syncwarp();
    bool inA = s < nA;
    int64_t ownOff = inA ? offA : offB, ownN = inA ? nA : nB, ownBase = inA ? 0 : nA;
    int64_t othN = inA ? nB : nA, othBase = inA ? nA : 0;
    uint32_t* g = gIds + s * K;
    float* gd = gDists + s * K;
    for (int e = lane; e < K; e += 32) {
        g[e] = kEmptyId;
        gd[e] = infinity();
    }
    __syncwarp();
    // 1. the first K/2 entries of the own set stay (OLD): from the head
    // lists when given (they stay in the canonical lists, duplicates go at
    // the end), else taken out of the canonical lists
    int half = K / 2, taken = 0;
    int* ci = cIds + s * K;
    float* cd = cDists + s * K;
    const bool separateHead = hIds != nullptr;
    const int* hi = separateHead ? hIds + s * K : ci;
    const float* hd = separateHead ? hDists + s * K : cd;
    for (int e0 = 0; e0 < K && taken < half; e0 += 32) {
        int e = e0 + lane;
        int64_t gid = e < K ? hi[e] : -1;
        bool own = gid >= ownOff && gid < ownOff + ownN;
        unsigned m = __ballot_sync(kFull, own);
        int rank = taken + __popc(m & ((1u << lane) - 1));
        if (own && rank < half) {
            int64_t local = ownBase + (gid - ownOff);
            int seg = int(local % nseg);
            int slot = atomicAdd(&cnt[seg], 1);
            if (slot < kSegment) {
                g[seg * kSegment + slot] = uint32_t(local);
                gd[seg * kSegment + slot] = hd[e];
                if (!separateHead) {
                    ci[e] = -1;
                    cd[e] = infinity();
                }
            }
        }
        taken += __popc(m);
        __syncwarp();
    }
    // 2. random nodes of the other set (NEW) in the rest of the list: K/2
    // when the own set gave K/2, more when it gave fewer (an own set smaller
    // than K/2, a small batch added to a large index), so that the list
    // starts full whenever the two sets hold K other nodes. Lists that start
    // short may stay short: the iterations can stop before they are filled.
    __syncwarp();
    int ownPlaced = 0;
    for (int j = 0; j < nseg; ++j) ownPlaced += min(cnt[j], kSegment);
    const int quota = K - ownPlaced;
    __syncwarp();
    if (othN > 0 && quota > 0) {
        int64_t a, c;
        randomWalk(seed ^ mix64(uint64_t(s) * 2654435761ull + 77), othN, &a, &c);
        int placed = 0;
        for (int64_t i0 = 0; i0 < othN && placed < quota && i0 < 8 * int64_t(K); i0 += 32) {
            int64_t i = i0 + lane;
            bool ok = false;
            int64_t local = -1;
            if (i < othN) {
                local = othBase + (a + i * c) % othN;
                int seg = int(local % nseg);
                if (atomicAdd(&cnt[seg], 1) < kSegment) {
                    ok = true;
                } else {
                    atomicSub(&cnt[seg], 1);
                }
            }
            unsigned m = __ballot_sync(kFull, ok);
            int rank = placed + __popc(m & ((1u << lane) - 1));
            if (ok && rank >= quota) {  // over quota: give the slot back
                atomicSub(&cnt[int(local % nseg)], 1);
                ok = false;
            }
            __syncwarp();
            // slots: re-count so that each accepted entry gets a distinct one
            unsigned acc = __ballot_sync(kFull, ok);
            for (int b = 0; b < 32; ++b) {
                if (!((acc >> b) & 1u)) continue;
                int64_t v = __shfl_sync(kFull, local, b);
                float dv = warpDistance(x, nullptr, d, s, v, ip, lane);
                if (lane == 0) {
                    int seg = int(v % nseg);
                    // the first empty slot of the segment
                    uint32_t* sg = g + seg * kSegment;
                    for (int t = 0; t < kSegment; ++t) {
                        if (sg[t] == kEmptyId) {
                            sg[t] = uint32_t(v) | kNewFlag;
                            gd[seg * kSegment + t] = dv;
                            break;
                        }
                    }
                }
                __syncwarp();
            }
            placed += __popc(acc);
        }
    }
    __syncwarp();
    for (int j = 0; j < nseg; ++j) {
        sortSegment(g + j * kSegment, gd + j * kSegment, sk[warp], si[warp], lane);
    }
}

/// The per-warp (key, id) buffer of P2 entries of the sorting kernels
/// below, cleared to empty.
__device__ void warpSortBuffer(unsigned char* smem, int warp, int P2, int lane, float** keys,
                               uint32_t** ids) {
    *keys = reinterpret_cast<float*>(smem) + warp * 2 * P2;
    *ids = reinterpret_cast<uint32_t*>(*keys + P2);
    for (int e = lane; e < P2; e += 32) {
        (*keys)[e] = infinity();
        (*ids)[e] = kEmptyId;
    }
    __syncwarp();
}

/// Writes the first K sorted buffer entries as node s's canonical list.
__device__ void writeCanonical(const float* keys, const uint32_t* ids, int64_t s, int K,
                               int* cIds, float* cDists, int lane) {
    for (int e = lane; e < K; e += 32) {
        bool empty = ids[e] == kEmptyId;
        cIds[s * K + e] = empty ? -1 : int(ids[e]);
        cDists[s * K + e] = empty ? infinity() : keys[e];
    }
}

/// Final lists: raw segments (exact distances recomputed) plus set-aside
/// canonical entries, de-duplicated by id, sorted, first K kept. Without
/// set-aside entries cIds may be gIds and cDists the raw distances (build()
/// finalises in place): a warp reads all of its node's raw row before it
/// writes the final one, and no other row.
__global__ void finalizeKernel(const float* x, int64_t n, int d, int K, bool ip,
                               const uint32_t* gIds, int64_t nA, int64_t offA, int64_t offB,
                               int* cIds, float* cDists, bool haveSetAside, int P2, int warps) {
    extern __shared__ unsigned char smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t s = int64_t(blockIdx.x) * warps + warp;
    if (s >= n) return;
    float* keys;
    uint32_t* ids;
    warpSortBuffer(smem, warp, P2, lane, &keys, &ids);
    // gather (distance, global id); global ids fit in 31 bits
    const uint32_t* g = gIds + s * K;
    for (int e0 = 0; e0 < K; e0 += 32) {
        uint32_t raw = g[e0 + lane];
        uint32_t local = raw & kIdMask;
        for (int b = 0; b < 32; ++b) {
            uint32_t lb = __shfl_sync(kFull, local, b);
            if (lb == kEmptyId) continue;
            float dv = warpDistance(x, nullptr, d, s, lb, ip, lane);
            if (lane == 0) {
                keys[e0 + b] = dv;
                ids[e0 + b] = uint32_t(lb < nA ? offA + lb : offB + (lb - nA));
            }
        }
    }
    if (haveSetAside) {
        for (int e = lane; e < K; e += 32) {
            int id = cIds[s * K + e];
            if (id >= 0) {
                keys[K + e] = cDists[s * K + e];
                ids[K + e] = uint32_t(id);
            }
        }
    }
    __syncwarp();
    // de-duplicate: sort by (id, distance), drop repeats, sort by distance
    warpBitonicSortBy(keys, ids, P2, lane, [](float ka, uint32_t ia, float kb, uint32_t ib) {
        return ia < ib || (ia == ib && ka < kb);
    });
    // pass 1 reads ids only and marks repeats (NaN key); pass 2 empties them
    for (int e = lane; e < P2; e += 32) {
        if (e > 0 && ids[e] != kEmptyId && ids[e] == ids[e - 1]) keys[e] = __int_as_float(0x7fc00000);
    }
    __syncwarp();
    for (int e = lane; e < P2; e += 32) {
        if (isnan(keys[e])) {
            keys[e] = infinity();
            ids[e] = kEmptyId;
        }
    }
    __syncwarp();
    warpBitonicSort(keys, ids, P2, lane);
    writeCanonical(keys, ids, s, K, cIds, cDists, lane);
}

__global__ void refreshKernel(const float* x, int64_t n, int d, int K, bool ip, int64_t idOffset,
                              int* cIds, float* cDists, int P2, int warps) {
    extern __shared__ unsigned char smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t s = int64_t(blockIdx.x) * warps + warp;
    if (s >= n) return;
    float* keys;
    uint32_t* ids;
    warpSortBuffer(smem, warp, P2, lane, &keys, &ids);
    for (int e0 = 0; e0 < K; e0 += 32) {
        int id = e0 + lane < K ? cIds[s * K + e0 + lane] : -1;
        for (int b = 0; b < 32; ++b) {
            int ib = __shfl_sync(kFull, id, b);
            if (ib < 0) continue;
            float dv = warpDistance(x, nullptr, d, s, ib - idOffset, ip, lane);
            if (lane == 0) {
                keys[e0 + b] = dv;
                ids[e0 + b] = uint32_t(ib);
            }
        }
    }
    __syncwarp();
    warpBitonicSort(keys, ids, P2, lane);
    writeCanonical(keys, ids, s, K, cIds, cDists, lane);
}

/// Exact lists of a small set (n <= 2K <= 2048): a warp per node scores all
/// others, sorts them and keeps the first K.
__global__ void exactSmallKernel(const float* x, int64_t n, int d, int K, bool ip,
                                 int64_t idOffset, int* cIds, float* cDists, int P2, int warps) {
    extern __shared__ unsigned char smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t s = int64_t(blockIdx.x) * warps + warp;
    if (s >= n) return;
    float* keys;
    uint32_t* ids;
    warpSortBuffer(smem, warp, P2, lane, &keys, &ids);
    for (int64_t j = 0; j < n; ++j) {
        if (j == s) continue;
        float dv = warpDistance(x, nullptr, d, s, j, ip, lane);
        if (lane == 0) {
            keys[j] = dv;
            ids[j] = uint32_t(idOffset + j);
        }
    }
    __syncwarp();
    warpBitonicSort(keys, ids, P2, lane);
    writeCanonical(keys, ids, s, K, cIds, cDists, lane);
}

unsigned gridFor(int64_t n, int warps) { return unsigned((n + warps - 1) / warps); }

}  // namespace

void launchRandomInit(cudaStream_t stream, const float* x, const float* norms, int64_t n, int d,
                      int K, bool ip, uint64_t seed, uint32_t* gIds, float* gDists) {
    if (n == 0) return;
    randomInitKernel<<<gridFor(n, kInitWarps), 32 * kInitWarps, 0, stream>>>(x, n, d, K, ip, seed,
                                                                             gIds, gDists);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void launchMergeInit(cudaStream_t stream, const float* x, const float* norms, int64_t nA,
                     int64_t nB, int d, int64_t offA, int64_t offB, int K, bool ip, uint64_t seed,
                     int* cIds, float* cDists, const int* hIds, const float* hDists,
                     uint32_t* gIds, float* gDists) {
    int64_t n = nA + nB;
    if (n == 0) return;
    mergeInitKernel<<<gridFor(n, kInitWarps), 32 * kInitWarps, 0, stream>>>(
            x, nA, nB, d, offA, offB, K, ip, seed, cIds, cDists, hIds, hDists, gIds, gDists);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

namespace {
void sortLaunchShape(int entries, int* P2, int* warps, size_t* smem) {
    *P2 = nextPow2(std::max(entries, 32));
    size_t perWarp = size_t(*P2) * 8;
    *warps = int(std::max<size_t>(1, std::min<size_t>(4, 32768 / perWarp)));
    *smem = perWarp * *warps;
}
}  // namespace

void launchFinalize(cudaStream_t stream, const float* x, const float* norms, int64_t n, int d,
                    int K, bool ip, const uint32_t* gIds, int64_t nA, int64_t offA, int64_t offB,
                    int* cIds, float* cDists, bool haveSetAside) {
    if (n == 0) return;
    int P2, warps;
    size_t smem;
    sortLaunchShape(haveSetAside ? 2 * K : K, &P2, &warps, &smem);
    finalizeKernel<<<gridFor(n, warps), 32 * warps, smem, stream>>>(
            x, n, d, K, ip, gIds, nA, offA, offB, cIds, cDists, haveSetAside, P2, warps);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void launchExactSmall(cudaStream_t stream, const float* x, int64_t n, int d, int K, bool ip,
                      int64_t idOffset, int* cIds, float* cDists) {
    FAISS_THROW_IF_NOT_FMT(n <= 2 * int64_t(kMaxBuildDegree), "exact small graph: n = %lld too large",
                           (long long)n);
    if (n == 0) return;
    int P2, warps;
    size_t smem;
    // the buffer holds the n candidates and is read back K entries deep
    // (writeCanonical): P2 >= max(n, K), or a small set with K > 32 reads
    // past its warp's buffer (garbage ids for n < K)
    sortLaunchShape(int(std::max<int64_t>(n, K)), &P2, &warps, &smem);
    exactSmallKernel<<<gridFor(n, warps), 32 * warps, smem, stream>>>(x, n, d, K, ip, idOffset, cIds,
                                                                      cDists, P2, warps);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void refreshDistances(cudaStream_t stream, const float* x, const float* norms, int64_t n, int d,
                      int K, bool innerProduct, int64_t idOffset, int* ids, float* dists) {
    if (n == 0) return;
    int P2, warps;
    size_t smem;
    sortLaunchShape(K, &P2, &warps, &smem);
    refreshKernel<<<gridFor(n, warps), 32 * warps, smem, stream>>>(x, n, d, K, innerProduct,
                                                                   idOffset, ids, dists, P2, warps);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
