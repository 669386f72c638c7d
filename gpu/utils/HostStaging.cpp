#include "faiss_ext/gpu/utils/HostStaging.h"

#include <faiss/impl/FaissAssert.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

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

/// Threads for a copy of `floats` values.
int copyThreads(int64_t floats) {
    return int(std::min<int64_t>(std::min(kMaxCopyThreads, omp_get_max_threads()),
                                 std::max<int64_t>(1, floats / kParallelCopyFloats)));
}
}  // namespace

int64_t copyRowsCheckingFinite(const float* src, float* dst, int64_t n, int d) {
    return copyRowsCheckingFiniteInPieces(src, dst, n, d, std::max<int64_t>(n, 1),
                                          [](int64_t, int64_t) {});
}

int64_t copyRowsCheckingFiniteInPieces(
        const float* src, float* dst, int64_t n, int d, int64_t pieceRows,
        const std::function<void(int64_t row0, int64_t rows)>& onPiece) {
    FAISS_THROW_IF_NOT_FMT(n >= 0 && d >= 1 && pieceRows >= 1,
                           "copyRowsCheckingFinite: n = %lld, d = %d, pieceRows = %lld",
                           (long long)n, d, (long long)pieceRows);
    const int threads = copyThreads(n * d);
    int64_t first = n;
#pragma omp parallel num_threads(threads) reduction(min : first)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const int64_t lo = n * t / T, hi = n * (t + 1) / T;
        for (int64_t p0 = lo; p0 < hi && first == std::numeric_limits<int64_t>::max(); p0 += pieceRows) {
            const int64_t p1 = std::min(hi, p0 + pieceRows);
            std::memcpy(dst + size_t(p0) * d, src + size_t(p0) * d,
                        sizeof(float) * size_t(p1 - p0) * d);
            for (int64_t i = p0; i < p1; ++i)
                if (rowHasNonFinite(dst + size_t(i) * d, d)) {
                    first = i;
                    break;
                }
            if (first == std::numeric_limits<int64_t>::max()) onPiece(p0, p1 - p0);
        }
    }
    return first < n ? first : -1;
}

void copyBytesInParallel(void* dst, const void* src, size_t bytes) {
    const int threads = copyThreads(int64_t(bytes / sizeof(float)));
    if (threads == 1) {
        std::memcpy(dst, src, bytes);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const size_t lo = bytes * t / T, hi = bytes * (t + 1) / T;
        std::memcpy(static_cast<char*>(dst) + lo, static_cast<const char*>(src) + lo, hi - lo);
    }
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

namespace {
size_t align256(size_t b) {
    return (b + 255) & ~size_t(255);
}
}  // namespace

StagingSlotLayout stagingSlotLayout(int64_t rows, int64_t d, int64_t k) {
    FAISS_THROW_IF_NOT_FMT(rows >= 0 && d >= 1 && k >= 1,
                           "stagingSlotLayout: rows = %lld, d = %lld, k = %lld", (long long)rows,
                           (long long)d, (long long)k);
    StagingSlotLayout l;
    l.distances = align256(sizeof(float) * size_t(rows) * size_t(d));
    l.labels = l.distances + align256(sizeof(float) * size_t(rows) * size_t(k));
    l.bytes = l.labels + align256(sizeof(int64_t) * size_t(rows) * size_t(k));
    return l;
}

size_t stagingSlotBytes(size_t pinnedBytes, int slots) {
    FAISS_THROW_IF_NOT_FMT(slots >= 1, "stagingSlotBytes: slots = %d", slots);
    return (pinnedBytes / size_t(slots)) & ~size_t(255);
}

int64_t stagingSlotRows(size_t pinnedBytes, int slots, int64_t d, int64_t k) {
    const size_t slot = stagingSlotBytes(pinnedBytes, slots);
    const size_t rowBytes = sizeof(float) * size_t(d + k) + sizeof(int64_t) * size_t(k);
    // at most 255 bytes of padding after each of the three parts
    int64_t rows = slot > 3 * 255 ? int64_t((slot - 3 * 255) / rowBytes) : 0;
    while (rows > 0 && stagingSlotLayout(rows, d, k).bytes > slot) --rows;
    while (stagingSlotLayout(rows + 1, d, k).bytes <= slot) ++rows;  // the padding left room
    return rows;
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
