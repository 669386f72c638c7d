// The bounded TF32 search (see BoundedFlatSearch.h for the algorithm and
// Tf32ErrorBound.h for the bound's derivation).
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "faiss_ext/gpu/impl/flat/BoundedFlatSearch.h"
#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/RowSelector.h"
#include "faiss_ext/gpu/impl/flat/SplitBf16.h"
#include "faiss_ext/gpu/impl/flat/Tf32ErrorBound.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

constexpr int kRescoreWarps = 8;

/// What the rescoring kernel reads and writes, for one row block.
struct RescoreArgs {
    const uint64_t* approxKeys;  // rows x m, sorted ascending (TF32 keys)
    int64_t m;                   // candidates per row
    const float* queries;        // rows x d (prepared)
    const float* querySqNorms;   // rows: FP32 |q|^2
    const float* vectors;        // nb x d
    const float* sqNorms;        // nb: stored |x|^2 (L2), else null
    int64_t nb;
    int d;
    bool l2;
    Tf32BoundTerms terms;
    double xMaxNorm;         // upper bound of the largest true |x|
    double xMaxSqNorm;       // the largest stored |x|^2
    uint64_t* rescoredKeys;  // out: rows x m FP32 keys, unsorted
    double* leftOutLower;    // out: rows lower bounds of the keys left out (NaN: none)
};

__device__ __forceinline__ float warpSumDown(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xFFFFFFFFu, v, o);
    return v;  // lane 0 holds the sum
}

/// One block per query: each warp re-scores candidates j = warp, warp + 8,
/// ... with the FP32 path's formula (lanes split the dimensions so that
/// reads are coalesced; any order of FP32 summation is covered by the
/// bound), and thread 0 bounds from below the re-scored key of every vector
/// left out (leftOutKeyLowerBound): its approximate key is >= the m-th one
/// (the keys are sorted), so its FP32 key is >= that minus e(q, x), and for
/// L2 also >= what its norm alone allows.
__global__ void __launch_bounds__(32 * kRescoreWarps) rescoreCandidatesKernel(RescoreArgs a) {
    const int64_t r = blockIdx.x;
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const float* q = a.queries + r * a.d;
    const uint64_t* keys = a.approxKeys + r * a.m;
    for (int64_t j = warp; j < a.m; j += kRescoreWarps) {
        const uint32_t id = select::keyIndex(keys[j]);
        if (id >= a.nb) {  // a row the filter flagged: placeholders, never certified
            if (lane == 0) a.rescoredKeys[r * a.m + j] = select::kMaxKey;
            continue;
        }
        const float* x = a.vectors + int64_t(id) * a.d;
        float dot = 0.f;
        for (int i = lane; i < a.d; i += 32) dot = fmaf(q[i], x[i], dot);
        dot = warpSumDown(dot);
        if (lane == 0) {
            // The FP32 path's key: the GEMM's alpha * q.x (alpha = -2 or
            // -1, exact), plus the stored |x|^2 for L2 with one rounding.
            const float value = a.l2 ? __fadd_rn(-2.f * dot, a.sqNorms[id]) : -dot;
            a.rescoredKeys[r * a.m + j] = select::makeKey(value, id);
        }
    }
    if (threadIdx.x == 0) {
        const double qNorm = normUpperBound(a.terms, double(a.querySqNorms[r]));
        const double lastKey = double(select::keyValue(keys[a.m - 1]));
        // NaN (never certified) when some product could overflow, or when
        // the m-th key is not finite.
        a.leftOutLower[r] = magnitudeSafe(a.terms, qNorm, a.xMaxNorm, a.xMaxSqNorm)
                                ? leftOutKeyLowerBound(a.terms, qNorm, lastKey, a.xMaxNorm)
                                : NAN;
    }
}

/// certified[r] = 1 when every vector left out is strictly worse than the
/// kk-th re-scored key of row r (sorted rows of m keys), or nothing is left
/// out, and the candidate selection did not flag the row (flags may be
/// null). Written so that NaN and infinities never certify.
__global__ void certifyRowsKernel(const uint64_t* sortedKeys, int64_t m, int64_t kk,
                                  const double* leftOutLower, bool allCandidates,
                                  const uint8_t* flags, int64_t rows, uint8_t* certified) {
    const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const double kth = double(select::keyValue(sortedKeys[r * m + kk - 1]));
    const bool ok = !(flags && flags[r]) &&
                    (allCandidates || (kth < INFINITY && leftOutLower[r] > kth));
    certified[r] = ok ? 1 : 0;
}

/// out row i = queries row rows[i] (d floats).
__global__ void gatherRowsKernel(const float* queries, int d, const int64_t* rows, int64_t n,
                                 float* out) {
    const int64_t total = n * d;
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
         t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = t / d;
        out[t] = queries[rows[i] * d + t % d];
    }
}

/// Result row rows[i] = row i of (dIn, lIn) (k entries each; outputs may be null).
__global__ void scatterResultsKernel(const float* dIn, const int64_t* lIn, int64_t k,
                                     const int64_t* rows, int64_t n, float* distances,
                                     int64_t* labels) {
    const int64_t total = n * k;
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
         t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = t / k;
        const int64_t dst = rows[i] * k + t % k;
        if (distances) distances[dst] = dIn[t];
        if (labels) labels[dst] = lIn[t];
    }
}

/// Searches the queries of `rows` (global indices) by the FP32 path and
/// writes their results over the rows of (distances, labels), in chunks
/// within a quarter of the temporary memory left.
void searchRowsByFp32(GpuResources* res, int device, cudaStream_t stream, const float* queries,
                      int d, int64_t k, const std::vector<int64_t>& rows,
                      const Fp32SearchFn& fp32Search, float* distances, int64_t* labels) {
    if (rows.empty()) return;
    const size_t rowBytes =
        sizeof(float) * d + (sizeof(float) + sizeof(int64_t)) * size_t(k) + sizeof(int64_t);
    const size_t room = res->getTempMemoryAvailable(device) / 4;
    const int64_t n = int64_t(rows.size());
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n, int64_t(room / rowBytes)));
    TempBuffer<int64_t> rowIds(res, device, size_t(chunk), stream);
    TempBuffer<float> q(res, device, size_t(chunk) * d, stream);
    TempBuffer<float> dOut(res, device, size_t(chunk) * k, stream);
    TempBuffer<int64_t> lOut(res, device, size_t(chunk) * k, stream);
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const int64_t c = std::min(chunk, n - i0);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(rowIds.data(), rows.data() + i0, sizeof(int64_t) * c,
                                             cudaMemcpyHostToDevice, stream));
        gatherRowsKernel<<<gridStrideBlocks(c * d), 256, 0, stream>>>(queries, d, rowIds.data(), c,
                                                             q.data());
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        fp32Search(q.data(), c, dOut.data(), lOut.data());
        scatterResultsKernel<<<gridStrideBlocks(c * k), 256, 0, stream>>>(
            dOut.data(), lOut.data(), k, rowIds.data(), c, distances, labels);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        // rows.data() is host memory read by the copy above; the next chunk
        // reuses the buffers.
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
}

/// Whether the first block's flags (rows of them, on the device) certify
/// at least kBoundedBailOutShare of its queries; synchronises `stream`.
bool firstBlockWorthIt(const uint8_t* certified, int64_t rows, cudaStream_t stream) {
    std::vector<uint8_t> flags(static_cast<size_t>(rows));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(flags.data(), certified, size_t(rows),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int64_t ok = std::count(flags.begin(), flags.end(), uint8_t(1));
    return double(ok) >= kBoundedBailOutShare * double(rows);
}

}  // namespace

int64_t boundedCandidateCount(int64_t kk, int64_t nb, bool bf16x3Products) {
    FAISS_THROW_IF_NOT_FMT(kk >= 1 && nb >= 1 && kk <= nb,
                           "boundedCandidateCount: need 1 <= k <= nb (k %lld, nb %lld)",
                           (long long)kk, (long long)nb);
    const int64_t slack = bf16x3Products && kk <= kBf16x3WideSlackMaxK ? kBf16x3SlackFactor * kk
                                                                        : kk;
    return std::min(nb, kk + std::max(slack, kBoundedMinSlack));
}


namespace {

/// How the TF32 candidates of a search are selected: GEMM tiles folded by
/// a RowSelector (colTiles tiles of cols columns a row block), or full-row
/// tiles filtered by the sampled threshold (sampled; cols = nb).
struct CandidatePlan {
    bool sampled = false;
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t colTiles = 0;
};

/// Full-row tiles for the sampled-threshold filter within `budget` bytes
/// (rows = 0 where not even one row fits or the filter does not apply).
CandidatePlan planSampledCandidates(size_t budget, int64_t nq, int64_t nb, int64_t m,
                                    size_t extraPerRow) {
    CandidatePlan p;
    if (!select::sampledThresholdKeysApply(nb, m)) return p;
    const int64_t ld = (nb + 3) / 4 * 4;
    const size_t perRow = sizeof(float) * size_t(ld) + select::sampledThresholdScratchBytes(1, nb, m) +
                          sizeof(uint64_t) * size_t(m) + 1 + extraPerRow;
    // Rows of one filter call, and GEMM tiles under 2^31 entries.
    p.rows = std::min<int64_t>({nq, select::kSampledThresholdMaxRows, (int64_t(1) << 31) / ld,
                                int64_t(budget / perRow)});
    p.sampled = p.rows >= 1;
    p.cols = nb;
    p.colTiles = 1;
    return p;
}


/// Batches of at least two row blocks of this many queries are pipelined
/// (fewer: one stream and the whole budget for one block, as a GEMM of few
/// rows runs below the tensor cores' rate).
constexpr int64_t kMinPipelinedRows = 512;

/// What every row block of one bounded search shares.
struct BoundedPass {
    const BoundedCorpus* corpus = nullptr;
    const float* queries = nullptr;
    int64_t k = 0, kk = 0, m = 0, nb = 0, gemmRows = 0;
    int d = 0, dPad = 0;
    bool l2 = false, bf16 = false, centred = false;
    CandidatePlan plan;
    TileSelection selection;
    RescoreArgs rescore;  ///< the fields common to every block
    float* distances = nullptr;
    int64_t* labels = nullptr;
    uint8_t* certified = nullptr;  ///< nq flags (device)
};

/// The two streams of a pipelined pass: the GEMMs (and the queries'
/// preparation) on the caller's stream; the selection, re-scoring and
/// certificate on the resources' alternate stream, of higher priority, so
/// that a block's selection takes SMs as the next block's GEMM frees them
/// instead of waiting for the whole GEMM (measured, H200: with each block's
/// work on one stream of two, every GEMM ran alone before its selection;
/// issue 39). Both are the caller's stream when the pass is not pipelined.
struct PassStreams {
    cudaStream_t gemm;
    cublasHandle_t blas;  ///< bound to `gemm`
    cudaStream_t select;
};

/// An event destroyed with its owner.
struct OwnedEvent {
    cudaEvent_t e = nullptr;
    OwnedEvent() { FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
    ~OwnedEvent() {
        if (e) cudaEventDestroy(e);
    }
    OwnedEvent(const OwnedEvent&) = delete;
    OwnedEvent& operator=(const OwnedEvent&) = delete;
};

/// The buffers of one row block in flight (two alternate when pipelined),
/// allocated in the GEMM stream's order, and the events that hand the
/// block between the streams: gemmDone (a distance tile written),
/// tileRead (the selection has read it), blockDone (the slot is free).
struct BoundedSlot {
    int64_t ldMax;
    TempBuffer<float> dist;
    std::unique_ptr<RowSelector> sel;
    size_t filterBytes;
    TempBuffer<char> filterScratch;
    TempBuffer<uint64_t> filtered;
    TempBuffer<uint8_t> flags;
    TempBuffer<uint64_t> rescored;
    size_t sortBytes;
    TempBuffer<char> sortTemp;
    TempBuffer<double> leftOutLower;
    // Query norms per block (the bound's |q|; for L2 also the decode's
    // |q|^2, the same kernel as the FP32 path's, on the queries this pass
    // multiplies: centred ones when the corpus is); the centred queries
    // (L2) or their q.c (inner products); BF16x3: the split queries.
    TempBuffer<float> querySqNorms;
    TempBuffer<float> centredQueries;
    TempBuffer<float> centreOffsets;
    TempBuffer<Bf16Bits> querySplit;
    OwnedEvent gemmDone, tileRead, blockDone;
    bool used = false;  ///< blockDone recorded by an earlier block

    BoundedSlot(GpuResources* res, int device, const PassStreams& st, const BoundedPass& b)
            : ldMax((b.plan.cols + 3) / 4 * 4),
              dist(res, device, size_t(b.plan.rows) * ldMax, st.gemm),
              filterBytes(b.plan.sampled
                                  ? select::sampledThresholdScratchBytes(b.plan.rows, b.nb, b.m)
                                  : 0),
              filterScratch(res, device, filterBytes, st.gemm),
              filtered(res, device, b.plan.sampled ? size_t(b.plan.rows) * b.m : 0, st.gemm),
              flags(res, device, b.plan.sampled ? size_t(b.plan.rows) : 0, st.gemm),
              rescored(res, device, size_t(b.plan.rows) * b.m, st.gemm),
              sortBytes(select::sortKeyRowsTempBytes(b.plan.rows, b.m)),
              sortTemp(res, device, sortBytes, st.gemm),
              leftOutLower(res, device, size_t(b.plan.rows), st.gemm),
              querySqNorms(res, device, size_t(b.plan.rows), st.gemm),
              centredQueries(res, device,
                             b.centred && b.l2 ? size_t(b.plan.rows) * b.d : 0, st.gemm),
              centreOffsets(res, device, b.centred && !b.l2 ? size_t(b.plan.rows) : 0, st.gemm),
              querySplit(res, device, b.bf16 ? size_t(b.plan.rows) * 3 * b.dPad : 0, st.gemm) {
        if (!b.plan.sampled) {  // it selects on the selection stream
            const TileSelection& c = b.selection;
            sel.reset(new RowSelector(res, device, st.select, c.algo, b.plan.rows, b.plan.cols,
                                      b.plan.colTiles, b.nb, b.m, c.group, c.thFactor));
        }
    }
};

/// `waiter` waits for `e` (nothing when both sides are one stream: the
/// stream's order already holds).
void handOver(cudaStream_t from, cudaEvent_t e, cudaStream_t waiter) {
    if (from == waiter) return;
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(e, from));
    FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(waiter, e, 0));
}

/// The approximate products of `rows` queries q (prepared, centred or split
/// as the slot holds them) with vectors [c0, c0 + w), into out (ld a row),
/// on the GEMM stream.
void approximateProducts(const BoundedPass& b, const PassStreams& st, BoundedSlot& slot,
                         const float* q, int64_t rows, int64_t c0, int64_t w, float* out,
                         int64_t ld) {
    const float alpha = b.l2 ? -2.f : -1.f;
    if (b.bf16) {
        gemmDotProductsBf16x3(st.blas, slot.querySplit.data(), rows,
                              b.corpus->split + size_t(c0) * 3 * b.dPad, w, b.dPad, alpha, out,
                              ld);
    } else {
        gemmDotProductsTf32(st.blas, q, rows, b.corpus->vectors + size_t(c0) * b.d, w, b.d,
                            alpha, out, ld);
    }
}

/// The m candidates of the slot's block (sorted approximate keys, device,
/// ready on the selection stream): GEMM tiles on the GEMM stream, each
/// handed to the selection stream.
const uint64_t* selectCandidates(const BoundedPass& b, const PassStreams& st, BoundedSlot& slot,
                                 const float* q, int64_t rows) {
    const BoundedCorpus& corpus = *b.corpus;
    if (b.plan.sampled) {
        approximateProducts(b, st, slot, q, rows, 0, std::min(b.gemmRows, slot.ldMax),
                            slot.dist.data(), slot.ldMax);
        handOver(st.gemm, slot.gemmDone.e, st.select);
        select::sampledThresholdSelectKeys(slot.dist.data(), slot.ldMax,
                                           b.l2 ? corpus.sqNorms : nullptr, rows, b.nb, b.m,
                                           slot.filtered.data(), slot.flags.data(),
                                           slot.filterScratch.data(), slot.filterBytes, st.select);
        return slot.filtered.data();
    }
    slot.sel->begin(rows);
    for (int64_t c0 = 0; c0 < b.nb; c0 += b.plan.cols) {
        const int64_t w = std::min(b.plan.cols, b.nb - c0);
        const int64_t ld = (w + 3) / 4 * 4;
        if (c0 > 0 && st.gemm != st.select) {  // the tile is read before it is written again
            FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(st.gemm, slot.tileRead.e, 0));
        }
        approximateProducts(b, st, slot, q, rows, c0, std::min(ld, b.gemmRows - c0),
                            slot.dist.data(), ld);
        handOver(st.gemm, slot.gemmDone.e, st.select);
        slot.sel->addTile(slot.dist.data(), ld, b.l2 ? corpus.sqNorms + c0 : nullptr,
                          uint32_t(c0), w);
        if (st.gemm != st.select) FAISS_EXT_CUDA_CHECK(cudaEventRecord(slot.tileRead.e, st.select));
    }
    return slot.sel->finish();
}

/// Steps 1-3 of BoundedFlatSearch.h for queries [q0, q0 + rows) in `slot`:
/// the queries' preparation and GEMMs on the GEMM stream; candidates,
/// FP32 re-scoring, the certificate and decoded results on the selection
/// stream.
void runBoundedBlock(const BoundedPass& b, const PassStreams& st, BoundedSlot& slot, int64_t q0,
                     int64_t rows) {
    const BoundedCorpus& corpus = *b.corpus;
    cudaStream_t gs = st.gemm;
    cudaStream_t ss = st.select;
    // the slot's block before this one is done with its buffers
    if (slot.used && gs != ss) FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(gs, slot.blockDone.e, 0));
    const float* q = b.queries + size_t(q0) * b.d;
    if (b.centred && b.l2) {
        subtractCentre(q, rows, b.d, corpus.centre, slot.centredQueries.data(), gs);
        q = slot.centredQueries.data();
    } else if (b.centred) {
        centreDots(q, rows, b.d, corpus.centre, slot.centreOffsets.data(), gs);
    }
    rowSquaredNorms(q, rows, b.d, slot.querySqNorms.data(), gs);
    if (b.bf16) splitRowsBf16(q, rows, b.d, SplitSide::Queries, slot.querySplit.data(), gs);
    RescoreArgs a = b.rescore;
    a.approxKeys = selectCandidates(b, st, slot, q, rows);
    a.queries = q;
    a.querySqNorms = slot.querySqNorms.data();
    a.rescoredKeys = slot.rescored.data();
    a.leftOutLower = slot.leftOutLower.data();
    rescoreCandidatesKernel<<<unsigned(rows), 32 * kRescoreWarps, 0, ss>>>(a);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    select::sortKeyRows(slot.rescored.data(), rows, b.m, slot.sortTemp.data(), slot.sortBytes,
                        ss);
    certifyRowsKernel<<<unsigned((rows + 255) / 256), 256, 0, ss>>>(
            slot.rescored.data(), b.m, b.kk, slot.leftOutLower.data(), b.m == b.nb,
            b.plan.sampled ? slot.flags.data() : nullptr, rows, b.certified + q0);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    // Every row is decoded; the uncertified ones are written over later.
    const select::KeyDecode decode = b.l2 ? select::KeyDecode::L2 : select::KeyDecode::Negated;
    select::decodeKeys(slot.rescored.data(), rows, b.kk, b.k, decode,
                       b.l2 ? slot.querySqNorms.data() : nullptr,
                       b.distances + size_t(q0) * b.k, b.labels + size_t(q0) * b.k, ss, b.m);
    if (b.centred && !b.l2) {  // back from q.(x - c) to q.x
        addRowOffsets(b.distances ? b.distances + size_t(q0) * b.k : nullptr, rows, b.k,
                      slot.centreOffsets.data(), ss);
    }
    if (gs != ss) FAISS_EXT_CUDA_CHECK(cudaEventRecord(slot.blockDone.e, ss));
    slot.used = true;
}

/// On leaving scope (exceptions too), the caller's stream waits for the
/// selection stream, so that memory freed in the caller's order (the
/// slots' buffers, the certified flags, the caller's own) outlives the
/// selection's work.
struct SelectionJoin {
    cudaStream_t main, other;
    ~SelectionJoin() {
        if (main == other) return;
        cudaEvent_t e;
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
            cudaStreamSynchronize(other);
            return;
        }
        if (cudaEventRecord(e, other) != cudaSuccess ||
            cudaStreamWaitEvent(main, e, 0) != cudaSuccess) {
            cudaStreamSynchronize(other);
        }
        cudaEventDestroy(e);
    }
};

/// The candidate plan of one slot within `budget` bytes.
CandidatePlan planSlot(size_t budget, int64_t nq, const BoundedPass& b, bool sampledCandidates,
                       size_t extraPerRow) {
    CandidatePlan p;
    if (sampledCandidates) p = planSampledCandidates(budget, nq, b.nb, b.m, extraPerRow);
    if (!p.sampled) {
        const TilePlan t = planSearch(budget, b.nb, nq, b.k, b.m, b.d, /*onHost=*/false, b.l2,
                                      b.selection, extraPerRow);
        p.rows = t.rows;
        p.cols = t.cols;
        p.colTiles = t.colTiles;
    }
    return p;
}

/// Runs the bounded pass over the nq queries (flags in b.certified);
/// returns how many queries it saw (the rest go to the FP32 path) and adds
/// the row blocks whose GEMM could overlap an earlier block's selection to
/// *overlapped.
int64_t runBoundedPass(GpuResources* res, int device, cudaStream_t stream, BoundedPass& b,
                       int64_t nq, bool sampledCandidates, int64_t* overlapped) {
    // Per row beyond the selection: m re-scored keys, their sort's
    // temporary memory, the lower bound of the keys left out, the query's
    // norm and (centred) the centred query (L2) or its q.c (inner
    // products). BF16x3: the query's split row (3 dPad BF16).
    const size_t extraPerRow = sizeof(uint64_t) * b.m + select::sortKeyRowsTempBytes(1, b.m) +
                               64 + sizeof(float) * (1 + (b.centred ? size_t(b.d) : 0)) +
                               (b.bf16 ? 3 * sizeof(Bf16Bits) * size_t(b.dPad) : 0);
    const size_t budget = res->getTempMemoryAvailable(device) / 10 * 9;
    // Two slots in flight when each still gets blocks worth a GEMM.
    b.plan = planSlot(budget / 2, nq, b, sampledCandidates, extraPerRow);
    const bool pipelined = nq >= 2 * kMinPipelinedRows && b.plan.rows >= kMinPipelinedRows;
    if (pipelined) {
        b.plan.rows = std::min(b.plan.rows, (nq + 1) / 2);
    } else {
        b.plan = planSlot(budget, nq, b, sampledCandidates, extraPerRow);
    }
    PassStreams st{stream, res->getBlasHandle(device),
                   pipelined ? res->getAlternateStream(device) : stream};
    std::unique_ptr<BoundedSlot> slots[2];
    slots[0].reset(new BoundedSlot(res, device, st, b));
    if (pipelined) slots[1].reset(new BoundedSlot(res, device, st, b));
    // the selection stream starts after what the caller and the slots queued
    OwnedEvent ready;
    handOver(st.gemm, ready.e, st.select);
    SelectionJoin join{st.gemm, st.select};
    int64_t passed = 0;  // queries the pass has seen
    int64_t block = 0;
    for (int64_t q0 = 0; q0 < nq; q0 += b.plan.rows, ++block) {
        // Bail out on the first block's share (checked before block 2 when
        // pipelined, so that block 1's GEMM is not held up).
        if (block == (pipelined ? 2 : 1)) {
            if (pipelined) FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(stream, slots[0]->blockDone.e, 0));
            if (!firstBlockWorthIt(b.certified, b.plan.rows, stream)) break;
        }
        const int64_t rows = std::min(b.plan.rows, nq - q0);
        runBoundedBlock(b, st, *slots[pipelined ? block & 1 : 0], q0, rows);
        *overlapped += pipelined && block > 0 ? 1 : 0;
        passed = q0 + rows;
    }
    return passed;
}

}  // namespace

void boundedFlatSearch(GpuResources* res, int device, cudaStream_t stream,
                       const BoundedCorpus& corpus, const float* queries, int64_t nq, int64_t k,
                       const TileSelection& candidateSelection, bool sampledCandidates,
                       float* distances, int64_t* labels, const Fp32SearchFn& fp32Search,
                       BoundedSearchStats* stats) {
    const int64_t nb = corpus.nb;
    const int d = corpus.d;
    FAISS_THROW_IF_NOT_FMT(nq >= 1 && k >= 1 && nb >= 1 && corpus.vectors,
                           "boundedFlatSearch: bad arguments (nq %lld, k %lld, nb %lld)",
                           (long long)nq, (long long)k, (long long)nb);
    FAISS_THROW_IF_NOT_FMT(boundedSearchSupported(d),
                           "boundedFlatSearch: dimension %d too large for the TF32 bound", d);
    const bool l2 = corpus.metric == FlatMetric::L2;
    FAISS_THROW_IF_NOT_MSG(!l2 || corpus.sqNorms, "boundedFlatSearch: L2 needs the stored norms");
    const bool bf16 = corpus.split != nullptr;
    FAISS_THROW_IF_NOT_MSG(!bf16 || corpus.splitDim == bf16PaddedDim(d),
                           "boundedFlatSearch: BF16 split of the corpus at the wrong width");
    BoundedPass b;
    b.corpus = &corpus;
    b.queries = queries;
    b.k = k;
    b.kk = std::min(k, nb);
    b.nb = nb;
    b.d = d;
    b.dPad = corpus.splitDim;
    b.l2 = l2;
    b.bf16 = bf16;
    b.centred = corpus.centre != nullptr;
    b.m = boundedCandidateCount(b.kk, nb, bf16);
    // The GEMMs may run past nb up to gemmRows (columns the selection skips).
    b.gemmRows = std::max(nb, corpus.gemmRows);
    b.selection = candidateSelection;
    b.distances = distances;
    b.labels = labels;
    const Tf32BoundTerms terms = bf16 ? bf16x3BoundTerms(b.dPad, l2) : tf32BoundTerms(d, l2);
    RescoreArgs& a = b.rescore;
    a.m = b.m;
    a.vectors = corpus.vectors;
    a.sqNorms = l2 ? corpus.sqNorms : nullptr;
    a.nb = nb;
    a.d = d;
    a.l2 = l2;
    a.terms = terms;
    a.xMaxNorm = normUpperBound(terms, corpus.maxSqNorm);
    a.xMaxSqNorm = corpus.maxSqNorm;

    std::vector<int64_t> fallbackRows;
    int64_t overlapped = 0;
    {
        // One flag per query, read back once after the last block (a read
        // per block would stall the stream between blocks).
        TempBuffer<uint8_t> certified(res, device, size_t(nq), stream);
        b.certified = certified.data();
        const int64_t passed =
                runBoundedPass(res, device, stream, b, nq, sampledCandidates, &overlapped);
        std::vector<uint8_t> hostCertified(static_cast<size_t>(nq), 0);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostCertified.data(), certified.data(), size_t(passed),
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        for (int64_t r = 0; r < nq; ++r) {
            if (!hostCertified[size_t(r)]) fallbackRows.push_back(r);
        }
    }  // the bounded pass's buffers go back before the fallback plans its tiles

    searchRowsByFp32(res, device, stream, queries, d, k, fallbackRows, fp32Search, distances,
                     labels);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (stats) {
        stats->fallbackQueries += int64_t(fallbackRows.size());
        stats->certifiedQueries += nq - int64_t(fallbackRows.size());
        stats->overlappedRowBlocks += overlapped;
    }
}

}  // namespace gpu
}  // namespace faiss_ext
