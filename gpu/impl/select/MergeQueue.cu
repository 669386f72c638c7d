// Tang et al.'s k-selection on the GPU: Merge Queue, Buffered Search and
// Hierarchical Partition (Tang et al., IPDPS 2015; docs/references.md).
//
// One warp per row. The queue holds K = max(64, 2^ceil(log2 k)) keys in
// levels of 32, 32, 64, 128, ... (m = 32: one element per lane), each sorted
// decreasing, level heads decreasing, so the queue's largest key is lane 0
// of level 0. Levels 0 and 1 live in registers, the rest in shared memory.
// A key enters by replacing the head of level 0 (an insertion sort within
// the level: one shuffle); only when level 0's head falls below level 1's
// does a merge run, and it cascades down only while the next level's head
// is larger (the paper's lazy update, Algorithm 2). Merges of two sorted
// decreasing runs use the reverse bitonic merge: the first stage
// cross-compares position i with 2n-1-i, then half-cleaners finish both
// halves. A queue of K > k keys starts with K - k sentinel keys smaller
// than every real key (0 .. K-k-1: real keys have distance bits >= those of
// -inf), so its head is always the k-th smallest real key seen.
//
// Buffered search: each round the warp reads 32 candidates, the ones below
// the queue head are appended to a shared buffer through a ballot (intra-
// warp communication: the lanes' candidates are packed, not inserted by
// lanes one at a time); a full buffer of 32 is sorted by a register bitonic
// sort (local sort) and inserted smallest first, stopping at the first key
// not below the (shrinking) head.
//
// Hierarchical partition: level l+1 holds the minima of groups of G
// consecutive entries of level l (ordered distance bits only), built bottom
// up until a level has at most G * k entries; the search runs top down:
// all entries of the top level, then at every level the children of the k
// entries selected one level up. The k smallest keys of level l lie among
// the children of level l+1's k smallest (each of those k parents is the
// value of a distinct child no larger than any child of an unselected
// parent; ties break by position, which orders children as it orders
// parents), so the result is exact.
#include "faiss_ext/gpu/impl/select/MergeQueue.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>

namespace faiss_ext {
namespace gpu {
namespace select {

namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kMaxLevels = 40;

/// Shapes shared by host and kernels.
struct HpPlan {
    int levels = 0;                 // L: levels above the row itself
    int64_t size[kMaxLevels + 1];   // entries of each level (size[0] = n)
    int64_t off[kMaxLevels + 1];    // offset of level l >= 1 in a row's level area
    int64_t rowStride = 0;          // uint32 entries of a row's level area
};

HpPlan makePlan(int64_t n, int64_t k, int group) {
    HpPlan p;
    p.size[0] = n;
    p.off[0] = 0;
    int64_t cur = n, total = 0;
    while (cur > int64_t(group) * k && p.levels < kMaxLevels) {
        cur = (cur + group - 1) / group;
        ++p.levels;
        p.size[p.levels] = cur;
        p.off[p.levels] = total;
        total += cur;
    }
    p.rowStride = (total + 3) / 4 * 4;
    return p;
}

int64_t queueSize(int64_t k) {
    int64_t K = 64;
    while (K < k) K *= 2;
    return K;
}

struct KernelParams {
    const float* dist;
    int64_t ld;
    const float* colAdd;
    uint32_t colBase;
    int64_t n;
    int64_t rows;
    int k;
    int K;
    uint64_t* run;
    int64_t runStride;
    bool hasInit;
    int group;
    HpPlan plan;
    uint32_t* levels;  // rows x plan.rowStride
    uint32_t* slist;   // rows x K
};

__device__ __forceinline__ uint64_t u64min(uint64_t a, uint64_t b) { return a < b ? a : b; }
__device__ __forceinline__ uint64_t u64max(uint64_t a, uint64_t b) { return a < b ? b : a; }

/// Sorts a bitonic sequence of 32 held one per lane, decreasing.
__device__ __forceinline__ uint64_t halfCleanDecreasing(uint64_t v, int lane) {
#pragma unroll
    for (int s = 16; s >= 1; s >>= 1) {
        uint64_t o = __shfl_xor_sync(kFull, v, s);
        v = (lane & s) ? u64min(v, o) : u64max(v, o);
    }
    return v;
}

/// Sorts 32 keys held one per lane, ascending (bitonic sort).
__device__ __forceinline__ uint64_t sortAscending32(uint64_t v, int lane) {
#pragma unroll
    for (int kk = 2; kk <= 32; kk <<= 1) {
#pragma unroll
        for (int j = kk >> 1; j > 0; j >>= 1) {
            uint64_t o = __shfl_xor_sync(kFull, v, j);
            bool up = (lane & kk) == 0;
            bool lower = (lane & j) == 0;
            v = (lower == up) ? u64min(v, o) : u64max(v, o);
        }
    }
    return v;
}

/// Merges levels 0 and 1 (registers, both sorted decreasing) into one
/// sorted decreasing run of 64: the reverse bitonic merge.
__device__ __forceinline__ void mergeRegs(uint64_t& l0, uint64_t& l1, int lane) {
    uint64_t br = __shfl_sync(kFull, l1, 31 - lane);
    uint64_t hi = u64max(l0, br), lo = u64min(l0, br);
    l0 = halfCleanDecreasing(hi, lane);
    l1 = halfCleanDecreasing(lo, lane);
}

/// Merges q[0, n) and q[n, 2n) (both sorted decreasing) into q[0, 2n)
/// sorted decreasing; n >= 32.
__device__ void mergeSmem(uint64_t* q, int n, int lane) {
    for (int i = lane; i < n; i += 32) {
        uint64_t a = q[i], b = q[2 * n - 1 - i];
        if (a < b) {
            q[i] = b;
            q[2 * n - 1 - i] = a;
        }
    }
    __syncwarp();
    for (int s = n >> 1; s >= 1; s >>= 1) {
        for (int t = lane; t < n; t += 32) {
            int i = (t / s) * 2 * s + (t % s);
            uint64_t a = q[i], b = q[i + s];
            if (a < b) {
                q[i] = b;
                q[i + s] = a;
            }
        }
        __syncwarp();
    }
}

/// The warp's merge queue.
struct WarpQueue {
    uint64_t l0, l1;  // levels 0 and 1, lane i holds position i
    uint64_t* q;      // shared: K keys (levels >= 2; [0, 64) as merge room)
    int K;
    int kReal;        // k: keys q[0, k) are real, q[k, K) sentinels
    int lane;

    int fill;      // real keys placed directly while filling
    bool filling;  // a fresh queue takes its first k keys unsorted, then sorts once

    /// Sorts q[0, K) decreasing (bitonic sort) and reloads levels 0 and 1.
    __device__ void sortFull() {
        for (int size = 2; size <= K; size <<= 1) {
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int t = lane; t < K / 2; t += 32) {
                    int i = 2 * t - (t & (stride - 1));
                    int j = i + stride;
                    uint64_t a = q[i], b = q[j];
                    bool desc = (i & size) == 0;
                    if (desc ? a < b : a > b) {
                        q[i] = b;
                        q[j] = a;
                    }
                }
                __syncwarp();
            }
        }
        l0 = q[lane];
        l1 = q[32 + lane];
        __syncwarp();
    }

    /// Fills the queue: k keys from init (ascending, may be null: all
    /// kMaxKey), then K - k sentinels; a fully sorted decreasing queue.
    /// Without init the queue starts in fill mode: the first k candidates
    /// are written straight into q[0, k) and sorted once, instead of
    /// entering one by one through cascades that would each reach the
    /// bottom level.
    __device__ void init(int k, const uint64_t* initList) {
        filling = initList == nullptr;
        fill = 0;
        for (int i = lane; i < K; i += 32) {
            q[i] = i < k ? (initList ? initList[k - 1 - i] : kMaxKey) : uint64_t(K - 1 - i);
        }
        __syncwarp();
        l0 = q[lane];
        l1 = q[32 + lane];
        __syncwarp();
    }

    __device__ uint64_t head() const { return __shfl_sync(kFull, l0, 0); }

    /// Inserts x (warp-uniform, below head()).
    __device__ void insert(uint64_t x) {
        uint64_t b = __shfl_down_sync(kFull, l0, 1);
        l0 = (lane < 31 && b > x) ? b : (l0 > x ? x : l0);
        if (__shfl_sync(kFull, l0, 0) >= __shfl_sync(kFull, l1, 0)) return;
        mergeRegs(l0, l1, lane);
        if (K <= 64) return;
        if (!(__shfl_sync(kFull, l1, 0) < q[64])) return;
        q[lane] = l0;
        q[32 + lane] = l1;
        __syncwarp();
        for (int next = 64;;) {
            mergeSmem(q, next, lane);
            int prev = next;
            next *= 2;
            if (next >= K || !(q[prev] < q[next])) break;
        }
        l0 = q[lane];
        l1 = q[32 + lane];
        __syncwarp();
    }

    /// Sorts the whole queue decreasing into q[0, K).
    __device__ void sortAll() {
        mergeRegs(l0, l1, lane);
        q[lane] = l0;
        q[32 + lane] = l1;
        __syncwarp();
        for (int n = 64; n < K; n *= 2) mergeSmem(q, n, lane);
    }
};

/// Buffered search over `total` candidate slots; produce(idx) gives the key
/// of slot idx or kMaxKey when the slot holds nothing.
template <typename Produce>
__device__ void bufferedSearch(WarpQueue& wq, uint64_t* buf, int64_t total, Produce produce) {
    const int lane = wq.lane;
    const unsigned ltMask = (1u << lane) - 1;
    uint64_t thr = wq.head();
    int bc = 0;
    const int k = wq.kReal;
    auto flush = [&](int count) {
        uint64_t y = lane < count ? buf[lane] : kMaxKey;
        __syncwarp();
        y = sortAscending32(y, lane);
        for (int j = 0; j < count; ++j) {
            uint64_t x = __shfl_sync(kFull, y, j);
            if (!(x < thr)) break;
            wq.insert(x);
            thr = wq.head();
        }
    };
    for (int64_t base = 0; base < total; base += 32) {
        int64_t idx = base + lane;
        uint64_t key = idx < total ? produce(idx) : kMaxKey;
        bool pass = key < thr;
        unsigned m = __ballot_sync(kFull, pass);
        if (m == 0) continue;
        if (wq.filling) {
            // Fill mode: the first k candidates go straight into the queue,
            // the ones past k into the buffer; one sort when it is full.
            const int slot = wq.fill + __popc(m & ltMask);
            if (pass) {
                if (slot < k) {
                    wq.q[slot] = key;
                } else {
                    buf[bc + slot - k] = key;
                }
            }
            const int cnt = __popc(m);
            bc += max(0, wq.fill + cnt - k);
            wq.fill = min(k, wq.fill + cnt);
            __syncwarp();
            if (wq.fill == k) {
                wq.filling = false;
                wq.sortFull();
                thr = wq.head();
            }
            continue;
        }
        if (pass) buf[bc + __popc(m & ltMask)] = key;
        bc += __popc(m);
        __syncwarp();
        if (bc >= 32) {
            flush(32);
            uint64_t rest = lane < bc - 32 ? buf[32 + lane] : 0;
            __syncwarp();
            if (lane < bc - 32) buf[lane] = rest;
            bc -= 32;
            __syncwarp();
        }
    }
    if (wq.filling) {
        // Fewer than k candidates: the unfilled slots hold kMaxKey.
        wq.filling = false;
        wq.sortFull();
        thr = wq.head();
    }
    if (bc > 0) flush(bc);
    __syncwarp();
}

/// Level l >= 1 -> l + 1 minima (and l = 0 -> 1, 2 in one pass for G*G <= 32).
template <int G>
__global__ void hpBuildFirstKernel(KernelParams p) {
    const int lane = threadIdx.x & 31;
    const int64_t size1 = p.plan.size[1];
    const bool second = G * G <= 32 && p.plan.levels >= 2;
    const int64_t size2 = second ? p.plan.size[2] : 0;
    for (int64_t row = blockIdx.y; row < p.rows; row += gridDim.y) {
        const float* d = p.dist + row * p.ld;
        uint32_t* l1 = p.levels + row * p.plan.rowStride + p.plan.off[1];
        uint32_t* l2 = second ? p.levels + row * p.plan.rowStride + p.plan.off[2] : nullptr;
        for (int64_t j0 = int64_t(blockIdx.x) * blockDim.x; j0 < p.n;
             j0 += int64_t(gridDim.x) * blockDim.x) {
            int64_t j = j0 + threadIdx.x;
            uint32_t ob = 0xFFFFFFFFu;
            if (j < p.n) ob = orderedFloatBits(d[j] + (p.colAdd ? p.colAdd[j] : 0.f));
#pragma unroll
            for (int s = 1; s < G; s <<= 1) ob = min(ob, __shfl_xor_sync(kFull, ob, s));
            if ((lane % G) == 0 && j / G < size1) l1[j / G] = ob;
            if (G * G <= 32 && second) {
#pragma unroll
                for (int s = G; s < G * G; s <<= 1) ob = min(ob, __shfl_xor_sync(kFull, ob, s));
                if ((lane % (G * G)) == 0 && j / (G * G) < size2) l2[j / (G * G)] = ob;
            }
        }
    }
}

/// G = 4 with 16-byte aligned rows: each thread reads one float4, which is
/// one group of level 1; four threads make a group of level 2.
__global__ void hpBuildFirstVec4Kernel(KernelParams p) {
    const int lane = threadIdx.x & 31;
    const int64_t size1 = p.plan.size[1];
    const bool second = p.plan.levels >= 2;
    const int64_t size2 = second ? p.plan.size[2] : 0;
    const int64_t groups = (p.n + 3) / 4;
    for (int64_t row = blockIdx.y; row < p.rows; row += gridDim.y) {
        const float* d = p.dist + row * p.ld;
        uint32_t* l1 = p.levels + row * p.plan.rowStride + p.plan.off[1];
        uint32_t* l2 = second ? p.levels + row * p.plan.rowStride + p.plan.off[2] : nullptr;
        for (int64_t g0 = int64_t(blockIdx.x) * blockDim.x; g0 < groups;
             g0 += int64_t(gridDim.x) * blockDim.x) {
            const int64_t g = g0 + threadIdx.x;
            const int64_t j = 4 * g;
            uint32_t ob = 0xFFFFFFFFu;
            if (j + 3 < p.n) {
                float4 v = *reinterpret_cast<const float4*>(d + j);
                if (p.colAdd) {
                    float4 a = *reinterpret_cast<const float4*>(p.colAdd + j);
                    v.x += a.x;
                    v.y += a.y;
                    v.z += a.z;
                    v.w += a.w;
                }
                ob = min(min(orderedFloatBits(v.x), orderedFloatBits(v.y)),
                         min(orderedFloatBits(v.z), orderedFloatBits(v.w)));
            } else {
                for (int64_t e = j; e < p.n; ++e) {
                    ob = min(ob, orderedFloatBits(d[e] + (p.colAdd ? p.colAdd[e] : 0.f)));
                }
            }
            if (g < size1) l1[g] = ob;
            if (second) {
                ob = min(ob, __shfl_xor_sync(kFull, ob, 1));
                ob = min(ob, __shfl_xor_sync(kFull, ob, 2));
                if ((lane & 3) == 0 && g / 4 < size2) l2[g / 4] = ob;
            }
        }
    }
}

__global__ void hpBuildNextKernel(KernelParams p, int from) {
    const int64_t sizeFrom = p.plan.size[from], sizeTo = p.plan.size[from + 1];
    for (int64_t row = blockIdx.y; row < p.rows; row += gridDim.y) {
        const uint32_t* src = p.levels + row * p.plan.rowStride + p.plan.off[from];
        uint32_t* dst = p.levels + row * p.plan.rowStride + p.plan.off[from + 1];
        for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < sizeTo;
             g += int64_t(gridDim.x) * blockDim.x) {
            uint32_t m = 0xFFFFFFFFu;
            int64_t e = min(sizeFrom, (g + 1) * p.group);
            for (int64_t i = g * p.group; i < e; ++i) m = min(m, src[i]);
            dst[g] = m;
        }
    }
}

__global__ void mqTopDownKernel(KernelParams p, int warpsPerBlock) {
    extern __shared__ uint64_t smem[];
    const int warp = threadIdx.x >> 5;
    const int64_t row = int64_t(blockIdx.x) * warpsPerBlock + warp;
    if (row >= p.rows) return;
    WarpQueue wq;
    wq.lane = threadIdx.x & 31;
    wq.K = p.K;
    wq.kReal = p.k;
    wq.q = smem + size_t(warp) * (p.K + 64);
    uint64_t* buf = wq.q + p.K;
    const int k = p.k;
    const int G = p.group;
    uint64_t* run = p.run + row * p.runStride;
    const float* d = p.dist + row * p.ld;
    const uint32_t* lvBase = p.levels + row * p.plan.rowStride;
    uint32_t* sl = p.slist + row * p.K;
    // Entries above the running list's k-th value cannot enter at any level.
    const uint32_t obBound = p.hasInit ? uint32_t(run[k - 1] >> 32) : 0xFFFFFFFFu;
    int cS = 0;  // selected entries of the level above
    for (int l = p.plan.levels; l >= 0; --l) {
        const bool top = l == p.plan.levels;
        const int64_t size = p.plan.size[l];
        const int64_t total = top ? size : int64_t(cS) * G;
        if (l > 0) {
            wq.init(k, nullptr);
            const uint32_t* lv = lvBase + p.plan.off[l];
            bufferedSearch(wq, buf, total, [&](int64_t idx) -> uint64_t {
                int64_t c = top ? idx : int64_t(sl[idx / G]) * G + idx % G;
                if (c >= size) return kMaxKey;
                uint32_t ob = lv[c];
                return ob <= obBound ? (uint64_t(ob) << 32) | uint32_t(c) : kMaxKey;
            });
            wq.sortAll();
            // The selected entries: the real keys among q[0, k) (kMaxKey pads first).
            int pads = 0;
            for (int i0 = 0; i0 < k; i0 += 32) {
                int i = i0 + wq.lane;
                pads += __popc(__ballot_sync(kFull, i < k && wq.q[i] == kMaxKey));
            }
            cS = k - pads;
            for (int t = wq.lane; t < cS; t += 32) sl[t] = uint32_t(wq.q[pads + t]);
            __syncwarp();
        } else {
            wq.init(k, p.hasInit ? run : nullptr);
            bufferedSearch(wq, buf, total, [&](int64_t idx) -> uint64_t {
                int64_t c = top ? idx : int64_t(sl[idx / G]) * G + idx % G;
                if (c >= size) return kMaxKey;
                float v = d[c] + (p.colAdd ? p.colAdd[c] : 0.f);
                return makeKey(v, p.colBase + uint32_t(c));
            });
            wq.sortAll();
            for (int j = wq.lane; j < k; j += 32) run[j] = wq.q[k - 1 - j];
        }
    }
}

}  // namespace

size_t mergeQueueScratchBytes(int64_t rows, int64_t n, int64_t k, int group) {
    HpPlan plan = makePlan(n, k, group);
    return sizeof(uint32_t) * size_t(rows) * (plan.rowStride + queueSize(k)) + 256;
}

void mergeQueueSelect(const MergeQueueArgs& a, cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(a.k >= 1 && a.k <= kMergeQueueMaxK,
                           "merge queue selection: k = %lld not in [1, %lld]", (long long)a.k,
                           (long long)kMergeQueueMaxK);
    FAISS_THROW_IF_NOT_FMT(a.group >= 2 && a.group <= 16,
                           "merge queue selection: group size %d not in [2, 16]", a.group);
    FAISS_THROW_IF_NOT_MSG(a.dist && a.run && a.n >= 1 && a.runStride >= a.k,
                           "merge queue selection: missing source or running list");
    if (a.rows == 0) return;
    FAISS_THROW_IF_NOT_FMT(a.scratchBytes >= mergeQueueScratchBytes(a.rows, a.n, a.k, a.group),
                           "merge queue selection: scratch of %zu bytes too small", a.scratchBytes);
    KernelParams p;
    p.dist = a.dist;
    p.ld = a.ld;
    p.colAdd = a.colAdd;
    p.colBase = a.colBase;
    p.n = a.n;
    p.rows = a.rows;
    p.k = int(a.k);
    p.K = int(queueSize(a.k));
    p.run = a.run;
    p.runStride = a.runStride;
    p.hasInit = a.hasInit;
    p.group = a.group;
    p.plan = makePlan(a.n, a.k, a.group);
    uintptr_t base = (reinterpret_cast<uintptr_t>(a.scratch) + 255) & ~uintptr_t(255);
    p.levels = reinterpret_cast<uint32_t*>(base);
    p.slist = p.levels + size_t(a.rows) * p.plan.rowStride;

    const unsigned gy = unsigned(std::min<int64_t>(a.rows, 65535));
    if (p.plan.levels >= 1) {
        const int threads = 256;
        unsigned gx = unsigned(std::min<int64_t>((a.n + threads - 1) / threads,
                                                 std::max<int64_t>(1, 4096 / gy)));
        gx = std::max(gx, 1u);
        const bool vec4 = a.group == 4 && a.ld % 4 == 0 &&
                          aligned16(a.dist) && aligned16(a.colAdd);
        if (vec4) {
            unsigned gv = unsigned(std::min<int64_t>((a.n + 4 * threads - 1) / (4 * threads),
                                                     std::max<int64_t>(1, 8192 / gy)));
            hpBuildFirstVec4Kernel<<<dim3(std::max(gv, 1u), gy), threads, 0, stream>>>(p);
        } else switch (a.group) {
            case 2: hpBuildFirstKernel<2><<<dim3(gx, gy), threads, 0, stream>>>(p); break;
            case 4: hpBuildFirstKernel<4><<<dim3(gx, gy), threads, 0, stream>>>(p); break;
            case 8: hpBuildFirstKernel<8><<<dim3(gx, gy), threads, 0, stream>>>(p); break;
            case 16: hpBuildFirstKernel<16><<<dim3(gx, gy), threads, 0, stream>>>(p); break;
            default: FAISS_THROW_FMT("merge queue selection: group size %d must be 2, 4, 8 or 16",
                                     a.group);
        }
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        int first = (a.group * a.group <= 32 && p.plan.levels >= 2) ? 2 : 1;
        for (int l = first; l < p.plan.levels; ++l) {
            int64_t sizeTo = p.plan.size[l + 1];
            unsigned gx2 = unsigned(std::min<int64_t>((sizeTo + threads - 1) / threads,
                                                      std::max<int64_t>(1, 4096 / gy)));
            hpBuildNextKernel<<<dim3(std::max(gx2, 1u), gy), threads, 0, stream>>>(p, l);
            FAISS_EXT_CUDA_CHECK_LAUNCH();
        }
    }
    const size_t perWarp = sizeof(uint64_t) * (size_t(p.K) + 64);
    int wpb = int(std::max<size_t>(1, std::min<size_t>(8, 49152 / perWarp)));
    const size_t smem = perWarp * wpb;
    if (smem > 49152) {
        FAISS_EXT_CUDA_CHECK(cudaFuncSetAttribute(
                mqTopDownKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    }
    const int64_t blocks = (a.rows + wpb - 1) / wpb;
    mqTopDownKernel<<<unsigned(blocks), 32 * wpb, smem, stream>>>(p, wpb);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
