// GpuIndexQuickSelectFlat: exact brute-force k-NN on the GPU.
//
// Distances by cuBLAS SGEMM plus norms, and k-selection by the quick
// multi-select of Komarov, Dashti & D'Souza (PLoS ONE 2014, docs/references.md,
// "GPU-based quick multi-select"): partitions with __ballot_sync / __popc,
// one read per pass, one warp per query when queries are many and one block
// per query when they are few, and a stack of partition references instead
// of copies. Any k from 1 to ntotal; results equal faiss::IndexFlat's (ties
// aside), sorted closest first. The dot products run in FP32, or on the TF32
// tensor cores with a proven error bound and FP32 re-scoring that keep the
// results exact (DistancePrecision::TF32Bounded, docs/flat.md).
//
// Usage:
//   faiss_ext::gpu::StandardGpuResources res;
//   faiss_ext::gpu::GpuIndexQuickSelectFlat index(&res, 128, faiss_ext::FlatMetric::L2);
//   index.add(nb, xb);
//   index.search(nq, xq, k, D, I);
#pragma once

#include <faiss/IndexFlat.h>

#include <atomic>
#include <memory>

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/FlatOptions.h"
#include "faiss_ext/gpu/GpuIndex.h"
#include "faiss_ext/gpu/GpuSelect.h"

namespace faiss_ext {
namespace gpu {

/// Options of GpuIndexQuickSelectFlat.
struct GpuIndexQuickSelectFlatConfig : GpuIndexConfig {
    /// Default k-selection algorithm (per search: SearchParametersQuickSelectFlat).
    SelectAlgo selectAlgo = SelectAlgo::Auto;
    /// Where the vectors live.
    VectorStorage storage = VectorStorage::Auto;
    /// Hierarchical partition group size G of the merge-queue selection (2, 4, 8 or 16).
    int mergeQueueGroup = 4;
    /// TH-heap sample size n_S as a multiple of k (the paper's 8k .. 32k; 1..1024).
    int thheapSampleFactor = 8;
    /// Default precision of the distance products (per search:
    /// SearchParametersQuickSelectFlat). TF32Bounded stays exact: a proven
    /// bound on the TF32 error picks the candidates re-scored in FP32, and
    /// queries it cannot certify are searched in FP32 (getBoundedStats).
    DistancePrecision distancePrecision = DistancePrecision::Auto;
};

/// Per-search knobs of GpuIndexQuickSelectFlat.
struct SearchParametersQuickSelectFlat : faiss::SearchParameters {
    /// Overrides the index's selectAlgo for this search (Auto: the index's).
    SelectAlgo selectAlgo = SelectAlgo::Auto;
    /// Overrides the index's distancePrecision for this search (Auto: the index's).
    DistancePrecision distancePrecision = DistancePrecision::Auto;
};

class FlatStorage;

/// Exact k-NN on the GPU with GEMM distances and quick multi-select.
class GpuIndexQuickSelectFlat : public GpuIndex {
  public:
    /// An empty index of dimension dims (> 0) for `metric`.
    GpuIndexQuickSelectFlat(GpuResourcesProvider* provider, int dims,
                            FlatMetric metric = FlatMetric::L2,
                            GpuIndexQuickSelectFlatConfig config = {});

    /// An empty index with a FAISS metric (L2 or inner product).
    GpuIndexQuickSelectFlat(GpuResourcesProvider* provider, int dims, faiss::MetricType metric,
                            GpuIndexQuickSelectFlatConfig config = {});

    /// A copy of a CPU index (see copyFrom).
    GpuIndexQuickSelectFlat(GpuResourcesProvider* provider, const faiss::Index* index,
                            GpuIndexQuickSelectFlatConfig config = {});

    ~GpuIndexQuickSelectFlat() override;

    /// The flat metric (L2, InnerProduct, Cosine, Pearson).
    FlatMetric getFlatMetric() const { return flatMetric_; }

    /// The configuration.
    const GpuIndexQuickSelectFlatConfig& getConfig() const { return qsConfig_; }

    /// Replaces the contents by those of a CPU index: a faiss::IndexFlat
    /// (L2 or IP; the metric is taken from it), or the cosine / Pearson twin
    /// made by copyToCpuIndex (IndexPreTransform of the preparation over an
    /// IndexFlatIP holding prepared vectors). Throws on anything else, with
    /// this index unchanged.
    void copyFrom(const faiss::Index* index);

    /// Writes the stored vectors into a faiss::IndexFlat (reset first). For
    /// cosine and Pearson these are the prepared vectors under
    /// METRIC_INNER_PRODUCT: queries must be prepared the same way.
    void copyTo(faiss::IndexFlat* index) const;

    /// The CPU twin: an IndexFlat (L2, IP), or for cosine / Pearson an
    /// IndexPreTransform that prepares queries before an IndexFlatIP.
    faiss::Index* copyToCpuIndex() const override;

    /// Removes all vectors.
    void reset() override;

    /// Removes the stored vectors `sel` selects and renumbers the rest in
    /// order, as faiss::IndexFlat does (wrap the index in faiss::IndexIDMap2
    /// to keep ids stable). Returns how many were removed; compaction runs
    /// on the device. On failure the index is unchanged.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    /// Copies stored vector `key` to recons (prepared vectors for cosine /
    /// Pearson).
    void reconstruct(idx_t key, float* recons) const override;

    /// Copies stored vectors i0 .. i0 + ni - 1 to recons.
    void reconstruct_n(idx_t i0, idx_t ni, float* recons) const override;

    /// Reserves device memory for `n` vectors in total.
    void reserveMemory(idx_t n);

    /// Device pointer to the stored (prepared) vectors, ntotal x d, row major;
    /// null when they are kept on the host (getStorage() == Host).
    const float* getVectorsDevice() const;

    /// Where the vectors are now: Device or Host (never Auto).
    VectorStorage getStorage() const;

    /// The exact k-NN graph of the stored vectors: for each stored vector i,
    /// its k nearest stored vectors, sorted, as search() would give them for
    /// query x_i (itself excluded when excludeSelf, by id, so duplicates of
    /// x_i still count). distances / labels: ntotal x k, host or device
    /// pointers (distances may be null). Requires 1 <= k, and k <= ntotal - 1
    /// with excludeSelf (k <= ntotal without). Runs tiled on the GPU.
    void knnGraph(int64_t k, bool excludeSelf, float* distances, idx_t* labels,
                  const SearchParametersQuickSelectFlat* params = nullptr) const;

    /// The selection algorithm a search asks for: the params' when they name
    /// one, else the config's (possibly Auto). Throws on an unknown value.
    SelectAlgo requestedSelectAlgo(const faiss::SearchParameters* params = nullptr) const;

    /// The selection algorithm a search of nq queries at k runs (Auto resolved).
    SelectAlgo resolveSelectAlgo(int64_t nq, int64_t k,
                                 const faiss::SearchParameters* params = nullptr) const;

    /// The distance precision a search of nq queries at k runs: FP32,
    /// TF32Bounded or BF16x3Bounded (Auto resolved by chooseDistancePrecision). Throws on an
    /// unknown value in the config or params.
    DistancePrecision resolveDistancePrecision(int64_t nq, int64_t k,
                                               const faiss::SearchParameters* params = nullptr) const;

    /// Queries searched with a bounded precision since construction or the last
    /// resetBoundedStats(): certified from the TF32 candidates, or searched
    /// again in FP32 (the bound could not certify them, or the vectors are
    /// on the host). Safe to call while other threads search.
    BoundedSearchStats getBoundedStats() const;

    /// Zeroes the counters of getBoundedStats().
    void resetBoundedStats();

  protected:
    void addImpl_(idx_t n, const float* x) override;
    bool addImplAcceptsHost_() const override { return true; }
    /// FlatStorage::search calls the deferred check before it writes results.
    bool defersFiniteCheck_() const override { return true; }
    /// params->sel restricts the search to the selected vectors (by position).
    bool honoursSelector_() const override { return true; }
    void searchImpl_(idx_t n, const float* x, int64_t k, float* distances, idx_t* labels,
                     const faiss::SearchParameters* params) const override;
    /// Exact range search (impl/flat/RangeSearch.h), FP32 products, params->sel honoured.
    bool supportsRangeSearch_() const override { return true; }
    void checkRangeSearchParams_(const faiss::SearchParameters* params) const override;
    void rangeSearchImpl_(idx_t n, const float* x, float radius,
                          const faiss::SearchParameters* params, RangeHits* hits,
                          idx_t row0) const override;

  private:
    void init_();
    /// The config's precision, overridden by the params' (both checked).
    DistancePrecision requestedDistancePrecision_(const faiss::SearchParameters* params) const;

    FlatMetric flatMetric_;
    GpuIndexQuickSelectFlatConfig qsConfig_;
    std::unique_ptr<FlatStorage> storage_;
    // getBoundedStats(): searches of several threads add to them.
    mutable std::atomic<int64_t> boundedCertified_{0};
    mutable std::atomic<int64_t> boundedFallback_{0};
    mutable std::atomic<int64_t> boundedResidual_{0};
};

}  // namespace gpu
}  // namespace faiss_ext
