// The fused few-query kernel (FusedFewQuery.h). Work split: blockIdx.x is a
// group of up to NQ queries, blockIdx.y a contiguous chunk of the corpus;
// consecutive blocks share a chunk, so the groups after the first read it
// from L2. Per tile of kTileVectors vectors, the block stages kDimChunk
// dimensions of the tile (and of its queries) in shared memory; each thread
// owns one vector and accumulates its NQ dot products in registers, in
// dimension order. Keys below a query's running threshold (the block's
// kk-th best so far) go to a per-query buffer; a full buffer is merged into
// the sorted list by a bitonic sort of (list, buffer) in shared memory.
#include "faiss_ext/gpu/impl/FusedFewQuery.h"

#include "faiss_ext/gpu/impl/FlatSearchPath.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>

namespace faiss_ext {
namespace gpu {

namespace {

constexpr int kThreads = 256;           ///< threads of a block
constexpr int kTileVectors = kThreads;  ///< one vector per thread
constexpr int kDimChunk = 32;           ///< dimensions staged at a time
constexpr int kRowStride = kDimChunk + 4;  ///< staged row: conflict-free float4 reads
/// Shared memory for the lists and buffers of a block: with the staged
/// tile (36 KiB) a block stays near 100 KiB, so two blocks share an SM.
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
    float* x;        ///< kTileVectors x kRowStride
    float* q;        ///< NQ x kDimChunk
    uint64_t* seg;   ///< NQ x seg: the sorted list (listCap), then the buffer
    uint64_t* thresh;
    unsigned* cnt;
    __device__ SharedLayout(char* base, int segLen) {
        x = reinterpret_cast<float*>(base);
        q = x + kTileVectors * kRowStride;
        seg = reinterpret_cast<uint64_t*>(q + NQ * kDimChunk);
        thresh = seg + size_t(NQ) * segLen;
        cnt = reinterpret_cast<unsigned*>(thresh + NQ);
    }
    static size_t bytes(int segLen) {
        return sizeof(float) * (kTileVectors * kRowStride + NQ * kDimChunk) +
               sizeof(uint64_t) * (size_t(NQ) * segLen + NQ) + sizeof(unsigned) * NQ;
    }
};

/// Stages dimensions c0 .. c0 + kDimChunk of tile vectors v0 .. (zeros
/// past the corpus or the dimension: they add exact zeros to the sums).
template <bool kVec4>
__device__ void loadTileChunk(float* xs, const FusedArgs& a, int64_t v0, int c0) {
    if (kVec4) {
        constexpr int kPerRow = kDimChunk / 4;
#pragma unroll
        for (int it = 0; it < kTileVectors * kPerRow / kThreads; ++it) {
            const int i = it * kThreads + threadIdx.x;
            const int v = i / kPerRow, j = (i % kPerRow) * 4;
            const int64_t gv = v0 + v;
            float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
            if (gv < a.nb && c0 + j < a.d) {
                val = __ldg(reinterpret_cast<const float4*>(a.x + gv * a.d + c0 + j));
            }
            *reinterpret_cast<float4*>(xs + v * kRowStride + j) = val;
        }
    } else {
#pragma unroll 8
        for (int it = 0; it < kTileVectors * kDimChunk / kThreads; ++it) {
            const int i = it * kThreads + threadIdx.x;
            const int v = i / kDimChunk, j = i % kDimChunk;
            const int64_t gv = v0 + v;
            xs[v * kRowStride + j] = gv < a.nb && c0 + j < a.d ? __ldg(a.x + gv * a.d + c0 + j) : 0.f;
        }
    }
}

template <int NQ>
__device__ void loadQueryChunk(float* qs, const FusedArgs& a, int64_t q0, int nqg, int c0) {
    for (int i = threadIdx.x; i < NQ * kDimChunk; i += kThreads) {
        const int qi = i / kDimChunk, j = i % kDimChunk;
        qs[i] = qi < nqg && c0 + j < a.d ? __ldg(a.q + (q0 + qi) * a.d + c0 + j) : 0.f;
    }
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

/// Offers this thread's keys (vector id, one per query of the group) to the
/// lists: keys under the threshold go to the buffers; when a buffer is full
/// the block merges and the keys left over are offered again.
template <int NQ>
__device__ void offerKeys(const SharedLayout<NQ>& s, const FusedArgs& a, const float (&acc)[NQ],
                          int64_t id, int nqg) {
    const bool valid = id < a.nb;
    const float norm = valid && a.norms ? a.norms[id] : 0.f;
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

template <int NQ, bool kVec4>
__global__ void __launch_bounds__(kThreads) fusedFewQueryKernel(FusedArgs a) {
    extern __shared__ float4 smem[];
    const SharedLayout<NQ> s(reinterpret_cast<char*>(smem), a.seg);
    const int64_t q0 = int64_t(blockIdx.x) * NQ;
    const int nqg = a.nq - q0 < NQ ? int(a.nq - q0) : NQ;
    for (int i = threadIdx.x; i < NQ * a.listCap; i += kThreads) {
        s.seg[(i / a.listCap) * a.seg + i % a.listCap] = select::kMaxKey;
    }
    if (threadIdx.x < NQ) {
        s.thresh[threadIdx.x] = select::kMaxKey;
        s.cnt[threadIdx.x] = 0;
    }
    const int64_t t0 = int64_t(blockIdx.y) * a.tilesPerChunk;
    const int64_t t1 = min(a.totalTiles, t0 + a.tilesPerChunk);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t v0 = t * kTileVectors;
        float acc[NQ];
#pragma unroll
        for (int qi = 0; qi < NQ; ++qi) acc[qi] = 0.f;
        for (int c0 = 0; c0 < a.d; c0 += kDimChunk) {
            __syncthreads();  // the previous chunk's readers are done
            loadTileChunk<kVec4>(s.x, a, v0, c0);
            loadQueryChunk<NQ>(s.q, a, q0, nqg, c0);
            __syncthreads();
            dotChunk<NQ>(s.x, s.q, a.d - c0, acc);
        }
        offerKeys<NQ>(s, a, acc, v0 + threadIdx.x, nqg);
    }
    mergeBuffers<NQ>(s, a);
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

int nextPow2(int64_t v) {
    int p = 1;
    while (p < v) p <<= 1;
    return p;
}

/// The launch of one instantiation: chunks sized so that all blocks run at
/// once (one wave), each chunk at least four lists long (fewer merges).
template <int NQ, bool kVec4>
int64_t launchFused(FusedArgs a, int device, cudaStream_t stream, bool countOnly) {
    auto kernel = fusedFewQueryKernel<NQ, kVec4>;
    const size_t smem = SharedLayout<NQ>::bytes(a.seg);
    FAISS_EXT_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int sms = 0, perSm = 0;
    FAISS_EXT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    FAISS_EXT_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, kThreads, smem));
    FAISS_THROW_IF_NOT_FMT(perSm >= 1, "fused few-query kernel: %zu bytes of shared memory do "
                           "not fit a multiprocessor", smem);
    const int64_t groups = (a.nq + NQ - 1) / NQ;
    int64_t chunks = std::max<int64_t>(1, int64_t(sms) * perSm / groups);
    chunks = std::min(chunks, std::max<int64_t>(1, a.nb / (4 * int64_t(a.listCap))));
    chunks = std::min(chunks, a.totalTiles);
    a.tilesPerChunk = (a.totalTiles + chunks - 1) / chunks;
    chunks = (a.totalTiles + a.tilesPerChunk - 1) / a.tilesPerChunk;
    if (countOnly) return chunks;
    FAISS_THROW_IF_NOT_FMT(chunks < 65536, "fused few-query kernel: %lld chunks", (long long)chunks);
    kernel<<<dim3(unsigned(groups), unsigned(chunks)), kThreads, smem, stream>>>(a);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    return chunks;
}

/// Dispatches on the queries per block (a power of two <= 32) and on
/// whether rows can be read as float4.
int64_t launchFor(int nqBlock, const FusedArgs& a, int device, cudaStream_t stream,
                  bool countOnly) {
    const bool vec4 = a.d % 4 == 0 && (reinterpret_cast<uintptr_t>(a.x) & 15) == 0;
#define FAISS_EXT_FUSED_CASE(NQ)                                                          \
    case NQ:                                                                              \
        return vec4 ? launchFused<NQ, true>(a, device, stream, countOnly)                 \
                    : launchFused<NQ, false>(a, device, stream, countOnly);
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

}  // namespace

void fusedFewQuerySelect(GpuResources* res, int device, cudaStream_t stream,
                         const DeviceCorpus& corpus, const float* queries, int64_t nq, int64_t kk,
                         uint64_t* out) {
    FAISS_THROW_IF_NOT_FMT(nq >= 1 && nq <= kFewQueryMaxQueries,
                           "fusedFewQuerySelect: nq = %lld not in [1, %lld]", (long long)nq,
                           (long long)kFewQueryMaxQueries);
    FAISS_THROW_IF_NOT_FMT(kk >= 1 && kk <= kFewQueryMaxK && kk <= corpus.nb,
                           "fusedFewQuerySelect: k = %lld not in [1, min(%lld, nb = %lld)]",
                           (long long)kk, (long long)kFewQueryMaxK, (long long)corpus.nb);
    FAISS_THROW_IF_NOT_MSG(corpus.vectors && queries && out && corpus.d >= 1,
                           "fusedFewQuerySelect: null pointer or dimension < 1");
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
    const int64_t chunks = launchFor(nqBlock, a, device, stream, /*countOnly=*/true);
    if (chunks == 1) {  // one list per query: already the sorted answer
        a.out = out;
        a.outStride = kk;
        launchFor(nqBlock, a, device, stream, false);
        return;
    }
    TempBuffer<uint64_t> lists(res, device, size_t(nq) * chunks * kk, stream);
    a.out = lists.data();
    a.outStride = chunks * kk;
    launchFor(nqBlock, a, device, stream, false);
    mergeChunkLists(res, device, stream, lists.data(), nq, chunks * kk, kk, out);
}

}  // namespace gpu
}  // namespace faiss_ext
