// Search of Bi-level LSH on the GPU (Pan & Manocha 2011, docs/references.md, section
// 5.3): per query its groups (best-first RP-tree descent), its codes, the
// candidate intervals of every (group, table) (multi-probe and Morton
// widening, BiLevelLSHCommon.h), then the short-list search:
//   per-query heap: one warp per query keeps its k best (distance, id) in
//     shared memory; each batch of 32 candidates is filtered against the
//     k-th, sorted and merged in (duplicates from several tables dropped);
//   work queue: the (query, candidate) pairs of a batch of queries are
//     written to one queue, their distances computed, the queue radix-sorted
//     by (query, distance) (the clustered sort) and the first k distinct
//     entries of each query compacted out.
#include "faiss_ext/gpu/impl/lsh/LshEngine.h"

#include "faiss_ext/gpu/utils/WarpSort.cuh"

#include <faiss/impl/FaissAssert.h>

#include <cub/cub.cuh>

#include <algorithm>
#include <limits>

namespace faiss_ext {
namespace gpu {
namespace lsh_impl {

namespace {

using namespace faiss_ext::lsh;

__global__ void queryGroupsKernel(const uint8_t* __restrict__ rule, const float* __restrict__ vec,
                                  const float* __restrict__ thr, int depth, int d,
                                  const float* __restrict__ q, int64_t nq, int groupProbes,
                                  const float* __restrict__ leafWidth, float groupMargin,
                                  int32_t* __restrict__ groups) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    int g[kMaxGroupProbes];
    const int found = bestGroups(rule, vec, thr, depth, d, q + size_t(i) * d, groupProbes, g,
                                 leafWidth, groupMargin);
    for (int j = 0; j < groupProbes; ++j) groups[i * groupProbes + j] = j < found ? g[j] : -1;
}

struct IntervalArgs {
    CuckooView cuckoo;
    const BucketRange* ranges;
    const uint64_t* sortedCodes;
    const int64_t* groupStart;
    const float* leafOffset;
    const float* leafWidth;
    const float* bias;
    int64_t ntotal;
    int L, M, bits, lattice, nprobe, tables, groupProbes, slots;
    int64_t minCandidates;
    uint64_t salt;
};

/// One thread per (query, group probe, table).
__global__ void intervalsKernel(IntervalArgs a, const float* __restrict__ qProj,
                                const int32_t* __restrict__ groups, int64_t nq,
                                Interval* __restrict__ out, int32_t* __restrict__ counts) {
    const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int perQuery = a.groupProbes * a.tables;
    if (tid >= nq * perQuery) return;
    const int64_t q = tid / perQuery;
    const int r = int(tid % perQuery);
    const int gi = r / a.tables, t = r % a.tables;
    const int g = groups[q * a.groupProbes + gi];
    if (g < 0) {
        counts[tid] = 0;
        return;
    }
    const int LM = a.L * a.M;
    uint32_t u[kMaxProjections];
    float frac[kMaxProjections];
    latticeCoordinates(a.lattice, qProj + size_t(q) * LM + size_t(t) * a.M,
                       a.leafOffset + size_t(g) * LM + size_t(t) * a.M, a.leafWidth[g],
                       a.bias + size_t(t) * a.M, a.M, a.bits, u, frac);
    counts[tid] = collectIntervals(t, g, u, frac, a.M, a.bits, a.nprobe, a.minCandidates, a.salt,
                                   a.cuckoo, a.ranges, a.sortedCodes + size_t(t) * a.ntotal,
                                   a.groupStart[g], a.groupStart[g + 1], int64_t(t) * a.ntotal,
                                   out + size_t(tid) * a.slots);
}

/// Partial squared distance of the lane's share of dimensions (4 floats a
/// lane per step of 128) between row and q.
template <bool kVec4>
__device__ __forceinline__ float lanePartial(const float* __restrict__ q,
                                             const float* __restrict__ row, int d, int lane) {
    float s = 0.f;
    if (kVec4) {
        const float4* r4 = reinterpret_cast<const float4*>(row);
        const float4* q4 = reinterpret_cast<const float4*>(q);
        for (int j = lane; j < d / 4; j += 32) {
            const float4 a = __ldg(r4 + j), c = q4[j];
            const float t0 = c.x - a.x, t1 = c.y - a.y, t2 = c.z - a.z, t3 = c.w - a.w;
            s = fmaf(t0, t0, s);
            s = fmaf(t1, t1, s);
            s = fmaf(t2, t2, s);
            s = fmaf(t3, t3, s);
        }
    } else {
        for (int j = lane; j < d; j += 32) {
            const float t = q[j] - __ldg(row + j);
            s = fmaf(t, t, s);
        }
    }
    return s;
}

/// Squared L2 distance of the query to each lane's candidate `id` (< 0:
/// none; result +inf). Valid lanes must form a prefix of the warp. Small d:
/// one lane per candidate; else the whole warp reads each row (coalesced),
/// four rows at a time so that their loads overlap.
template <bool kVec4>
__device__ __forceinline__ float warpCandidateDistance(const float* __restrict__ q,
                                                       const float* __restrict__ vectors, int d,
                                                       int id, int lane) {
    float mine = INFINITY;
    const int nValid = __popc(__ballot_sync(0xffffffffu, id >= 0));
    if (d <= 16) {
        if (id >= 0) {
            const float* row = vectors + size_t(id) * d;
            float s = 0.f;
            for (int j = 0; j < d; ++j) {
                const float t = q[j] - row[j];
                s = fmaf(t, t, s);
            }
            mine = s;
        }
        return mine;
    }
    for (int b0 = 0; b0 < nValid; b0 += 4) {
        float s[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int idb = __shfl_sync(0xffffffffu, id, (b0 + u) & 31);
            s[u] = (b0 + u < nValid && idb >= 0)
                       ? lanePartial<kVec4>(q, vectors + size_t(idb) * d, d, lane)
                       : 0.f;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int u = 0; u < 4; ++u) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (lane == b0 + u) mine = s[u];
    }
    return id >= 0 ? mine : INFINITY;
}

/// Same as warpCandidateDistance for any set of valid lanes.
template <bool kVec4>
__device__ __forceinline__ float warpCandidateDistanceAny(const float* __restrict__ q,
                                                          const float* __restrict__ vectors, int d,
                                                          int id, int lane) {
    // compact the valid lanes to a prefix, compute, scatter back
    const unsigned valid = __ballot_sync(0xffffffffu, id >= 0);
    const int rank = __popc(valid & ((1u << lane) - 1u));
    int src = 0;  // lane whose id goes to position `lane`
    {
        unsigned m = valid;
        for (int r = 0; r < lane && m; ++r) m &= m - 1;
        src = m ? __ffs(m) - 1 : 0;
    }
    const int idc = __shfl_sync(0xffffffffu, id, src);
    const int packedId = lane < __popc(valid) ? idc : -1;
    const float dc = warpCandidateDistance<kVec4>(q, vectors, d, packedId, lane);
    const float mine = __shfl_sync(0xffffffffu, dc, rank & 31);
    return id >= 0 ? mine : INFINITY;
}

__device__ __forceinline__ bool pairBefore(float da, uint32_t ia, float db, uint32_t ib) {
    return da < db || (da == db && ia < ib);
}

struct PairBefore {
    __device__ __forceinline__ bool operator()(float da, uint32_t ia, float db, uint32_t ib) const {
        return pairBefore(da, ia, db, ib);
    }
};

/// Calls f(id, lanePosValid) for the candidates of one query's slot list,
/// 32 at a time: the intervals are flattened (32 intervals at a time, prefix
/// sums by shuffles) so each batch is full whatever the bucket sizes.
template <typename F>
__device__ __forceinline__ void forEachCandidateBatch(const int32_t* __restrict__ sortedIds,
                                                      const Interval* __restrict__ iv, int nIv,
                                                      int lane, F&& f) {
    for (int c0 = 0; c0 < nIv; c0 += 32) {
        Interval mine = {0, 0};
        if (c0 + lane < nIv) mine = iv[c0 + lane];
        long long incl = mine.count;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const long long v = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += v;
        }
        const long long total = __shfl_sync(0xffffffffu, incl, 31);
        const long long excl = incl - mine.count;
        for (long long p0 = 0; p0 < total; p0 += 32) {
            const long long p = p0 + lane;
            int j = 0;  // number of intervals ending at or before p
#pragma unroll
            for (int step = 16; step > 0; step >>= 1) {
                const long long v = __shfl_sync(0xffffffffu, incl, j + step - 1);
                if (v <= p) j += step;
            }
            j = min(j, 31);
            const long long st = __shfl_sync(0xffffffffu, (long long)mine.start, j);
            const long long ex = __shfl_sync(0xffffffffu, excl, j);
            const int id = p < total ? sortedIds[st + (p - ex)] : -1;
            f(id);
        }
    }
}

/// id, or -1 when keepBits (may be null) does not keep it.
__device__ __forceinline__ int keptOrNone(int id, const uint32_t* __restrict__ keepBits) {
    return id >= 0 && keepBits && !((keepBits[id >> 5] >> (id & 31)) & 1u) ? -1 : id;
}

/// One warp per query: its k best (distance, id). k <= 32: in registers
/// (lane j holds the j-th best; insertions shift lanes up); else in shared
/// memory, merged with each filtered and sorted batch of 32.
template <bool kVec4, bool kSmallK>
__global__ void heapShortListKernel(const float* __restrict__ vectors, int d,
                                    const int32_t* __restrict__ sortedIds,
                                    const Interval* __restrict__ iv,
                                    const int32_t* __restrict__ ivCount, int slots, int perQuery,
                                    const float* __restrict__ Q, int64_t nq, int k,
                                    float* __restrict__ outD, int64_t* __restrict__ outI,
                                    const uint32_t* __restrict__ keepBits) {
    extern __shared__ unsigned char smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int64_t q = int64_t(blockIdx.x) * (blockDim.x >> 5) + warp;
    if (q >= nq) return;
    const float* qrow = Q + size_t(q) * d;
    // shared-memory lists (k > 32)
    const size_t perWarp = kSmallK ? 0 : size_t(16) * k + 256;
    unsigned char* base = smem + perWarp * warp;
    float* listD[2] = {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base) + k};
    uint32_t* listI[2] = {reinterpret_cast<uint32_t*>(base) + 2 * k,
                          reinterpret_cast<uint32_t*>(base) + 3 * k};
    float* batchD = reinterpret_cast<float*>(base + size_t(16) * k);
    uint32_t* batchI = reinterpret_cast<uint32_t*>(base + size_t(16) * k + 128);
    int cur = 0, buf = 0;
    // register list (k <= 32)
    float topD = INFINITY;
    uint32_t topI = 0xffffffffu;
    const unsigned kMask = k >= 32 ? 0xffffffffu : ((1u << k) - 1u);
    float thrD = INFINITY;
    uint32_t thrI = 0xffffffffu;
    for (int sl = 0; sl < perQuery; ++sl) {
        const int64_t slot = q * perQuery + sl;
        forEachCandidateBatch(sortedIds, iv + size_t(slot) * slots, ivCount[slot], lane, [&](int id) {
            id = keptOrNone(id, keepBits);
            // warpCandidateDistance wants the valid lanes as a prefix (as the
            // batches come); a filter leaves holes (keepBits is warp-uniform)
            const float dist = keepBits
                                   ? warpCandidateDistanceAny<kVec4>(qrow, vectors, d, id, lane)
                                   : warpCandidateDistance<kVec4>(qrow, vectors, d, id, lane);
            const bool cand = id >= 0 && pairBefore(dist, uint32_t(id), thrD, thrI);
            unsigned mask = __ballot_sync(0xffffffffu, cand);
            if (mask == 0) return;
            if constexpr (kSmallK) {
                while (mask) {
                    const int b = __ffs(mask) - 1;
                    mask &= mask - 1;
                    const float cd = __shfl_sync(0xffffffffu, dist, b);
                    const uint32_t ci = __shfl_sync(0xffffffffu, uint32_t(id), b);
                    if (!pairBefore(cd, ci, thrD, thrI)) continue;
                    if (__ballot_sync(0xffffffffu, topD == cd && topI == ci) & kMask) continue;
                    const int pos = __popc(__ballot_sync(0xffffffffu, pairBefore(topD, topI, cd, ci)) & kMask);
                    const float upD = __shfl_up_sync(0xffffffffu, topD, 1);
                    const uint32_t upI = __shfl_up_sync(0xffffffffu, topI, 1);
                    if (lane > pos) {
                        topD = upD;
                        topI = upI;
                    } else if (lane == pos) {
                        topD = cd;
                        topI = ci;
                    }
                    thrD = __shfl_sync(0xffffffffu, topD, k - 1);
                    thrI = __shfl_sync(0xffffffffu, topI, k - 1);
                }
                return;
            }
            batchD[lane] = cand ? dist : INFINITY;
            batchI[lane] = cand ? uint32_t(id) : 0xffffffffu;
            __syncwarp();
            warpBitonicSortBy(batchD, batchI, 32, lane, PairBefore());
            const float myD = batchD[lane];
            const uint32_t myI = batchI[lane];
            bool keep = myI != 0xffffffffu &&
                        !(lane > 0 && batchD[lane - 1] == myD && batchI[lane - 1] == myI);
            int pos = 0;
            if (keep) {  // lower bound in the list; an equal entry is a duplicate
                int lo = 0, hi = cur;
                while (lo < hi) {
                    const int mid = (lo + hi) >> 1;
                    if (pairBefore(listD[buf][mid], listI[buf][mid], myD, myI)) lo = mid + 1;
                    else hi = mid;
                }
                pos = lo;
                if (pos < cur && listD[buf][pos] == myD && listI[buf][pos] == myI) keep = false;
            }
            const unsigned keepMask = __ballot_sync(0xffffffffu, keep);
            const int nb = __popc(keepMask);
            const int o = buf ^ 1;
            if (keep) {
                const int np = pos + __popc(keepMask & ((1u << lane) - 1u));
                if (np < k) {
                    listD[o][np] = myD;
                    listI[o][np] = myI;
                }
            }
            for (int j = lane; j < cur; j += 32) {
                const float ed = listD[buf][j];
                const uint32_t ei = listI[buf][j];
                int lo = 0, hi = 32;  // batch entries before e: a prefix of the sorted batch
                while (lo < hi) {
                    const int mid = (lo + hi) >> 1;
                    if (pairBefore(batchD[mid], batchI[mid], ed, ei)) lo = mid + 1;
                    else hi = mid;
                }
                const unsigned before = lo >= 32 ? 0xffffffffu : ((1u << lo) - 1u);
                const int np = j + __popc(keepMask & before);
                if (np < k) {
                    listD[o][np] = ed;
                    listI[o][np] = ei;
                }
            }
            __syncwarp();
            cur = min(k, cur + nb);
            buf = o;
            if (cur == k) {
                thrD = listD[buf][k - 1];
                thrI = listI[buf][k - 1];
            }
        });
    }
    if constexpr (kSmallK) {
        if (lane < k) {
            const bool has = topI != 0xffffffffu;
            outD[size_t(q) * k + lane] = has ? topD : INFINITY;
            outI[size_t(q) * k + lane] = has ? int64_t(topI) : -1;
        }
    } else {
        for (int j = lane; j < k; j += 32) {
            const bool has = j < cur;
            outD[size_t(q) * k + j] = has ? listD[buf][j] : INFINITY;
            outI[size_t(q) * k + j] = has ? int64_t(listI[buf][j]) : -1;
        }
    }
}

/// Candidates of each query: sum of its interval lengths.
__global__ void candidateCountKernel(const Interval* __restrict__ iv,
                                     const int32_t* __restrict__ ivCount, int slots, int perQuery,
                                     int64_t nq, int64_t* __restrict__ total) {
    const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (q >= nq) return;
    int64_t s = 0;
    for (int r = 0; r < perQuery; ++r) {
        const int64_t slot = q * perQuery + r;
        for (int i = 0; i < ivCount[slot]; ++i) s += iv[size_t(slot) * slots + i].count;
    }
    total[q] = s;
}

/// Work queue fill: one warp per query of [q0, q1) writes its candidate ids.
__global__ void fillQueueKernel(const Interval* __restrict__ iv, const int32_t* __restrict__ ivCount,
                                int slots, int perQuery, int64_t q0, int64_t q1,
                                const int64_t* __restrict__ offsets,
                                const int32_t* __restrict__ sortedIds, int32_t* __restrict__ ids,
                                int32_t* __restrict__ owner, const uint32_t* __restrict__ keepBits) {
    const int lane = threadIdx.x & 31;
    const int64_t q = q0 + int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (q >= q1) return;
    int64_t w = offsets[q] - offsets[q0];
    for (int r = 0; r < perQuery; ++r) {
        const int64_t slot = q * perQuery + r;
        for (int i = 0; i < ivCount[slot]; ++i) {
            const Interval it = iv[size_t(slot) * slots + i];
            for (int64_t off = lane; off < it.count; off += 32) {
                ids[w + off] = keptOrNone(sortedIds[it.start + off], keepBits);  // -1: scored +inf
                owner[w + off] = int32_t(q - q0);
            }
            w += it.count;
        }
    }
}

/// Distances of the queue entries (warps over 32 entries at a time) and
/// the clustered-sort keys (query << 32 | distance bits).
template <bool kVec4>
__global__ void queueDistanceKernel(const float* __restrict__ vectors, int d,
                                    const float* __restrict__ Q, int64_t q0,
                                    const int32_t* __restrict__ ids,
                                    const int32_t* __restrict__ owner, int64_t total,
                                    uint64_t* __restrict__ keys) {
    const int lane = threadIdx.x & 31;
    const int64_t warpId = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int64_t e = warpId * 32 + lane;
    if (warpId * 32 >= total) return;
    const bool valid = e < total;
    const int id = valid ? ids[e] : -1;
    const int own = valid ? owner[e] : -1;
    // the 32 entries may belong to several queries: one pass per distinct owner
    float dist = INFINITY;
    unsigned todo = __ballot_sync(0xffffffffu, valid);
    while (todo) {
        const int leader = __ffs(todo) - 1;
        const int o = __shfl_sync(0xffffffffu, own, leader);
        const bool mineNow = valid && own == o;
        const float dd = warpCandidateDistanceAny<kVec4>(Q + size_t(q0 + o) * d, vectors, d,
                                                         mineNow ? id : -1, lane);
        if (mineNow) dist = dd;
        todo &= ~__ballot_sync(0xffffffffu, mineNow);
    }
    if (valid) keys[e] = (uint64_t(uint32_t(own)) << 32) | uint64_t(orderedFloatBits(dist));
}

/// Compact: one warp per query takes the first k distinct entries of its
/// sorted segment.
__global__ void compactKernel(const uint64_t* __restrict__ keys, const int32_t* __restrict__ ids,
                              const int64_t* __restrict__ offsets, int64_t q0, int64_t q1, int k,
                              float* __restrict__ outD, int64_t* __restrict__ outI) {
    const int lane = threadIdx.x & 31;
    const int64_t q = q0 + int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (q >= q1) return;
    const int64_t b = offsets[q] - offsets[q0], e = offsets[q + 1] - offsets[q0];
    int written = 0;
    for (int64_t p0 = b; p0 < e && written < k; p0 += 32) {
        const int64_t p = p0 + lane;
        bool keep = p < e;
        uint32_t dbits = 0;
        int id = -1;
        if (keep) {
            dbits = uint32_t(keys[p] & 0xffffffffu);
            id = ids[p];
            for (int64_t j = p - 1; j >= b && uint32_t(keys[j] & 0xffffffffu) == dbits; --j)
                if (ids[j] == id) {
                    keep = false;
                    break;
                }
        }
        const unsigned m = __ballot_sync(0xffffffffu, keep);
        if (keep) {
            const int r = written + __popc(m & ((1u << lane) - 1u));
            if (r < k) {
                outD[size_t(q) * k + r] = floatFromOrderedBits(dbits);
                outI[size_t(q) * k + r] = id;
            }
        }
        written += __popc(m);
    }
    for (int r = min(written, k) + lane; r < k; r += 32) {
        outD[size_t(q) * k + r] = INFINITY;
        outI[size_t(q) * k + r] = -1;
    }
}

__global__ void fillEmptyKernel(float* __restrict__ D, int64_t* __restrict__ I, int64_t count) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) {
        D[i] = INFINITY;
        I[i] = -1;
    }
}


}  // namespace

void fillEmpty(float* dD, int64_t* dI, int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    fillEmptyKernel<<<blocksFor(count, 256), 256, 0, stream>>>(dD, dI, count);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}


void queryIntervals(const DeviceState& st, const BiLevelLSHModel& model,
                    const BiLevelSearchSettings& s, int64_t nq, const float* dQ,
                    QueryIntervals* out, cudaStream_t stream) {
    const char* who = "GpuIndexBiLevelLSH::search";
    const int d = model.d, LM = model.nTables * model.nProjections;
    DeviceVector<int32_t> groups;
    groups.allocate(size_t(nq) * s.groupProbes, who, "query groups");
    queryGroupsKernel<<<blocksFor(nq, 64), 64, 0, stream>>>(
        st.model.nodeRule.data(), st.model.nodeVec.data(), st.model.nodeThreshold.data(),
        model.depth, d, dQ, nq, s.groupProbes, st.model.leafWidth.data(), s.groupMargin,
        groups.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    DeviceVector<float> qProj;
    qProj.allocate(size_t(nq) * LM, who, "query projections");
    projectRows(dQ, nq, d, st.model.proj.data(), LM, qProj.data(), stream);
    out->slots = s.nprobe + 1;
    out->perQuery = s.groupProbes * s.tables;
    const int64_t threads = nq * out->perQuery;
    out->intervals.allocate(size_t(threads) * out->slots, who, "candidate intervals");
    out->counts.allocate(threads, who, "candidate intervals");
    IntervalArgs a;
    a.cuckoo = st.cuckoo.view();
    a.ranges = st.ranges.data();
    a.sortedCodes = st.sortedCodes.data();
    a.groupStart = st.groupStart.data();
    a.leafOffset = st.model.leafOffset.data();
    a.leafWidth = st.model.leafWidth.data();
    a.bias = st.model.projBias.data();
    a.ntotal = st.n;
    a.L = model.nTables;
    a.M = model.nProjections;
    a.bits = model.bits;
    a.lattice = model.lattice;
    a.nprobe = s.nprobe;
    a.tables = s.tables;
    a.groupProbes = s.groupProbes;
    a.slots = out->slots;
    a.minCandidates = s.minCandidates;
    a.salt = st.keySalt;
    intervalsKernel<<<blocksFor(threads, 64), 64, 0, stream>>>(a, qProj.data(), groups.data(), nq,
                                                              out->intervals.data(),
                                                              out->counts.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void searchGpu(const DeviceState& st, const BiLevelLSHModel& model,
               const BiLevelSearchSettings& s, BiLevelShortList mode,
               const std::function<BiLevelShortList(double)>& chooseAuto, size_t workQueueBytes,
               int64_t nq, const float* dQ, int k, float* dD, int64_t* dI,
               const uint32_t* keepBits, cudaStream_t stream) {
    const char* who = "GpuIndexBiLevelLSH::search";
    const int d = model.d;
    QueryIntervals qi;
    queryIntervals(st, model, s, nq, dQ, &qi, stream);
    const bool vec4 = d % 4 == 0;
    DeviceVector<int64_t> counts, offsets;
    counts.allocate(nq, who, "candidate counts");
    candidateCountKernel<<<blocksFor(nq, 128), 128, 0, stream>>>(qi.intervals.data(),
                                                                 qi.counts.data(), qi.slots,
                                                                 qi.perQuery, nq, counts.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    std::vector<int64_t> cnt(nq), off(nq + 1, 0);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(cnt.data(), counts.data(), nq * sizeof(int64_t),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int64_t q = 0; q < nq; ++q) off[q + 1] = off[q] + cnt[q];
    if (mode == BiLevelShortList::Auto) mode = chooseAuto(double(off[nq]) / double(nq));
    if (mode == BiLevelShortList::Heap) {
        FAISS_THROW_IF_NOT_FMT(k <= 1024, "%s: the per-query heap handles k <= 1024, got %d", who, k);
        const bool small = k <= 32;
        const size_t perWarp = small ? 0 : size_t(16) * k + 256;
        int warps = small ? 4 : int(std::max<size_t>(1, std::min<size_t>(8, (48 * 1024) / perWarp)));
        const size_t smem = perWarp * warps;
        const unsigned blocks = unsigned((nq + warps - 1) / warps);
        auto launch = [&](auto kernel) {
            kernel<<<blocks, 32 * warps, smem, stream>>>(st.vectors.data(), d, st.sortedIds.data(),
                                                         qi.intervals.data(), qi.counts.data(),
                                                         qi.slots, qi.perQuery, dQ, nq, k, dD, dI,
                                                         keepBits);
        };
        if (vec4 && small) launch(heapShortListKernel<true, true>);
        else if (vec4) launch(heapShortListKernel<true, false>);
        else if (small) launch(heapShortListKernel<false, true>);
        else launch(heapShortListKernel<false, false>);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        return;
    }
    // work queue
    offsets.allocate(nq + 1, who, "candidate offsets");
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(offsets.data(), off.data(), (nq + 1) * sizeof(int64_t),
                                         cudaMemcpyHostToDevice, stream));
    const size_t bytesPerEntry = 4 + 4 + 8 + 8 + 4 + 4 + 16;  // ids, owner, keys x2, values x2, sort
    const int64_t budget = std::max<int64_t>(1, int64_t(workQueueBytes / bytesPerEntry));
    int64_t q0 = 0;
    DeviceVector<int32_t> ids, idsAlt, owner;
    DeviceVector<uint64_t> keys, keysAlt;
    DeviceVector<char> temp;
    while (q0 < nq) {
        int64_t q1 = q0 + 1;
        while (q1 < nq && off[q1 + 1] - off[q0] <= budget && q1 - q0 < (int64_t(1) << 30)) ++q1;
        const int64_t total = off[q1] - off[q0];
        if (total > 0) {
            if (size_t(total) > ids.size()) {
                ids.allocate(total, who, "work queue");
                idsAlt.allocate(total, who, "work queue");
                owner.allocate(total, who, "work queue");
                keys.allocate(total, who, "work queue");
                keysAlt.allocate(total, who, "work queue");
            }
            const int wpb = 4;
            fillQueueKernel<<<blocksFor(q1 - q0, wpb), 32 * wpb, 0, stream>>>(
                qi.intervals.data(), qi.counts.data(), qi.slots, qi.perQuery, q0, q1,
                offsets.data(), st.sortedIds.data(), ids.data(), owner.data(), keepBits);
            FAISS_EXT_CUDA_CHECK_LAUNCH();
            const int64_t warpsNeeded = (total + 31) / 32;
            if (vec4)
                queueDistanceKernel<true><<<blocksFor(warpsNeeded, 4), 128, 0, stream>>>(
                    st.vectors.data(), d, dQ, q0, ids.data(), owner.data(), total, keys.data());
            else
                queueDistanceKernel<false><<<blocksFor(warpsNeeded, 4), 128, 0, stream>>>(
                    st.vectors.data(), d, dQ, q0, ids.data(), owner.data(), total, keys.data());
            FAISS_EXT_CUDA_CHECK_LAUNCH();
            int qBits = 0;
            while ((int64_t(1) << qBits) < q1 - q0) ++qBits;
            size_t bytes = 0;
            FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
                nullptr, bytes, keys.data(), keysAlt.data(), ids.data(), idsAlt.data(), int(total),
                0, 32 + qBits, stream));
            if (bytes > temp.size()) temp.allocate(bytes, who, "work queue sort");
            bytes = temp.size();
            FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
                temp.data(), bytes, keys.data(), keysAlt.data(), ids.data(), idsAlt.data(),
                int(total), 0, 32 + qBits, stream));
        }
        const int wpb = 4;
        compactKernel<<<blocksFor(q1 - q0, wpb), 32 * wpb, 0, stream>>>(
            keysAlt.data(), idsAlt.data(), offsets.data(), q0, q1, k, dD, dI);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        q0 = q1;
    }
}

}  // namespace lsh_impl
}  // namespace gpu
}  // namespace faiss_ext
