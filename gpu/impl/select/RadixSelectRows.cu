// Radix selection (RadixSelectRows.h). Per row, a state (the key prefix
// found so far, how many keys of that prefix are still wanted, whether the
// row is settled) is refined by one pass per digit of the 64-bit key: a
// histogram of the digit over the keys matching the prefix (shared-memory
// counts, added to a per-row global histogram), then one warp per row
// finds the digit holding the wanted rank. The value bits take three
// passes (11 + 11 + 10 bits); the column bits are needed only while a row
// has more keys of equal value than it wants (ties), and settled rows skip
// every later pass.
#include "faiss_ext/gpu/impl/select/RadixSelectRows.h"

#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace select {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxDigitBits = 11;
constexpr int kBins = 1 << kMaxDigitBits;

struct RowState {
    uint64_t prefix;    ///< the key bits found so far
    uint64_t kstar;     ///< settled: keep the keys <= kstar
    uint32_t wanted;    ///< keys of `prefix` still wanted
    uint32_t settled;
    uint32_t kept;      ///< compaction cursor
    uint32_t pad;
};

struct Source {
    const float* dist;
    int64_t ld;
    const float* colAdd;
    int64_t w;
};

__device__ __forceinline__ uint64_t wideKey(float v, int64_t j) {
    return (uint64_t(orderedFloatBits(v)) << 32) | uint64_t(j);
}

/// Calls f(value, column) for this block's share of row r (a grid-stride
/// loop over blockIdx.x), in float4 steps when kVec4.
template <bool kVec4, class F>
__device__ void visitRow(const Source& s, int64_t r, F& f) {
    const float* row = s.dist + r * s.ld;
    const int64_t step = int64_t(gridDim.x) * kThreads;
    if (kVec4) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        const float4* add4 = reinterpret_cast<const float4*>(s.colAdd);
        for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < s.w / 4; i += step) {
            float4 v = __ldg(row4 + i);
            if (add4) {
                const float4 c = __ldg(add4 + i);
                v.x += c.x;
                v.y += c.y;
                v.z += c.z;
                v.w += c.w;
            }
            f(v.x, 4 * i);
            f(v.y, 4 * i + 1);
            f(v.z, 4 * i + 2);
            f(v.w, 4 * i + 3);
        }
        // A row whose width is not a multiple of 4 ends with 1-3 entries
        // read one by one (rows start aligned: ld % 4 == 0).
        const int64_t j = s.w / 4 * 4 + threadIdx.x;
        if (blockIdx.x == 0 && j < s.w) {
            float v = __ldg(row + j);
            if (s.colAdd) v += __ldg(s.colAdd + j);
            f(v, j);
        }
    } else {
        for (int64_t j = int64_t(blockIdx.x) * kThreads + threadIdx.x; j < s.w; j += step) {
            float v = __ldg(row + j);
            if (s.colAdd) v += __ldg(s.colAdd + j);
            f(v, j);
        }
    }
}

struct CountDigit {
    unsigned* bins;
    uint64_t prefix, maskAbove;
    int lo;
    unsigned digitMask;
    __device__ void operator()(float v, int64_t j) {
        const uint64_t key = wideKey(v, j);
        if ((key & maskAbove) == prefix) atomicAdd(&bins[unsigned(key >> lo) & digitMask], 1u);
    }
};

template <bool kVec4>
__global__ void __launch_bounds__(kThreads) histogramKernel(Source s, RowState* state,
                                                            unsigned* hist, int lo, int bits) {
    const int64_t r = blockIdx.y;
    if (state[r].settled) return;
    __shared__ unsigned bins[kBins];
    const int nBins = 1 << bits;
    for (int b = threadIdx.x; b < nBins; b += kThreads) bins[b] = 0;
    __syncthreads();
    const int top = lo + bits;  // bits at and above `top` are the prefix
    CountDigit f{bins, state[r].prefix, top >= 64 ? 0 : ~((uint64_t(1) << top) - 1), lo,
                 unsigned(nBins - 1)};
    visitRow<kVec4>(s, r, f);
    __syncthreads();
    for (int b = threadIdx.x; b < nBins; b += kThreads) {
        if (bins[b]) atomicAdd(&hist[r * kBins + b], bins[b]);
    }
}

/// One warp per row: the digit holding the wanted rank joins the prefix;
/// the row is settled when all keys of the new prefix are wanted (or no
/// bits are left). Clears the row's histogram for the next pass.
__global__ void findDigitKernel(RowState* state, unsigned* hist, int lo, int bits, bool last) {
    const int64_t r = blockIdx.x;
    const int lane = threadIdx.x;
    unsigned* h = hist + r * kBins;
    RowState st = state[r];
    if (!st.settled) {
        constexpr int kPerLane = kBins / 32;
        unsigned sum = 0;
        for (int i = 0; i < kPerLane; ++i) sum += h[lane * kPerLane + i];
        unsigned incl = sum;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned t = __shfl_up_sync(0xFFFFFFFFu, incl, o);
            if (lane >= o) incl += t;
        }
        const unsigned owner = __ffs(__ballot_sync(0xFFFFFFFFu, incl >= st.wanted)) - 1;
        if (lane == int(owner)) {
            unsigned below = incl - sum;
            int b = lane * kPerLane;
            while (below + h[b] < st.wanted) below += h[b++];
            st.prefix |= uint64_t(b) << lo;
            st.wanted -= below;
            const uint64_t lowMask = (uint64_t(1) << lo) - 1;
            if (h[b] == st.wanted || last) {
                st.settled = 1;
                st.kstar = st.prefix | lowMask;
            }
            state[r] = st;
        }
    }
    __syncwarp();
    for (int i = lane; i < kBins; i += 32) h[i] = 0;
}

__global__ void initStateKernel(RowState* state, int64_t rows, uint32_t kk) {
    const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r < rows) state[r] = RowState{0, 0, kk, 0, 0, 0};
}

struct KeepKeys {
    uint64_t* out;
    uint64_t kstar;
    uint32_t colBase;
    unsigned* kept;
    uint32_t kk;
    __device__ void operator()(float v, int64_t j) {
        const bool take = wideKey(v, j) <= kstar;
        const unsigned active = __activemask();
        const unsigned ballot = __ballot_sync(active, take);
        if (!ballot) return;
        const int leader = __ffs(active) - 1;
        const int lane = threadIdx.x & 31;
        unsigned base = 0;
        if (lane == leader) base = atomicAdd(kept, unsigned(__popc(ballot)));
        base = __shfl_sync(active, base, leader);
        const unsigned pos = base + __popc(ballot & ((1u << lane) - 1u));
        if (take && pos < kk) out[pos] = makeKey(v, colBase + uint32_t(j));
    }
};

template <bool kVec4>
__global__ void __launch_bounds__(kThreads) keepKernel(Source s, RowState* state, uint32_t colBase,
                                                       uint64_t* out, uint32_t kk) {
    const int64_t r = blockIdx.y;
    KeepKeys f{out + r * kk, state[r].kstar, colBase, &state[r].kept, kk};
    visitRow<kVec4>(s, r, f);
}

/// (lo, bits) of each pass, most significant first: the value's 32 bits,
/// then the column's significant bits (ties).
std::vector<std::pair<int, int>> digitPasses(int64_t w) {
    std::vector<std::pair<int, int>> p = {{53, 11}, {42, 11}, {32, 10}};
    int colBits = 0;
    while ((int64_t(1) << colBits) < w) ++colBits;
    for (int hi = colBits; hi > 0; hi -= kMaxDigitBits) {
        const int lo = std::max(0, hi - kMaxDigitBits);
        p.push_back({lo, hi - lo});
    }
    return p;
}

}  // namespace

size_t radixSelectScratchBytes(int64_t rows) {
    return align256(sizeof(RowState) * size_t(rows)) + sizeof(unsigned) * size_t(rows) * kBins;
}

void radixSelectRows(const float* dist, int64_t ld, const float* colAdd, uint32_t colBase,
                     int64_t rows, int64_t w, int64_t kk, uint64_t* out, void* scratch,
                     size_t scratchBytes, cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(kk >= 1 && kk <= w && w <= (int64_t(1) << 32) - 1,
                           "radixSelectRows: k = %lld not in [1, %lld]", (long long)kk,
                           (long long)w);
    FAISS_THROW_IF_NOT_FMT(rows >= 0 && rows < 65536, "radixSelectRows: %lld rows (at most 65535)",
                           (long long)rows);
    FAISS_THROW_IF_NOT_FMT(scratch && scratchBytes >= radixSelectScratchBytes(rows),
                           "radixSelectRows: %zu bytes of scratch, %zu needed", scratchBytes,
                           radixSelectScratchBytes(rows));
    if (rows == 0) return;
    RowState* state = static_cast<RowState*>(scratch);
    unsigned* hist = reinterpret_cast<unsigned*>(static_cast<char*>(scratch) +
                                                 align256(sizeof(RowState) * size_t(rows)));
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(hist, 0, sizeof(unsigned) * size_t(rows) * kBins, stream));
    initStateKernel<<<unsigned((rows + 255) / 256), 256, 0, stream>>>(state, rows, uint32_t(kk));
    FAISS_EXT_CUDA_CHECK_LAUNCH();

    const Source s{dist, ld, colAdd, w};
    const bool vec4 = ld % 4 == 0 && aligned16(dist) && aligned16(colAdd);
    // Enough blocks over all rows to fill the GPU several times over.
    int sms = 0;
    FAISS_EXT_CUDA_CHECK(
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, getCurrentDevice()));
    const int64_t perRowMax = std::max<int64_t>(1, (w / (vec4 ? 4 : 1) + kThreads - 1) / kThreads);
    const int64_t perRow = std::min(perRowMax, std::max<int64_t>(1, (int64_t(sms) * 8 + rows - 1) / rows));
    const dim3 grid(unsigned(std::min<int64_t>(perRow, 65535)), unsigned(rows));

    const auto passes = digitPasses(w);
    for (size_t p = 0; p < passes.size(); ++p) {
        const int lo = passes[p].first, bits = passes[p].second;
        if (vec4) histogramKernel<true><<<grid, kThreads, 0, stream>>>(s, state, hist, lo, bits);
        else histogramKernel<false><<<grid, kThreads, 0, stream>>>(s, state, hist, lo, bits);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        findDigitKernel<<<unsigned(rows), 32, 0, stream>>>(state, hist, lo, bits,
                                                          p + 1 == passes.size());
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
    if (vec4) keepKernel<true><<<grid, kThreads, 0, stream>>>(s, state, colBase, out, uint32_t(kk));
    else keepKernel<false><<<grid, kThreads, 0, stream>>>(s, state, colBase, out, uint32_t(kk));
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
