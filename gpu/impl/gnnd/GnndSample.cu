// GNND sampling (section 4.1): per list the first p NEW and the first p OLD
// entries go into G_new / G_old (sampled NEW entries become OLD in the
// graph), then each sample v of node s appends s to v's list in the same
// graph (atomic appends, capped at 2p), then a warp per list sorts it and
// removes repeated ids.
#include "faiss_ext/gpu/impl/gnnd/GnndCommon.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ int warpExclusiveScan(int v, int lane) {
    int incl = v;
    for (int o = 1; o < 32; o <<= 1) {
        int t = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += t;
    }
    return incl - v;
}

// Forward samples. Lane l looks at position l of every segment; the order is
// position first, then segment, so the nearest entries of all segments come
// first.
__global__ void forwardSampleKernel(int64_t n, int K, int p, uint32_t* gIds, int* newList,
                                    int* oldList, int* counts) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t s = int64_t(blockIdx.x) * kWarps + warp;
    if (s >= n) return;
    int nseg = K / kSegment;
    uint32_t* g = gIds + s * K;
    int myNew = 0, myOld = 0;
    for (int j = 0; j < nseg; ++j) {
        uint32_t e = g[j * kSegment + lane];
        if (e == kEmptyId) continue;
        if (e & kNewFlag) ++myNew;
        else ++myOld;
    }
    int rNew = warpExclusiveScan(myNew, lane);
    int rOld = warpExclusiveScan(myOld, lane);
    int totNew = __shfl_sync(kFull, rNew + myNew, 31);
    int totOld = __shfl_sync(kFull, rOld + myOld, 31);
    int* nl = newList + s * 2 * p;
    int* ol = oldList + s * 2 * p;
    for (int j = 0; j < nseg; ++j) {
        uint32_t e = g[j * kSegment + lane];
        if (e == kEmptyId) continue;
        if (e & kNewFlag) {
            if (rNew < p) {
                nl[rNew] = int(e & kIdMask);
                g[j * kSegment + lane] = e & kIdMask;  // sampled: OLD from now on
            }
            ++rNew;
        } else {
            if (rOld < p) ol[rOld] = int(e);
            ++rOld;
        }
    }
    if (lane == 0) {
        int fn = min(totNew, p), fo = min(totOld, p);
        counts[s] = fn;
        counts[n + s] = fo;
        counts[2 * n + s] = fn;
        counts[3 * n + s] = fo;
    }
}

// Reverse samples: thread per (node, forward sample).
__global__ void reverseSampleKernel(int64_t n, int p, int* newList, int* oldList, int* counts) {
    int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    int64_t s = t / (2 * p);
    int r = int(t % (2 * p));
    if (s >= n) return;
    bool isNew = r < p;
    int rr = isNew ? r : r - p;
    int fwd = counts[(isNew ? 2 : 3) * n + s];
    if (rr >= fwd) return;
    int* list = isNew ? newList : oldList;
    int v = list[s * 2 * p + rr];
    int pos = atomicAdd(&counts[(isNew ? 0 : 1) * n + v], 1);
    if (pos < 2 * p) list[int64_t(v) * 2 * p + pos] = int(s);
}

// De-duplication: a warp per list sorts its (at most 2p <= 64) ids.
__global__ void dedupKernel(int64_t n, int p, int* newList, int* oldList, int* counts) {
    __shared__ uint32_t buf[kWarps][2 * kMaxSamples];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t s = int64_t(blockIdx.x) * kWarps + warp;
    if (s >= n) return;
    uint32_t* b = buf[warp];
    for (int which = 0; which < 2; ++which) {
        int* list = (which == 0 ? newList : oldList) + s * 2 * p;
        int cnt = min(counts[which * n + s], 2 * p);
        for (int e = lane; e < 2 * kMaxSamples; e += 32) b[e] = e < cnt ? uint32_t(list[e]) : kEmptyId;
        __syncwarp();
        // bitonic sort of 64 keys (ids only)
        for (int size = 2; size <= 64; size <<= 1) {
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                int i = lane;  // 32 comparators
                int lo = 2 * i - (i & (stride - 1));
                int hi = lo + stride;
                bool asc = (lo & size) == 0;
                uint32_t a = b[lo], c = b[hi];
                if (asc ? c < a : a < c) {
                    b[lo] = c;
                    b[hi] = a;
                }
                __syncwarp();
            }
        }
        int out = 0;
        for (int e0 = 0; e0 < 64; e0 += 32) {
            int e = e0 + lane;
            uint32_t v = b[e];
            bool keep = v != kEmptyId && (e == 0 || b[e - 1] != v);
            unsigned m = __ballot_sync(kFull, keep);
            int pos = out + __popc(m & ((1u << lane) - 1));
            if (keep) list[pos] = int(v);
            out += __popc(m);
        }
        if (lane == 0) counts[which * n + s] = out;
        __syncwarp();
    }
}

}  // namespace

void launchSample(cudaStream_t stream, int64_t n, int K, int p, uint32_t* gIds, int* newList,
                  int* oldList, int* counts) {
    if (n == 0) return;
    unsigned grid = unsigned((n + kWarps - 1) / kWarps);
    forwardSampleKernel<<<grid, 32 * kWarps, 0, stream>>>(n, K, p, gIds, newList, oldList, counts);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    int64_t threads = n * 2 * p;
    reverseSampleKernel<<<unsigned((threads + 255) / 256), 256, 0, stream>>>(n, p, newList, oldList,
                                                                            counts);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    dedupKernel<<<grid, 32 * kWarps, 0, stream>>>(n, p, newList, oldList, counts);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
