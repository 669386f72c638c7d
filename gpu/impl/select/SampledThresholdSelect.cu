// Sampled-threshold k-selection (SampledThresholdSelect.h): two kernels.
//   thresholdKernel  one block per row: sample, radix-select the rank-r key T
//   filterKernel     (chunk, row) blocks: one read of the row, keys <= T to
//                    the row's candidate buffer; the row's last block to
//                    finish then settles the row (settleRow): radix-select
//                    the k-th candidate, sort the k keys at or below it,
//                    decode them, or flag the row
// Only the filter touches the whole matrix; the rest reads about 0.4% of it
// (the sample) or the candidates (a few thousand keys per row), and settling
// a row, which computes, overlaps the filtering of others, which reads. The
// filter must keep up with the memory, so its common case is one float
// comparison per entry: key(v, j) <= T implies v <= T's value (-v for the
// largest), and the exact key comparison runs only for entries that pass.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cub/block/block_merge_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace select {

namespace {

/// Threads of every kernel here; the radix select gives one bin to a thread.
constexpr int kThreads = 256;
constexpr int kDigitBits = 8;
static_assert((1 << kDigitBits) == kThreads, "one radix bin per thread");

/// Samples per row: 512 runs of 8 at most (more samples give fewer
/// candidates, but a slower threshold kernel: 8192 doubled its time for
/// 25% fewer candidates at k = 2048).
constexpr int kRunLength = int(kSampledThresholdRunLength);
constexpr int64_t kMaxSamples = 4096;
constexpr int64_t kMinSamples = 1024;
/// Runs a thread of thresholdKernel samples (its keys stay in registers).
constexpr int kMaxRunsPerThread = int(kMaxSamples / kRunLength / kThreads);

/// Entries of a row per filterKernel block, and per thread per step (four
/// float4 loads in flight per thread, as in the memory-read floor kernel).
constexpr int64_t kChunk = 32768;
constexpr int kPerThread = 16;
constexpr uint32_t kStep = uint32_t(kThreads) * kPerThread;
static_assert(kChunk % kStep == 0, "whole steps per chunk");
static_assert(kThreads * 8 >= kSampledThresholdMaxK, "settleRow<.., 8> sorts the largest k");
static_assert(kThreads * 16 >= kSampledThresholdKeysMaxK, "settleRow<.., 16> sorts the largest k");

/// A count no row reaches: thresholdKernel's mark of a row to redo.
constexpr unsigned kRedoRow = 0xFFFFFFFFu;

/// Key bits of value v: negated first for the largest entries, as
/// negateCopy does for the other selections, so that the keys are the same.
template <bool kLargest>
__device__ __forceinline__ uint32_t orderedBits(float v) {
    return orderedFloatBits(kLargest ? -v : v);
}

struct RadixShared {
    unsigned hist[kThreads];
    typename cub::BlockScan<unsigned, kThreads>::TempStorage scan;
    uint64_t prefix;
    unsigned wanted;
    int settled;
};

/// A key T with exactly `wanted` of the block's keys at or below it
/// (1 <= wanted <= the number of valid keys). forEach(f) calls f(key, valid)
/// for each of the calling thread's keys, the same number of times in every
/// lane of a warp. Digit by digit from the top (8 bits a pass): a histogram
/// of the keys that match the prefix found so far, then the bin holding the
/// wanted rank joins the prefix; it stops as soon as every key of that bin
/// is wanted (T = the prefix with all lower bits set), at the latest after
/// the last digit. Lanes of a warp with the same bin add once
/// (__match_any_sync): the keys of a row mostly share their top bits.
template <class ForEach>
__device__ uint64_t blockRadixSelect(const ForEach& forEach, unsigned wanted, RadixShared& sh) {
    const int t = threadIdx.x;
    const int lane = t & 31;
    uint64_t prefix = 0;
    for (int lo = 64 - kDigitBits;; lo -= kDigitBits) {
        const uint64_t above = lo + kDigitBits >= 64 ? 0 : ~uint64_t(0) << (lo + kDigitBits);
        sh.hist[t] = 0;
        __syncthreads();
        forEach([&](uint64_t key, bool valid) {
            const bool match = valid && (key & above) == prefix;
            if (!__any_sync(0xFFFFFFFFu, match)) return;  // later passes: most warps
            const unsigned bin = match ? unsigned(key >> lo) & (kThreads - 1) : kThreads;
            const unsigned peers = __match_any_sync(0xFFFFFFFFu, bin);
            if (match && lane == __ffs(peers) - 1)
                atomicAdd(&sh.hist[bin], unsigned(__popc(peers)));
        });
        __syncthreads();
        const unsigned h = sh.hist[t];
        unsigned below = 0;
        cub::BlockScan<unsigned, kThreads>(sh.scan).ExclusiveSum(h, below);
        if (below < wanted && wanted <= below + h) {  // exactly one thread
            sh.prefix = prefix | (uint64_t(t) << lo);
            sh.wanted = wanted - below;
            sh.settled = h == wanted - below || lo == 0;
        }
        __syncthreads();
        prefix = sh.prefix;
        wanted = sh.wanted;
        if (sh.settled) return prefix | ((uint64_t(1) << lo) - 1);
        // (sh is rewritten only after the next pass's barriers)
    }
}

/// Per row: `runs` runs of kRunLength entries (sampledThresholdRunStart);
/// the threshold is the key with exactly `rank` sampled keys at or below
/// it. Sets the row's candidate count for filterKernel: 0, or kRedoRow when
/// the threshold's value is NaN (a row of almost only NaN: the float test
/// of the filter cannot express it, the fallback takes the row); zeroes the
/// row's count of finished filter blocks.
template <bool kLargest>
__global__ void __launch_bounds__(kThreads)
    thresholdKernel(const float* values, int64_t ld, const float* colAdd, int64_t n, int runs,
                    unsigned rank, uint64_t* thresholds, unsigned* counts, unsigned* done) {
    __shared__ RadixShared sh;
    const int64_t row = blockIdx.x;
    const float* rowPtr = values + row * ld;
    uint64_t key[kMaxRunsPerThread][kRunLength];
    bool valid[kMaxRunsPerThread];
#pragma unroll
    for (int u = 0; u < kMaxRunsPerThread; ++u) {
        const int i = u * kThreads + threadIdx.x;
        valid[u] = i < runs;
        const int64_t pos = valid[u] ? sampledThresholdRunStart(row, i, n, runs) : 0;
#pragma unroll
        for (int e = 0; e < kRunLength; ++e) {
            float v = valid[u] ? __ldg(rowPtr + pos + e) : 0.f;
            // (only where there is a column term: + 0.f would turn -0 into +0)
            if (colAdd && valid[u]) v += __ldg(colAdd + pos + e);
            key[u][e] = (uint64_t(orderedBits<kLargest>(v)) << 32) | uint64_t(pos + e);
        }
    }
    auto forEach = [&](auto f) {
#pragma unroll
        for (int u = 0; u < kMaxRunsPerThread; ++u) {
#pragma unroll
            for (int e = 0; e < kRunLength; ++e) f(key[u][e], valid[u]);
        }
    };
    const uint64_t threshold = blockRadixSelect(forEach, rank, sh);
    if (threadIdx.x == 0) {
        thresholds[row] = threshold;
        counts[row] = uint32_t(threshold >> 32) == 0xFFFFFFFFu ? kRedoRow : 0;
        done[row] = 0;
    }
}

/// thresholdKernel<false> over the sample shared by every row
/// (sampledThresholdFromSharedSample): row r's `samples` entries are
/// contiguous, so run i is entries 8 i .. 8 i + 7 and the key of entry s is
/// (its ordered bits, s), the keys thresholdKernel makes of such a row. A
/// thread holds its kRunsPerThread runs as floats (up to 64 registers for
/// 16,384 samples; 64-bit keys would take twice as many) and makes the keys
/// as the radix select asks for them.
template <int kRunsPerThread>
__global__ void __launch_bounds__(kThreads)
    sharedSampleThresholdKernel(const float* values, const float* colAdd, int64_t samples,
                                int runs, unsigned rank, uint64_t* thresholds, unsigned* counts,
                                unsigned* done) {
    __shared__ RadixShared sh;
    const int64_t row = blockIdx.x;
    const float4* rowRuns = reinterpret_cast<const float4*>(values + row * samples);
    const float4* addRuns = reinterpret_cast<const float4*>(colAdd);
    float v[kRunsPerThread][kRunLength];
#pragma unroll
    for (int u = 0; u < kRunsPerThread; ++u) {
        const int i = u * kThreads + threadIdx.x;
#pragma unroll
        for (int h = 0; h < kRunLength / 4; ++h) {
            float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
            if (i < runs) {
                x = __ldg(rowRuns + i * (kRunLength / 4) + h);
                // (only where there is a column term: + 0.f would turn -0 into +0)
                if (colAdd) {
                    const float4 c = __ldg(addRuns + i * (kRunLength / 4) + h);
                    x = make_float4(x.x + c.x, x.y + c.y, x.z + c.z, x.w + c.w);
                }
            }
            v[u][4 * h] = x.x;
            v[u][4 * h + 1] = x.y;
            v[u][4 * h + 2] = x.z;
            v[u][4 * h + 3] = x.w;
        }
    }
    auto forEach = [&](auto f) {
#pragma unroll
        for (int u = 0; u < kRunsPerThread; ++u) {
            const int i = u * kThreads + threadIdx.x;
#pragma unroll
            for (int e = 0; e < kRunLength; ++e)
                f((uint64_t(orderedBits<false>(v[u][e])) << 32) | uint64_t(i * kRunLength + e),
                  i < runs);
        }
    };
    const uint64_t threshold = blockRadixSelect(forEach, rank, sh);
    if (threadIdx.x == 0) {
        thresholds[row] = threshold;
        counts[row] = uint32_t(threshold >> 32) == 0xFFFFFFFFu ? kRedoRow : 0;
        done[row] = 0;
    }
}

/// Keys a filterKernel block gathers in shared memory before it appends
/// them to the row's buffer with one atomic. The stage shares its memory
/// with the settle's (filterKernel's union), so it takes as many slots as
/// the settle has, and at least 1024 (about 200 keys are expected of a block
/// at k = 2048 of 2^20, about 1,050 at k = 3000 of 100k); a block that finds
/// more appends the rest directly.
template <unsigned kSlots>
struct FilterStage {
    uint64_t keys[kSlots];
    unsigned count;  ///< keys claimed (may pass kSlots)
    unsigned base;   ///< the stage's place in the row's buffer
};

/// One row's share of a filterKernel block.
struct FilterChunk {
    const float* values;  ///< the chunk's first entry
    const float* colAdd;  ///< the column terms of its entries, or null
    uint32_t len;         ///< entries in the chunk
    uint32_t col0;        ///< column of its first entry
    uint32_t tHi, tLo;    ///< the threshold key's halves
    float tValue;         ///< the threshold's value
    unsigned* count;      ///< the row's candidate count
    uint64_t* out;        ///< the row's candidate buffer
    int64_t capacity;
};

/// Entry m (0 <= m < kPerThread) of a thread's share of a filter step, as an
/// offset in the step: with float4 loads, four consecutive entries per load
/// and consecutive threads on consecutive float4s; else consecutive threads
/// on consecutive entries. Both coalesced.
template <bool kVec4>
__device__ __forceinline__ uint32_t stepOffset(int m) {
    return kVec4 ? 4 * (uint32_t(m / 4) * kThreads + threadIdx.x) + uint32_t(m % 4)
                 : uint32_t(m) * kThreads + threadIdx.x;
}

/// Entries o .. o + 3 of p (o a multiple of 4, p 16-byte aligned) as one
/// float4; kChecked: those at or past len read as 0 (the caller masks
/// them), one by one where len ends inside the float4, so that rows whose
/// length is not a multiple of 4 still take float4 loads (4-byte loads were
/// one of the two reasons a gathered filter subset of 900,001 vectors was
/// searched at 0.7x the rate of one of 900,000, H200; the other: odd GEMM
/// widths, BoundedCorpus::gemmRows).
/// kStreaming: the distance tile, read once (__ldcs); else the column
/// terms (__ldg).
template <bool kChecked, bool kStreaming>
__device__ __forceinline__ float4 loadFour(const float* p, uint32_t o, uint32_t len) {
    if (kChecked && o + 3 >= len) {
        float e[4];
#pragma unroll
        for (uint32_t i = 0; i < 4; ++i) {
            e[i] = o + i >= len ? 0.f : kStreaming ? __ldcs(p + o + i) : __ldg(p + o + i);
        }
        return make_float4(e[0], e[1], e[2], e[3]);
    }
    const float4* p4 = reinterpret_cast<const float4*>(p + o);
    return kStreaming ? __ldcs(p4) : __ldg(p4);
}

/// v[m] += the column term of entry m of the step at s (the same float
/// addition as the other selections' dist + colAdd, so the keys are theirs).
template <bool kVec4, bool kChecked>
__device__ __forceinline__ void addColumnTerms(const FilterChunk& c, uint32_t s,
                                               float (&v)[kPerThread]) {
    if (kVec4) {
#pragma unroll
        for (int q = 0; q < kPerThread / 4; ++q) {
            const uint32_t o = s + stepOffset<true>(4 * q);
            if (kChecked && o >= c.len) continue;
            const float4 a = loadFour<kChecked, false>(c.colAdd, o, c.len);
            v[4 * q] += a.x;
            v[4 * q + 1] += a.y;
            v[4 * q + 2] += a.z;
            v[4 * q + 3] += a.w;
        }
    } else {
#pragma unroll
        for (int m = 0; m < kPerThread; ++m) {
            const uint32_t o = s + stepOffset<false>(m);
            if (!kChecked || o < c.len) v[m] += __ldg(c.colAdd + o);
        }
    }
}

/// A kept key of a filter step to the block's stage at `slot`, or, past
/// the stage (rare: rows the threshold misjudged), to the row's buffer.
template <unsigned kSlots>
__device__ __forceinline__ void stageKey(const FilterChunk& c, FilterStage<kSlots>& st,
                                         unsigned slot, uint64_t key) {
    if (slot < kSlots) {
        st.keys[slot] = key;
        return;
    }
    const unsigned pos = atomicAdd(c.count, 1u);
    if (int64_t(pos) < c.capacity) c.out[pos] = key;
}

/// v[m] for an m known only at run time, without indexing the register
/// array (that would move it to local memory): a tree of selects on m's
/// bits.
__device__ __forceinline__ float pickEntry(const float (&v)[kPerThread], unsigned m) {
    static_assert(kPerThread == 16, "four levels of selects");
    float a[8], b[4], c[2];
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = (m & 1u) ? v[2 * j + 1] : v[2 * j];
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = (m & 2u) ? a[2 * j + 1] : a[2 * j];
#pragma unroll
    for (int j = 0; j < 2; ++j) c[j] = (m & 4u) ? b[2 * j + 1] : b[2 * j];
    return (m & 8u) ? c[1] : c[0];
}

/// Rows where the threshold is expected to pass at least this many entries
/// of a warp's step (16 x 32 entries) are filtered by the dense form of
/// filterStep (at k = 3000 of 100k about 21 pass; at selectK's k = 2048 of
/// 2^20 about 3).
constexpr double kDenseKeysPerWarpStep = 8;

/// One step (kStep entries from offset s) of a chunk. Each thread marks its
/// entries whose value passes the threshold's value: one comparison each,
/// and most steps of most rows mark none. A marked entry is kept when its
/// key is <= the threshold key (the two tests differ only where the value
/// equals the threshold's). The warp then claims room for its kept keys in
/// the block's stage (a shared atomic: the loop never waits on global
/// memory), in one of two ways:
///   - sparse rows (selectK's, where the threshold keeps well under 1% of a
///     row): rounds in which each lane takes its next marked entry, a claim
///     per round, offsets by ballot;
///   - dense rows (kDense: k = 3000 of 100k keeps 4%, and nearly every
///     index has a marked lane): one claim for the warp, offsets by a scan
///     of the lanes' counts, each lane writing its own keys. A claim per
///     index made the filter issue-bound there (ncu, H200, 200 rows of 100k
///     at k 3000: 28M of the kernel's 47.6M warp instructions), and the
///     sparse form's rounds are slower here too (tried: the kernel 92 ->
///     101 us). The dense form takes more registers, which the
///     memory-bound sparse rows cannot spare.
/// kChecked: the step may run past the chunk's end.
template <bool kVec4, bool kLargest, bool kDense, bool kChecked, unsigned kSlots>
__device__ __forceinline__ void filterStep(const FilterChunk& c, uint32_t s,
                                           FilterStage<kSlots>& st) {
    float v[kPerThread];
    if (kVec4) {
#pragma unroll
        for (int q = 0; q < kPerThread / 4; ++q) {
            const uint32_t o = s + stepOffset<true>(4 * q);
            const float4 x = loadFour<kChecked, true>(c.values, o, c.len);
            v[4 * q] = x.x;
            v[4 * q + 1] = x.y;
            v[4 * q + 2] = x.z;
            v[4 * q + 3] = x.w;
        }
    } else {
#pragma unroll
        for (int m = 0; m < kPerThread; ++m) {
            const uint32_t o = s + stepOffset<false>(m);
            v[m] = !kChecked || o < c.len ? __ldcs(c.values + o) : 0.f;
        }
    }
    if (c.colAdd) addColumnTerms<kVec4, kChecked>(c, s, v);
    unsigned marked = 0;
#pragma unroll
    for (int m = 0; m < kPerThread; ++m) {
        const bool pass = kLargest ? -v[m] <= c.tValue : v[m] <= c.tValue;
        const bool in = !kChecked || s + stepOffset<kVec4>(m) < c.len;
        marked |= unsigned(pass && in) << m;
    }
    if (!__any_sync(0xFFFFFFFFu, marked != 0)) return;
    const int lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1u;
    if (!kDense) {
        // Each lane walks its own marked entries (most lanes have none or
        // one): the warp takes as many rounds as its busiest lane, where a
        // vote per entry index cost 16 rounds a step (ncu, selectK k 2048
        // of 2^20: 18 instructions per entry, 63% of the read bandwidth).
        unsigned rest = marked;
        while (__any_sync(0xFFFFFFFFu, rest != 0)) {
            const bool cand = rest != 0;
            const int m = cand ? __ffs(rest) - 1 : 0;
            rest &= rest - 1u;
            const uint32_t col = c.col0 + s + stepOffset<kVec4>(m);
            const uint32_t ob = orderedBits<kLargest>(pickEntry(v, unsigned(m)));
            const bool keep = cand && keyAtMost(ob, col, c.tHi, c.tLo);
            const unsigned lanes = __ballot_sync(0xFFFFFFFFu, keep);
            if (!lanes) continue;
            const int leader = __ffs(lanes) - 1;
            unsigned slot = 0;
            if (lane == leader) slot = atomicAdd(&st.count, unsigned(__popc(lanes)));
            slot = __shfl_sync(0xFFFFFFFFu, slot, leader) + __popc(lanes & below);
            if (keep) stageKey(c, st, slot, (uint64_t(ob) << 32) | col);
        }
        return;
    }
    unsigned tied = 0;
#pragma unroll
    for (int m = 0; m < kPerThread; ++m) {
        if ((kLargest ? -v[m] : v[m]) == c.tValue) tied |= (marked >> m & 1u) << m;
    }
    unsigned kept = marked & ~tied;
    if (__any_sync(0xFFFFFFFFu, tied != 0)) {
#pragma unroll
        for (int m = 0; m < kPerThread; ++m) {
            const uint32_t col = c.col0 + s + stepOffset<kVec4>(m);
            if (((tied >> m) & 1u) && keyAtMost(orderedBits<kLargest>(v[m]), col, c.tHi, c.tLo))
                kept |= 1u << m;
        }
    }
    const unsigned mine = unsigned(__popc(kept));
    unsigned upTo = mine;  // inclusive scan over the warp's lanes
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xFFFFFFFFu, upTo, o);
        if (lane >= o) upTo += y;
    }
    const unsigned total = __shfl_sync(0xFFFFFFFFu, upTo, 31);
    if (total == 0) return;
    unsigned slot = 0;
    if (lane == 31) slot = atomicAdd(&st.count, total);
    slot = __shfl_sync(0xFFFFFFFFu, slot, 31) + upTo - mine;
    if (kept == 0) return;
#pragma unroll
    for (int m = 0; m < kPerThread; ++m) {
        if (!((kept >> m) & 1u)) continue;
        const uint32_t col = c.col0 + s + stepOffset<kVec4>(m);
        stageKey(c, st, slot++, (uint64_t(orderedBits<kLargest>(v[m])) << 32) | col);
    }
}

/// What filterKernel reads and writes.
struct FilterArgs {
    const float* values;
    int64_t ld;            ///< row stride of values
    const float* colAdd;   ///< per column, added to every row's entries, or null
    int64_t n;
    const uint64_t* thresholds;
    unsigned* counts;  ///< candidates per row
    unsigned* done;    ///< blocks of the row done (zeroed by thresholdKernel)
    uint64_t* candidates;
    int64_t capacity;
    unsigned k;
    float* outValues;     ///< rows x k, or null
    int64_t* outIndices;  ///< rows x k, or null
    uint64_t* outKeys;    ///< rows x k sorted keys instead of values / indices, or null
    uint8_t* needsFallback;
};

/// Candidate slots of a row's settle in shared memory: the k <= kThreads *
/// kItems keys it sorts and, when they fit, all of the row's candidates
/// (the radix select then reads them there instead of from L2 once per
/// digit). The largest k (kItems 12 and 16: few-query rows of k up to 3072
/// and 4096) get 5,120: at k = 3000 of 100k a row has about 4,200
/// candidates (rank 171 of 4,096 samples, +-8% at one standard deviation),
/// which then fit. Smaller k keep the sort's size, so that the filter
/// blocks of selectK (many rows, memory-bound) keep their occupancy.
template <int kItems>
constexpr int settleSlots() {
    return kItems >= 12 ? kThreads * 16 * 5 / 4 : kThreads * kItems;
}

template <int kItems>
constexpr unsigned stageSlots() {
    return unsigned(settleSlots<kItems>()) > 1024u ? unsigned(settleSlots<kItems>()) : 1024u;
}

/// The block's sort of the k kept keys (CUB's merge sort: a thread's keys
/// sorted in registers, then merge-path rounds through shared memory). It
/// replaced a bitonic network of p log^2 p exchanges, which left the
/// settle of a few-query row at k = 3000 bound by the latency of its 78
/// dependent stages (ncu, H200: IPC 1.1).
template <int kItems>
using SettleSort = cub::BlockMergeSort<uint64_t, kThreads, kItems>;

template <int kItems>
struct SettleShared {
    RadixShared radix;
    unsigned kept;
    union {
        uint64_t keys[settleSlots<kItems>()];  ///< staged candidates, then the kept keys
        typename SettleSort<kItems>::TempStorage sort;
    };
};

/// Writes `key` as decodeKeys does (KeyDecode::Identity, or Negated for the
/// largest).
template <bool kLargest>
__device__ __forceinline__ void writeDecoded(uint64_t key, float* value, int64_t* index) {
    const float v = keyValue(key);
    if (value) *value = kLargest ? -v : v;
    if (index) *index = int64_t(keyIndex(key));
}

struct KeyLess {
    __device__ __forceinline__ bool operator()(uint64_t x, uint64_t y) const { return x < y; }
};

/// Appends `key` to sh.keys when `take` (the warp claims its room at once).
template <int kItems>
__device__ __forceinline__ void keepKey(bool take, uint64_t key, SettleShared<kItems>& sh) {
    const int lane = threadIdx.x & 31;
    const unsigned m = __ballot_sync(0xFFFFFFFFu, take);
    unsigned base = 0;
    if (lane == 0 && m) base = atomicAdd(&sh.kept, unsigned(__popc(m)));
    base = __shfl_sync(0xFFFFFFFFu, base, 0);
    if (take) sh.keys[base + __popc(m & ((1u << lane) - 1u))] = key;
}

/// Compacts the row's keys <= kth into sh.keys[0, k) (in any order). From
/// staged candidates in place, 256 at a time: a round reads its slots
/// before a barrier and writes below its last slot (every key kept so far
/// came from an earlier slot), so no slot is written before it is read.
/// From the row's buffer (L2), four loads in flight per thread.
template <int kItems>
__device__ void gatherKept(bool staged, const uint64_t* buf, unsigned count, uint64_t kth,
                          SettleShared<kItems>& sh) {
    if (threadIdx.x == 0) sh.kept = 0;
    __syncthreads();
    if (staged) {
        const unsigned rounds = (count + kThreads - 1) / kThreads;
        for (unsigned r = 0; r < rounds; ++r) {
            const unsigned i = r * kThreads + threadIdx.x;
            const uint64_t key = i < count ? sh.keys[i] : kMaxKey;
            __syncthreads();
            keepKey(i < count && key <= kth, key, sh);
        }
    } else {
        constexpr unsigned kLoads = 4;
        constexpr unsigned kSpan = kLoads * kThreads;
        // (a bound the same for every thread: keepKey's ballot needs the warp)
        const unsigned padded = (count + kSpan - 1) / kSpan * kSpan;
        for (unsigned i0 = threadIdx.x; i0 < padded; i0 += kSpan) {
            uint64_t key[kLoads];
#pragma unroll
            for (unsigned u = 0; u < kLoads; ++u) {
                const unsigned i = i0 + u * kThreads;
                key[u] = i < count ? __ldcg(buf + i) : kMaxKey;
            }
#pragma unroll
            for (unsigned u = 0; u < kLoads; ++u) {
                keepKey(i0 + u * kThreads < count && key[u] <= kth, key[u], sh);
            }
        }
    }
    __syncthreads();
}

/// Settles a row whose candidates are complete, by one block: flags it when
/// they overflowed the buffer or are fewer than k (and writes placeholders:
/// the decoded largest key); else radix-selects the k-th candidate, gathers
/// the k keys at or below it, sorts and decodes them. k <= kThreads * kItems.
/// Reads the candidates past L1 (other blocks wrote them).
template <bool kLargest, int kItems>
__device__ void settleRow(const FilterArgs& a, int64_t row, SettleShared<kItems>& sh) {
    const unsigned k = a.k;
    const unsigned count = __ldcg(a.counts + row);
    float* rowValues = a.outValues ? a.outValues + row * k : nullptr;
    int64_t* rowIndices = a.outIndices ? a.outIndices + row * k : nullptr;
    const bool flagged = count < k || int64_t(count) > a.capacity;
    if (threadIdx.x == 0) a.needsFallback[row] = flagged ? 1 : 0;
    uint64_t* rowKeys = a.outKeys ? a.outKeys + row * k : nullptr;
    if (flagged && rowKeys) {
        for (unsigned j = threadIdx.x; j < k; j += kThreads) rowKeys[j] = kMaxKey;
        return;
    }
    if (flagged) {
        for (unsigned j = threadIdx.x; j < k; j += kThreads) {
            writeDecoded<kLargest>(kMaxKey, rowValues ? rowValues + j : nullptr,
                                   rowIndices ? rowIndices + j : nullptr);
        }
        return;
    }
    const uint64_t* buf = a.candidates + row * a.capacity;
    // Stage the candidates in shared memory when they fit (see settleSlots).
    const bool staged = count <= unsigned(settleSlots<kItems>());
    // Four loads in flight per thread (from L2, or from the stage).
    constexpr unsigned kLoads = 4;
    constexpr unsigned kSpan = kLoads * kThreads;
    if (staged) {
        for (unsigned i0 = threadIdx.x; i0 < count; i0 += kSpan) {
            uint64_t key[kLoads];
#pragma unroll
            for (unsigned u = 0; u < kLoads; ++u) {
                const unsigned i = i0 + u * kThreads;
                key[u] = i < count ? __ldcg(buf + i) : 0;
            }
#pragma unroll
            for (unsigned u = 0; u < kLoads; ++u) {
                if (i0 + u * kThreads < count) sh.keys[i0 + u * kThreads] = key[u];
            }
        }
        __syncthreads();
    }
    const unsigned padded = (count + kSpan - 1) / kSpan * kSpan;
    auto forEach = [&](auto f) {
        for (unsigned i0 = threadIdx.x; i0 < padded; i0 += kSpan) {
            uint64_t key[kLoads];
#pragma unroll
            for (unsigned u = 0; u < kLoads; ++u) {
                const unsigned i = i0 + u * kThreads;
                key[u] = i >= count ? kMaxKey : staged ? sh.keys[i] : __ldcg(buf + i);
            }
#pragma unroll
            for (unsigned u = 0; u < kLoads; ++u) f(key[u], i0 + u * kThreads < count);
        }
    };
    const uint64_t kth = blockRadixSelect(forEach, k, sh.radix);
    gatherKept<kItems>(staged, buf, count, kth, sh);
    // Exactly k keys are <= kth; the sort's padding (kMaxKey) sorts after
    // them. Read striped (conflict-free: the sort takes any arrangement).
    uint64_t x[kItems];
#pragma unroll
    for (int e = 0; e < kItems; ++e) {
        const unsigned i = unsigned(e * kThreads) + threadIdx.x;
        x[e] = i < k ? sh.keys[i] : kMaxKey;
    }
    __syncthreads();  // the sort's storage overlaps the keys
    SettleSort<kItems>(sh.sort).Sort(x, KeyLess());
    // Thread t now holds ranks t * kItems .. t * kItems + kItems - 1.
#pragma unroll
    for (int e = 0; e < kItems; ++e) {
        const unsigned j = threadIdx.x * unsigned(kItems) + unsigned(e);
        if (j >= k) break;
        if (rowKeys) {
            rowKeys[j] = x[e];
        } else {
            writeDecoded<kLargest>(x[e], rowValues ? rowValues + j : nullptr,
                                   rowIndices ? rowIndices + j : nullptr);
        }
    }
}

/// Block (x, y): entries [x * kChunk, (x + 1) * kChunk) of row y, appended
/// to the row's candidates where their keys are <= the row's threshold
/// (keys past the capacity are counted, not written: the row is flagged).
/// The row's last block to finish then settles the row, so that settling,
/// which computes, overlaps other rows' filtering, which reads. kVec4: the
/// rows start 16-byte aligned (ld % 4 == 0), loads are float4; else 4-byte
/// loads. k <= kThreads * kItems.
template <bool kVec4, bool kLargest, int kItems, bool kDense>
__global__ void __launch_bounds__(kThreads) filterKernel(FilterArgs a) {
    constexpr unsigned kSlots = stageSlots<kItems>();
    __shared__ union {
        FilterStage<kSlots> stage;
        SettleShared<kItems> settle;
    } sh;
    __shared__ bool lastBlock;
    const int64_t row = blockIdx.y;
    const uint64_t threshold = a.thresholds[row];
    // A NaN threshold: thresholdKernel marked the row for the fallback.
    if (uint32_t(threshold >> 32) != 0xFFFFFFFFu) {
        const int64_t begin = int64_t(blockIdx.x) * kChunk;
        FilterChunk c;
        c.values = a.values + row * a.ld + begin;
        c.colAdd = a.colAdd ? a.colAdd + begin : nullptr;
        c.len = uint32_t(min(kChunk, a.n - begin));
        c.col0 = uint32_t(begin);  // columns are < 2^32
        c.tHi = uint32_t(threshold >> 32);
        c.tLo = uint32_t(threshold);
        c.tValue = floatFromOrderedBits(c.tHi);
        c.count = a.counts + row;
        c.out = a.candidates + row * a.capacity;
        c.capacity = a.capacity;
        FilterStage<kSlots>& st = sh.stage;
        if (threadIdx.x == 0) st.count = 0;
        __syncthreads();
        uint32_t s = 0;
        for (; s + kStep <= c.len; s += kStep) filterStep<kVec4, kLargest, kDense, false>(c, s, st);
        if (s < c.len) filterStep<kVec4, kLargest, kDense, true>(c, s, st);
        // Append the stage: one atomic for the block, coalesced writes.
        __syncthreads();
        const unsigned staged = min(st.count, kSlots);
        if (threadIdx.x == 0 && staged > 0) st.base = atomicAdd(c.count, staged);
        __syncthreads();
        for (unsigned i = threadIdx.x; i < staged; i += kThreads) {
            if (int64_t(st.base) + i < c.capacity) c.out[st.base + i] = st.keys[i];
        }
    }
    // Publish this block's keys, then count it done (the CUDA guide's
    // last-block pattern).
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) lastBlock = atomicAdd(a.done + row, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!lastBlock) return;
    __threadfence();
    settleRow<kLargest, kItems>(a, row, sh.settle);
}

/// One block per row: settles the row once a caller's own filter has
/// appended its candidates (sampledThresholdSettleKeys).
template <int kItems>
__global__ void __launch_bounds__(kThreads) settleKernel(FilterArgs a) {
    __shared__ SettleShared<kItems> sh;
    settleRow<false, kItems>(a, blockIdx.x, sh);
}

/// The scratch of sampledThresholdSelect, carved in this order.
struct ScratchLayout {
    size_t thresholds, counts, done, candidates, total;
    ScratchLayout(int64_t rows, int64_t capacity) {
        thresholds = 0;
        counts = thresholds + align256(sizeof(uint64_t) * size_t(rows));
        done = counts + align256(sizeof(unsigned) * size_t(rows));
        candidates = done + align256(sizeof(unsigned) * size_t(rows));
        total = candidates + align256(sizeof(uint64_t) * size_t(rows) * size_t(capacity));
    }
};

template <bool kVec4, bool kLargest, bool kDense>
void launchFilter(const FilterArgs& a, int items, dim3 grid, cudaStream_t stream) {
    auto kernel = items == 1   ? filterKernel<kVec4, kLargest, 1, kDense>
                  : items == 2 ? filterKernel<kVec4, kLargest, 2, kDense>
                  : items == 4 ? filterKernel<kVec4, kLargest, 4, kDense>
                  : items == 8 ? filterKernel<kVec4, kLargest, 8, kDense>
                  : items == 12 ? filterKernel<kVec4, kLargest, 12, kDense>
                               : filterKernel<kVec4, kLargest, 16, kDense>;
    kernel<<<grid, kThreads, 0, stream>>>(a);
}

template <bool kVec4, bool kLargest>
void launchFilter(const FilterArgs& a, int items, bool dense, dim3 grid, cudaStream_t stream) {
    if (dense)
        launchFilter<kVec4, kLargest, true>(a, items, grid, stream);
    else
        launchFilter<kVec4, kLargest, false>(a, items, grid, stream);
}

void launchFilter(const FilterArgs& a, bool vec4, bool largest, int items, bool dense, dim3 grid,
                  cudaStream_t stream) {
    if (vec4) {
        if (largest)
            launchFilter<true, true>(a, items, dense, grid, stream);
        else
            launchFilter<true, false>(a, items, dense, grid, stream);
    } else {
        if (largest)
            launchFilter<false, true>(a, items, dense, grid, stream);
        else
            launchFilter<false, false>(a, items, dense, grid, stream);
    }
}

std::atomic<int64_t> gSelectedRows{0};
std::atomic<int64_t> gFallbackRows{0};
std::atomic<int64_t> gSharedSampleForced{0};  // 0: kSharedSampleMaxSamples

}  // namespace

bool sampledThresholdApplies(int64_t n, int64_t k) {
    return k >= 1 && k <= kSampledThresholdMaxK && n >= kSampledThresholdMinN &&
           n >= kSampledThresholdMinNOverK * k && n <= (int64_t(1) << 32) - 1;
}

bool sampledThresholdKeysApply(int64_t n, int64_t k) {
    return k >= 1 && k <= kSampledThresholdKeysMaxK && n >= kSampledThresholdMinN &&
           n >= kSampledThresholdKeysMinNOverK * k && n <= (int64_t(1) << 32) - 1;
}

namespace {

/// sampledThresholdPlan (maxSamples kMaxSamples) and
/// sharedSampleThresholdPlan without the range check.
SampledThresholdPlan planFor(int64_t n, int64_t k, int64_t maxSamples = kMaxSamples) {
    SampledThresholdPlan p;
    p.samples = maxSamples;
    while (p.samples > kMinSamples && p.samples * 16 > n) p.samples /= 2;
    // mu <= samples / 16 (n >= 16 k), so rank stays below samples.
    const double mu = double(k) * double(p.samples) / double(n);
    p.rank = std::min<int64_t>(p.samples, int64_t(std::ceil(mu + 4.0 * std::sqrt(mu) + 4.0)));
    // The rank-r sample lies at a fraction of the row that is about
    // Beta(r, samples - r + 1): above (2r + 12) / samples with probability
    // under 1e-5 for every r (a Poisson tail), so overflows are rare.
    const double survivors = double(2 * p.rank + 12) * double(n) / double(p.samples);
    p.capacity = 1024;
    while (double(p.capacity) < survivors || p.capacity < k) p.capacity *= 2;
    return p;
}

/// kItems keys a thread sort k <= 256 * kItems keys when a row settles.
int settleItems(unsigned k) {
    return k <= 256 ? 1 : k <= 512 ? 2 : k <= 1024 ? 4 : k <= 2048 ? 8 : k <= 3072 ? 12 : 16;
}

/// The three steps of both entry points: a.values .. a.needsFallback set
/// but for the scratch pointers, which are carved here.
void runSampledThreshold(FilterArgs a, int64_t rows, bool largest, void* scratch,
                         size_t scratchBytes, cudaStream_t stream) {
    const SampledThresholdPlan plan = planFor(a.n, a.k);
    FAISS_THROW_IF_NOT_FMT(rows >= 1 && rows <= kSampledThresholdMaxRows,
                           "sampled-threshold selection: %lld rows (1 to %lld per call)",
                           (long long)rows, (long long)kSampledThresholdMaxRows);
    const ScratchLayout layout(rows, plan.capacity);
    FAISS_THROW_IF_NOT_FMT(scratch && scratchBytes >= layout.total,
                           "sampled-threshold selection: %zu bytes of scratch, %zu needed",
                           scratchBytes, layout.total);
    FAISS_THROW_IF_NOT_MSG(a.values && a.needsFallback && a.ld >= a.n,
                           "sampled-threshold selection: null values or flags, or ld < n");
    char* base = static_cast<char*>(scratch);
    uint64_t* thresholds = reinterpret_cast<uint64_t*>(base + layout.thresholds);
    unsigned* counts = reinterpret_cast<unsigned*>(base + layout.counts);
    unsigned* done = reinterpret_cast<unsigned*>(base + layout.done);

    const int runs = int(plan.samples / kRunLength);
    auto threshold = largest ? thresholdKernel<true> : thresholdKernel<false>;
    threshold<<<unsigned(rows), kThreads, 0, stream>>>(a.values, a.ld, a.colAdd, a.n, runs,
                                                       unsigned(plan.rank), thresholds, counts,
                                                       done);
    FAISS_EXT_CUDA_CHECK_LAUNCH();

    a.thresholds = thresholds;
    a.counts = counts;
    a.done = done;
    a.candidates = reinterpret_cast<uint64_t*>(base + layout.candidates);
    a.capacity = plan.capacity;
    // Rows need not hold a multiple of 4 entries (loadFour reads the last
    // float4 of a row entry by entry); their starts must be aligned.
    const bool vec4 = a.ld % 4 == 0 && aligned16(a.values) && aligned16(a.colAdd);
    const dim3 grid(unsigned((a.n + kChunk - 1) / kChunk), unsigned(rows));
    const int items = settleItems(a.k);
    // The threshold passes about rank / samples of a row.
    const bool dense = double(plan.rank) * double(kPerThread * 32) / double(plan.samples) >=
                       kDenseKeysPerWarpStep;
    launchFilter(a, vec4, largest, items, dense, grid, stream);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace

SampledThresholdPlan sampledThresholdPlan(int64_t n, int64_t k) {
    FAISS_THROW_IF_NOT_FMT(sampledThresholdApplies(n, k) || sampledThresholdKeysApply(n, k),
                           "sampled-threshold selection: k = %lld of n = %lld out of its range",
                           (long long)k, (long long)n);
    return planFor(n, k);
}

size_t sampledThresholdScratchBytes(int64_t rows, int64_t n, int64_t k) {
    return ScratchLayout(rows, sampledThresholdPlan(n, k).capacity).total;
}

namespace {
/// The shared sample's largest size (planFor halves it while n < 16
/// samples): kSharedSampleMaxSamples unless setSharedSampleSize forced one.
/// A larger sample costs the threshold kernel rows x samples and saves the
/// appends of kept products, about rows x n x rank / samples; measured
/// (H100, 2026-12-05, fused bounded TF32, nq 10,000, k 10 / 100) 16,384
/// against 4,096 vectors: 1M x 128 636k / 569k q/s against 576k / 517k,
/// far 10M x 96 76.0k / 74.0k against 58.6k / 56.2k.
int64_t sharedSampleSize() {
    const int64_t forced = gSharedSampleForced.load();
    return forced ? forced : kSharedSampleMaxSamples;
}
}  // namespace

SampledThresholdPlan sharedSampleThresholdPlan(int64_t n, int64_t k) {
    FAISS_THROW_IF_NOT_FMT(sampledThresholdKeysApply(n, k),
                           "sampled-threshold selection: k = %lld of n = %lld out of its range",
                           (long long)k, (long long)n);
    return planFor(n, k, sharedSampleSize());
}

size_t sharedSampleThresholdScratchBytes(int64_t rows, int64_t n, int64_t k) {
    return ScratchLayout(rows, sharedSampleThresholdPlan(n, k).capacity).total;
}

void setSharedSampleSize(int64_t samples) {
    FAISS_THROW_IF_NOT_FMT(samples == 0 || (samples >= kMinSamples &&
                                            samples <= kSharedSampleMaxSamples &&
                                            (samples & (samples - 1)) == 0),
                           "setSharedSampleSize: %lld is neither 0 nor a power of two in "
                           "[%lld, %lld]",
                           (long long)samples, (long long)kMinSamples,
                           (long long)kSharedSampleMaxSamples);
    gSharedSampleForced.store(samples);
}

int64_t sharedSampleSizeForced() { return gSharedSampleForced.load(); }

void sampledThresholdSelect(const float* values, int64_t rows, int64_t n, int64_t k, bool largest,
                            float* outValues, int64_t* outIndices, uint8_t* needsFallback,
                            void* scratch, size_t scratchBytes, cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(sampledThresholdApplies(n, k),
                           "sampled-threshold selection: k = %lld of n = %lld out of its range",
                           (long long)k, (long long)n);
    FilterArgs a{};
    a.values = values;
    a.ld = n;
    a.n = n;
    a.k = unsigned(k);
    a.outValues = outValues;
    a.outIndices = outIndices;
    a.needsFallback = needsFallback;
    runSampledThreshold(a, rows, largest, scratch, scratchBytes, stream);
}

void sampledThresholdSelectKeys(const float* dist, int64_t ld, const float* colAdd, int64_t rows,
                                int64_t n, int64_t k, uint64_t* outKeys, uint8_t* needsFallback,
                                void* scratch, size_t scratchBytes, cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(sampledThresholdKeysApply(n, k),
                           "sampled-threshold selection: k = %lld of n = %lld out of its range",
                           (long long)k, (long long)n);
    FAISS_THROW_IF_NOT_MSG(outKeys, "sampled-threshold selection: null output keys");
    FilterArgs a{};
    a.values = dist;
    a.ld = ld;
    a.colAdd = colAdd;
    a.n = n;
    a.k = unsigned(k);
    a.outKeys = outKeys;
    a.needsFallback = needsFallback;
    runSampledThreshold(a, rows, /*largest=*/false, scratch, scratchBytes, stream);
}

SampledThresholdRowBuffers sampledThresholdRowBuffers(void* scratch, size_t scratchBytes,
                                                      int64_t rows, int64_t n, int64_t k) {
    const SampledThresholdPlan plan = sharedSampleThresholdPlan(n, k);
    const ScratchLayout layout(rows, plan.capacity);
    FAISS_THROW_IF_NOT_FMT(scratch && scratchBytes >= layout.total && rows >= 1 &&
                                   rows <= kSampledThresholdMaxRows,
                           "sampled-threshold buffers: %zu bytes of scratch for %lld rows, %zu "
                           "needed (1 to %lld rows)",
                           scratchBytes, (long long)rows, layout.total,
                           (long long)kSampledThresholdMaxRows);
    char* base = static_cast<char*>(scratch);
    SampledThresholdRowBuffers b;
    b.thresholds = reinterpret_cast<const uint64_t*>(base + layout.thresholds);
    b.counts = reinterpret_cast<unsigned*>(base + layout.counts);
    b.candidates = reinterpret_cast<uint64_t*>(base + layout.candidates);
    b.capacity = plan.capacity;
    return b;
}

void sampledThresholdFromSharedSample(const float* sampleValues, const float* sampleColAdd,
                                      int64_t rows, int64_t n, int64_t k, void* scratch,
                                      size_t scratchBytes, cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(sampledThresholdKeysApply(n, k),
                           "sampled-threshold selection: k = %lld of n = %lld out of its range",
                           (long long)k, (long long)n);
    FAISS_THROW_IF_NOT_MSG(sampleValues && aligned16(sampleValues) && aligned16(sampleColAdd),
                           "sampled-threshold selection: null or unaligned sample");
    const SampledThresholdPlan plan = sharedSampleThresholdPlan(n, k);
    sampledThresholdRowBuffers(scratch, scratchBytes, rows, n, k);  // checks the scratch
    const ScratchLayout layout(rows, plan.capacity);
    char* base = static_cast<char*>(scratch);
    const int runs = int(plan.samples / kRunLength);
    uint64_t* thresholds = reinterpret_cast<uint64_t*>(base + layout.thresholds);
    unsigned* counts = reinterpret_cast<unsigned*>(base + layout.counts);
    unsigned* done = reinterpret_cast<unsigned*>(base + layout.done);
    if (plan.samples <= kMaxSamples) {
        // A row of `samples` entries read whole: runs of 8 in strata of 8.
        thresholdKernel<false><<<unsigned(rows), kThreads, 0, stream>>>(
                sampleValues, plan.samples, sampleColAdd, plan.samples, runs,
                unsigned(plan.rank), thresholds, counts, done);
    } else {
        const int runsPerThread = (runs + kThreads - 1) / kThreads;
        auto kernel = runsPerThread <= 4 ? sharedSampleThresholdKernel<4>
                                         : sharedSampleThresholdKernel<8>;
        kernel<<<unsigned(rows), kThreads, 0, stream>>>(sampleValues, sampleColAdd,
                                                        plan.samples, runs, unsigned(plan.rank),
                                                        thresholds, counts, done);
    }
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void sampledThresholdSettleKeys(int64_t rows, int64_t n, int64_t k, uint64_t* outKeys,
                                uint8_t* needsFallback, void* scratch, size_t scratchBytes,
                                cudaStream_t stream) {
    FAISS_THROW_IF_NOT_MSG(outKeys && needsFallback,
                           "sampled-threshold selection: null output keys or flags");
    const SampledThresholdRowBuffers b =
            sampledThresholdRowBuffers(scratch, scratchBytes, rows, n, k);
    FilterArgs a{};
    a.n = n;
    a.k = unsigned(k);
    a.counts = b.counts;
    a.candidates = b.candidates;
    a.capacity = b.capacity;
    a.outKeys = outKeys;
    a.needsFallback = needsFallback;
    const int items = settleItems(a.k);
    auto kernel = items == 1    ? settleKernel<1>
                  : items == 2  ? settleKernel<2>
                  : items == 4  ? settleKernel<4>
                  : items == 8  ? settleKernel<8>
                  : items == 12 ? settleKernel<12>
                                : settleKernel<16>;
    kernel<<<unsigned(rows), kThreads, 0, stream>>>(a);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

SampledThresholdCounters sampledThresholdCounters() {
    SampledThresholdCounters c;
    c.rows = gSelectedRows.load();
    c.fallbackRows = gFallbackRows.load();
    return c;
}

int64_t fetchSampledThresholdFlags(const uint8_t* flags, int64_t rows, std::vector<uint8_t>& host,
                                   cudaStream_t stream) {
    host.resize(static_cast<size_t>(rows));
    FAISS_EXT_CUDA_CHECK(
            cudaMemcpyAsync(host.data(), flags, size_t(rows), cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int64_t flagged = std::count(host.begin(), host.end(), uint8_t(1));
    gSelectedRows += rows;
    gFallbackRows += flagged;
    return flagged;
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
