// The fused few-query kernel (FusedFewQuery.h). Work split: blockIdx.x is a
// group of up to NQ queries, blockIdx.y a contiguous chunk of the corpus;
// consecutive blocks share a chunk, so the groups after the first read it
// from L2. Per tile of kTileVectors vectors, the block stages kDimChunk
// dimensions of the tile (and of its queries) in shared memory; each thread
// owns one vector and accumulates its NQ dot products in registers, in
// dimension order. Staging is double-buffered with cp.async: the copies of
// the next step (the next kDimChunk dimensions of the tile, or the next
// tile's first) are started before the current step is computed, so the
// corpus reads stay in flight while the block computes, offers keys and
// waits at barriers; before, a block alternated between loading and
// computing, and only other blocks on the SM covered the loads' latency.
// The staged values and the summation order are those of the single-buffer
// kernel, so the keys are bit-identical to it. Keys below a query's running threshold
// (the block's kk-th best so far) go to a per-query buffer; a full buffer
// is merged into the sorted list by a bitonic sort of (list, buffer) in
// shared memory.
#include "faiss_ext/gpu/impl/flat/FusedFewQuery.h"

#include "faiss_ext/gpu/impl/flat/FewQueryMerge.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPath.h"
#include "faiss_ext/gpu/impl/flat/KernelLaunchCache.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>

namespace faiss_ext {
namespace gpu {

namespace {

constexpr int kThreads = 256;           ///< threads of a block
constexpr int kTileVectors = kThreads;  ///< one vector per thread
constexpr int kDimChunk = 32;           ///< dimensions staged at a time
constexpr int kRowStride = kDimChunk + 4;  ///< staged row: conflict-free float4 reads
/// Staging buffers: one step is computed while the next one's copies fly.
constexpr int kStages = 2;
/// Shared memory for the lists and buffers of a block: with the two staged
/// tiles (72 KiB) a block stays within 140 KiB (one per SM when the lists
/// are full; small k leaves room for two or three).
constexpr size_t kListBytes = 64 << 10;

struct FusedArgs {
    const float* x;
    const float* norms;
    int64_t nb;
    int d;
    const float* q;
    int64_t nq;
    int kk;       ///< keys kept per query and block
    int listCap;  ///< kk rounded up to a power of two
    int seg;      ///< list + buffer per query (a power of two)
    int64_t tilesPerChunk;
    int64_t totalTiles;
    uint64_t* out;       ///< key of query i, chunk c, rank r at out[i * outStride + c * kk + r]
    int64_t outStride;
};

template <int NQ>
struct SharedLayout {
    float* x;        ///< kStages x kTileVectors x kRowStride
    float* q;        ///< kStages x NQ x kDimChunk
    uint64_t* seg;   ///< NQ x seg: the sorted list (listCap), then the buffer
    uint64_t* thresh;
    unsigned* cnt;
    __device__ SharedLayout(char* base, int segLen) {
        x = reinterpret_cast<float*>(base);
        q = x + kStages * kTileVectors * kRowStride;
        seg = reinterpret_cast<uint64_t*>(q + kStages * NQ * kDimChunk);
        thresh = seg + size_t(NQ) * segLen;
        cnt = reinterpret_cast<unsigned*>(thresh + NQ);
    }
    static size_t bytes(int segLen) {
        return sizeof(float) * kStages * (kTileVectors * kRowStride + NQ * kDimChunk) +
               sizeof(uint64_t) * (size_t(NQ) * segLen + NQ) + sizeof(unsigned) * NQ;
    }
};

/// Copies `kBytes` (4 or 16) from global `src` to shared `dst` without
/// passing through registers (cp.async, sm_80+): the copy is in flight
/// until cpAsyncWait. Where !valid the destination is zero-filled and
/// nothing is read (src is then any mapped address).
template <int kBytes>
__device__ __forceinline__ void copyAsync(void* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    // No cp.async before sm_80: a plain copy (correct, without the overlap).
    if (kBytes == 16) {
        *static_cast<float4*>(dst) = valid ? __ldg(reinterpret_cast<const float4*>(src))
                                           : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
        *static_cast<float*>(dst) = valid ? __ldg(src) : 0.f;
    }
    return;
#endif
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    const int srcBytes = valid ? kBytes : 0;
    if (kBytes == 16) {
        // .cg: the vectors are read once, keep them out of L1.
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                     "r"(srcBytes)
                     : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
                     "r"(srcBytes)
                     : "memory");
    }
}

__device__ __forceinline__ void cpAsyncCommit() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most `kPending` of this thread's committed groups are
/// still in flight (the others have landed in shared memory).
template <int kPending>
__device__ __forceinline__ void cpAsyncWait() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

/// Starts staging dimensions c0 .. c0 + kDimChunk of tile vectors v0 ..
/// into xs (zeros past the corpus or the dimension: they add exact zeros to
/// the sums).
template <bool kVec4>
__device__ void copyTileChunk(float* xs, const FusedArgs& a, int64_t v0, int c0) {
    // Thread t copies element (or float4) t % kPerRow of rows t / kPerRow +
    // it * kRowsPerIt: one source pointer advanced by a fixed stride keeps
    // the addresses out of the registers the dot products need.
    constexpr int kPerRow = kVec4 ? kDimChunk / 4 : kDimChunk;
    constexpr int kWidth = kVec4 ? 4 : 1;
    constexpr int kRowsPerIt = kThreads / kPerRow;
    const int v = threadIdx.x / kPerRow, j = (threadIdx.x % kPerRow) * kWidth;
    const bool dimValid = c0 + j < a.d;
    const float* src = a.x + (v0 + v) * a.d + c0 + j;
    const int64_t srcStride = int64_t(kRowsPerIt) * a.d;
    float* dst = xs + v * kRowStride + j;
#pragma unroll 8
    for (int it = 0; it < kTileVectors / kRowsPerIt; ++it) {
        const bool valid = dimValid && v0 + v + it * kRowsPerIt < a.nb;
        copyAsync<4 * kWidth>(dst + it * kRowsPerIt * kRowStride, valid ? src + it * srcStride : a.x,
                              valid);
    }
}

/// Starts staging dimensions c0 .. c0 + kDimChunk of the group's queries
/// into qs (zeros past the group or the dimension).
template <int NQ>
__device__ void copyQueryChunk(float* qs, const FusedArgs& a, int64_t q0, int nqg, int c0) {
    for (int i = threadIdx.x; i < NQ * kDimChunk; i += kThreads) {
        const int qi = i / kDimChunk, j = i % kDimChunk;
        const bool valid = qi < nqg && c0 + j < a.d;
        copyAsync<4>(qs + i, valid ? a.q + (q0 + qi) * a.d + c0 + j : a.q, valid);
    }
}

/// Starts one step's copies (tile vectors v0 .., dimensions c0 ..) into
/// stage `buf` of the double-buffered staging area, as one commit group.
template <int NQ, bool kVec4>
__device__ void copyStep(const SharedLayout<NQ>& s, int buf, const FusedArgs& a, int64_t v0,
                         int c0, int64_t q0, int nqg) {
    copyTileChunk<kVec4>(s.x + buf * kTileVectors * kRowStride, a, v0, c0);
    copyQueryChunk<NQ>(s.q + buf * NQ * kDimChunk, a, q0, nqg, c0);
    cpAsyncCommit();
}

/// acc[qi] += <staged query qi, this thread's staged vector> over the chunk.
template <int NQ>
__device__ void dotChunk(const float* xs, const float* qs, int dims, float (&acc)[NQ]) {
    const float* xr = xs + threadIdx.x * kRowStride;
#pragma unroll
    for (int j = 0; j < kDimChunk; j += 4) {
        if (j >= dims) break;
        const float4 xv = *reinterpret_cast<const float4*>(xr + j);
#pragma unroll
        for (int qi = 0; qi < NQ; ++qi) {
            const float4 qv = *reinterpret_cast<const float4*>(qs + qi * kDimChunk + j);
            acc[qi] = fmaf(xv.x, qv.x, acc[qi]);
            acc[qi] = fmaf(xv.y, qv.y, acc[qi]);
            acc[qi] = fmaf(xv.z, qv.z, acc[qi]);
            acc[qi] = fmaf(xv.w, qv.w, acc[qi]);
        }
    }
}

/// Sorts each query's segment (list + buffer) ascending and makes its first
/// listCap keys the new list; the kk-th becomes the threshold. Called by
/// the whole block.
template <int NQ>
__device__ void mergeBuffers(const SharedLayout<NQ>& s, const FusedArgs& a) {
    const int bufCap = a.seg - a.listCap;
    for (int i = threadIdx.x; i < NQ * bufCap; i += kThreads) {
        const int qi = i / bufCap, j = i % bufCap;
        if (j >= min(s.cnt[qi], unsigned(bufCap))) s.seg[qi * a.seg + a.listCap + j] = select::kMaxKey;
    }
    __syncthreads();
    const int half = NQ * a.seg / 2;
    for (int size = 2; size <= a.seg; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < half; i += kThreads) {
                const int pos = 2 * i - (i & (stride - 1));
                const bool ascending = ((pos & (a.seg - 1)) & size) == 0;
                const uint64_t x = s.seg[pos], y = s.seg[pos + stride];
                if ((x > y) == ascending) {
                    s.seg[pos] = y;
                    s.seg[pos + stride] = x;
                }
            }
            __syncthreads();
        }
    }
    if (threadIdx.x < NQ) {
        s.thresh[threadIdx.x] = s.seg[threadIdx.x * a.seg + a.kk - 1];
        s.cnt[threadIdx.x] = 0;
    }
    __syncthreads();
}

/// Offers this thread's keys (vector id, |x|^2 `norm` for L2, one key per
/// query of the group) to the lists: keys under the threshold go to the
/// buffers; when a buffer is full the block merges and the keys left over
/// are offered again.
template <int NQ>
__device__ void offerKeys(const SharedLayout<NQ>& s, const FusedArgs& a, const float (&acc)[NQ],
                          int64_t id, float norm, int nqg) {
    const bool valid = id < a.nb;
    const unsigned bufCap = unsigned(a.seg - a.listCap);
    uint32_t pending = valid ? (nqg >= 32 ? ~0u : (1u << nqg) - 1u) : 0u;
    for (;;) {
#pragma unroll
        for (int qi = 0; qi < NQ; ++qi) {
            if (!(pending & (1u << qi))) continue;
            // As the tiled path: alpha <q, x> rounded, then + |x|^2 for L2.
            const float v = a.norms ? -2.f * acc[qi] + norm : -acc[qi];
            const uint64_t key = select::makeKey(v, uint32_t(id));
            if (key < s.thresh[qi]) {
                const unsigned pos = atomicAdd(&s.cnt[qi], 1u);
                if (pos >= bufCap) continue;  // full: offered again after the merge
                s.seg[qi * a.seg + a.listCap + pos] = key;
            }
            pending &= ~(1u << qi);
        }
        if (!__syncthreads_or(pending != 0)) break;
        mergeBuffers<NQ>(s, a);
    }
}

template <int NQ>
__device__ void initLists(const SharedLayout<NQ>& s, const FusedArgs& a) {
    for (int i = threadIdx.x; i < NQ * a.listCap; i += kThreads) {
        s.seg[(i / a.listCap) * a.seg + i % a.listCap] = select::kMaxKey;
    }
    if (threadIdx.x < NQ) {
        s.thresh[threadIdx.x] = select::kMaxKey;
        s.cnt[threadIdx.x] = 0;
    }
}

/// Writes the block's sorted list of each query of its group to its chunk's
/// slots of a.out.
template <int NQ>
__device__ void writeLists(const SharedLayout<NQ>& s, const FusedArgs& a, int64_t q0, int nqg) {
    for (int i = threadIdx.x; i < nqg * a.kk; i += kThreads) {
        const int qi = i / a.kk, r = i % a.kk;
        const int64_t slot = int64_t(blockIdx.y) * a.kk + r;
        uint64_t key = s.seg[qi * a.seg + r];
        // A chunk shorter than kk pads its list; the merge's selection wants
        // distinct keys, so each pad gets its own key above every real one.
        if (key == select::kMaxKey) key = select::kMaxKey - 1 - uint64_t(slot);
        a.out[(q0 + qi) * a.outStride + slot] = key;
    }
}

template <int NQ, bool kVec4>
__global__ void __launch_bounds__(kThreads) fusedFewQueryKernel(FusedArgs a) {
    extern __shared__ float4 smem[];
    const SharedLayout<NQ> s(reinterpret_cast<char*>(smem), a.seg);
    const int64_t q0 = int64_t(blockIdx.x) * NQ;
    const int nqg = a.nq - q0 < NQ ? int(a.nq - q0) : NQ;
    initLists<NQ>(s, a);
    const int64_t t0 = int64_t(blockIdx.y) * a.tilesPerChunk;
    const int64_t t1 = min(a.totalTiles, t0 + a.tilesPerChunk);
    // Steps are (tile, dimension chunk) in order, step i staged in buffer
    // i % 2; step i + 1's copies are started before step i is computed.
    if (t0 < t1) copyStep<NQ, kVec4>(s, 0, a, t0 * kTileVectors, 0, q0, nqg);
    int buf = 0;
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t v0 = t * kTileVectors;
        const int64_t id = v0 + threadIdx.x;
        const float norm = id < a.nb && a.norms ? __ldg(a.norms + id) : 0.f;
        float acc[NQ];
#pragma unroll
        for (int qi = 0; qi < NQ; ++qi) acc[qi] = 0.f;
        for (int c0 = 0; c0 < a.d; c0 += kDimChunk) {
            if (c0 + kDimChunk < a.d) {
                copyStep<NQ, kVec4>(s, buf ^ 1, a, v0, c0 + kDimChunk, q0, nqg);
                cpAsyncWait<1>();
            } else if (t + 1 < t1) {
                copyStep<NQ, kVec4>(s, buf ^ 1, a, v0 + kTileVectors, 0, q0, nqg);
                cpAsyncWait<1>();
            } else {
                cpAsyncWait<0>();
            }
            __syncthreads();  // every thread's copies of this step have landed
            dotChunk<NQ>(s.x + buf * kTileVectors * kRowStride, s.q + buf * NQ * kDimChunk,
                         a.d - c0, acc);
            __syncthreads();  // this buffer's readers are done before step + 2 refills it
            buf ^= 1;
        }
        offerKeys<NQ>(s, a, acc, id, norm, nqg);
    }
    mergeBuffers<NQ>(s, a);
    writeLists<NQ>(s, a, q0, nqg);
}

int nextPow2(int64_t v) {
    int p = 1;
    while (p < v) p <<= 1;
    return p;
}

/// How the corpus is split: chunks (blockIdx.y) of tilesPerChunk tiles.
struct FusedPlan {
    int64_t chunks = 0;
    int64_t tilesPerChunk = 0;
};

/// Chunks sized so that all blocks of one instantiation run at once (one
/// wave), each chunk at least four lists long (fewer merges), and at most
/// maxChunks of them (what the temporary memory holds).
template <int NQ, bool kVec4>
FusedPlan planFused(const FusedArgs& a, int device, int64_t maxChunks) {
    const size_t smem = SharedLayout<NQ>::bytes(a.seg);
    const int perSm = cachedBlocksPerSm(reinterpret_cast<const void*>(fusedFewQueryKernel<NQ, kVec4>),
                                        device, kThreads, smem);
    FAISS_THROW_IF_NOT_FMT(perSm >= 1, "fused few-query kernel: %zu bytes of shared memory do "
                           "not fit a multiprocessor", smem);
    const int64_t groups = (a.nq + NQ - 1) / NQ;
    int64_t chunks = std::max<int64_t>(1, int64_t(cachedSmCount(device)) * perSm / groups);
    chunks = std::min(chunks, std::max<int64_t>(1, a.nb / (4 * int64_t(a.listCap))));
    chunks = std::min(chunks, a.totalTiles);
    chunks = std::max<int64_t>(1, std::min(chunks, maxChunks));
    FusedPlan p;
    p.tilesPerChunk = (a.totalTiles + chunks - 1) / chunks;
    p.chunks = (a.totalTiles + p.tilesPerChunk - 1) / p.tilesPerChunk;
    FAISS_THROW_IF_NOT_FMT(p.chunks < 65536, "fused few-query kernel: %lld chunks",
                           (long long)p.chunks);
    return p;
}

/// Launches one instantiation as planned (planFused set its shared memory
/// limit).
template <int NQ, bool kVec4>
void launchFused(FusedArgs a, const FusedPlan& p, cudaStream_t stream) {
    a.tilesPerChunk = p.tilesPerChunk;
    const unsigned groups = unsigned((a.nq + NQ - 1) / NQ);
    fusedFewQueryKernel<NQ, kVec4><<<dim3(groups, unsigned(p.chunks)), kThreads,
                                     SharedLayout<NQ>::bytes(a.seg), stream>>>(a);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

/// One instantiation of the kernel, as a type for withInstantiation.
template <int NQ, bool kVec4>
struct Instantiation {
    static constexpr int kNQ = NQ;
    static constexpr bool kIsVec4 = kVec4;
};

/// Calls f(Instantiation<NQ, kVec4>{}) for the queries per block (a power
/// of two <= 32) and whether rows can be read as float4.
template <typename F>
auto withInstantiation(int nqBlock, const FusedArgs& a, F&& f) {
    const bool vec4 = a.d % 4 == 0 && aligned16(a.x);
#define FAISS_EXT_FUSED_CASE(NQ) \
    case NQ: return vec4 ? f(Instantiation<NQ, true>{}) : f(Instantiation<NQ, false>{});
    switch (nqBlock) {
        FAISS_EXT_FUSED_CASE(1)
        FAISS_EXT_FUSED_CASE(2)
        FAISS_EXT_FUSED_CASE(4)
        FAISS_EXT_FUSED_CASE(8)
        FAISS_EXT_FUSED_CASE(16)
        FAISS_EXT_FUSED_CASE(32)
    }
#undef FAISS_EXT_FUSED_CASE
    FAISS_THROW_FMT("fused few-query kernel: %d queries per block", nqBlock);
}

/// The most chunks whose lists, and the merge's buffers, fit `budget` bytes
/// of temporary memory (1: a single chunk writes its list straight to the
/// output and needs none). Without this cap a small temporary memory made
/// searches of a few queries at large k fail where the tiled path runs.
int64_t chunksThatFit(size_t budget, int64_t nq, int64_t kk) {
    // Lists of nq x chunks x kk keys; above the warp merge's k, quick
    // multi-select's two buffers of that size and the sort of nq x kk keys.
    const bool warpMerge = kk <= kWarpMergeMaxK;
    const size_t sortBytes = warpMerge ? 0 : select::sortKeyRowsTempBytes(nq, kk) + 1024;
    const size_t perChunk = sizeof(uint64_t) * size_t(nq) * size_t(kk) * (warpMerge ? 1 : 3);
    if (budget <= sortBytes) return 1;
    return std::max<int64_t>(1, int64_t((budget - sortBytes) / perChunk));
}

/// Quick multi-select of the kk best of the chunks' lists, then a sort.
void mergeChunkLists(GpuResources* res, int device, cudaStream_t stream, const uint64_t* lists,
                     int64_t nq, int64_t n, int64_t kk, uint64_t* out) {
    TempBuffer<uint64_t> aux1(res, device, size_t(nq) * n, stream);
    TempBuffer<uint64_t> aux2(res, device, size_t(nq) * n, stream);
    select::SelectArgs m;
    m.keys = lists;
    m.keyStride = n;
    m.n = n;
    m.rows = nq;
    m.k = kk;
    m.out = out;
    m.outStride = kk;
    m.aux1 = aux1.data();
    m.aux2 = aux2.data();
    m.auxStride = n;
    select::quickMultiSelect(m, stream);
    const size_t sortBytes = select::sortKeyRowsTempBytes(nq, kk);
    TempBuffer<char> sortTemp(res, device, sortBytes, stream);
    select::sortKeyRows(out, nq, kk, sortTemp.data(), sortBytes, stream);
}

/// Records `e` on `stream` where the caller asked for it.
void recordIf(cudaEvent_t e, cudaStream_t stream) {
    if (e) FAISS_EXT_CUDA_CHECK(cudaEventRecord(e, stream));
}

}  // namespace

void fusedFewQuerySelect(GpuResources* res, int device, cudaStream_t stream,
                         const DeviceCorpus& corpus, const float* queries, int64_t nq, int64_t kk,
                         uint64_t* out, const FusedFewQueryEvents* events) {
    FAISS_THROW_IF_NOT_FMT(nq >= 1 && nq <= kFewQueryMaxQueries,
                           "fusedFewQuerySelect: nq = %lld not in [1, %lld]", (long long)nq,
                           (long long)kFewQueryMaxQueries);
    FAISS_THROW_IF_NOT_FMT(kk >= 1 && kk <= kFewQueryMaxK && kk <= corpus.nb,
                           "fusedFewQuerySelect: k = %lld not in [1, min(%lld, nb = %lld)]",
                           (long long)kk, (long long)kFewQueryMaxK, (long long)corpus.nb);
    FAISS_THROW_IF_NOT_MSG(corpus.vectors && queries && out && corpus.d >= 1,
                           "fusedFewQuerySelect: null pointer or dimension < 1");
    const FusedFewQueryEvents ev = events ? *events : FusedFewQueryEvents{};
    FusedArgs a{};
    a.x = corpus.vectors;
    a.norms = corpus.sqNorms;
    a.nb = corpus.nb;
    a.d = corpus.d;
    a.q = queries;
    a.nq = nq;
    a.kk = int(kk);
    a.listCap = nextPow2(kk);
    a.seg = std::max(2 * a.listCap, 128);
    a.totalTiles = (corpus.nb + kTileVectors - 1) / kTileVectors;
    // Queries per block: all of them (rounded up to a power of two) while
    // their lists fit kListBytes; query groups beyond that.
    int nqBlock = std::min(nextPow2(nq), 32);
    while (nqBlock > 1 && size_t(nqBlock) * a.seg * sizeof(uint64_t) > kListBytes) nqBlock /= 2;
    // 90% of the temporary memory left, as the other engines plan.
    const int64_t maxChunks = chunksThatFit(res->getTempMemoryAvailable(device) / 10 * 9, nq, kk);
    const FusedPlan plan = withInstantiation(nqBlock, a, [&](auto inst) {
        return planFused<decltype(inst)::kNQ, decltype(inst)::kIsVec4>(a, device, maxChunks);
    });
    const auto launch = [&]() {
        recordIf(ev.kernelStart, stream);
        withInstantiation(nqBlock, a, [&](auto inst) {
            launchFused<decltype(inst)::kNQ, decltype(inst)::kIsVec4>(a, plan, stream);
        });
        recordIf(ev.kernelEnd, stream);
    };
    if (plan.chunks == 1) {  // one list per query: already the sorted answer
        a.out = out;
        a.outStride = kk;
        launch();
        recordIf(ev.mergeEnd, stream);
        return;
    }
    const int64_t n = plan.chunks * kk;
    TempBuffer<uint64_t> lists(res, device, size_t(nq) * n, stream);
    a.out = lists.data();
    a.outStride = n;
    launch();
    if (kk <= kWarpMergeMaxK) {
        warpMergeLists(lists.data(), nq, n, kk, out, stream);
    } else {
        mergeChunkLists(res, device, stream, lists.data(), nq, n, kk, out);
    }
    recordIf(ev.mergeEnd, stream);
}

}  // namespace gpu
}  // namespace faiss_ext
