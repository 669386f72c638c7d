// Quick multi-select (Komarov, Dashti & D'Souza,
// PLoS ONE 2014, docs/references.md, "GPU-based quick multi-select").
//
// Each row is handled by a group: one warp (W = 1, many rows) or one block
// of W warps (few rows). A pass partitions the row's current segment around
// a pivot. Every warp reads 32 elements at a time, one per lane, takes
// __ballot_sync of the predicate key <= pivot and places its element with
// __popc of the ballot masked to the lanes before it: no prefix sum, and the
// segment is read once per pass. Elements at or below the pivot go to the
// left of an auxiliary array, the others to its right end (the paper's two
// coalesced writes). When the left side holds fewer than the k' still
// wanted, it is taken whole: its reference is pushed on a stack (the paper's
// "stack of references" instead of copying it back) and the search goes on
// in the right side for k' - left. Otherwise it goes on in the left side.
// A segment of at most 32 elements is finished by ranks computed with warp
// shuffles.
//
// Deviations, both for speed: pivots come from samples of the segment (the
// first pass samples up to 1024 elements and picks a rank that keeps the k
// wanted with high probability, so that pass discards almost the whole row
// and only writes its left side; a pass that kept too few is redone with a
// higher pivot); and warps of a block get their write offsets with one shared
// atomic per 32 * U elements instead of a block-wide scan. Keys are
// (distance, id) pairs (SelectKeys.cuh), all distinct, so every pass makes
// progress, even on rows of equal values.
#pragma once

#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace select {

/// References to segments already known to be in the result.
constexpr int kStackSize = 32;

/// Rows (warps) per block of the one-warp-per-row kernel.
constexpr int kWarpsPerBlockW1 = 8;

/// Warps per block of the one-block-per-row kernel.
constexpr int kWarpsPerBlockRow = 8;

/// Samples per row of the first-pass pivot of filterFloatRows.
constexpr int kPivotSamplesForward = 1024;

/// Below this many elements the first pass takes the whole row.
constexpr int64_t kMinFilterN = 2048;

/// Shared state of one group.
template <int W>
struct GroupShared {
    static constexpr int kSamples = W == 1 ? 256 : 1024;  // a power of two
    uint64_t samples[kSamples];
    const uint64_t* stackPtr[kStackSize];
    int64_t stackLen[kStackSize];
    unsigned long long left;
    unsigned long long right;
    uint64_t pivot;
};

template <int W>
__device__ __forceinline__ void groupSync() {
    if (W == 1) {
        __syncwarp();
    } else {
        __syncthreads();
    }
}

/// Loads element j of a float source row as a key.
struct FloatRowLoader {
    const float* row;
    const float* colAdd;
    uint32_t colBase;
    __device__ __forceinline__ uint64_t operator()(int64_t j) const {
        float v = row[j];
        if (colAdd) v += colAdd[j];
        return makeKey(v, colBase + uint32_t(j));
    }
};

/// Loads element j of a key row.
struct KeyRowLoader {
    const uint64_t* row;
    __device__ __forceinline__ uint64_t operator()(int64_t j) const { return row[j]; }
};

/// The group-uniform total of a pass: W == 1 counted it in registers
/// (warpCount), W > 1 in sh.left.
template <int W>
__device__ int64_t groupTotal(GroupShared<W>& sh, int64_t warpCount) {
    if (W == 1) {
        __syncwarp();
        return warpCount;
    }
    __syncthreads();
    int64_t total = int64_t(sh.left);
    __syncthreads();
    return total;
}

/// One partition pass over elements 0..n-1 of `load`, by the whole group.
/// Keys <= pivot go to leftOut[0..), if kWriteRight the others to
/// rightEnd[-1], rightEnd[-2], ... Returns the left count (group-uniform).
template <int W, int U, bool kWriteRight, class Load>
__device__ int64_t partitionPass(const Load& load, int64_t n, uint64_t pivot, uint64_t* leftOut,
                                 uint64_t* rightEnd, GroupShared<W>& sh) {
    const int lane = threadIdx.x & 31;
    const int warp = W == 1 ? 0 : int(threadIdx.x >> 5);
    const unsigned ltMask = (1u << lane) - 1u;
    int64_t leftBase = 0, rightBase = 0;
    if (W > 1) {
        if (threadIdx.x == 0) {
            sh.left = 0;
            sh.right = 0;
        }
        __syncthreads();
    }
    constexpr int64_t kChunk = 32 * U;
    for (int64_t c0 = int64_t(warp) * kChunk; c0 < n; c0 += int64_t(W) * kChunk) {
        uint64_t key[U];
        bool valid[U];
        if (c0 + kChunk <= n) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                valid[u] = true;
                key[u] = load(c0 + u * 32 + lane);
            }
        } else {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                int64_t j = c0 + u * 32 + lane;
                valid[u] = j < n;
                key[u] = valid[u] ? load(j) : kMaxKey;
            }
        }
        unsigned lm[U], rm[U];
        int lTot = 0, rTot = 0;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            lm[u] = __ballot_sync(0xFFFFFFFFu, valid[u] && key[u] <= pivot);
            rm[u] = __ballot_sync(0xFFFFFFFFu, valid[u]) & ~lm[u];
            lTot += __popc(lm[u]);
            rTot += __popc(rm[u]);
        }
        int64_t lb, rb;
        if (W == 1) {
            lb = leftBase;
            rb = rightBase;
            leftBase += lTot;
            rightBase += rTot;
        } else {
            unsigned long long a = 0, b = 0;
            if (lane == 0) {
                if (lTot) a = atomicAdd(&sh.left, (unsigned long long)lTot);
                if (kWriteRight && rTot) b = atomicAdd(&sh.right, (unsigned long long)rTot);
            }
            lb = (int64_t)__shfl_sync(0xFFFFFFFFu, a, 0);
            rb = (int64_t)__shfl_sync(0xFFFFFFFFu, b, 0);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if ((lm[u] >> lane) & 1u) {
                leftOut[lb + __popc(lm[u] & ltMask)] = key[u];
            } else if (kWriteRight && ((rm[u] >> lane) & 1u)) {
                rightEnd[-1 - (rb + __popc(rm[u] & ltMask))] = key[u];
            }
            lb += __popc(lm[u]);
            rb += __popc(rm[u]);
        }
    }
    return groupTotal<W>(sh, leftBase);
}

/// Sorts the first s samples ascending (s a power of two) by a bitonic
/// network in shared memory, by the whole group.
template <int W>
__device__ void sortSamples(GroupShared<W>& sh, int s) {
    const int t = W == 1 ? int(threadIdx.x & 31) : int(threadIdx.x);
    for (int size = 2; size <= s; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = t; i < s / 2; i += 32 * W) {
                int pos = 2 * i - (i & (stride - 1));
                bool ascending = (pos & size) == 0;
                uint64_t x = sh.samples[pos], y = sh.samples[pos + stride];
                if ((x > y) == ascending) {
                    sh.samples[pos] = y;
                    sh.samples[pos + stride] = x;
                }
            }
            groupSync<W>();
        }
    }
}

/// First pass over a float row: keys <= pivot go to leftOut (compacted),
/// the rest is dropped. Reads the row once, four floats per load where the
/// row is 16-byte aligned; a warp's ballot is written only when some lane
/// kept an element, which is rare once the pivot is near the k-th value.
/// Returns the kept count (group-uniform).
template <int W>
__device__ int64_t filterFloatRow(const FloatRowLoader& fl, int64_t n, uint64_t pivot,
                                  uint64_t* leftOut, GroupShared<W>& sh) {
    const int lane = threadIdx.x & 31;
    const int warp = W == 1 ? 0 : int(threadIdx.x >> 5);
    const unsigned ltMask = (1u << lane) - 1u;
    const uint32_t pHi = uint32_t(pivot >> 32);
    const uint32_t pLo = uint32_t(pivot);
    if (W > 1) {
        if (threadIdx.x == 0) sh.left = 0;
        __syncthreads();
    }
    int64_t leftBase = 0;
    auto keep = [&](float v, int64_t j, bool valid) {
        uint32_t ob = orderedFloatBits(v);
        uint32_t idx = fl.colBase + uint32_t(j);
        bool pred = valid && keyAtMost(ob, idx, pHi, pLo);
        unsigned m = __ballot_sync(0xFFFFFFFFu, pred);
        if (m) {
            int64_t base;
            if (W == 1) {
                base = leftBase;
                leftBase += __popc(m);
            } else {
                unsigned long long b = 0;
                if (lane == 0) b = atomicAdd(&sh.left, (unsigned long long)__popc(m));
                base = (int64_t)__shfl_sync(0xFFFFFFFFu, b, 0);
            }
            if (pred) leftOut[base + __popc(m & ltMask)] = (uint64_t(ob) << 32) | idx;
        }
    };
    constexpr int64_t kVecChunk = 32 * 16;
    const bool aligned = ((reinterpret_cast<uintptr_t>(fl.row) |
                           reinterpret_cast<uintptr_t>(fl.colAdd)) & 15) == 0;
    const int64_t nVec = aligned ? (n / kVecChunk) * kVecChunk : 0;
    for (int64_t c0 = int64_t(warp) * kVecChunk; c0 < nVec; c0 += int64_t(W) * kVecChunk) {
        const float4* r4 = reinterpret_cast<const float4*>(fl.row + c0);
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) v[u] = r4[u * 32 + lane];
        if (fl.colAdd) {
            const float4* a4 = reinterpret_cast<const float4*>(fl.colAdd + c0);
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                float4 a = a4[u * 32 + lane];
                v[u].x += a.x;
                v[u].y += a.y;
                v[u].z += a.z;
                v[u].w += a.w;
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            int64_t j = c0 + int64_t(u * 32 + lane) * 4;
            keep(v[u].x, j, true);
            keep(v[u].y, j + 1, true);
            keep(v[u].z, j + 2, true);
            keep(v[u].w, j + 3, true);
        }
    }
    // The tail (and unaligned rows), 32 elements at a time.
    for (int64_t c0 = nVec + int64_t(warp) * 32; c0 < n; c0 += int64_t(W) * 32) {
        const int64_t j = c0 + lane;
        const bool valid = j < n;
        float v = 0.f;
        if (valid) {
            v = fl.row[j];
            if (fl.colAdd) v += fl.colAdd[j];
        }
        keep(v, j, valid);
    }
    return groupTotal<W>(sh, leftBase);
}

/// Copies the stacked segments into out[outPos..] and empties the stack.
template <int W>
__device__ void flushStack(GroupShared<W>& sh, int& top, uint64_t* out, int64_t& outPos) {
    const int t = W == 1 ? int(threadIdx.x & 31) : int(threadIdx.x);
    for (int s = 0; s < top; ++s) {
        const uint64_t* p = sh.stackPtr[s];
        int64_t len = sh.stackLen[s];
        for (int64_t i = t; i < len; i += 32 * W) out[outPos + i] = p[i];
        outPos += len;
    }
    top = 0;
    groupSync<W>();
}

template <int W>
__device__ void pushRef(GroupShared<W>& sh, int& top, const uint64_t* p, int64_t len,
                        uint64_t* out, int64_t& outPos) {
    if (len == 0) return;
    if (top == kStackSize) flushStack<W>(sh, top, out, outPos);
    const int t = W == 1 ? int(threadIdx.x & 31) : int(threadIdx.x);
    if (t == 0) {
        sh.stackPtr[top] = p;
        sh.stackLen[top] = len;
    }
    ++top;
    groupSync<W>();
}

/// The sample count s (0: no filtering) and the pivot rank r of the first
/// pass over n elements when k are wanted.
__device__ __forceinline__ void firstPassPlan(int64_t n, int64_t k, int maxSamples, int* s,
                                              int* r) {
    *s = 0;
    *r = 0;
    if (n >= kMinFilterN && n >= 8 * k) {
        int ss = maxSamples;
        while (int64_t(ss) * 4 > n) ss >>= 1;
        double mu = double(k) * ss / double(n);
        *s = ss;
        *r = int(mu + 4.0 * sqrt(mu) + 3.0);
    }
}

/// Loads the s stratified random samples of a row into sh.samples.
template <int W, class Load>
__device__ void loadSamples(const Load& load, int64_t n, int64_t row, int s, GroupShared<W>& sh) {
    const int t = W == 1 ? int(threadIdx.x & 31) : int(threadIdx.x);
    const int64_t stride = n / s;
    for (int i = t; i < s; i += 32 * W) {
        int64_t pos = int64_t(i) * stride +
                      int64_t(hashMix(uint32_t(row) * 0x9E3779B9u ^ uint32_t(i)) % uint64_t(stride));
        sh.samples[i] = load(pos);
    }
    groupSync<W>();
}

/// Selects the k smallest keys of one row (see the file comment).
template <int W, bool kFloatSrc>
__device__ void selectRow(const SelectArgs& a, int64_t row, GroupShared<W>& sh) {
    const int lane = threadIdx.x & 31;
    const int warp = W == 1 ? 0 : int(threadIdx.x >> 5);
    const int64_t n = a.n;
    const int64_t k = a.k;
    uint64_t* out = a.out + row * a.outStride + a.outOffset;
    uint64_t* buf = a.aux1 + row * a.auxStride;
    uint64_t* other = a.aux2 + row * a.auxStride;
    int64_t outPos = 0;
    int top = 0;

    // ---- First pass: sampled pivot, left side only ----
    int64_t L;
    {
        constexpr int U = 8;
        FloatRowLoader fl{kFloatSrc ? a.dist + row * a.ld : nullptr, a.colAdd, a.colBase};
        KeyRowLoader kl{kFloatSrc ? nullptr : a.keys + row * a.keyStride};
        int s = 0, r = 0;
        firstPassPlan(n, k, GroupShared<W>::kSamples, &s, &r);
        if (kFloatSrc && a.prefilteredCount) {
            L = int64_t(a.prefilteredCount[row]);
            // As filterFloatRows planned it.
            int s1 = 0, r1 = 0;
            firstPassPlan(n, k, kPivotSamplesForward, &s1, &r1);
            if (L >= k || s1 == 0 || r1 >= s1 - 1) {
                s = -1;  // nothing to redo
            } else {
                r = 2 * r + 8;
            }
        }
        if (s > 0) {
            if constexpr (kFloatSrc) {
                loadSamples<W>(fl, n, row, s, sh);
            } else {
                loadSamples<W>(kl, n, row, s, sh);
            }
        }
        if (s > 0) sortSamples<W>(sh, s);
        while (s >= 0) {
            uint64_t pivot = (s > 0 && r < s - 1) ? sh.samples[r] : kMaxKey;
            if constexpr (kFloatSrc) {
                L = filterFloatRow<W>(fl, n, pivot, buf, sh);
            } else {
                L = partitionPass<W, U, false>(kl, n, pivot, buf, nullptr, sh);
            }
            if (L >= k) break;
            r = 2 * r + 8;  // too few kept: a higher pivot (rare)
        }
    }

    // ---- Multi-select passes on the kept segment ----
    int64_t lo = 0, len = L, kk = k;
    while (true) {
        if (len == kk) {
            pushRef<W>(sh, top, buf + lo, len, out, outPos);
            break;
        }
        if (len <= 32) {
            // Finish by ranks from warp shuffles.
            if (warp == 0) {
                uint64_t key = lane < len ? buf[lo + lane] : kMaxKey;
                int rank = 0;
                for (int j = 0; j < int(len); ++j) {
                    uint64_t o = __shfl_sync(0xFFFFFFFFu, key, j);
                    rank += o < key;
                }
                if (lane < len && rank < kk) out[outPos + rank] = key;
            }
            outPos += kk;
            groupSync<W>();
            break;
        }
        // Pivot from 32 evenly spaced samples of the segment.
        uint64_t pivot;
        {
            int r = int((kk * 33 + len - 1) / len);
            if (r > 30) r = 30;
            if (warp == 0) {
                uint64_t key = buf[lo + (int64_t(lane) * len) / 32];
                int rank = 0;
                for (int j = 0; j < 32; ++j) rank += __shfl_sync(0xFFFFFFFFu, key, j) < key;
                unsigned who = __ballot_sync(0xFFFFFFFFu, rank == r);
                pivot = __shfl_sync(0xFFFFFFFFu, key, __ffs(who) - 1);
                if (W > 1 && lane == 0) sh.pivot = pivot;
            }
            if (W > 1) {
                __syncthreads();
                pivot = sh.pivot;
                __syncthreads();
            }
        }
        KeyRowLoader seg{buf + lo};
        int64_t Lc = partitionPass<W, 4, true>(seg, len, pivot, other + lo, other + lo + len, sh);
        if (Lc > kk) {
            len = Lc;
        } else {
            pushRef<W>(sh, top, other + lo, Lc, out, outPos);
            if (Lc == kk) break;
            kk -= Lc;
            lo += Lc;
            len -= Lc;
        }
        uint64_t* tmp = buf;
        buf = other;
        other = tmp;
    }
    flushStack<W>(sh, top, out, outPos);
}

/// Samples per row of the first-pass pivot (filterFloatRows).
constexpr int kPivotSamples = GroupShared<kWarpsPerBlockRow>::kSamples;
static_assert(kPivotSamples == kPivotSamplesForward, "one sample count for the first pass");

/// Per row, the first-pass pivot from sorted samples (one block per row).
/// The samples are runs of 4 consecutive elements at stratified random
/// positions: 4 samples per 16 bytes read.
template <int kUnused = 0>
__global__ void __launch_bounds__(32 * kWarpsPerBlockRow)
        firstPassPivotKernel(SelectArgs a, uint64_t* pivots) {
    __shared__ GroupShared<kWarpsPerBlockRow> sh;
    const int64_t row = blockIdx.x;
    int s = 0, r = 0;
    firstPassPlan(a.n, a.k, kPivotSamples, &s, &r);
    uint64_t pivot = kMaxKey;
    if (s > 0 && r < s - 1) {
        FloatRowLoader fl{a.dist + row * a.ld, a.colAdd, a.colBase};
        const int runs = s / 4;
        const int64_t stratum = a.n / runs;  // >= 16 since 4 * s <= n
        for (int i = threadIdx.x; i < runs; i += blockDim.x) {
            int64_t pos = int64_t(i) * stratum +
                          int64_t(hashMix(uint32_t(row) * 0x9E3779B9u ^ uint32_t(i)) %
                                  uint64_t(stratum - 3));
#pragma unroll
            for (int e = 0; e < 4; ++e) sh.samples[4 * i + e] = fl(pos + e);
        }
        __syncthreads();
        sortSamples<kWarpsPerBlockRow>(sh, s);
        pivot = sh.samples[r];
    }
    if (threadIdx.x == 0) pivots[row] = pivot;
}

/// Elements of a row per work item of firstPassFilterKernel.
constexpr int64_t kFilterChunk = 4096;

/// Streams (row, chunk) work items: keys <= pivots[row] are appended to
/// aux1's row, counted in counts[row]. kVec: rows and colAdd 16-byte aligned.
template <bool kVec>
__global__ void __launch_bounds__(256) firstPassFilterKernel(SelectArgs a, const uint64_t* pivots,
                                                             unsigned long long* counts) {
    const int lane = threadIdx.x & 31;
    const unsigned ltMask = (1u << lane) - 1u;
    const int64_t chunksPerRow = (a.n + kFilterChunk - 1) / kFilterChunk;
    const int64_t items = a.rows * chunksPerRow;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
    for (int64_t item = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); item < items;
         item += warps) {
        const int64_t row = item / chunksPerRow;
        const int64_t begin = (item % chunksPerRow) * kFilterChunk;
        const int64_t end = begin + kFilterChunk < a.n ? begin + kFilterChunk : a.n;
        const uint64_t pivot = pivots[row];
        const uint32_t pHi = uint32_t(pivot >> 32), pLo = uint32_t(pivot);
        const float* rowPtr = a.dist + row * a.ld;
        uint64_t* out = a.aux1 + row * a.auxStride;
        unsigned long long* count = counts + row;
        auto keep = [&](float v, int64_t j, bool valid) {
            uint32_t ob = orderedFloatBits(v);
            uint32_t idx = a.colBase + uint32_t(j);
            bool pred = valid && keyAtMost(ob, idx, pHi, pLo);
            unsigned m = __ballot_sync(0xFFFFFFFFu, pred);
            if (m) {
                unsigned long long b = 0;
                if (lane == 0) b = atomicAdd(count, (unsigned long long)__popc(m));
                b = __shfl_sync(0xFFFFFFFFu, b, 0);
                if (pred) out[b + __popc(m & ltMask)] = (uint64_t(ob) << 32) | idx;
            }
        };
        int64_t j0 = begin;
        if (kVec) {
            constexpr int64_t kStep = 32 * 4 * 4;  // 4 float4 per lane
            for (; j0 + kStep <= end; j0 += kStep) {
                const float4* r4 = reinterpret_cast<const float4*>(rowPtr + j0);
                float4 v[4];
#pragma unroll
                for (int u = 0; u < 4; ++u) v[u] = __ldcs(r4 + u * 32 + lane);
                if (a.colAdd) {
                    const float4* c4 = reinterpret_cast<const float4*>(a.colAdd + j0);
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        float4 c = __ldg(c4 + u * 32 + lane);
                        v[u].x += c.x;
                        v[u].y += c.y;
                        v[u].z += c.z;
                        v[u].w += c.w;
                    }
                }
                // Each lane marks its kept elements (16 bits); most steps keep
                // none. Kept keys are appended with one atomic per warp step
                // and a warp scan of the per-lane counts.
                unsigned keepBits = 0;
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const uint32_t idx0 = a.colBase + uint32_t(j0 + (u * 32 + lane) * 4);
                    const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        uint32_t ob = orderedFloatBits(e[c]);
                        bool pred = keyAtMost(ob, idx0 + c, pHi, pLo);
                        keepBits |= unsigned(pred) << (u * 4 + c);
                    }
                }
                if (__ballot_sync(0xFFFFFFFFu, keepBits != 0) == 0) continue;
                const int mine = __popc(keepBits);
                int incl = mine;
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    int y = __shfl_up_sync(0xFFFFFFFFu, incl, o);
                    if (lane >= o) incl += y;
                }
                unsigned long long b = 0;
                if (lane == 31) b = atomicAdd(count, (unsigned long long)incl);
                b = __shfl_sync(0xFFFFFFFFu, b, 31) + (incl - mine);
                while (keepBits) {
                    int bit = __ffs(keepBits) - 1;
                    keepBits &= keepBits - 1;
                    // Re-read the (cached) value: no local array of v.
                    const int64_t j = j0 + ((bit >> 2) * 32 + lane) * 4 + (bit & 3);
                    float x = rowPtr[j];
                    if (a.colAdd) x += a.colAdd[j];
                    out[b++] = (uint64_t(orderedFloatBits(x)) << 32) | (a.colBase + uint32_t(j));
                }
            }
        }
        for (; j0 < end; j0 += 32) {
            int64_t j = j0 + lane;
            bool valid = j < end;
            float v = 0.f;
            if (valid) {
                v = rowPtr[j];
                if (a.colAdd) v += a.colAdd[j];
            }
            keep(v, j, valid);
        }
    }
}

/// W == 1: blockDim.x / 32 rows per block, a warp each; W > 1: one row per
/// block of 32 * W threads.
template <int W, bool kFloatSrc>
__global__ void __launch_bounds__(256, 4) quickMultiSelectKernel(SelectArgs a) {
    if constexpr (W == 1) {
        __shared__ GroupShared<1> shAll[kWarpsPerBlockW1];
        const int w = threadIdx.x >> 5;
        const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlockW1 + w;
        if (row >= a.rows) return;
        selectRow<1, kFloatSrc>(a, row, shAll[w]);
    } else {
        __shared__ GroupShared<W> sh;
        selectRow<W, kFloatSrc>(a, int64_t(blockIdx.x), sh);
    }
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
