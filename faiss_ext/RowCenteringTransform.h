// Per-vector centring: x -> x - mean(x). With faiss::NormalizationTransform
// after it, this is the Pearson preparation of Komarov et al.
// (quick multi-select, 2014, docs/references.md, "Distance calculation"). Saved by
// faiss_ext::write_index under its own fourcc.
#pragma once

#include <faiss/VectorTransform.h>

namespace faiss_ext {

/// Subtracts from each vector the mean of its own components.
struct RowCenteringTransform : faiss::VectorTransform {
    /// d: input and output dimension.
    explicit RowCenteringTransform(int d = 0);

    /// Centres each of the n vectors of x into xt.
    void apply_noalloc(faiss::Index::idx_t n, const float* x, float* xt) const override;

    /// Not invertible: copies xt to x (as NormalizationTransform does).
    void reverse_transform(faiss::Index::idx_t n, const float* xt, float* x) const override;

    /// Throws unless `other` is a RowCenteringTransform of the same dimensions.
    void check_identical(const faiss::VectorTransform& other) const override;
};

}  // namespace faiss_ext
