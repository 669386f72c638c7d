// GpuIndex::searchPagedHostInput_: the search of queries in host memory (a
// numpy array, a std::vector). The queries go through pinned staging memory
// in chunks, and the chunks are pipelined: while the GPU searches chunk i, a
// staging thread copies chunk i + 1 into pinned memory (checking it for NaN
// and infinity in the same pass) and queues its upload on a copy stream of
// its own, and the results of chunk i - 1 are copied out. The first chunk
// is small, so that the GPU starts early; later ones double. Only the
// first chunk's staging and the last chunk's results are not hidden behind
// a search (issue 38: host queries at >= 0.9x the q/s of device queries).
#include "faiss_ext/gpu/GpuIndex.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/HostStaging.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace {
/// The first chunk has at least this many rows (fewer leave SMs idle)...
constexpr int64_t kFirstChunkMinRows = 1024;
/// ... or as many as fill this many bytes of queries.
constexpr size_t kFirstChunkBytes = size_t(1) << 20;
/// Chunks in flight: one staged, one searched, one whose results are copied
/// out; so the staging thread runs ahead even of a search that blocks.
constexpr int kSlots = 3;

using idx_t = GpuIndex::idx_t;

/// The buffers of one chunk in flight: pinned host memory and device memory
/// for its queries and results, and the events that order them.
struct Slot {
    float* pinX = nullptr;
    float* pinD = nullptr;
    idx_t* pinL = nullptr;
    float* devX = nullptr;
    float* devD = nullptr;
    idx_t* devL = nullptr;
    cudaEvent_t uploaded = nullptr;
    cudaEvent_t downloaded = nullptr;
};

/// Where a search's queries and results are, and how one chunk is searched.
struct HostSearchJob {
    idx_t d = 0, k = 0;
    const float* x = nullptr;  // host queries
    float* distances = nullptr;
    idx_t* labels = nullptr;
    bool distancesOnDevice = false, labelsOnDevice = false;
    std::vector<int64_t> chunks;
    /// Searches m device queries into outD / outL (device) on `compute`.
    std::function<void(idx_t m, const float* devX, float* outD, idx_t* outL)> searchChunk;
};

/// The pipelined search of one call (see the file comment). The caller
/// holds the pinned buffer's mutex for the pipeline's life.
class HostQueryPipeline {
public:
    HostQueryPipeline(const HostSearchJob& job, int device, GpuResources* res,
                      cudaStream_t compute, void* pinned, size_t pinnedBytes);
    ~HostQueryPipeline();
    HostQueryPipeline(const HostQueryPipeline&) = delete;
    HostQueryPipeline& operator=(const HostQueryPipeline&) = delete;

    /// Runs every chunk; throws for a query holding a NaN or an infinity
    /// (results of earlier chunks may have been written) or a CUDA error.
    void run();

private:
    void stageAll_();
    void stage_(size_t j, cudaStream_t stream);
    void searchChunk_(size_t i);
    void finishChunk_(size_t i);
    void throwBadRow_(int64_t row) const;
    void stopStager_();

    const HostSearchJob& job_;
    const int device_;
    cudaStream_t compute_;
    cudaStream_t copy_ = nullptr;
    std::vector<int64_t> row0_;
    Slot slots_[kSlots];
    std::vector<std::unique_ptr<TempBuffer<float>>> floatBufs_;
    std::vector<std::unique_ptr<TempBuffer<idx_t>>> labelBufs_;

    std::thread stager_;
    std::mutex m_;
    std::condition_variable cv_;
    size_t staged_ = 0, finished_ = 0;
    int64_t badRow_ = -1;
    bool abort_ = false;
    std::exception_ptr stagerError_;
};

HostQueryPipeline::HostQueryPipeline(const HostSearchJob& job, int device, GpuResources* res,
                                     cudaStream_t compute, void* pinned, size_t pinnedBytes)
        : job_(job), device_(device), compute_(compute) {
    int64_t maxRows = 0, r0 = 0;
    for (int64_t m : job.chunks) {
        row0_.push_back(r0);
        r0 += m;
        maxRows = std::max(maxRows, m);
    }
    const int used = int(std::min<size_t>(kSlots, job.chunks.size()));
    char* p = static_cast<char*>(pinned);
    const size_t slotBytes = pinnedBytes / kSlots;
    for (int s = 0; s < used; ++s) {
        Slot& slot = slots_[s];
        slot.pinX = reinterpret_cast<float*>(p + s * slotBytes);
        slot.pinD = slot.pinX + size_t(maxRows) * job.d;
        slot.pinL = reinterpret_cast<idx_t*>(slot.pinD + size_t(maxRows) * job.k);
        floatBufs_.emplace_back(new TempBuffer<float>(res, device, size_t(maxRows) * job.d, compute));
        slot.devX = floatBufs_.back()->data();
        if (!job.distancesOnDevice) {
            floatBufs_.emplace_back(
                    new TempBuffer<float>(res, device, size_t(maxRows) * job.k, compute));
            slot.devD = floatBufs_.back()->data();
        }
        if (!job.labelsOnDevice) {
            labelBufs_.emplace_back(
                    new TempBuffer<idx_t>(res, device, size_t(maxRows) * job.k, compute));
            slot.devL = labelBufs_.back()->data();
        }
        FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&slot.uploaded, cudaEventDisableTiming));
        FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&slot.downloaded, cudaEventDisableTiming));
    }
}

HostQueryPipeline::~HostQueryPipeline() {
    stopStager_();
    // nothing may still write the buffers when they go back to the pool
    if (copy_) cudaStreamSynchronize(copy_);
    cudaStreamSynchronize(compute_);
    for (Slot& s : slots_) {
        if (s.uploaded) cudaEventDestroy(s.uploaded);
        if (s.downloaded) cudaEventDestroy(s.downloaded);
    }
    if (copy_) cudaStreamDestroy(copy_);
}

void HostQueryPipeline::stopStager_() {
    if (!stager_.joinable()) return;
    {
        std::lock_guard<std::mutex> l(m_);
        abort_ = true;
    }
    cv_.notify_all();
    stager_.join();
}

void HostQueryPipeline::stage_(size_t j, cudaStream_t stream) {
    Slot& s = slots_[j % kSlots];
    const int64_t m = job_.chunks[j];
    const int64_t bad = copyRowsCheckingFinite(job_.x + size_t(row0_[j]) * job_.d, s.pinX, m,
                                               int(job_.d));
    if (bad >= 0) {
        std::lock_guard<std::mutex> l(m_);
        badRow_ = row0_[j] + bad;
        return;
    }
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.devX, s.pinX, sizeof(float) * size_t(m) * job_.d,
                                         cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(s.uploaded, stream));
    std::lock_guard<std::mutex> l(m_);
    staged_ = j + 1;
}

void HostQueryPipeline::stageAll_() {
    try {
        DeviceScope scope(device_);
        for (size_t j = 0; j < job_.chunks.size(); ++j) {
            {
                // the slot's previous chunk (j - kSlots) must be finished
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [&] { return abort_ || finished_ + kSlots > j; });
                if (abort_) return;
            }
            stage_(j, copy_);
            cv_.notify_all();
            std::lock_guard<std::mutex> l(m_);
            if (badRow_ >= 0) return;
        }
    } catch (...) {
        std::lock_guard<std::mutex> l(m_);
        stagerError_ = std::current_exception();
    }
    cv_.notify_all();
}

void HostQueryPipeline::searchChunk_(size_t i) {
    Slot& s = slots_[i % kSlots];
    const int64_t m = job_.chunks[i];
    const size_t out = size_t(row0_[i]) * job_.k;
    float* outD = job_.distancesOnDevice ? job_.distances + out : s.devD;
    idx_t* outL = job_.labelsOnDevice ? job_.labels + out : s.devL;
    FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(compute_, s.uploaded, 0));
    job_.searchChunk(m, s.devX, outD, outL);
    if (!job_.distancesOnDevice)
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.pinD, outD, sizeof(float) * m * job_.k,
                                             cudaMemcpyDeviceToHost, compute_));
    if (!job_.labelsOnDevice)
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.pinL, outL, sizeof(idx_t) * m * job_.k,
                                             cudaMemcpyDeviceToHost, compute_));
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(s.downloaded, compute_));
}

void HostQueryPipeline::finishChunk_(size_t i) {
    Slot& s = slots_[i % kSlots];
    const size_t count = size_t(job_.chunks[i]) * job_.k;
    const size_t out = size_t(row0_[i]) * job_.k;
    FAISS_EXT_CUDA_CHECK(cudaEventSynchronize(s.downloaded));
    if (!job_.distancesOnDevice)
        std::memcpy(job_.distances + out, s.pinD, sizeof(float) * count);
    if (!job_.labelsOnDevice) std::memcpy(job_.labels + out, s.pinL, sizeof(idx_t) * count);
    {
        std::lock_guard<std::mutex> l(m_);
        finished_ = i + 1;
    }
    cv_.notify_all();
}

void HostQueryPipeline::throwBadRow_(int64_t row) const {
    FAISS_THROW_FMT("search: query %lld has a NaN or infinite component; nothing was changed "
                    "(faiss_ext GPU indexes take finite vectors only)",
                    (long long)row);
}

void HostQueryPipeline::run() {
    const size_t C = job_.chunks.size();
    if (C == 1) {  // one chunk: no thread, no second stream (latency of small batches)
        stage_(0, compute_);
        if (badRow_ >= 0) throwBadRow_(badRow_);
        searchChunk_(0);
        finishChunk_(0);
        return;
    }
    // the copy stream may use the buffers once their allocation (ordered on
    // the compute stream) has happened
    FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(slots_[0].downloaded, compute_));
    FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(copy_, slots_[0].downloaded, 0));
    stager_ = std::thread([this] { stageAll_(); });
    for (size_t i = 0; i < C; ++i) {
        {
            std::unique_lock<std::mutex> l(m_);
            cv_.wait(l, [&] { return staged_ > i || badRow_ >= 0 || stagerError_; });
            if (staged_ <= i) {
                l.unlock();
                stopStager_();
                if (stagerError_) std::rethrow_exception(stagerError_);
                throwBadRow_(badRow_);
            }
        }
        searchChunk_(i);
        if (i > 0) finishChunk_(i - 1);
    }
    finishChunk_(C - 1);
    stopStager_();
}
}  // namespace

void GpuIndex::searchPagedHostInput_(idx_t n, const float* x, idx_t k, float* distances,
                                     idx_t* labels, const faiss::SearchParameters* params) const {
    HostSearchJob job;
    job.d = d;
    job.k = k;
    job.x = x;
    job.distances = distances;
    job.labels = labels;
    job.distancesOnDevice = onThisDevice_(distances, "search: distances");
    job.labelsOnDevice = onThisDevice_(labels, "search: labels");
    const size_t xRowBytes = sizeof(float) * size_t(d);
    const size_t rowBytes = xRowBytes + (sizeof(float) + sizeof(idx_t)) * size_t(k);
    std::unique_lock<std::mutex> pinnedLock(resources_->getPinnedMemoryMutex());
    const std::pair<void*, size_t> pinned = resources_->getPinnedMemory();
    const int64_t slotRows = pinned.first ? int64_t(pinned.second / kSlots / rowBytes) : 0;
    if (slotRows < 1) {  // no pinned memory (or rows too large for it)
        pinnedLock.unlock();
        searchPageableHostInput_(n, x, k, distances, labels, params);
        return;
    }
    const int64_t maxRows =
            std::min(slotRows, std::max<int64_t>(1, int64_t(minPagingSize_ / rowBytes)));
    const int64_t firstRows =
            std::max<int64_t>(kFirstChunkMinRows, int64_t(kFirstChunkBytes / xRowBytes));
    job.chunks = hostQueryChunks(n, firstRows, maxRows);
    job.searchChunk = [&](idx_t m, const float* devX, float* outD, idx_t* outL) {
        searchImpl_(m, devX, k, outD, outL, params);
    };
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    HostQueryPipeline pipe(job, config_.device, resources_.get(), stream, pinned.first,
                           pinned.second);
    pipe.run();
}

void GpuIndex::searchPageableHostInput_(idx_t n, const float* x, idx_t k, float* distances,
                                        idx_t* labels,
                                        const faiss::SearchParameters* params) const {
    checkFinite_(n, x, "search: query");
    const bool dOnDev = onThisDevice_(distances, "search: distances");
    const bool lOnDev = onThisDevice_(labels, "search: labels");
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    const size_t rowBytes = sizeof(float) * size_t(d) + (sizeof(float) + sizeof(idx_t)) * size_t(k);
    const idx_t chunk = std::max<idx_t>(1, idx_t(minPagingSize_ / rowBytes));
    const idx_t m0 = std::min(n, chunk);
    TempBuffer<float> xBuf(resources_.get(), config_.device, size_t(m0) * d, stream);
    TempBuffer<float> dBuf(resources_.get(), config_.device, dOnDev ? 0 : size_t(m0) * k, stream);
    TempBuffer<idx_t> lBuf(resources_.get(), config_.device, lOnDev ? 0 : size_t(m0) * k, stream);
    for (idx_t i = 0; i < n; i += chunk) {
        const idx_t m = std::min(chunk, n - i);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(xBuf.data(), x + size_t(i) * d,
                                             sizeof(float) * size_t(m) * d,
                                             cudaMemcpyHostToDevice, stream));
        float* dOut = dOnDev ? distances + size_t(i) * k : dBuf.data();
        idx_t* lOut = lOnDev ? labels + size_t(i) * k : lBuf.data();
        searchImpl_(m, xBuf.data(), k, dOut, lOut, params);
        if (!dOnDev)
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances + size_t(i) * k, dOut,
                                                 sizeof(float) * m * k, cudaMemcpyDeviceToHost,
                                                 stream));
        if (!lOnDev)
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels + size_t(i) * k, lOut,
                                                 sizeof(idx_t) * m * k, cudaMemcpyDeviceToHost,
                                                 stream));
        // xBuf is reused by the next chunk
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
}

}  // namespace gpu
}  // namespace faiss_ext
