#include "faiss_ext/gpu/GpuIndex.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/HostQueryPipeline.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace {
/// Host inputs larger than this are paged through the GPU in chunks.
constexpr size_t kDefaultPagingBytes = size_t(256) << 20;

/// Checks that a device pointer lives on `device`; returns whether p is on the device.
bool onDevice(const void* p, int device, const char* what) {
    int ptrDevice = -1;
    bool dev = isDevicePointer(p, &ptrDevice);
    FAISS_THROW_IF_NOT_FMT(!dev || ptrDevice == device,
                           "%s is a pointer to GPU %d, but the index lives on GPU %d", what,
                           ptrDevice, device);
    return dev;
}
}  // namespace

GpuIndex::GpuIndex(GpuResourcesProvider* provider, int dims, faiss::MetricType metric,
                   GpuIndexConfig config)
        : faiss::Index(dims, metric), config_(config), minPagingSize_(kDefaultPagingBytes) {
    FAISS_THROW_IF_NOT_MSG(provider, "GpuIndex: null GpuResourcesProvider");
    FAISS_THROW_IF_NOT_FMT(dims > 0, "GpuIndex: dimension must be > 0 (got %d)", dims);
    FAISS_THROW_IF_NOT_FMT(metric == faiss::METRIC_L2 || metric == faiss::METRIC_INNER_PRODUCT,
                           "GpuIndex: metric %d not supported (L2 or inner product)", int(metric));
    checkDevice(config_.device);
    resources_ = provider->getResources();
    FAISS_THROW_IF_NOT_MSG(resources_, "GpuIndex: the provider returned no resources");
    resources_->initializeForDevice(config_.device);
}

GpuIndex::~GpuIndex() = default;

void GpuIndex::checkUsable_() const {
    FAISS_THROW_IF_NOT_MSG(resources_, "GpuIndex: no resources");
}

bool GpuIndex::onThisDevice_(const void* p, const char* what) const {
    return onDevice(p, config_.device, what);
}

void GpuIndex::fillEmptyResults_(idx_t n, int64_t k, float* distances, idx_t* labels) const {
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    std::vector<float> d0(size_t(n) * k, metric_type == faiss::METRIC_INNER_PRODUCT
                                                 ? -std::numeric_limits<float>::infinity()
                                                 : std::numeric_limits<float>::infinity());
    std::vector<idx_t> l0(size_t(n) * k, -1);
    // on our stream, not the legacy one: a pageable host-to-device
    // cudaMemcpy may return before the data lands, and the caller's copies
    // run on our (non-blocking) stream
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances, d0.data(), sizeof(float) * d0.size(),
                                         cudaMemcpyDefault, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels, l0.data(), sizeof(idx_t) * l0.size(),
                                         cudaMemcpyDefault, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void GpuIndex::checkFinite_(idx_t n, const float* x, const char* what) const {
    checkFiniteAt_(n, x, onDevice(x, config_.device, what), what);
}

void GpuIndex::checkFiniteAt_(idx_t n, const float* x, bool xOnDevice, const char* what) const {
    int64_t bad;
    if (xOnDevice) {
        DeviceScope scope(config_.device);
        deferredCheck().start(x, n, d, resources_->getDefaultStream(config_.device));
        bad = deferredCheck().wait();
    } else {
        bad = firstNonFiniteRow(n, d, x);
    }
    FAISS_THROW_IF_NOT_FMT(bad < 0,
                           "%s %lld has a NaN or infinite component; nothing was changed "
                           "(faiss_ext GPU indexes take finite vectors only)",
                           what, (long long)bad);
}

void GpuIndex::checkDeviceQueries_(idx_t n, const float* x) const {
    if (!defersFiniteCheck_()) {
        checkFiniteAt_(n, x, true, "search: query");
        return;
    }
    DeviceScope scope(config_.device);
    deferredCheck().start(x, n, d, resources_->getDefaultStream(config_.device));
    deferredRows_ = n;
}

DeferredFiniteCheck& GpuIndex::deferredCheck() const {
    if (!deferredCheck_) deferredCheck_.reset(new DeferredFiniteCheck());
    return *deferredCheck_;
}

void GpuIndex::finishDeferredFiniteCheck_() const {
    if (deferredRows_ == 0) return;
    deferredRows_ = 0;
    const int64_t bad = deferredCheck_->wait();
    FAISS_THROW_IF_NOT_FMT(bad < 0,
                           "search: query %lld has a NaN or infinite component; nothing was "
                           "changed (faiss_ext GPU indexes take finite vectors only)",
                           (long long)bad);
}

void GpuIndex::add(idx_t n, const float* x) {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(n >= 0, "add: n must be >= 0 (got %lld)", (long long)n);
    if (n == 0) return;
    FAISS_THROW_IF_NOT_MSG(x, "add: x is a null pointer");
    FAISS_THROW_IF_NOT_MSG(is_trained, "add: index is not trained");
    checkUsable_();
    checkVectorCount("add", n, d);
    checkAddCount_(n);
    checkFinite_(n, x, "add: vector");
    DeviceScope scope(config_.device);
    if (onDevice(x, config_.device, "add: x") || addImplAcceptsHost_()) {
        addImpl_(n, x);
        return;
    }
    // Page host vectors through a device buffer.
    const size_t rowBytes = sizeof(float) * size_t(d);
    const idx_t chunk = std::max<idx_t>(1, idx_t(minPagingSize_ / rowBytes));
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    TempBuffer<float> buf(resources_.get(), config_.device, size_t(std::min(n, chunk)) * d, stream);
    for (idx_t i = 0; i < n; i += chunk) {
        idx_t m = std::min(chunk, n - i);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(buf.data(), x + size_t(i) * d, rowBytes * m,
                                             cudaMemcpyHostToDevice, stream));
        addImpl_(m, buf.data());
    }
}

void GpuIndex::add_with_ids(idx_t, const float*, const idx_t*) {
    FAISS_THROW_MSG("add_with_ids is not supported by this GPU index: wrap it in "
                    "faiss::IndexIDMap for custom ids");
}

void GpuIndex::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                      const faiss::SearchParameters* params) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(n >= 0, "search: n must be >= 0 (got %lld)", (long long)n);
    FAISS_THROW_IF_NOT_FMT(k > 0, "search: k must be > 0 (got %lld)", (long long)k);
    FAISS_THROW_IF_NOT_MSG(!params || !params->sel || honoursSelector_(),
                           "search: this GPU index cannot apply an IDSelector "
                           "(SearchParameters::sel); it is refused rather than ignored "
                           "(docs/filters.md)");
    if (n == 0) return;
    FAISS_THROW_IF_NOT_MSG(x, "search: x is a null pointer");
    FAISS_THROW_IF_NOT_MSG(distances, "search: distances is a null pointer");
    FAISS_THROW_IF_NOT_MSG(labels, "search: labels is a null pointer");
    FAISS_THROW_IF_NOT_MSG(is_trained, "search: index is not trained");
    checkUsable_();
    checkVectorCount("search", n, d);
    FAISS_THROW_IF_NOT_FMT(uint64_t(n) <= uint64_t(SIZE_MAX / 16) / uint64_t(k),
                           "search: n x k = %lld x %lld results overflow the address space",
                           (long long)n, (long long)k);
    const bool deviceInput = onDevice(x, config_.device, "search: x");
    // host queries are checked as they are staged (GpuIndexHostSearch.cpp)
    if (deviceInput) checkDeviceQueries_(n, x);
    // A deferred check left pending by a search that threw is dropped.
    struct DropPending {
        idx_t& rows;
        ~DropPending() { rows = 0; }
    } dropPending{deferredRows_};
    DeviceScope scope(config_.device);
    if (deviceInput) {
        searchDeviceInput_(n, x, k, distances, labels, params);
        finishDeferredFiniteCheck_();  // (searchImpl_ has done it already)
    } else {
        searchPagedHostInput_(n, x, k, distances, labels, params);
    }
}

void GpuIndex::searchDeviceInput_(idx_t n, const float* x, idx_t k, float* distances,
                                  idx_t* labels, const faiss::SearchParameters* params) const {
    bool dOnDev = onDevice(distances, config_.device, "search: distances");
    bool lOnDev = onDevice(labels, config_.device, "search: labels");
    if (dOnDev && lOnDev) {
        searchImpl_(n, x, k, distances, labels, params);
        return;
    }
    // Device queries, host results: chunk the results through device buffers.
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    const size_t outRowBytes = (sizeof(float) + sizeof(idx_t)) * size_t(k);
    const idx_t chunk = std::max<idx_t>(1, idx_t(minPagingSize_ / outRowBytes));
    const idx_t m0 = std::min(n, chunk);
    TempBuffer<float> dBuf(resources_.get(), config_.device, size_t(m0) * k, stream);
    TempBuffer<idx_t> lBuf(resources_.get(), config_.device, size_t(m0) * k, stream);
    for (idx_t i = 0; i < n; i += chunk) {
        idx_t m = std::min(chunk, n - i);
        searchImpl_(m, x + size_t(i) * d, k, dBuf.data(), lBuf.data(), params);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances + size_t(i) * k, dBuf.data(),
                                             sizeof(float) * m * k, cudaMemcpyDefault, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels + size_t(i) * k, lBuf.data(),
                                             sizeof(idx_t) * m * k, cudaMemcpyDefault, stream));
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace gpu
}  // namespace faiss_ext
