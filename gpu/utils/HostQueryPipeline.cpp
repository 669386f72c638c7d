#include "faiss_ext/gpu/utils/HostQueryPipeline.h"

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/HostStaging.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>

namespace faiss_ext {
namespace gpu {

namespace {
constexpr int kSlots = HostQueryPipeline::kSlots;
/// Rows are staged and uploaded in pieces of about this many bytes (the
/// first upload starts once the copiers have done the first piece).
/// Measured on the H200 host (bench_host_staging --upload, f81c677):
/// 10,000 x 128 staged and uploaded in 149 us with pieces of 512 KB or 1 MB,
/// 173 us with 256 KB, 180 us with 2 MB; 5,000 x 784 in 388 us (1 MB) and
/// 422 us (512 KB).
constexpr size_t kStagingPieceBytes = size_t(1) << 20;

/// The buffers of one chunk in flight: pinned host memory and device memory
/// for its queries and results.
struct Slot {
    float* pinX = nullptr;
    float* pinD = nullptr;
    int64_t* pinL = nullptr;
    float* devX = nullptr;
    float* devD = nullptr;
    int64_t* devL = nullptr;
};

[[noreturn]] void throwBadRow(int64_t row) {
    FAISS_THROW_FMT("search: query %lld has a NaN or infinite component; nothing was changed "
                    "(faiss_ext GPU indexes take finite vectors only)",
                    (long long)row);
}
}  // namespace

/// The state of one run(): the slots, and the progress the staging thread
/// and the searching thread report to each other.
class HostQueryRun {
public:
    HostQueryRun(HostQueryPipeline& p, const HostSearchJob& job, GpuResources* res,
                 cudaStream_t compute, void* pinned, size_t pinnedBytes);
    ~HostQueryRun();
    void run();

private:
    void stageAll_();
    void stage_(size_t j, cudaStream_t stream);
    void searchChunk_(size_t i);
    void finishChunk_(size_t i);
    void stopStager_();

    HostQueryPipeline& p_;
    const HostSearchJob& job_;
    cudaStream_t compute_;
    std::vector<int64_t> row0_;
    Slot slots_[kSlots];
    std::vector<std::unique_ptr<TempBuffer<float>>> floatBufs_;
    std::vector<std::unique_ptr<TempBuffer<int64_t>>> labelBufs_;

    bool stagerPosted_ = false;
    std::mutex m_;
    std::condition_variable cv_;
    size_t staged_ = 0, finished_ = 0;
    int64_t badRow_ = -1;
    bool abort_ = false;
    std::exception_ptr stagerError_;
};

HostQueryRun::HostQueryRun(HostQueryPipeline& p, const HostSearchJob& job, GpuResources* res,
                           cudaStream_t compute, void* pinned, size_t pinnedBytes)
        : p_(p), job_(job), compute_(compute) {
    int64_t maxRows = 0, r0 = 0;
    for (int64_t m : job.chunks) {
        row0_.push_back(r0);
        r0 += m;
        maxRows = std::max(maxRows, m);
    }
    const int used = int(std::min<size_t>(kSlots, job.chunks.size()));
    char* base = static_cast<char*>(pinned);
    const size_t slotBytes = stagingSlotBytes(pinnedBytes, kSlots);
    const StagingSlotLayout layout = stagingSlotLayout(maxRows, job.d, job.k);
    FAISS_THROW_IF_NOT_MSG(layout.bytes <= slotBytes,
                           "HostQueryPipeline: a chunk does not fit its pinned slot");
    const size_t xCount = size_t(maxRows) * job.d, outCount = size_t(maxRows) * job.k;
    for (int s = 0; s < used; ++s) {
        Slot& slot = slots_[s];
        char* at = base + s * slotBytes;
        slot.pinX = reinterpret_cast<float*>(at + layout.queries);
        slot.pinD = reinterpret_cast<float*>(at + layout.distances);
        slot.pinL = reinterpret_cast<int64_t*>(at + layout.labels);
        floatBufs_.emplace_back(new TempBuffer<float>(res, p.device_, xCount, compute));
        slot.devX = floatBufs_.back()->data();
        if (job.resultsToPinned) continue;  // results written into pinD / pinL
        if (!job.distancesOnDevice) {
            floatBufs_.emplace_back(new TempBuffer<float>(res, p.device_, outCount, compute));
            slot.devD = floatBufs_.back()->data();
        }
        if (!job.labelsOnDevice) {
            labelBufs_.emplace_back(new TempBuffer<int64_t>(res, p.device_, outCount, compute));
            slot.devL = labelBufs_.back()->data();
        }
    }
}

HostQueryRun::~HostQueryRun() {
    stopStager_();
    // nothing may still use the buffers when they go back to the pool
    cudaStreamSynchronize(p_.copy_);
    cudaStreamSynchronize(compute_);
}

void HostQueryRun::stopStager_() {
    if (!stagerPosted_) return;
    {
        std::lock_guard<std::mutex> l(m_);
        abort_ = true;
    }
    cv_.notify_all();
    p_.stager_->wait();
    stagerPosted_ = false;
}

void HostQueryRun::stage_(size_t j, cudaStream_t stream) {
    const Slot& s = slots_[j % kSlots];
    const int64_t m = job_.chunks[j], d = job_.d;
    // several threads copy their shares piece by piece, each piece's upload
    // queued as soon as it is copied: the copies overlap the DMA
    const int64_t pieceRows = std::max<int64_t>(1, int64_t(kStagingPieceBytes / (4 * d)));
    std::atomic<int> uploadError{int(cudaSuccess)};
    const int64_t bad = copyRowsCheckingFiniteInPieces(
            job_.x + size_t(row0_[j]) * d, s.pinX, m, int(d), pieceRows,
            [&](int64_t r0, int64_t rows) {
                cudaError_t e = cudaMemcpyAsync(s.devX + size_t(r0) * d, s.pinX + size_t(r0) * d,
                                                sizeof(float) * size_t(rows) * d,
                                                cudaMemcpyHostToDevice, stream);
                if (e != cudaSuccess) uploadError = int(e);
            });
    FAISS_EXT_CUDA_CHECK(cudaError_t(uploadError.load()));
    if (bad >= 0) {
        std::lock_guard<std::mutex> l(m_);
        badRow_ = row0_[j] + bad;
        return;
    }
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(p_.uploaded_[j % kSlots], stream));
    std::lock_guard<std::mutex> l(m_);
    staged_ = j + 1;
}

void HostQueryRun::stageAll_() {
    try {
        DeviceScope scope(p_.device_);
        for (size_t j = 0; j < job_.chunks.size(); ++j) {
            {
                // the slot's previous chunk (j - kSlots) must be finished
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [&] { return abort_ || finished_ + kSlots > j; });
                if (abort_) return;
            }
            stage_(j, p_.copy_);
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

void HostQueryRun::searchChunk_(size_t i) {
    const Slot& s = slots_[i % kSlots];
    const int64_t m = job_.chunks[i];
    const size_t out = size_t(row0_[i]) * job_.k;
    // results for the host go to the slot's device buffers and are copied
    // to its pinned ones after the search, or are written there by the
    // search itself (resultsToPinned: the copy's latency leaves the path)
    float* hostD = job_.resultsToPinned ? s.pinD : s.devD;
    int64_t* hostL = job_.resultsToPinned ? s.pinL : s.devL;
    float* outD = job_.distancesOnDevice ? job_.distances + out : hostD;
    int64_t* outL = job_.labelsOnDevice ? job_.labels + out : hostL;
    FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(compute_, p_.uploaded_[i % kSlots], 0));
    job_.searchChunk(m, s.devX, outD, outL);
    if (!job_.distancesOnDevice && !job_.resultsToPinned)
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.pinD, outD, sizeof(float) * m * job_.k,
                                             cudaMemcpyDeviceToHost, compute_));
    if (!job_.labelsOnDevice && !job_.resultsToPinned)
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.pinL, outL, sizeof(int64_t) * m * job_.k,
                                             cudaMemcpyDeviceToHost, compute_));
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(p_.downloaded_[i % kSlots], compute_));
}

void HostQueryRun::finishChunk_(size_t i) {
    const Slot& s = slots_[i % kSlots];
    const size_t count = size_t(job_.chunks[i]) * job_.k;
    const size_t out = size_t(row0_[i]) * job_.k;
    FAISS_EXT_CUDA_CHECK(cudaEventSynchronize(p_.downloaded_[i % kSlots]));
    if (!job_.distancesOnDevice)
        copyBytesInParallel(job_.distances + out, s.pinD, sizeof(float) * count);
    if (!job_.labelsOnDevice)
        copyBytesInParallel(job_.labels + out, s.pinL, sizeof(int64_t) * count);
    {
        std::lock_guard<std::mutex> l(m_);
        finished_ = i + 1;
    }
    cv_.notify_all();
}

void HostQueryRun::run() {
    const size_t C = job_.chunks.size();
    if (C == 1) {  // one chunk: staged here, on the compute stream
        stage_(0, compute_);
        if (badRow_ >= 0) throwBadRow(badRow_);
        searchChunk_(0);
        finishChunk_(0);
        return;
    }
    // the copy stream may write the buffers once their allocation (ordered
    // on the compute stream) has happened
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(p_.downloaded_[0], compute_));
    FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(p_.copy_, p_.downloaded_[0], 0));
    stagerPosted_ = true;
    p_.stager_->post([this] { stageAll_(); });
    for (size_t i = 0; i < C; ++i) {
        {
            std::unique_lock<std::mutex> l(m_);
            cv_.wait(l, [&] { return staged_ > i || badRow_ >= 0 || stagerError_; });
            if (staged_ <= i) {
                l.unlock();
                stopStager_();
                if (stagerError_) std::rethrow_exception(stagerError_);
                throwBadRow(badRow_);
            }
        }
        searchChunk_(i);
        if (i > 0) finishChunk_(i - 1);
    }
    finishChunk_(C - 1);
    stopStager_();
}

HostQueryPipeline::HostQueryPipeline(int device) : device_(device) {
    DeviceScope scope(device);
    FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    for (int s = 0; s < kSlots; ++s) {
        FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_[s], cudaEventDisableTiming));
        FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&downloaded_[s], cudaEventDisableTiming));
    }
    stager_.reset(new StagingThread());
}

HostQueryPipeline::~HostQueryPipeline() {
    stager_.reset();
    DeviceScope scope(device_);
    for (int s = 0; s < kSlots; ++s) {
        if (uploaded_[s]) cudaEventDestroy(uploaded_[s]);
        if (downloaded_[s]) cudaEventDestroy(downloaded_[s]);
    }
    if (copy_) cudaStreamDestroy(copy_);
}

bool HostQueryPipeline::deviceWritesThrough(const void* pinned) {
    if (pinned != checkedPinned_) {
        DeviceScope scope(device_);
        cudaPointerAttributes a{};
        const bool known = cudaPointerGetAttributes(&a, pinned) == cudaSuccess;
        if (!known) (void)cudaGetLastError();  // not a CUDA pointer: no error left behind
        deviceWrites_ = known && a.type == cudaMemoryTypeHost && a.devicePointer == pinned;
        checkedPinned_ = pinned;
    }
    return deviceWrites_;
}

void HostQueryPipeline::run(const HostSearchJob& job, GpuResources* res, cudaStream_t compute,
                            void* pinned, size_t pinnedBytes) {
    FAISS_THROW_IF_NOT_MSG(!job.chunks.empty(), "HostQueryPipeline: no chunks");
    HostQueryRun r(*this, job, res, compute, pinned, pinnedBytes);
    r.run();
}

}  // namespace gpu
}  // namespace faiss_ext
