#include "faiss_ext/gpu/utils/HostStaging.h"

#include <faiss/impl/FaissAssert.h>

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace faiss_ext {
namespace gpu {

namespace {
/// Below this many floats one thread copies (thread start-up costs more).
constexpr int64_t kParallelCopyFloats = int64_t(1) << 18;
/// Threads of a large copy: memory bandwidth, not cores, limits it.
constexpr int kMaxCopyThreads = 8;

/// Whether any of the d floats at r is a NaN or an infinity (all exponent
/// bits set); branch-free so that the compiler vectorises it.
bool rowHasNonFinite(const float* r, int d) {
    uint32_t bad = 0;
    for (int j = 0; j < d; ++j) {
        uint32_t bits;
        std::memcpy(&bits, r + j, sizeof bits);
        bad |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
    }
    return bad != 0;
}
}  // namespace

int64_t copyRowsCheckingFinite(const float* src, float* dst, int64_t n, int d) {
    FAISS_THROW_IF_NOT_FMT(n >= 0 && d >= 1, "copyRowsCheckingFinite: n = %lld, d = %d",
                           (long long)n, d);
    const int threads = int(std::min<int64_t>(
            std::min(kMaxCopyThreads, omp_get_max_threads()),
            std::max<int64_t>(1, n * d / kParallelCopyFloats)));
    int64_t first = n;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(min : first)
    for (int64_t i = 0; i < n; ++i) {
        if (first < n) continue;  // this thread has found one: the rest is unused
        float* out = dst + size_t(i) * d;
        std::memcpy(out, src + size_t(i) * d, sizeof(float) * size_t(d));
        if (rowHasNonFinite(out, d)) first = i;
    }
    return first < n ? first : -1;
}

std::vector<int64_t> hostQueryChunks(int64_t n, int64_t firstRows, int64_t maxRows, int growth) {
    FAISS_THROW_IF_NOT_FMT(n >= 0 && firstRows >= 1 && maxRows >= 1 && growth >= 1,
                           "hostQueryChunks: n = %lld, firstRows = %lld, maxRows = %lld, "
                           "growth = %d",
                           (long long)n, (long long)firstRows, (long long)maxRows, growth);
    firstRows = std::min(firstRows, maxRows);
    std::vector<int64_t> chunks;
    int64_t done = 0, next = firstRows;
    while (done < n) {
        int64_t m = std::min(next, n - done);
        // a short remainder joins this chunk where the chunk can take it,
        // else this chunk leaves firstRows for the last
        const int64_t left = n - done;
        if (left - m > 0 && left - m < firstRows) {
            if (left <= maxRows)
                m = left;
            else if (left - firstRows >= firstRows)
                m = left - firstRows;
        }
        chunks.push_back(m);
        done += m;
        next = std::min(growth * m, maxRows);
    }
    return chunks;
}

StagingThread::StagingThread() : thread_([this] { loop_(); }) {}

StagingThread::~StagingThread() {
    {
        std::lock_guard<std::mutex> l(m_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void StagingThread::post(std::function<void()> task) {
    {
        std::lock_guard<std::mutex> l(m_);
        tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
}

void StagingThread::wait() {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return tasks_.empty() && !busy_; });
}

void StagingThread::loop_() {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
        cv_.wait(l, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, nothing left
        std::function<void()> task = std::move(tasks_.front());
        tasks_.pop_front();
        busy_ = true;
        l.unlock();
        task();  // tasks catch their own exceptions
        l.lock();
        busy_ = false;
        cv_.notify_all();
    }
}

}  // namespace gpu
}  // namespace faiss_ext
