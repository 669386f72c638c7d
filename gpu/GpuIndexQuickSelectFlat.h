// GpuIndexQuickSelectFlat: exact brute-force k-NN on the GPU.
//
// Distances by cuBLAS SGEMM plus norms, and k-selection by the quick
// multi-select of Komarov, Dashti & D'Souza (papers/komarov-quick-multi-select.txt,
// "GPU-based quick multi-select"): partitions with __ballot_sync / __popc,
// one read per pass, one warp per query when queries are many and one block
// per query when they are few, and a stack of partition references instead
// of copies. Any k from 1 to ntotal; results equal faiss::IndexFlat's (ties
// aside), sorted closest first.
//
// Usage:
//   faiss_ext::gpu::StandardGpuResources res;
//   faiss_ext::gpu::GpuIndexQuickSelectFlat index(&res, 128, faiss_ext::FlatMetric::L2);
//   index.add(nb, xb);
//   index.search(nq, xq, k, D, I);
#pragma once

#include "faiss_ext/Metric.h"
#include "gpu/GpuIndex.h"

#include <faiss/IndexFlat.h>

#include <memory>

namespace faiss_ext {
namespace gpu {

/// The k-selection algorithm of GpuIndexQuickSelectFlat.
enum class SelectAlgo : int {
    Auto = 0,              ///< chosen by (k, nb, nq, d)
    QuickMultiSelect = 1,  ///< Komarov et al.'s quick multi-select
};

/// Options of GpuIndexQuickSelectFlat.
struct GpuIndexQuickSelectFlatConfig : GpuIndexConfig {
    /// Default k-selection algorithm (per search: SearchParametersQuickSelectFlat).
    SelectAlgo selectAlgo = SelectAlgo::Auto;
};

/// Per-search knobs of GpuIndexQuickSelectFlat.
struct SearchParametersQuickSelectFlat : faiss::SearchParameters {
    /// Overrides the index's selectAlgo for this search.
    SelectAlgo selectAlgo = SelectAlgo::Auto;
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

    /// Copies stored vector `key` to recons (prepared vectors for cosine /
    /// Pearson).
    void reconstruct(idx_t key, float* recons) const override;

    /// Copies stored vectors i0 .. i0 + ni - 1 to recons.
    void reconstruct_n(idx_t i0, idx_t ni, float* recons) const override;

    /// Reserves device memory for `n` vectors in total.
    void reserveMemory(idx_t n);

    /// Device pointer to the stored (prepared) vectors, ntotal x d, row major.
    const float* getVectorsDevice() const;

protected:
    void addImpl_(idx_t n, const float* x) override;
    bool addImplAcceptsHost_() const override { return true; }
    void searchImpl_(idx_t n, const float* x, int64_t k, float* distances, idx_t* labels,
                     const faiss::SearchParameters* params) const override;

private:
    void init_();

    FlatMetric flatMetric_;
    GpuIndexQuickSelectFlatConfig qsConfig_;
    std::unique_ptr<FlatStorage> storage_;
};

}  // namespace gpu
}  // namespace faiss_ext
