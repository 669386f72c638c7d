// The engine behind GpuIndexQuickSelectFlat: storage of the vectors and
// their norms (on the device, or in pinned host memory streamed through the
// GPU in tiles), and the tiled exact search (GEMM tile, selection per tile
// by RowSelector with the chosen algorithm, sort, decode).
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/FlatOptions.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/BoundedFlatSearch.h"
#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPath.h"
#include "faiss_ext/gpu/impl/flat/ResidualCorpus.h"
#include "faiss_ext/gpu/impl/flat/SplitBf16.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"
#include "faiss_ext/gpu/utils/IdSelection.h"

#include <cstdint>
#include <functional>

namespace faiss_ext {
namespace gpu {

struct RangeHits;

/// How FlatStorage::search runs.
struct FlatSearchOptions {
    SelectAlgo algo = SelectAlgo::QuickMultiSelect;  ///< resolved (not Auto)
    /// FP32, TF32Bounded or BF16x3Bounded (resolved, not Auto). The bounded
    /// precisions run only for vectors on the device and searches without
    /// selfBase; otherwise FP32 runs and the queries count as fallbacks.
    DistancePrecision precision = DistancePrecision::FP32;
    /// TF32Bounded: the algorithm (resolved) that selects the
    /// boundedCandidateCount(k, nb) candidates per query.
    SelectAlgo candidateAlgo = SelectAlgo::QuickMultiSelect;
    /// TF32Bounded: the candidates' algorithm came from Auto, so full-row
    /// distance tiles may be selected by the sampled-threshold filter
    /// (select/SampledThresholdSelect.h) where it applies.
    bool sampledCandidates = false;
    /// TF32Bounded: queries of each route are added here (may be null).
    BoundedSearchStats* boundedStats = nullptr;
    /// TF32Bounded chosen by Auto: the queries TF32 cannot certify are
    /// searched with BF16x3Bounded (its split copy made on first need)
    /// before FP32.
    bool cascadeToBf16x3 = false;
    int group = 4;                                   ///< merge queue's G
    int thFactor = 8;                                ///< TH-heap's n_S / k
    bool queriesPrepared = false;                    ///< queries already prepared for the metric
    /// >= 0: query i is stored vector selfBase + i and its own pair is
    /// excluded (k-NN graphs).
    int64_t selfBase = -1;
    /// The FP32 engine: Auto picks by chooseFlatSearchPath (FlatSearchPath.h);
    /// tests force the others (a forced path that cannot run the shape throws).
    FlatSearchPath path = FlatSearchPath::Auto;
    /// Called before the first write of a result (may throw: nothing is
    /// written then). The fused few-query path calls it after its kernels
    /// are queued, so that a deferred check of the queries overlaps them
    /// (GpuIndex::defersFiniteCheck_); idempotent, may be empty.
    std::function<void()> beforeResults;
    /// When set (over size() positions): only the selected vectors are
    /// candidates; where fewer than k are selected the rest is padding
    /// (label -1, distance +inf / -inf). Not with selfBase.
    const IdSelection* filter = nullptr;
};

/// Vectors of a flat index.
class FlatStorage {
public:
    /// Storage of d-dimensional vectors for `metric` on `device`, kept
    /// where `where` says (Auto: on the device while they fit).
    FlatStorage(GpuResources* res, int device, int d, FlatMetric metric,
                VectorStorage where = VectorStorage::Auto);
    ~FlatStorage();
    FlatStorage(const FlatStorage&) = delete;
    FlatStorage& operator=(const FlatStorage&) = delete;

    /// Number of stored vectors.
    int64_t size() const { return ntotal_; }

    /// Device or Host.
    VectorStorage where() const { return onHost_ ? VectorStorage::Host : VectorStorage::Device; }

    /// Ensures room for n vectors in total (may move them to the host under Auto).
    void reserve(int64_t n);

    /// Appends n vectors (host or device pointer); prepares them for the
    /// metric unless `prepared`. On failure nothing changes.
    void append(const float* x, int64_t n, bool prepared);

    /// Removes all vectors and frees the memory.
    void reset();

    /// Removes the vectors `removed` selects (over size() positions) and
    /// moves the rest down in order, as faiss::IndexFlat::remove_ids does;
    /// returns how many were removed. On failure nothing changes.
    int64_t removeSelected(const IdSelection& removed);

    /// Copies vectors i0 .. i0 + n - 1 to out (host or device pointer).
    void copyVectors(int64_t i0, int64_t n, float* out) const;

    /// Device pointer to the vectors (null when they are on the host).
    const float* vectors() const { return onHost_ ? nullptr : vectors_; }

    /// Exact k-NN of nq queries (device pointers throughout; k >= 1), over
    /// the vectors opt.filter selects when it is set.
    void search(const float* queries, int64_t nq, int64_t k, float* distances, int64_t* labels,
                const FlatSearchOptions& opt) const;

    /// Exact range search of nq device queries (prepared for the metric when
    /// `prepared`): every vector `filter` (null: all) selects within radius,
    /// appended to hits rows hitRow0 .. (impl/flat/RangeSearch.h).
    void rangeSearch(const float* queries, int64_t nq, bool prepared, float radius,
                     const IdSelection* filter, RangeHits* hits, int64_t hitRow0) const;

    /// The exact k-NN graph of the stored vectors (outputs: host or device
    /// pointers, distances may be null); k checked by the caller.
    void knnGraph(int64_t k, bool excludeSelf, float* distances, int64_t* labels,
                  const FlatSearchOptions& opt) const;

private:
    /// The vectors one search reads: the storage's, a run of them, or a
    /// gathered subset; keepBits (device bitmap over nb) masks the rest.
    struct CorpusView {
        const float* vectors;
        const float* norms;  ///< |x|^2, L2 only
        int64_t nb;
        bool onHost;
        double maxSqNorm;  ///< an upper bound of the vectors' |x|^2 (TF32 bound)
        const uint32_t* keepBits;
        /// Row of the storage that is the view's row 0 (the whole storage
        /// or a run of it), or -1 for a gathered subset: where the
        /// storage's centred copy (centred_) lines up with the view.
        int64_t storageRow0 = -1;
        /// Rows the bounded search's GEMMs may read (0: nb): a gathered
        /// subset is followed by zero rows up to a multiple of 4, so that
        /// its GEMMs are as wide (BoundedCorpus::gemmRows).
        int64_t gemmRows = 0;
    };

    /// A gathered subset's BF16 split, for one search.
    struct SplitScratch {
        std::unique_ptr<TempBuffer<Bf16Bits>> rows;
    };

    void searchView_(const CorpusView& c, const float* queries, int64_t nq, int64_t k,
                     float* distances, int64_t* labels, const FlatSearchOptions& opt) const;
    /// What a bounded search of view c reads: the centred copy where it
    /// helps, and for BF16x3 the split (kept, or made in scratch for a
    /// gathered subset). False when the split does not fit (kept: more than
    /// half the free device memory; gathered: more than half the temporary
    /// memory left): the search then runs without BF16x3.
    bool boundedCorpus_(const CorpusView& c, DistancePrecision precision, cudaStream_t stream,
                        BoundedCorpus* corpus, SplitScratch* scratch) const;
    /// The bounded search of prepared queries q over view c, with its FP32
    /// fallback (and Auto's BF16x3 step, opt.cascadeToBf16x3); false where
    /// it cannot run (bit masks, self pairs, a dimension past the bound, a
    /// split that does not fit, host vectors at other than TF32Bounded):
    /// the FP32 path answers then.
    bool searchBounded_(const CorpusView& c, const float* q, int64_t nq, int64_t k,
                        float* distances, int64_t* labels, const FlatSearchOptions& opt,
                        cudaStream_t stream) const;
    /// What a bounded search's FP32 fallback runs with: opt at FP32, its
    /// queries already prepared, counting nothing, with no BF16x3 step.
    static FlatSearchOptions fp32FallbackOptions_(const FlatSearchOptions& opt);
    /// The bounded TF32 search of view c whose vectors are on the host:
    /// streamed in tiles, each searched by the bounded path with the FP32
    /// path over the staged tile as fallback, the answers merged
    /// (HostBoundedSearch.cu); false when the temporary memory holds no
    /// tile worth it (the FP32 path streams the vectors then).
    bool searchHostBounded_(const CorpusView& c, const float* q, int64_t nq, int64_t k,
                            float* distances, int64_t* labels, const FlatSearchOptions& opt,
                            cudaStream_t stream) const;
    void searchFiltered_(const IdSelection& s, const float* queries, int64_t nq, int64_t k,
                         float* distances, int64_t* labels, const FlatSearchOptions& opt) const;
    void allocate_(int64_t n, bool onHost, float** nv, float** nn, DeviceVector<float>* dv,
                   DeviceVector<float>* dn) const;
    static void freeHost_(float* v, float* nn);
    bool wantHost_(int64_t n) const;
    /// Zeroes the device rows from ntotal_ up to the next multiple of 4
    /// (within capacity_): the whole storage's bounded GEMMs read them
    /// (CorpusView::gemmRows); the selection never does.
    void zeroPaddingRows_(cudaStream_t stream);
    /// Runs the few-query or large-k engine when opt.path resolves to one
    /// (queries prepared, qNorms |q|^2 for L2); false: the tiled path runs.
    bool searchSpecialPath_(const CorpusView& c, const float* q, const float* qNorms, int64_t nq, int64_t k,
                            float* distances, int64_t* labels, const FlatSearchOptions& opt,
                            cudaStream_t stream) const;

    GpuResources* res_;
    int device_;
    int d_;
    FlatMetric metric_;
    VectorStorage request_;
    bool onHost_ = false;
    int64_t ntotal_ = 0;
    int64_t capacity_ = 0;  ///< rows allocated (device: a multiple of 4, see paddedRows)
    float* vectors_ = nullptr;  // device (dVectors_), or pinned host when onHost_
    float* norms_ = nullptr;    // |x|^2, L2 only; same memory space (dNorms_)
    double maxSqNorm_ = 0.0;    // the largest FP32 |x|^2 stored (the TF32 bound's x_max)
    DeviceVector<float> dVectors_, dNorms_;  // own vectors_ / norms_ on the device
    /// The vectors translated by their mean for the bounded searches
    /// (built by the first such search, dropped whenever the vectors change).
    mutable CentredCorpus centred_;
    /// The BF16 split of the vectors the BF16x3 search multiplies (the
    /// centred copy or the stored vectors); dropped with centred_.
    mutable SplitCorpus split_;
    /// The residual copy for Auto's second TF32 pass (ResidualCorpus.h),
    /// built when a first TF32 block bails out; dropped with centred_.
    mutable ResidualCorpus residual_;
    bool residualApplies_(const CorpusView& c, const FlatSearchOptions& opt) const;
    /// The bounded corpus of a residual pass over view c (the stored
    /// vectors re-scored, `view`'s residuals multiplied).
    BoundedCorpus residualCorpus_(const CorpusView& c, const ResidualView* view) const;
    /// Auto's TF32 pass, its uncertified queries handed to the residual
    /// pass, BF16x3, then FP32 (byFp32); counts into opt.boundedStats.
    void searchAutoCascade_(const CorpusView& c, const BoundedCorpus& corpus, const float* q,
                            int64_t nq, int64_t k, float* distances, int64_t* labels,
                            const FlatSearchOptions& opt, const Fp32SearchFn& byFp32,
                            cudaStream_t stream) const;
    mutable cudaStream_t copyStream_ = nullptr;
};

}  // namespace gpu
}  // namespace faiss_ext
