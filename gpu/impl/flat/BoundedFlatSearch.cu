// The bounded TF32 search (see BoundedFlatSearch.h for the algorithm and
// Tf32ErrorBound.h for the bound's derivation).
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "faiss_ext/gpu/impl/flat/BoundedFlatSearch.h"
#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidates.h"
#include "faiss_ext/gpu/impl/flat/ResidualQueries.h"
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

/// Temporary bytes a residual pass adds per query row (ResidualQueries.h).
size_t residualRowBytes(const ResidualView& v) {
    return sizeof(float) * (size_t(v.d) + size_t(v.partitions)) + sizeof(float4) + sizeof(double2);
}

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
    // A residual corpus's pass, else null: the candidates' indices are
    // residual rows (candidateIds maps them to stored rows), and the keys
    // left out are bounded by ResidualBound.h from each row's terms.
    const uint32_t* candidateIds = nullptr;
    int64_t candidateRows = 0;
    const double2* residualCertify = nullptr;
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
        uint32_t id = select::keyIndex(keys[j]);
        if (a.candidateIds) id = id < a.candidateRows ? a.candidateIds[id] : UINT32_MAX;
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
    if (threadIdx.x == 0 && a.residualCertify) {
        const double2 c = a.residualCertify[r];
        a.leftOutLower[r] =
            residualLeftOutLowerBound(double(select::keyValue(keys[a.m - 1])), c.x, c.y);
    } else if (threadIdx.x == 0) {
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
    const bool ok =
        !(flags && flags[r]) && (allCandidates || (kth < INFINITY && leftOutLower[r] > kth));
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
bool certifiesEnough(const uint8_t* certified, int64_t rows, cudaStream_t stream) {
    std::vector<uint8_t> flags(static_cast<size_t>(rows));
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(flags.data(), certified, size_t(rows), cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int64_t ok = std::count(flags.begin(), flags.end(), uint8_t(1));
    return double(ok) >= kBoundedBailOutShare * double(rows);
}

}  // namespace

int64_t boundedCandidateCount(int64_t kk, int64_t nb, bool bf16x3Products) {
    FAISS_THROW_IF_NOT_FMT(kk >= 1 && nb >= 1 && kk <= nb,
                           "boundedCandidateCount: need 1 <= k <= nb (k %lld, nb %lld)",
                           (long long)kk, (long long)nb);
    const int64_t slack =
        bf16x3Products && kk <= kBf16x3WideSlackMaxK ? kBf16x3SlackFactor * kk : kk;
    return std::min(nb, kk + std::max(slack, kBoundedMinSlack));
}

namespace {

/// How the TF32 candidates of a search are selected: GEMM tiles folded by
/// a RowSelector (colTiles tiles of cols columns a row block), or full-row
/// tiles filtered by the sampled threshold (sampled; cols = nb).
struct CandidatePlan {
    bool sampled = false;
    bool fused = false;  ///< sampled, by fusedCandidates (no distance tile)
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
    const size_t perRow = sizeof(float) * size_t(ld) +
                          select::sampledThresholdScratchBytes(1, nb, m) +
                          sizeof(uint64_t) * size_t(m) + 1 + extraPerRow;
    // Rows of one filter call, and GEMM tiles under 2^31 entries.
    p.rows = std::min<int64_t>(
        {nq, select::kSampledThresholdMaxRows, (int64_t(1) << 31) / ld, int64_t(budget / perRow)});
    p.sampled = p.rows >= 1;
    p.cols = nb;
    p.colTiles = 1;
    return p;
}

/// Rows of the first block of a fused search (see the bail-out below): at
/// 1M vectors 2 x 7,813 tiles of 128 x 128, still a full grid. (1,024 cost
/// `Auto` 5% on the hard 10M set, where TF32 certifies nothing.)
constexpr int64_t kFusedFirstBlockRows = 256;

/// Rows of one fusedCandidates call within `budget` bytes (rows = 0 where
/// not even one row fits).
CandidatePlan planFusedCandidates(size_t budget, int64_t nq, int64_t nb, int64_t m,
                                  const FusedOperands& ops, size_t extraPerRow) {
    CandidatePlan p;
    const size_t fixed = fusedCandidatesScratchBytes(1, nb, m, ops);
    const size_t perRow = fusedCandidatesScratchBytes(2, nb, m, ops) - fixed +
                          sizeof(uint64_t) * size_t(m) + 1 + extraPerRow;
    if (budget <= fixed) return p;
    p.rows = std::min<int64_t>({nq, fusedCandidatesMaxRows(), int64_t((budget - fixed) / perRow)});
    p.sampled = p.fused = p.rows >= 1;
    p.cols = nb;
    p.colTiles = 1;
    return p;
}

/// How a search's candidates are taken, by preference: fused (no distance
/// tile), full-row tiles filtered by the sampled threshold (both where
/// `sampled`: the caller's algorithm was Auto), tiles folded by a
/// RowSelector.
CandidatePlan planCandidates(size_t budget, int64_t nq, int64_t k, int64_t m, int d, bool l2,
                             bool sampled, const FusedOperands& fused, int64_t nb,
                             const TileSelection& selection, size_t extraPerRow) {
    CandidatePlan p;
    if (sampled && fusedCandidatesApply(nb, m, fused)) {
        p = planFusedCandidates(budget, nq, nb, m, fused, extraPerRow);
    }
    if (sampled && !p.sampled) p = planSampledCandidates(budget, nq, nb, m, extraPerRow);
    if (!p.sampled) {
        const TilePlan t =
            planSearch(budget, nb, nq, k, m, d, /*onHost=*/false, l2, selection, extraPerRow);
        p.rows = t.rows;
        p.cols = t.cols;
        p.colTiles = t.colTiles;
    }
    return p;
}

}  // namespace

namespace {

/// The bounded pass over a search's queries, block by block: its plan, its
/// temporary buffers (for blocks of up to plan.rows queries) and the steps
/// of one block.
class BoundedPass {
  public:
    BoundedPass(GpuResources* res, int device, cudaStream_t stream, const BoundedCorpus& corpus,
                const float* queries, int64_t nq, int64_t k, const TileSelection& selection,
                bool sampledCandidates);

    /// Searches queries [q0, q0 + rows) (of `queries`, prepared) into the
    /// result rows and flags which of them are certified.
    void searchBlock(const float* queries, int64_t q0, int64_t rows, float* distances,
                     int64_t* labels);
    /// Rows of the first block (small on the fused path: the bail-out
    /// costs few queries' products) and of the others.
    int64_t firstRows() const {
        return plan_.fused ? std::min(plan_.rows, kFusedFirstBlockRows) : plan_.rows;
    }
    int64_t blockRows() const { return plan_.rows; }
    /// Whether the pass can take queries (a residual corpus's needs the
    /// fused candidates).
    bool usable() const { return plan_.rows >= 1; }
    /// Whether the first block certified enough of its queries to go on
    /// (synchronises the stream).
    bool firstBlockWorthIt(int64_t rows) const {
        return certifiesEnough(certified_.data(), rows, stream_);
    }
    /// The queries of [0, passed) the pass did not certify (synchronises).
    std::vector<int64_t> uncertified(int64_t passed, int64_t nq) const;

  private:
    /// What the products multiply: the residual rows of a residual pass, the
    /// BF16x3 split of the vectors, or the vectors.
    const void* multipliedVectors() const {
        if (residual_) return residual_->residuals;
        return bf16_ ? static_cast<const void*>(corpus_.split) : corpus_.vectors;
    }
    /// The fused kernel's operands for queries q (their split under BF16x3,
    /// q_t of a residual pass).
    FusedOperands operands(const void* q) const {
        FusedOperands o;
        o.bf16x3 = bf16_;
        o.d = bf16_ ? dPad_ : d_;
        o.queries = q;
        o.vectors = multipliedVectors();
        return o;
    }
    const float* prepareQueries(const float* q, int64_t rows);
    void planResidual(size_t budget, int64_t nq, bool sampled, size_t extraPerRow);
    /// The temporary buffers of blocks of plan_.rows queries.
    void allocate(GpuResources* res, int device, cudaStream_t stream,
                  const TileSelection& selection);
    /// What the rescoring kernel reads (args_), and a residual pass's bounds.
    void initRescoreArgs();
    const uint64_t* residualCandidates(int64_t rows);
    const uint64_t* candidates(const float* q, int64_t rows);
    void rescoreAndCertify(const float* q, int64_t q0, int64_t rows, const uint64_t* approxKeys,
                           float* distances, int64_t* labels);

    cudaStream_t stream_;
    const BoundedCorpus& corpus_;
    const int64_t nb_, kk_, k_, m_;
    const int d_, dPad_;
    const bool l2_, bf16_, centred_;
    const ResidualView* residual_;  ///< a residual corpus's pass, else null
    ResidualCorpusBounds residualBounds_;
    const int64_t
        gemmRows_;  ///< the GEMMs may run past nb up to here (columns the selection skips)
    const TileSelection& selection_;
    cublasHandle_t blas_;
    CandidatePlan plan_;
    size_t filterBytes_ = 0, sortBytes_ = 0;
    RescoreArgs args_;
    // One flag per query, read back once after the last block (a read
    // per block would stall the stream between blocks).
    TempBuffer<uint8_t> certified_;
    std::unique_ptr<TempBuffer<float>> dist_;
    std::unique_ptr<RowSelector> sel_;
    std::unique_ptr<TempBuffer<char>> filterScratch_, sortTemp_;
    std::unique_ptr<TempBuffer<uint64_t>> filtered_, rescored_;
    std::unique_ptr<TempBuffer<uint8_t>> flags_;
    std::unique_ptr<TempBuffer<double>> leftOutLower_;
    // Query norms per block (the bound's |q|; for L2 also the decode's
    // |q|^2, the same kernel as the FP32 path's, on the queries this
    // pass multiplies: centred ones when the corpus is), the centred
    // queries (L2) or their q.c (inner products), the BF16x3 split.
    std::unique_ptr<TempBuffer<float>> querySqNorms_, centredQueries_, centreOffsets_;
    std::unique_ptr<TempBuffer<Bf16Bits>> querySplit_;
    // A residual pass's prepared queries (ResidualQueries.h).
    std::unique_ptr<TempBuffer<float>> residualQueries_, centreDots_;
    std::unique_ptr<TempBuffer<float4>> residualCoefs_;
    std::unique_ptr<TempBuffer<double2>> residualCertify_;
};

BoundedPass::BoundedPass(GpuResources* res, int device, cudaStream_t stream,
                         const BoundedCorpus& corpus, const float* queries, int64_t nq, int64_t k,
                         const TileSelection& selection, bool sampledCandidates)
    : stream_(stream),
      corpus_(corpus),
      nb_(corpus.nb),
      kk_(std::min(k, corpus.nb)),
      k_(k),
      m_(boundedCandidateCount(std::min(k, corpus.nb), corpus.nb, corpus.split != nullptr)),
      d_(corpus.d),
      dPad_(corpus.splitDim),
      l2_(corpus.metric == FlatMetric::L2),
      bf16_(corpus.split != nullptr),
      centred_(corpus.centre != nullptr),
      residual_(corpus.residual),
      gemmRows_(std::max(corpus.nb, corpus.gemmRows)),
      selection_(selection),
      blas_(res->getBlasHandle(device)),
      certified_(res, device, size_t(nq), stream) {
    // Per row beyond the selection: m re-scored keys, their sort's
    // temporary memory, the lower bound of the keys left out, the
    // query's norm and (centred) the centred query (L2) or its q.c (inner
    // products). BF16x3: the query's split row (3 dPad BF16).
    const size_t extraPerRow = sizeof(uint64_t) * m_ + select::sortKeyRowsTempBytes(1, m_) + 64 +
                               sizeof(float) * (1 + (centred_ ? size_t(d_) : 0)) +
                               (bf16_ ? 3 * sizeof(Bf16Bits) * size_t(dPad_) : 0) +
                               (residual_ ? residualRowBytes(*residual_) : 0);
    const size_t budget = res->getTempMemoryAvailable(device) / 10 * 9;
    if (residual_) {
        planResidual(budget, nq, sampledCandidates, extraPerRow);
    } else {
        // (queries multiplied from a temporary buffer, centred or split, are
        // aligned: the vectors stand in for them in the check)
        const bool tempQueries = bf16_ || (centred_ && l2_);
        const FusedOperands planned = operands(tempQueries ? multipliedVectors() : queries);
        plan_ = planCandidates(budget, nq, k, m_, d_, l2_, sampledCandidates, planned, nb_,
                               selection, extraPerRow);
    }
    if (!usable()) return;  // every query falls back: nothing to allocate
    allocate(res, device, stream, selection);
    initRescoreArgs();
}

void BoundedPass::allocate(GpuResources* res, int device, cudaStream_t stream,
                           const TileSelection& selection) {
    const int64_t rows = plan_.rows;
    const int64_t ldMax = (plan_.cols + 3) / 4 * 4;
    dist_.reset(new TempBuffer<float>(res, device, plan_.fused ? 0 : size_t(rows) * ldMax, stream));
    if (!plan_.sampled) {
        sel_.reset(new RowSelector(res, device, stream, selection.algo, rows, plan_.cols,
                                   plan_.colTiles, nb_, m_, selection.group, selection.thFactor));
    }
    filterBytes_ =
        plan_.fused ? fusedCandidatesScratchBytes(rows, plan_.cols, m_, operands(corpus_.vectors))
        : plan_.sampled ? select::sampledThresholdScratchBytes(rows, nb_, m_)
                        : 0;
    filterScratch_.reset(new TempBuffer<char>(res, device, filterBytes_, stream));
    filtered_.reset(
        new TempBuffer<uint64_t>(res, device, plan_.sampled ? size_t(rows) * m_ : 0, stream));
    flags_.reset(new TempBuffer<uint8_t>(res, device, plan_.sampled ? size_t(rows) : 0, stream));
    rescored_.reset(new TempBuffer<uint64_t>(res, device, size_t(rows) * m_, stream));
    sortBytes_ = select::sortKeyRowsTempBytes(rows, m_);
    sortTemp_.reset(new TempBuffer<char>(res, device, sortBytes_, stream));
    leftOutLower_.reset(new TempBuffer<double>(res, device, size_t(rows), stream));
    querySqNorms_.reset(new TempBuffer<float>(res, device, size_t(rows), stream));
    centredQueries_.reset(
        new TempBuffer<float>(res, device, centred_ && l2_ ? size_t(rows) * d_ : 0, stream));
    centreOffsets_.reset(
        new TempBuffer<float>(res, device, centred_ && !l2_ ? size_t(rows) : 0, stream));
    querySplit_.reset(
        new TempBuffer<Bf16Bits>(res, device, bf16_ ? size_t(rows) * 3 * dPad_ : 0, stream));
    const int64_t residualRows = residual_ ? rows : 0;
    residualQueries_.reset(new TempBuffer<float>(res, device, size_t(residualRows) * d_, stream));
    centreDots_.reset(new TempBuffer<float>(
        res, device, size_t(residualRows) * (residual_ ? residual_->partitions : 0), stream));
    residualCoefs_.reset(new TempBuffer<float4>(res, device, size_t(residualRows), stream));
    residualCertify_.reset(new TempBuffer<double2>(res, device, size_t(residualRows), stream));
}

void BoundedPass::initRescoreArgs() {
    const Tf32BoundTerms terms = bf16_ ? bf16x3BoundTerms(dPad_, l2_) : tf32BoundTerms(d_, l2_);
    args_.m = m_;
    args_.vectors = corpus_.vectors;
    args_.sqNorms = l2_ ? corpus_.sqNorms : nullptr;
    args_.nb = nb_;
    args_.d = d_;
    args_.l2 = l2_;
    args_.terms = terms;
    args_.xMaxNorm = normUpperBound(terms, corpus_.maxSqNorm);
    args_.xMaxSqNorm = corpus_.maxSqNorm;
    args_.rescoredKeys = rescored_->data();
    args_.leftOutLower = leftOutLower_->data();
    if (residual_) {
        args_.candidateIds = residual_->ids;
        args_.candidateRows = residual_->rows;
        args_.residualCertify = residualCertify_->data();
        residualBounds_.d = d_;
        residualBounds_.maxCentreNorm = residual_->maxCentreNorm;
        residualBounds_.maxResidualNorm = residual_->maxResidualNorm;
        residualBounds_.maxCentredSqNorm = residual_->maxCentredSqNorm;
        residualBounds_.xMaxNorm = args_.xMaxNorm;
        residualBounds_.xMaxSqNorm = args_.xMaxSqNorm;
    }
}

void BoundedPass::planResidual(size_t budget, int64_t nq, bool sampled, size_t extraPerRow) {
    // (the queries: an aligned buffer of ours; the rows stand in for it)
    const FusedOperands ops = operands(residual_->residuals);
    // Only the fused kernels lower the keys by the residual terms.
    if (sampled && fusedCandidatesApply(residual_->rows, m_, ops)) {
        plan_ = planFusedCandidates(budget, nq, residual_->rows, m_, ops, extraPerRow);
    }
}

const float* BoundedPass::prepareQueries(const float* q, int64_t rows) {
    if (residual_) {
        const ResidualQueryBlock block{residualQueries_->data(), centreDots_->data(),
                                       residualCoefs_->data(), residualCertify_->data()};
        prepareResidualQueries(blas_, q, rows, *residual_, residualBounds_, block, stream_);
        rowSquaredNorms(q, rows, d_, querySqNorms_->data(), stream_);
        return q;  // the re-scoring multiplies the queries as passed
    }
    if (centred_ && l2_) {
        subtractCentre(q, rows, d_, corpus_.centre, centredQueries_->data(), stream_);
        q = centredQueries_->data();
    } else if (centred_) {
        centreDots(q, rows, d_, corpus_.centre, centreOffsets_->data(), stream_);
    }
    rowSquaredNorms(q, rows, d_, querySqNorms_->data(), stream_);
    if (bf16_) splitRowsBf16(q, rows, d_, SplitSide::Queries, querySplit_->data(), stream_);
    return q;
}

const uint64_t* BoundedPass::residualCandidates(int64_t rows) {
    const FusedResidualTerms terms{centreDots_->data(), residual_->partitions,
                                   residualCoefs_->data(), residual_->tilePartition,
                                   residual_->tileRadii};
    fusedCandidates(blas_, operands(residualQueries_->data()), rows, residual_->rows, -2.f,
                    residual_->centredSqNorms, m_, filtered_->data(), flags_->data(),
                    filterScratch_->data(), filterBytes_, stream_, &terms);
    return filtered_->data();
}

const uint64_t* BoundedPass::candidates(const float* q, int64_t rows) {
    if (residual_) return residualCandidates(rows);
    const float alpha = l2_ ? -2.f : -1.f;
    const float* colAdd = l2_ ? corpus_.sqNorms : nullptr;
    if (plan_.fused) {
        fusedCandidates(blas_, operands(bf16_ ? static_cast<const void*>(querySplit_->data()) : q),
                        rows, nb_, alpha, colAdd, m_, filtered_->data(), flags_->data(),
                        filterScratch_->data(), filterBytes_, stream_);
        return filtered_->data();
    }
    // The approximate products of this block's queries with vectors
    // [c0, c0 + w), into out (ld floats a row).
    auto products = [&](int64_t c0, int64_t w, float* out, int64_t ld) {
        if (bf16_) {
            gemmDotProductsBf16x3(blas_, querySplit_->data(), rows,
                                  corpus_.split + size_t(c0) * 3 * dPad_, w, dPad_, alpha, out, ld);
        } else {
            gemmDotProductsTf32(blas_, q, rows, corpus_.vectors + size_t(c0) * d_, w, d_, alpha,
                                out, ld);
        }
    };
    if (plan_.sampled) {
        const int64_t ldMax = (plan_.cols + 3) / 4 * 4;
        products(0, std::min(gemmRows_, ldMax), dist_->data(), ldMax);
        select::sampledThresholdSelectKeys(dist_->data(), ldMax, colAdd, rows, nb_, m_,
                                           filtered_->data(), flags_->data(),
                                           filterScratch_->data(), filterBytes_, stream_);
        return filtered_->data();
    }
    sel_->begin(rows);
    for (int64_t c0 = 0; c0 < nb_; c0 += plan_.cols) {
        const int64_t w = std::min(plan_.cols, nb_ - c0);
        const int64_t ld = (w + 3) / 4 * 4;
        products(c0, std::min(ld, gemmRows_ - c0), dist_->data(), ld);
        sel_->addTile(dist_->data(), ld, colAdd ? colAdd + c0 : nullptr, uint32_t(c0), w);
    }
    return sel_->finish();
}

void BoundedPass::rescoreAndCertify(const float* q, int64_t q0, int64_t rows,
                                    const uint64_t* approxKeys, float* distances, int64_t* labels) {
    args_.approxKeys = approxKeys;
    args_.queries = q;
    args_.querySqNorms = querySqNorms_->data();
    rescoreCandidatesKernel<<<unsigned(rows), 32 * kRescoreWarps, 0, stream_>>>(args_);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    select::sortKeyRows(rescored_->data(), rows, m_, sortTemp_->data(), sortBytes_, stream_);
    certifyRowsKernel<<<unsigned((rows + 255) / 256), 256, 0, stream_>>>(
        rescored_->data(), m_, kk_, leftOutLower_->data(), m_ == nb_,
        plan_.sampled ? flags_->data() : nullptr, rows, certified_.data() + q0);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    // Every row is decoded; the uncertified ones are written over later.
    const select::KeyDecode decode = l2_ ? select::KeyDecode::L2 : select::KeyDecode::Negated;
    select::decodeKeys(rescored_->data(), rows, kk_, k_, decode,
                       l2_ ? querySqNorms_->data() : nullptr, distances + size_t(q0) * k_,
                       labels + size_t(q0) * k_, stream_, m_);
    if (centred_ && !l2_) {  // back from q.(x - c) to q.x
        addRowOffsets(distances ? distances + size_t(q0) * k_ : nullptr, rows, k_,
                      centreOffsets_->data(), stream_);
    }
}

void BoundedPass::searchBlock(const float* queries, int64_t q0, int64_t rows, float* distances,
                              int64_t* labels) {
    const float* q = prepareQueries(queries + size_t(q0) * d_, rows);
    const uint64_t* approxKeys = candidates(q, rows);
    rescoreAndCertify(q, q0, rows, approxKeys, distances, labels);
}

std::vector<int64_t> BoundedPass::uncertified(int64_t passed, int64_t nq) const {
    std::vector<uint8_t> hostCertified(static_cast<size_t>(nq), 0);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostCertified.data(), certified_.data(), size_t(passed),
                                         cudaMemcpyDeviceToHost, stream_));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < nq; ++r) {
        if (!hostCertified[size_t(r)]) rows.push_back(r);
    }
    return rows;
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
    FAISS_THROW_IF_NOT_MSG(!corpus.split || corpus.splitDim == bf16PaddedDim(d),
                           "boundedFlatSearch: BF16 split of the corpus at the wrong width");
    FAISS_THROW_IF_NOT_MSG(
        !corpus.residual || (l2 && !corpus.centre && !corpus.split && corpus.residual->d == d),
        "boundedFlatSearch: a residual corpus serves L2 TF32 passes only");

    std::vector<int64_t> fallbackRows;
    {
        BoundedPass pass(res, device, stream, corpus, queries, nq, k, candidateSelection,
                         sampledCandidates);
        int64_t passed = 0;  // queries the pass has seen (the rest fall back)
        const int64_t firstRows = pass.firstRows();
        for (int64_t q0 = 0; pass.usable() && q0 < nq;
             q0 += q0 == 0 ? firstRows : pass.blockRows()) {
            if (q0 == firstRows && !pass.firstBlockWorthIt(firstRows)) break;
            const int64_t rows = std::min(q0 == 0 ? firstRows : pass.blockRows(), nq - q0);
            passed = q0 + rows;
            pass.searchBlock(queries, q0, rows, distances, labels);
        }
        fallbackRows = pass.uncertified(passed, nq);
    }  // the pass's buffers go back before the fallback plans its tiles

    searchRowsByFp32(res, device, stream, queries, d, k, fallbackRows, fp32Search, distances,
                     labels);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (stats) {
        stats->fallbackQueries += int64_t(fallbackRows.size());
        stats->certifiedQueries += nq - int64_t(fallbackRows.size());
    }
}

}  // namespace gpu
}  // namespace faiss_ext
