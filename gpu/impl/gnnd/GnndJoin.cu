// GNND cross-matching and graph update (sections 4.2 and 4.3), one thread
// block per node s:
//  - the NEW samples (rows 0..63) and OLD samples (rows 64..127) of s are
//    loaded into shared memory chunk by chunk of the dimension; their
//    products come from tensor-core tiles (TF32 in, FP32 out): NEW x NEW
//    tiles on and above the diagonal only, NEW x OLD tiles all;
//  - NEW-NEW distances are laid out as the paper's triangle: pair (u, v),
//    u > v, at u (u - 1) / 2 + v, thread t computing the pair of eq. 1-2;
//  - selective update (Algorithm 2): each NEW sample gets its nearest other
//    NEW sample and its nearest OLD sample, each OLD sample its nearest NEW
//    sample, found by a warp-shuffle minimum;
//  - insertion into the target's list segment v % (K / 32) under that
//    segment's spinlock, one warp per insertion, skipped without the lock
//    when the candidate is not closer than the segment's last entry.
// In GGM mode (crossBoundary >= 0) only pairs from different sets count and
// NEW-NEW pairs are not computed (all NEW samples of a node lie in the other
// set).
#include "faiss_ext/gpu/impl/gnnd/GnndCommon.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <mma.h>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

using namespace nvcuda;

constexpr int kThreads = 256;
constexpr int kJoinWarps = kThreads / 32;
constexpr int kMaxNew = 2 * kMaxSamples;   // 64
constexpr int kRowsTotal = 2 * kMaxNew;    // 128: NEW rows then OLD rows
constexpr int kChunk = 32;                 // dimensions per shared-memory chunk
constexpr int kLdx = kChunk + 4;           // row stride of the chunk (floats)
constexpr int kLdg = kRowsTotal + 4;       // row stride of the product matrix
constexpr int kTri = kMaxNew * (kMaxNew - 1) / 2;
constexpr int kMaxTasksPerWarp = 4;        // (10 + 16) tiles over 8 warps
constexpr int kMaxCand = 3 * kMaxNew;      // 2 per NEW sample, 1 per OLD sample
constexpr int kRowsPerWarp = kRowsTotal / kJoinWarps;  // rows each warp gathers

struct __align__(128) JoinShared {
    union {
        float xs[kRowsTotal][kLdx];   // chunk of the sample vectors
        float gram[kMaxNew][kLdg];    // products, then NEW x OLD distances
    } u;
    float dnn[kTri];                  // NEW-NEW distances, triangle of eq. 1-2
    int ids[kRowsTotal];
    float norms[kRowsTotal];
    // selected (target, partner, distance) of the selective update
    int candTarget[kMaxCand];
    int candId[kMaxCand];
    float candDist[kMaxCand];
    int nSurvivors;
    unsigned long long updates;
};

/// Eq. 1-2: thread t of the NEW-NEW triangle computes pair (u, v), u > v,
/// stored at u (u - 1) / 2 + v.
__device__ __forceinline__ void trianglePair(int t, int* u, int* v) {
    int uu = int(ceilf(sqrtf(2.f * t + 2.25f) - 0.5f));
    int vv = t - uu * (uu - 1) / 2;
    if (vv < 0) {  // float rounding at the edges of a row
        --uu;
        vv = t - uu * (uu - 1) / 2;
    } else if (vv >= uu) {
        ++uu;
        vv = t - uu * (uu - 1) / 2;
    }
    *u = uu;
    *v = vv;
}

__device__ __forceinline__ int triIndex(int a, int b) {  // a != b
    int u = a > b ? a : b, v = a > b ? b : a;
    return u * (u - 1) / 2 + v;
}

/// Inserts (v, dv) into node u's list (segment v % nseg) under the segment's
/// spinlock; returns 1 when inserted. Whole warp.
__device__ int insertIntoList(uint32_t* gIds, float* gDists, int* locks, int K, int nseg, int u,
                              int v, float dv, int lane) {
    int seg = v % nseg;
    int64_t base = int64_t(u) * K + seg * kSegment;
    int* lock = locks + int64_t(u) * nseg + seg;
    if (lane == 0) {
        int backoff = 8;
        while (atomicCAS(lock, 0, 1) != 0) {
            __nanosleep(backoff);
            backoff = min(backoff * 2, 256);
        }
        __threadfence();
    }
    __syncwarp();
    uint32_t e = __ldcg(gIds + base + lane);
    float de = __ldcg(gDists + base + lane);
    bool dup = __any_sync(kFull, (e & kIdMask) == uint32_t(v));
    float last = __shfl_sync(kFull, de, kSegment - 1);
    int inserted = 0;
    if (!dup && dv < last) {
        unsigned before = __ballot_sync(kFull, pairLess(de, e & kIdMask, dv, uint32_t(v)));
        int pos = __popc(before);
        float upD = __shfl_up_sync(kFull, de, 1);
        uint32_t upE = __shfl_up_sync(kFull, e, 1);
        if (lane == pos) {
            __stcg(gIds + base + lane, uint32_t(v) | kNewFlag);
            __stcg(gDists + base + lane, dv);
        } else if (lane > pos) {
            __stcg(gIds + base + lane, upE);
            __stcg(gDists + base + lane, upD);
        }
        inserted = 1;
    }
    __threadfence();
    __syncwarp();
    if (lane == 0) atomicExch(lock, 0);
    return inserted;
}

/// Warp minimum of (distance, id) pairs (Algorithm 2, lines 11-15).
__device__ __forceinline__ void warpArgMin(float& d, int& id) {
    for (int o = 16; o > 0; o >>= 1) {
        float od = __shfl_down_sync(kFull, d, o);
        int oi = __shfl_down_sync(kFull, id, o);
        if (od < d || (od == d && uint32_t(oi) < uint32_t(id))) {
            d = od;
            id = oi;
        }
    }
    d = __shfl_sync(kFull, d, 0);
    id = __shfl_sync(kFull, id, 0);
}

__global__ void __launch_bounds__(kThreads, 4) joinKernel(
        const float* __restrict__ x, const float* __restrict__ norms, int64_t n, int d, int K,
        int p, bool ip, int64_t crossBoundary, const int* __restrict__ newList,
        const int* __restrict__ oldList, const int* __restrict__ counts, uint32_t* gIds,
        float* gDists, int* locks, unsigned long long* updates, int64_t nodeBegin) {
    __shared__ JoinShared sh;
    int64_t s = nodeBegin + int64_t(blockIdx.x);
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int nNew = counts[s];
    if (nNew == 0) return;
    int nOld = counts[n + s];
    bool cross = crossBoundary >= 0;
    if (tid == 0) sh.updates = 0;
    for (int r = tid; r < kRowsTotal; r += kThreads) {
        int id = -1;
        if (r < kMaxNew) {
            if (r < nNew) id = newList[s * 2 * p + r];
        } else if (r - kMaxNew < nOld) {
            id = oldList[s * 2 * p + (r - kMaxNew)];
        }
        sh.ids[r] = id;
        sh.norms[r] = (id >= 0 && !ip) ? norms[id] : 0.f;
    }
    __syncthreads();

    int rt = (nNew + 15) / 16, ot = (nOld + 15) / 16;
    int nnTasks = cross ? 0 : rt * (rt + 1) / 2;
    int nTasks = nnTasks + rt * ot;
    // task t -> (row tile, column row offset); column rows < 64 are NEW, >= 64 OLD
    int taskRow[kMaxTasksPerWarp], taskCol[kMaxTasksPerWarp];
    int myTasks = 0;
    for (int t = warp; t < nTasks && myTasks < kMaxTasksPerWarp; t += kJoinWarps) {
        int ri, cr;
        if (t < nnTasks) {
            int q = t;
            ri = 0;
            while (q >= rt - ri) {
                q -= rt - ri;
                ++ri;
            }
            cr = (ri + q) * 16;
        } else {
            int q = t - nnTasks;
            ri = q / ot;
            cr = kMaxNew + (q % ot) * 16;
        }
        taskRow[myTasks] = ri * 16;
        taskCol[myTasks] = cr;
        ++myTasks;
    }
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[kMaxTasksPerWarp];
#pragma unroll
    for (int i = 0; i < kMaxTasksPerWarp; ++i) wmma::fill_fragment(acc[i], 0.f);

    int rowsNew = rt * 16, rowsOld = ot * 16;
    // Row r = warp + 8 i of the chunk goes through register pre[i]: the next
    // chunk's loads are in flight while the tensor cores work on this one.
    float pre[kRowsPerWarp];
    auto rowUsed = [&](int r) {
        return r < kMaxNew ? r < rowsNew : (r - kMaxNew) < rowsOld;
    };
    auto loadChunk = [&](int c0) {
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
            int r = warp + kJoinWarps * i;
            int id = sh.ids[r];
            int j = c0 + lane;
            pre[i] = (rowUsed(r) && id >= 0 && j < d) ? __ldg(x + int64_t(id) * d + j) : 0.f;
        }
    };
    loadChunk(0);
    // d <= 32: the vectors fit one chunk and the distances come from FP32
    // differences on CUDA cores (norms - 2 products in TF32 cancel badly for
    // low-dimensional data far from the origin, e.g. point clouds).
    const bool direct = d <= kChunk;
    auto masked = [&](int r, int c) {
        int a = sh.ids[r], b = sh.ids[c];
        return a < 0 || b < 0 || a == b ||
               (cross && ((a < crossBoundary) == (b < crossBoundary)));
    };
    auto directDistance = [&](int r, int c) -> float {
        if (masked(r, c)) return infty();
        float acc = 0.f;
        for (int j = 0; j < d; ++j) {
            float u = sh.u.xs[r][j], v = sh.u.xs[c][j];
            if (ip) acc = fmaf(u, v, acc);
            else acc = fmaf(u - v, u - v, acc);
        }
        return ip ? -acc : acc;
    };
    // NEW x OLD distance of NEW row r and OLD sample o
    auto newOld = [&](int r, int o) -> float {
        return direct ? directDistance(r, kMaxNew + o) : sh.u.gram[r][kMaxNew + o];
    };
    int nTri = cross ? 0 : nNew * (nNew - 1) / 2;
    if (direct) {
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
            int r = warp + kJoinWarps * i;
            if (rowUsed(r)) sh.u.xs[r][lane] = pre[i];
        }
        __syncthreads();
        for (int t = tid; t < nTri; t += kThreads) {
            int uu, vv;
            trianglePair(t, &uu, &vv);
            sh.dnn[t] = directDistance(uu, vv);
        }
        __syncthreads();
    } else {
        for (int c0 = 0; c0 < d; c0 += kChunk) {
            __syncthreads();  // the previous chunk is no longer read
#pragma unroll
            for (int i = 0; i < kRowsPerWarp; ++i) {
                int r = warp + kJoinWarps * i;
                if (rowUsed(r)) sh.u.xs[r][lane] = pre[i];
            }
            __syncthreads();
            if (c0 + kChunk < d) loadChunk(c0 + kChunk);
#pragma unroll
            for (int kk = 0; kk < kChunk; kk += 8) {
#pragma unroll
                for (int i = 0; i < kMaxTasksPerWarp; ++i) {
                    if (i < myTasks) {
                        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                                       wmma::row_major> a;
                        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32,
                                       wmma::col_major> b;
                        wmma::load_matrix_sync(a, &sh.u.xs[taskRow[i]][kk], kLdx);
                        wmma::load_matrix_sync(b, &sh.u.xs[taskCol[i]][kk], kLdx);
#pragma unroll
                        for (int e = 0; e < a.num_elements; ++e) a.x[e] = wmma::__float_to_tf32(a.x[e]);
#pragma unroll
                        for (int e = 0; e < b.num_elements; ++e) b.x[e] = wmma::__float_to_tf32(b.x[e]);
                        wmma::mma_sync(acc[i], a, b, acc[i]);
                    }
                }
            }
        }
        __syncthreads();
        // products into gram[row][column row]
#pragma unroll
        for (int i = 0; i < kMaxTasksPerWarp; ++i) {
            if (i < myTasks) {
                wmma::store_matrix_sync(&sh.u.gram[taskRow[i]][taskCol[i]], acc[i], kLdg,
                                        wmma::mem_row_major);
            }
        }
        __syncthreads();
        auto pairDistance = [&](int r, int c, float g) -> float {
            if (masked(r, c)) return infty();
            if (ip) return -g;
            return fmaxf(sh.norms[r] + sh.norms[c] - 2.f * g, 0.f);
        };
        // NEW-NEW triangle, thread t -> (u, v) by eq. 1-2
        for (int t = tid; t < nTri; t += kThreads) {
            int uu, vv;
            trianglePair(t, &uu, &vv);
            sh.dnn[t] = pairDistance(uu, vv, sh.u.gram[vv][uu]);
        }
        // NEW-OLD distances in place
        for (int t = tid; t < nNew * nOld; t += kThreads) {
            int r = t / nOld, o = t % nOld;
            sh.u.gram[r][kMaxNew + o] = pairDistance(r, kMaxNew + o, sh.u.gram[r][kMaxNew + o]);
        }
        __syncthreads();
    }

    // selective update (Algorithm 2): NEW sample t -> candidates 2t (nearest
    // NEW) and 2t + 1 (nearest OLD); OLD sample o -> candidate 2 nNew + o
    int nCand = 2 * nNew + nOld;
    for (int t = warp; t < nNew + nOld; t += kJoinWarps) {
        if (t < nNew) {
            float bd = infty();
            int bi = -1;
            if (!cross) {
                for (int v = lane; v < nNew; v += 32) {
                    if (v == t) continue;
                    float dv = sh.dnn[triIndex(t, v)];
                    int iv = sh.ids[v];
                    if (dv < bd || (dv == bd && uint32_t(iv) < uint32_t(bi))) {
                        bd = dv;
                        bi = iv;
                    }
                }
                warpArgMin(bd, bi);
            }
            float bo = infty();
            int io = -1;
            for (int o = lane; o < nOld; o += 32) {
                float dv = newOld(t, o);
                int iv = sh.ids[kMaxNew + o];
                if (dv < bo || (dv == bo && uint32_t(iv) < uint32_t(io))) {
                    bo = dv;
                    io = iv;
                }
            }
            warpArgMin(bo, io);
            if (lane == 0) {
                sh.candTarget[2 * t] = sh.ids[t];
                sh.candId[2 * t] = bi;
                sh.candDist[2 * t] = bd;
                sh.candTarget[2 * t + 1] = sh.ids[t];
                sh.candId[2 * t + 1] = io;
                sh.candDist[2 * t + 1] = bo;
            }
        } else {
            int o = t - nNew;
            float bd = infty();
            int bi = -1;
            for (int r = lane; r < nNew; r += 32) {
                float dv = newOld(r, o);
                int iv = sh.ids[r];
                if (dv < bd || (dv == bd && uint32_t(iv) < uint32_t(bi))) {
                    bd = dv;
                    bi = iv;
                }
            }
            warpArgMin(bd, bi);
            if (lane == 0) {
                sh.candTarget[2 * nNew + o] = sh.ids[kMaxNew + o];
                sh.candId[2 * nNew + o] = bi;
                sh.candDist[2 * nNew + o] = bd;
            }
        }
    }
    if (tid == 0) sh.nSurvivors = 0;
    __syncthreads();
    // bulk pre-check without locks: keep candidates closer than the last
    // entry of their target segment (all loads in flight at once)
    int nseg = K / kSegment;
    int keepT = -1, keepV = -1;
    float keepD = 0.f;
    if (tid < nCand && sh.candDist[tid] < infty()) {
        int u = sh.candTarget[tid], v = sh.candId[tid];
        float dv = sh.candDist[tid];
        float worst = __ldcg(gDists + int64_t(u) * K + (v % nseg) * kSegment + kSegment - 1);
        if (dv < worst) {
            keepT = u;
            keepV = v;
            keepD = dv;
        }
    }
    __syncthreads();
    if (keepT >= 0) {
        int pos = atomicAdd(&sh.nSurvivors, 1);
        sh.candTarget[pos] = keepT;
        sh.candId[pos] = keepV;
        sh.candDist[pos] = keepD;
    }
    __syncthreads();
    int nSurv = sh.nSurvivors;
    int mine = 0;
    for (int c = warp; c < nSurv; c += kJoinWarps) {
        mine += insertIntoList(gIds, gDists, locks, K, nseg, sh.candTarget[c], sh.candId[c],
                               sh.candDist[c], lane);
    }
    if (lane == 0 && mine) atomicAdd(&sh.updates, (unsigned long long)mine);
    __syncthreads();
    if (tid == 0 && sh.updates) atomicAdd(updates, sh.updates);
}

}  // namespace

void launchJoin(cudaStream_t stream, const float* x, const float* norms, int64_t n, int d, int K,
                int p, bool ip, int64_t crossBoundary, const int* newList, const int* oldList,
                const int* counts, uint32_t* gIds, float* gDists, int* locks,
                unsigned long long* updates, int64_t nodeBegin, int64_t nodeEnd) {
    if (nodeEnd < 0) nodeEnd = n;
    FAISS_THROW_IF_NOT_FMT(nodeBegin >= 0 && nodeBegin <= nodeEnd && nodeEnd <= n,
                           "GNND join: node range [%lld, %lld) not in [0, %lld]",
                           (long long)nodeBegin, (long long)nodeEnd, (long long)n);
    if (nodeEnd == nodeBegin) return;
    FAISS_THROW_IF_NOT_FMT(p >= 1 && p <= kMaxSamples, "GNND join: p = %d not in [1, %d]", p,
                           kMaxSamples);
    joinKernel<<<unsigned(nodeEnd - nodeBegin), kThreads, 0, stream>>>(
            x, norms, n, d, K, p, ip, crossBoundary, newList, oldList, counts, gIds, gDists, locks,
            updates, nodeBegin);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
