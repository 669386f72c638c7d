// Per-vector centring, the first half of the Pearson preparation.
#include "faiss_ext/RowCenteringTransform.h"

#include <faiss/impl/FaissAssert.h>

#include <cstring>

namespace faiss_ext {

RowCenteringTransform::RowCenteringTransform(int d) : faiss::VectorTransform(d, d) {
    FAISS_THROW_IF_NOT_FMT(d >= 0, "RowCenteringTransform: d = %d must be >= 0", d);
    is_trained = true;
}

void RowCenteringTransform::apply_noalloc(faiss::Index::idx_t n, const float* x, float* xt) const {
    FAISS_THROW_IF_NOT_FMT(d_in > 0, "RowCenteringTransform: d = %d must be > 0", d_in);
    const int d = d_in;
#pragma omp parallel for if (n > 64)
    for (faiss::Index::idx_t i = 0; i < n; ++i) {
        const float* src = x + i * d;
        float* dst = xt + i * d;
        double sum = 0;
        for (int j = 0; j < d; ++j) sum += src[j];
        const float mean = float(sum / d);
        for (int j = 0; j < d; ++j) dst[j] = src[j] - mean;
    }
}

void RowCenteringTransform::reverse_transform(faiss::Index::idx_t n, const float* xt,
                                              float* x) const {
    if (n > 0) std::memcpy(x, xt, sizeof(float) * size_t(n) * size_t(d_in));
}

void RowCenteringTransform::check_identical(const faiss::VectorTransform& other) const {
    FAISS_THROW_IF_NOT_MSG(dynamic_cast<const RowCenteringTransform*>(&other),
                           "check_identical: the other transform is not a RowCenteringTransform");
    FAISS_THROW_IF_NOT_FMT(
        other.d_in == d_in && other.d_out == d_out && other.is_trained == is_trained,
        "check_identical: RowCenteringTransform d_in %d d_out %d vs %d %d", d_in, d_out, other.d_in,
        other.d_out);
}

}  // namespace faiss_ext
