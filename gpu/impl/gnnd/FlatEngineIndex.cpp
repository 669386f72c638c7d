#include "faiss_ext/gpu/impl/gnnd/FlatEngineIndex.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/SelectOptions.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

/// Host queries are paged through the device in chunks of at most this
/// many bytes (GpuIndex's default paging size).
constexpr size_t kPagingBytes = size_t(256) << 20;

/// The GPU index's checks of a host input: not device memory, all finite.
void checkHostRows(int64_t n, int d, const float* x, const char* pointer, const char* what) {
    FAISS_THROW_IF_NOT_FMT(!isDevicePointer(x), "%s: FlatEngineIndex takes host vectors only",
                           pointer);
    const int64_t bad = firstNonFiniteRow(n, d, x);
    FAISS_THROW_IF_NOT_FMT(bad < 0,
                           "%s %lld has a NaN or infinite component; nothing was changed "
                           "(faiss_ext GPU indexes take finite vectors only)",
                           what, (long long)bad);
}

}  // namespace

FlatEngineIndex::FlatEngineIndex(std::shared_ptr<GpuResources> res, int device, int d)
        : faiss::Index(d, faiss::METRIC_L2), res_(std::move(res)), device_(device) {
    checkDevice(device_);
    FAISS_THROW_IF_NOT_MSG(res_, "FlatEngineIndex: no resources");
    res_->initializeForDevice(device_);
    // on the device or not at all: Auto would fall back to host memory when
    // an allocation fails, and a build that cannot allocate must fail (the
    // centroids are few)
    storage_.reset(new FlatStorage(res_.get(), device_, d, FlatMetric::L2, VectorStorage::Device));
    is_trained = true;
}

FlatEngineIndex::~FlatEngineIndex() = default;

void FlatEngineIndex::add(idx_t n, const float* x) {
    FAISS_THROW_IF_NOT_FMT(n >= 0, "add: n must be >= 0 (got %lld)", (long long)n);
    if (n == 0) return;
    FAISS_THROW_IF_NOT_MSG(x, "add: x is a null pointer");
    checkVectorCount("add", n, d);
    checkHostRows(n, d, x, "add: x", "add: vector");
    DeviceScope scope(device_);
    storage_->append(x, n, /*prepared=*/false);
    ntotal = storage_->size();
}

void FlatEngineIndex::reset() {
    storage_->reset();
    ntotal = 0;
}

void FlatEngineIndex::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                             const faiss::SearchParameters* params) const {
    FAISS_THROW_IF_NOT_FMT(n >= 0, "search: n must be >= 0 (got %lld)", (long long)n);
    FAISS_THROW_IF_NOT_FMT(k > 0, "search: k must be > 0 (got %lld)", (long long)k);
    FAISS_THROW_IF_NOT_MSG(!params, "FlatEngineIndex: search parameters are not supported");
    if (n == 0) return;
    FAISS_THROW_IF_NOT_MSG(x, "search: x is a null pointer");
    FAISS_THROW_IF_NOT_MSG(distances, "search: distances is a null pointer");
    FAISS_THROW_IF_NOT_MSG(labels, "search: labels is a null pointer");
    checkVectorCount("search", n, d);
    FAISS_THROW_IF_NOT_FMT(uint64_t(n) <= uint64_t(SIZE_MAX / 16) / uint64_t(k),
                           "search: n x k = %lld x %lld results overflow the address space",
                           (long long)n, (long long)k);
    checkHostRows(n, d, x, "search: x", "search: query");
    FAISS_THROW_IF_NOT_MSG(!isDevicePointer(distances) && !isDevicePointer(labels),
                           "search: FlatEngineIndex writes host results only");
    DeviceScope scope(device_);
    // GpuIndex::searchPagedHostInput_: chunks of host rows through the
    // resources' pinned staging buffer (when it holds a row) and device buffers
    cudaStream_t stream = res_->getDefaultStream(device_);
    const size_t rowBytes = sizeof(float) * size_t(d) + (sizeof(float) + sizeof(idx_t)) * size_t(k);
    idx_t chunk = std::max<idx_t>(1, idx_t(kPagingBytes / rowBytes));
    std::unique_lock<std::mutex> pinnedLock(res_->getPinnedMemoryMutex());
    std::pair<void*, size_t> pinned = res_->getPinnedMemory();
    if (!pinned.first || pinned.second < rowBytes) pinnedLock.unlock();
    const bool staged = pinned.first && pinned.second >= rowBytes;
    if (staged) chunk = std::min<idx_t>(chunk, idx_t(pinned.second / rowBytes));
    const idx_t m0 = std::min(n, chunk);
    float* pinX = staged ? static_cast<float*>(pinned.first) : nullptr;
    float* pinD = staged ? pinX + size_t(m0) * d : nullptr;
    idx_t* pinL = staged ? reinterpret_cast<idx_t*>(pinD + size_t(m0) * k) : nullptr;
    TempBuffer<float> xBuf(res_.get(), device_, size_t(m0) * d, stream);
    TempBuffer<float> dBuf(res_.get(), device_, size_t(m0) * k, stream);
    TempBuffer<idx_t> lBuf(res_.get(), device_, size_t(m0) * k, stream);
    for (idx_t i = 0; i < n; i += chunk) {
        idx_t m = std::min(chunk, n - i);
        const float* src = x + size_t(i) * d;
        if (staged) {
            std::memcpy(pinX, src, sizeof(float) * size_t(m) * d);
            src = pinX;
        }
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(xBuf.data(), src, sizeof(float) * size_t(m) * d,
                                             cudaMemcpyHostToDevice, stream));
        searchChunk_(m, xBuf.data(), k, dBuf.data(), lBuf.data());
        float* dHost = staged ? pinD : distances + size_t(i) * k;
        idx_t* lHost = staged ? pinL : labels + size_t(i) * k;
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dHost, dBuf.data(), sizeof(float) * m * k,
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(lHost, lBuf.data(), sizeof(idx_t) * m * k,
                                             cudaMemcpyDeviceToHost, stream));
        // The staging buffer is reused by the next chunk.
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (staged) {
            std::memcpy(distances + size_t(i) * k, pinD, sizeof(float) * m * k);
            std::memcpy(labels + size_t(i) * k, pinL, sizeof(idx_t) * m * k);
        }
    }
}

void FlatEngineIndex::searchChunk_(idx_t m, const float* x, idx_t k, float* distances,
                                   idx_t* labels) const {
    // As GpuIndexQuickSelectFlat at its defaults: Auto algorithm and
    // precision, planned in one place (FlatSearchPlan.h).
    FlatSearchOptions o = planFlatSearch(ntotal, storage_->where() == VectorStorage::Device,
                                         FlatMetric::L2, d, m, k, FlatSearchRequest());
    BoundedSearchStats stats;
    if (isBoundedPrecision(o.precision)) o.boundedStats = &stats;
    storage_->search(x, m, k, distances, labels, o);
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
