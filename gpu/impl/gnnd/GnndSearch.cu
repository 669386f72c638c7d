// Greedy graph search of faiss::IndexNNDescent (faiss/impl/NNDescent.cpp,
// NNDescent::search) on the GPU, one warp per query: a pool of L candidates
// sorted by distance, seeded with L distinct random nodes; the nearest
// unexpanded candidate is expanded (its graph neighbours are scored and
// inserted when closer than the pool's last), and the scan restarts from the
// best position that changed, until every candidate in the pool is expanded.
// A small per-warp hash set remembers scored nodes.
#include "faiss_ext/gpu/impl/gnnd/GnndCommon.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/QueryHash.cuh"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

constexpr int kHashSlots = 1024;

__device__ __forceinline__ float warpQueryDistance(const float* x, int d, int64_t id,
                                                   const float* q, bool ip, int lane) {
    const float* xr = x + id * d;
    float s = 0.f;
    if (ip) {
        for (int j = lane; j < d; j += 32) s += q[j] * xr[j];
        return -warpSumF(s);
    }
    for (int j = lane; j < d; j += 32) {
        float t = q[j] - xr[j];
        s += t * t;
    }
    return warpSumF(s);
}

/// true when id was not in the set (and is now, if there was room).
__device__ bool hashInsert(int* table, int id, int lane) {
    bool fresh = true;
    if (lane == 0) {
        uint32_t h = uint32_t(mix64(uint64_t(id)) & (kHashSlots - 1));
        for (int probe = 0; probe < 16; ++probe) {
            int old = atomicCAS(&table[h], -1, id);
            if (old == -1) break;
            if (old == id) {
                fresh = false;
                break;
            }
            h = (h + 1) & (kHashSlots - 1);
        }
    }
    return __shfl_sync(kFull, fresh ? 1 : 0, 0) != 0;
}

/// Inserts (dv, id) into the sorted pool of L; returns its position or L.
__device__ int poolInsert(float* keys, int* ids, unsigned char* flags, int L, float dv, int id,
                          int lane) {
    // already present?
    bool present = false;
    int pos = 0;
    for (int i0 = 0; i0 < L; i0 += 32) {
        int i = i0 + lane;
        bool in = i < L;
        present |= in && ids[i] == id;
        bool before = in && (keys[i] < dv || (keys[i] == dv && ids[i] >= 0 && ids[i] < id));
        pos += __popc(__ballot_sync(kFull, before));
    }
    if (__any_sync(kFull, present) || pos >= L) return L;
    __syncwarp();  // every lane's scan of the pool is done before it changes
    // shift [pos, L - 1) up by one, top chunk first
    for (int top = L - 1; top > pos; top -= 32) {
        int i = top - lane;
        float k = 0.f;
        int v = 0;
        unsigned char f = 0;
        bool act = i > pos;
        if (act) {
            k = keys[i - 1];
            v = ids[i - 1];
            f = flags[i - 1];
        }
        __syncwarp();
        if (act) {
            keys[i] = k;
            ids[i] = v;
            flags[i] = f;
        }
        __syncwarp();
    }
    if (lane == 0) {
        keys[pos] = dv;
        ids[pos] = id;
        flags[pos] = 1;
    }
    __syncwarp();
    return pos;
}

__global__ void greedySearchKernel(const float* x, int64_t n, int d, const int* graph, int K,
                                   int degree, bool ip, const float* queries, int64_t nq, int k,
                                   int L, uint64_t seed, int warps, float* outD, int64_t* outI) {
    extern __shared__ unsigned char smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t qi = int64_t(blockIdx.x) * warps + warp;
    if (qi >= nq) return;
    size_t perWarp = size_t(kHashSlots) * 4 + size_t(L) * 9;
    perWarp = (perWarp + 15) & ~size_t(15);
    unsigned char* base = smem + perWarp * warp;
    int* table = reinterpret_cast<int*>(base);
    float* keys = reinterpret_cast<float*>(base + kHashSlots * 4);
    int* ids = reinterpret_cast<int*>(keys + L);
    unsigned char* flags = reinterpret_cast<unsigned char*>(ids + L);
    for (int i = lane; i < kHashSlots; i += 32) table[i] = -1;
    for (int i = lane; i < L; i += 32) {
        keys[i] = infinity();
        ids[i] = -1;
        flags[i] = 0;
    }
    __syncwarp();
    const float* q = queries + qi * d;
    // seeds: L random nodes (as faiss's gen_random; repeats are dropped by
    // the pool, so a few fewer seeds than L can remain), drawn from the
    // query's hash: the same whatever its row in the batch
    const uint64_t qh = warpQueryHash(q, d);
    {
        int seeds = int(std::min<int64_t>(L, n));
        for (int i = 0; i < seeds; ++i) {
            int id = int(mix64(seed ^ mix64(qh) ^ uint64_t(i) * 0x9E3779B97F4A7C15ull) %
                         uint64_t(n));
            if (!hashInsert(table, id, lane)) continue;
            float dv = warpQueryDistance(x, d, id, q, ip, lane);
            poolInsert(keys, ids, flags, L, dv, id, lane);
        }
    }
    int kpos = 0;
    while (kpos < L) {
        int nk = L;
        if (ids[kpos] >= 0 && flags[kpos]) {
            __syncwarp();
            if (lane == 0) flags[kpos] = 0;
            int node = ids[kpos];
            __syncwarp();
            const int* nb = graph + int64_t(node) * K;
            for (int m0 = 0; m0 < degree; m0 += 32) {
                int cand = m0 + lane < degree ? nb[m0 + lane] : -1;
                for (int b = 0; b < 32; ++b) {
                    int id = __shfl_sync(kFull, cand, b);
                    if (id < 0) continue;
                    if (!hashInsert(table, id, lane)) continue;
                    float dv = warpQueryDistance(x, d, id, q, ip, lane);
                    if (!(dv < keys[L - 1])) continue;
                    int r = poolInsert(keys, ids, flags, L, dv, id, lane);
                    nk = min(nk, r);
                }
            }
        }
        __syncwarp();
        if (nk <= kpos) kpos = nk;
        else ++kpos;
    }
    for (int i = lane; i < k; i += 32) {
        bool ok = i < L && ids[i] >= 0;
        outD[qi * k + i] = ok ? keys[i] : infinity();
        outI[qi * k + i] = ok ? ids[i] : -1;
    }
}

}  // namespace

void search(GpuResources* res, int device, cudaStream_t stream, const float* x,
            const float* norms, int64_t n, int d, const int* ids, int K, int degree,
            bool innerProduct, const float* q, int64_t nq, int k, int L, uint64_t seed,
            float* outD, int64_t* outI) {
    if (nq == 0) return;
    FAISS_THROW_IF_NOT_FMT(L >= k && L >= 1, "GNND search: pool size %d < k = %d", L, k);
    size_t perWarp = size_t(kHashSlots) * 4 + size_t(L) * 9;
    perWarp = (perWarp + 15) & ~size_t(15);
    int warps = int(std::max<size_t>(1, std::min<size_t>(4, 48 * 1024 / perWarp)));
    size_t smem = perWarp * warps;
    FAISS_THROW_IF_NOT_FMT(smem <= 48 * 1024, "GNND search: pool size %d too large", L);
    greedySearchKernel<<<unsigned((nq + warps - 1) / warps), 32 * warps, smem, stream>>>(
            x, n, d, ids, K, degree, innerProduct, q, nq, k, L, seed, warps, outD, outI);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
