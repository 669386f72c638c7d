#include "faiss_ext/gpu/impl/graph/TraversalCopy.h"

#include <faiss/impl/FaissAssert.h>

#include <atomic>
#include <utility>

#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {
std::atomic<TraversalCodes> gCodes{TraversalCodes::FP16};
}  // namespace

void setTraversalCodes(TraversalCodes codes) { gCodes.store(codes); }

TraversalCodes traversalCodes() { return gCodes.load(); }

size_t TraversalCopy::bytesFor(int64_t n, int d, TraversalCodes codes) {
    return codes == TraversalCodes::Bytes
                   ? size_t(n) * d + 2 * sizeof(float) * size_t(d)
                   : sizeof(uint16_t) * size_t(n) * d + sizeof(float) * size_t(d);
}

void TraversalCopy::allocate(GpuResources* res, int device, int64_t n, int d, TraversalCodes codes,
                             const char* who) {
    FAISS_THROW_IF_NOT_FMT(n >= 1 && d >= 1, "%s: a traversal copy of %lld vectors of d %d", who,
                           (long long)n, d);
    TraversalCopy c;  // filled locals, swapped in whole
    c.codes_ = codes;
    c.n_ = n;
    c.d_ = d;
    if (codes == TraversalCodes::Bytes) {
        c.x8_.allocate(res, device, size_t(n) * d, who, "8-bit copy of the vectors");
        c.ranges_.allocate(res, device, 2 * size_t(d), who, "ranges of the 8-bit copy");
    } else {
        c.x16_.allocate(res, device, size_t(n) * d, who, "FP16 copy of the vectors");
        c.mean16_.allocate(res, device, size_t(d), who, "mean of the FP16 copy");
    }
    swap(c);
}

void TraversalCopy::fill(cudaStream_t stream, const float* x) {
    FAISS_THROW_IF_NOT_MSG(n_ > 0, "TraversalCopy::fill: nothing allocated");
    if (codes_ == TraversalCodes::Bytes) {
        byteCodeRanges(stream, x, n_, d_, ranges_.data(), ranges_.data() + d_);
        toBytes(stream, x, n_, d_, ranges_.data(), ranges_.data() + d_, x8_.data());
    } else {
        columnMeans(stream, x, n_, d_, mean16_.data());
        scale16_ = halfScaleFor(stream, x, n_, d_, mean16_.data());
        toHalf(stream, x, n_, d_, mean16_.data(), scale16_, x16_.data());
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void TraversalCopy::release() {
    x16_.release();
    mean16_.release();
    x8_.release();
    ranges_.release();
    n_ = 0;
    d_ = 0;
    scale16_ = 1.f;
}

void TraversalCopy::swap(TraversalCopy& o) noexcept {
    std::swap(codes_, o.codes_);
    std::swap(n_, o.n_);
    std::swap(d_, o.d_);
    x16_.swap(o.x16_);
    std::swap(scale16_, o.scale16_);
    mean16_.swap(o.mean16_);
    x8_.swap(o.x8_);
    ranges_.swap(o.ranges_);
}

void TraversalCopy::view(SearchVectors& v) const {
    if (n_ == 0) return;
    if (codes_ == TraversalCodes::Bytes) {
        v.x8 = x8_.data();
        v.lo8 = ranges_.data();
        v.step8 = ranges_.data() + d_;
    } else {
        v.x16 = x16_.data();
        v.scale16 = scale16_;
        v.mean16 = mean16_.data();
    }
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
