#include "faiss_ext/gpu/impl/graph/TraversalCopy.h"

#include <faiss/impl/FaissAssert.h>

#include <utility>

#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

size_t TraversalCopy::bytesFor(int64_t n, int d) {
    return sizeof(uint16_t) * size_t(n) * d + sizeof(float) * size_t(d);
}

void TraversalCopy::allocate(GpuResources* res, int device, int64_t n, int d, const char* who) {
    FAISS_THROW_IF_NOT_FMT(n >= 1 && d >= 1, "%s: a traversal copy of %lld vectors of d %d", who,
                           (long long)n, d);
    TraversalCopy c;  // filled locals, swapped in whole
    c.res_ = res;
    c.device_ = device;
    c.n_ = n;
    c.d_ = d;
    c.x16_.allocate(res, device, size_t(n) * d, who, "FP16 copy of the vectors");
    c.mean16_.allocate(res, device, size_t(d), who, "mean of the FP16 copy");
    swap(c);
}

void TraversalCopy::fill(cudaStream_t stream, const float* x) {
    FAISS_THROW_IF_NOT_MSG(n_ > 0, "TraversalCopy::fill: nothing allocated");
    corpusMean(res_, device_, stream, x, n_, d_, mean16_.data());  // (the flat engine's)
    scale16_ = halfScaleFor(stream, x, n_, d_, mean16_.data());
    toHalf(stream, x, n_, d_, mean16_.data(), scale16_, x16_.data());
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void TraversalCopy::release() {
    x16_.release();
    mean16_.release();
    n_ = 0;
    d_ = 0;
    scale16_ = 1.f;
}

void TraversalCopy::swap(TraversalCopy& o) noexcept {
    std::swap(res_, o.res_);
    std::swap(device_, o.device_);
    std::swap(n_, o.n_);
    std::swap(d_, o.d_);
    x16_.swap(o.x16_);
    std::swap(scale16_, o.scale16_);
    mean16_.swap(o.mean16_);
}

void TraversalCopy::view(SearchVectors& v) const {
    if (n_ == 0) return;
    v.x16 = x16_.data();
    v.scale16 = scale16_;
    v.mean16 = mean16_.data();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
