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

/// One block's join: its node's samples in shared memory and the constants
/// every step needs.
struct JoinBlock {
    JoinShared& sh;
    const float* __restrict__ x;
    int d;
    bool ip;
    bool cross;             ///< GGM: only pairs on different sides of crossBoundary
    int64_t crossBoundary;
    int nNew, nOld;         ///< samples of each kind
    int rowsNew, rowsOld;   ///< rows in use: the sample counts rounded up to tiles of 16
    int tid, warp, lane;

    /// Whether row r (NEW rows 0.., OLD rows kMaxNew..) lies in a used tile.
    __device__ __forceinline__ bool rowUsed(int r) const {
        return r < kMaxNew ? r < rowsNew : (r - kMaxNew) < rowsOld;
    }
    /// Whether the pair of rows r, c does not count (empty, the same node,
    /// or in GGM mode both on one side).
    __device__ __forceinline__ bool masked(int r, int c) const {
        int a = sh.ids[r], b = sh.ids[c];
        return a < 0 || b < 0 || a == b ||
               (cross && ((a < crossBoundary) == (b < crossBoundary)));
    }
    /// FP32 distance of rows r, c from the chunk in shared memory (d <= kChunk).
    __device__ __forceinline__ float directDistance(int r, int c) const {
        if (masked(r, c)) return infinity();
        float acc = 0.f;
        for (int j = 0; j < d; ++j) {
            float u = sh.u.xs[r][j], v = sh.u.xs[c][j];
            if (ip) acc = fmaf(u, v, acc);
            else acc = fmaf(u - v, u - v, acc);
        }
        return ip ? -acc : acc;
    }
    /// Distance of rows r, c from their product g (tensor-core path).
    __device__ __forceinline__ float productDistance(int r, int c, float g) const {
        if (masked(r, c)) return infinity();
        if (ip) return -g;
        return fmaxf(sh.norms[r] + sh.norms[c] - 2.f * g, 0.f);
    }
    /// NEW x OLD distance of NEW row r and OLD sample o.
    __device__ __forceinline__ float newOld(bool direct, int r, int o) const {
        return direct ? directDistance(r, kMaxNew + o) : sh.u.gram[r][kMaxNew + o];
    }
};

/// Rows of node s: ids (and |x|^2 for L2) of its NEW samples in rows
/// 0..nNew, of its OLD samples in rows kMaxNew..kMaxNew + nOld; -1 elsewhere.
__device__ __forceinline__ void loadSampleRows(JoinBlock& b, const float* __restrict__ norms,
                                               const int* __restrict__ newList,
                                               const int* __restrict__ oldList, int64_t s,
                                               int p) {
    for (int r = b.tid; r < kRowsTotal; r += kThreads) {
        int id = -1;
        if (r < kMaxNew) {
            if (r < b.nNew) id = newList[s * 2 * p + r];
        } else if (r - kMaxNew < b.nOld) {
            id = oldList[s * 2 * p + (r - kMaxNew)];
        }
        b.sh.ids[r] = id;
        b.sh.norms[r] = (id >= 0 && !b.ip) ? norms[id] : 0.f;
    }
}

/// The 16 x 16 product tiles warp `warp` computes: NEW x NEW tiles on and
/// above the diagonal (none in GGM mode), then NEW x OLD tiles, dealt out
/// round robin. Tile i has rows taskRow[i].. and column rows taskCol[i]..
/// (< kMaxNew: NEW, else OLD). Returns the number of tiles.
__device__ __forceinline__ int planProductTiles(const JoinBlock& b, int rt, int ot,
                                                int (&taskRow)[kMaxTasksPerWarp],
                                                int (&taskCol)[kMaxTasksPerWarp]) {
    int nnTasks = b.cross ? 0 : rt * (rt + 1) / 2;
    int nTasks = nnTasks + rt * ot;
    int myTasks = 0;
    for (int t = b.warp; t < nTasks && myTasks < kMaxTasksPerWarp; t += kJoinWarps) {
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
    return myTasks;
}

/// Starts the loads of dimensions c0..c0 + 31 of this warp's rows (row
/// warp + 8 i into pre[i]), so they are in flight while the tensor cores
/// work on the previous chunk.
__device__ __forceinline__ void loadChunk(const JoinBlock& b, float (&pre)[kRowsPerWarp], int c0) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        int r = b.warp + kJoinWarps * i;
        int id = b.sh.ids[r];
        int j = c0 + b.lane;
        pre[i] = (b.rowUsed(r) && id >= 0 && j < b.d) ? __ldg(b.x + int64_t(id) * b.d + j) : 0.f;
    }
}

/// Writes the loaded chunk of this warp's rows into shared memory.
__device__ __forceinline__ void storeChunk(JoinBlock& b, const float (&pre)[kRowsPerWarp]) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        int r = b.warp + kJoinWarps * i;
        if (b.rowUsed(r)) b.sh.u.xs[r][b.lane] = pre[i];
    }
}

/// d <= 32: the vectors fit one chunk and the NEW-NEW distances come from
/// FP32 differences on CUDA cores (norms - 2 products in TF32 cancel badly
/// for low-dimensional data far from the origin, e.g. point clouds); the
/// NEW x OLD ones are computed where the selective update reads them.
__device__ __forceinline__ void directDistances(JoinBlock& b, const float (&pre)[kRowsPerWarp],
                                                int nTri) {
    storeChunk(b, pre);
    __syncthreads();
    for (int t = b.tid; t < nTri; t += kThreads) {
        int uu, vv;
        trianglePair(t, &uu, &vv);
        b.sh.dnn[t] = b.directDistance(uu, vv);
    }
    __syncthreads();
}

using ProductFragment = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

/// The products of this warp's tiles on tensor cores (TF32 in, FP32 out),
/// chunk by chunk of the dimension, stored into gram[row][column row].
__device__ __forceinline__ void tensorCoreProducts(JoinBlock& b, float (&pre)[kRowsPerWarp],
                                                   ProductFragment (&acc)[kMaxTasksPerWarp],
                                                   const int (&taskRow)[kMaxTasksPerWarp],
                                                   const int (&taskCol)[kMaxTasksPerWarp],
                                                   int myTasks) {
    for (int c0 = 0; c0 < b.d; c0 += kChunk) {
        __syncthreads();  // the previous chunk is no longer read
        storeChunk(b, pre);
        __syncthreads();
        if (c0 + kChunk < b.d) loadChunk(b, pre, c0 + kChunk);
#pragma unroll
        for (int kk = 0; kk < kChunk; kk += 8) {
#pragma unroll
            for (int i = 0; i < kMaxTasksPerWarp; ++i) {
                if (i < myTasks) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                                   wmma::row_major> a;
                    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32,
                                   wmma::col_major> bm;
                    wmma::load_matrix_sync(a, &b.sh.u.xs[taskRow[i]][kk], kLdx);
                    wmma::load_matrix_sync(bm, &b.sh.u.xs[taskCol[i]][kk], kLdx);
#pragma unroll
                    for (int e = 0; e < a.num_elements; ++e) a.x[e] = wmma::__float_to_tf32(a.x[e]);
#pragma unroll
                    for (int e = 0; e < bm.num_elements; ++e)
                        bm.x[e] = wmma::__float_to_tf32(bm.x[e]);
                    wmma::mma_sync(acc[i], a, bm, acc[i]);
                }
            }
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMaxTasksPerWarp; ++i) {
        if (i < myTasks) {
            wmma::store_matrix_sync(&b.sh.u.gram[taskRow[i]][taskCol[i]], acc[i], kLdg,
                                    wmma::mem_row_major);
        }
    }
    __syncthreads();
}

/// Distances from the products: the NEW-NEW triangle (thread t -> pair (u, v)
/// by eq. 1-2) into dnn, the NEW x OLD ones in place in gram.
__device__ __forceinline__ void productDistances(JoinBlock& b, int nTri) {
    for (int t = b.tid; t < nTri; t += kThreads) {
        int uu, vv;
        trianglePair(t, &uu, &vv);
        b.sh.dnn[t] = b.productDistance(uu, vv, b.sh.u.gram[vv][uu]);
    }
    for (int t = b.tid; t < b.nNew * b.nOld; t += kThreads) {
        int r = t / b.nOld, o = t % b.nOld;
        b.sh.u.gram[r][kMaxNew + o] = b.productDistance(r, kMaxNew + o, b.sh.u.gram[r][kMaxNew + o]);
    }
    __syncthreads();
}

/// Selective update (Algorithm 2): NEW sample t -> candidates 2t (its
/// nearest NEW sample) and 2t + 1 (its nearest OLD sample); OLD sample o ->
/// candidate 2 nNew + o (its nearest NEW sample). One warp per sample.
__device__ __forceinline__ void selectiveUpdate(JoinBlock& b, bool direct) {
    JoinShared& sh = b.sh;
    const int nNew = b.nNew, nOld = b.nOld, lane = b.lane;
    for (int t = b.warp; t < nNew + nOld; t += kJoinWarps) {
        if (t < nNew) {
            float bd = infinity();
            int bi = -1;
            if (!b.cross) {
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
            float bo = infinity();
            int io = -1;
            for (int o = lane; o < nOld; o += 32) {
                float dv = b.newOld(direct, t, o);
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
            float bd = infinity();
            int bi = -1;
            for (int r = lane; r < nNew; r += 32) {
                float dv = b.newOld(direct, r, o);
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
}

/// Bulk pre-check without locks: keeps the candidates closer than the last
/// entry of their target segment (all loads in flight at once), compacted
/// to the front of the candidate arrays. Returns their number.
__device__ __forceinline__ int keepCloserCandidates(JoinBlock& b, const float* gDists, int K,
                                                    int nseg) {
    JoinShared& sh = b.sh;
    const int tid = b.tid;
    const int nCand = 2 * b.nNew + b.nOld;
    if (tid == 0) sh.nSurvivors = 0;
    __syncthreads();
    int keepT = -1, keepV = -1;
    float keepD = 0.f;
    if (tid < nCand && sh.candDist[tid] < infinity()) {
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
    return sh.nSurvivors;
}

/// Inserts the nSurv kept candidates (one warp per insertion) and adds the
/// block's accepted insertions to *updates.
__device__ __forceinline__ void insertCandidates(JoinBlock& b, int nSurv, uint32_t* gIds,
                                                 float* gDists, int* locks, int K, int nseg,
                                                 unsigned long long* updates) {
    JoinShared& sh = b.sh;
    int mine = 0;
    for (int c = b.warp; c < nSurv; c += kJoinWarps) {
        mine += insertIntoList(gIds, gDists, locks, K, nseg, sh.candTarget[c], sh.candId[c],
                               sh.candDist[c], b.lane);
    }
    if (b.lane == 0 && mine) atomicAdd(&sh.updates, (unsigned long long)mine);
    __syncthreads();
    if (b.tid == 0 && sh.updates) atomicAdd(updates, sh.updates);
}

/// The join of node s = nodeBegin + blockIdx.x (see the top of this file).
__global__ void __launch_bounds__(kThreads, 4) joinKernel(
        const float* __restrict__ x, const float* __restrict__ norms, int64_t n, int d, int K,
        int p, bool ip, int64_t crossBoundary, const int* __restrict__ newList,
        const int* __restrict__ oldList, const int* __restrict__ counts, uint32_t* gIds,
        float* gDists, int* locks, unsigned long long* updates, int64_t nodeBegin) {
    __shared__ JoinShared sh;
    int64_t s = nodeBegin + int64_t(blockIdx.x);
    int tid = threadIdx.x;
    int nNew = counts[s];
    if (nNew == 0) return;
    int nOld = counts[n + s];
    int rt = (nNew + 15) / 16, ot = (nOld + 15) / 16;
    JoinBlock b{sh,        x,       d,       ip,      crossBoundary >= 0, crossBoundary,
                nNew,      nOld,    rt * 16, ot * 16, tid,                tid >> 5,
                tid & 31};
    if (tid == 0) sh.updates = 0;
    loadSampleRows(b, norms, newList, oldList, s, p);
    __syncthreads();

    int taskRow[kMaxTasksPerWarp], taskCol[kMaxTasksPerWarp];
    int myTasks = planProductTiles(b, rt, ot, taskRow, taskCol);
    ProductFragment acc[kMaxTasksPerWarp];
#pragma unroll
    for (int i = 0; i < kMaxTasksPerWarp; ++i) wmma::fill_fragment(acc[i], 0.f);

    float pre[kRowsPerWarp];
    loadChunk(b, pre, 0);
    const bool direct = d <= kChunk;
    int nTri = b.cross ? 0 : nNew * (nNew - 1) / 2;
    if (direct) {
        directDistances(b, pre, nTri);
    } else {
        tensorCoreProducts(b, pre, acc, taskRow, taskCol, myTasks);
        productDistances(b, nTri);
    }

    selectiveUpdate(b, direct);
    int nseg = K / kSegment;
    int nSurv = keepCloserCandidates(b, gDists, K, nseg);
    insertCandidates(b, nSurv, gIds, gDists, locks, K, nseg, updates);
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
