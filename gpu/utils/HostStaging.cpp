#include "faiss_ext/gpu/utils/HostStaging.h"

#include "faiss_ext/gpu/utils/Align.h"

#include <faiss/impl/FaissAssert.h>

#include <omp.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace {
/// A thread for every this many floats (256 KB), up to kMaxCopyThreads:
/// with pieces of 256 KB, 10,000 queries of 128 floats have their first
/// piece staged after 20 us against 42 us with a thread a MB (H200 host,
/// bench/bench_host_staging).
constexpr int64_t kParallelCopyFloats = int64_t(1) << 16;
/// Threads of a large copy: memory bandwidth, not cores, limits it.
constexpr int kMaxCopyThreads = 8;

/// Whether the float's exponent bits are all set (a NaN or an infinity).
inline uint32_t nonFiniteBit(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return uint32_t((bits & 0x7f800000u) == 0x7f800000u);
}

/// Whether any of the d floats at r is a NaN or an infinity (all exponent
/// bits set); branch-free so that the compiler vectorises it.
bool rowHasNonFinite(const float* r, int d) {
    uint32_t bad = 0;
    for (int j = 0; j < d; ++j) bad |= nonFiniteBit(r[j]);
    return bad != 0;
}

/// Copies count floats from src to dst and returns whether any of them is
/// a NaN or an infinity. The stores are non-temporal (they bypass the
/// CPU's caches) because dst is pinned memory the GPU reads by DMA right
/// after: lines left dirty in the caches of the copying cores are read
/// through the coherence path. Measured on the H200 host: 5 MB copied by
/// eight threads with memcpy then uploaded in 200-220 us, after streaming
/// stores in 100 us (the link's rate); the copy itself took as long.
bool streamCopyCheckingFinite(const float* src, float* dst, size_t count) {
    size_t i = 0;
    uint32_t bad = 0;
#if defined(__SSE2__)
    for (; i < count && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) {
        bad |= nonFiniteBit(src[i]);
        dst[i] = src[i];
    }
    const __m128i exponent = _mm_set1_epi32(0x7f800000);
    __m128i anyBad = _mm_setzero_si128();
    for (; i + 8 <= count; i += 8) {
        const __m128 a = _mm_loadu_ps(src + i), b = _mm_loadu_ps(src + i + 4);
        const __m128i ea = _mm_and_si128(_mm_castps_si128(a), exponent);
        const __m128i eb = _mm_and_si128(_mm_castps_si128(b), exponent);
        anyBad = _mm_or_si128(anyBad, _mm_or_si128(_mm_cmpeq_epi32(ea, exponent),
                                                   _mm_cmpeq_epi32(eb, exponent)));
        _mm_stream_ps(dst + i, a);
        _mm_stream_ps(dst + i + 4, b);
    }
    bad |= uint32_t(_mm_movemask_epi8(anyBad) != 0);
#endif
    for (; i < count; ++i) {
        bad |= nonFiniteBit(src[i]);
        dst[i] = src[i];
    }
#if defined(__SSE2__)
    _mm_sfence();  // the streamed stores are visible before the piece is handed on
#endif
    return bad != 0;
}

/// Threads for a copy of `floats` values.
int copyThreads(int64_t floats) {
    return int(std::min<int64_t>(std::min(kMaxCopyThreads, omp_get_max_threads()),
                                 std::max<int64_t>(1, floats / kParallelCopyFloats)));
}

/// The size of every OpenMP team here, whatever the work: libgomp starts
/// threads anew when a region asks for more than the one before, and a
/// search alternates the staging of its queries with the copy of its
/// results. Measured on the H200 host (bench/bench_host_staging
/// --results-kb 1200): teams of 9 and 4 in turn delayed each staging's
/// first piece to 440 us, against 20 us with one team size. Threads past
/// the work's share wait at the region's end.
int teamSize() { return std::min(kMaxCopyThreads, omp_get_max_threads()) + 1; }
}  // namespace

int64_t copyRowsCheckingFinite(const float* src, float* dst, int64_t n, int d) {
    return copyRowsCheckingFiniteInPieces(src, dst, n, d, std::max<int64_t>(n, 1),
                                          [](int64_t, int64_t) {});
}

namespace {

/// The rows of a copy cut into pieces of pieceRows, in row order, and each
/// piece into `copiers` contiguous shares, copier c (from 1) copying share
/// c of every piece: the pieces are done one after another, first rows
/// first, so the first upload starts after 1 / copiers of a piece's copy
/// and the later pieces' copies overlap the earlier ones' uploads. (Shares
/// of whole rows ranges, each cut into pieces, finished all their first
/// pieces together: 10,000 x 128 staged and uploaded in 159 us at 1 MB
/// pieces, 149 us in row-order pieces; H200 host.)
struct PieceTable {
    int copiers;
    int64_t n, pieceRows, pieces;
    /// Copiers done with each piece.
    std::unique_ptr<std::atomic<int>[]> done;
    /// The first piece known to hold a bad row (`pieces`: none so far):
    /// copiers stop past it; every piece up to it is copied by all. A copier
    /// lowers it before it counts the piece done, so once all copiers are
    /// done with a piece, the piece is bad exactly when this is <= it.
    std::atomic<int64_t> firstBadPiece;

    PieceTable(int64_t n_, int copiers_, int64_t pieceRows_)
            : copiers(copiers_),
              n(n_),
              pieceRows(pieceRows_),
              pieces((n_ + pieceRows_ - 1) / pieceRows_),
              done(new std::atomic<int>[size_t(pieces)]),
              firstBadPiece(pieces) {
        for (int64_t p = 0; p < pieces; ++p) done[size_t(p)].store(0);
    }
    /// Rows [lo, hi) of copier c's share of piece p.
    void share(int64_t p, int c, int64_t* lo, int64_t* hi) const {
        const int64_t p0 = p * pieceRows, rows = std::min(pieceRows, n - p0);
        *lo = p0 + rows * (c - 1) / copiers;
        *hi = p0 + rows * c / copiers;
    }
    void markBad(int64_t p) {
        int64_t seen = firstBadPiece.load();
        while (p < seen && !firstBadPiece.compare_exchange_weak(seen, p)) {
        }
    }
};

/// The first bad row of copier c's shares (n: none), copied piece by piece
/// up to the first piece known to hold a bad row.
int64_t copyShare(const float* src, float* dst, int d, PieceTable& t, int c) {
    int64_t first = t.n;
    for (int64_t p = 0; p < t.pieces && p <= t.firstBadPiece.load(); ++p) {
        int64_t lo, hi;
        t.share(p, c, &lo, &hi);
        if (streamCopyCheckingFinite(src + size_t(lo) * d, dst + size_t(lo) * d,
                                     size_t(hi - lo) * d)) {
            for (int64_t i = lo; i < hi && first == t.n; ++i)
                if (rowHasNonFinite(src + size_t(i) * d, d)) first = i;
            t.markBad(p);
        }
        t.done[size_t(p)].fetch_add(1, std::memory_order_release);
    }
    return first;
}

/// Calls onPiece for every piece copied, in row order, up to the first
/// piece holding a bad row.
void handCopiedPieces(const PieceTable& t,
                      const std::function<void(int64_t row0, int64_t rows)>& onPiece) {
    for (int64_t p = 0; p < t.pieces; ++p) {
        while (t.done[size_t(p)].load(std::memory_order_acquire) < t.copiers &&
               p <= t.firstBadPiece.load()) {
        }
        if (p >= t.firstBadPiece.load()) return;
        onPiece(p * t.pieceRows, std::min(t.pieceRows, t.n - p * t.pieceRows));
    }
}

}  // namespace

int64_t copyRowsCheckingFiniteInPieces(
        const float* src, float* dst, int64_t n, int d, int64_t pieceRows,
        const std::function<void(int64_t row0, int64_t rows)>& onPiece) {
    FAISS_THROW_IF_NOT_FMT(n >= 0 && d >= 1 && pieceRows >= 1,
                           "copyRowsCheckingFinite: n = %lld, d = %d, pieceRows = %lld",
                           (long long)n, d, (long long)pieceRows);
    if (n == 0) return -1;
    PieceTable table(n, copyThreads(n * d), pieceRows);
    int64_t first = n;
    // thread 0 (the caller) hands the copied pieces to onPiece; threads
    // 1..copiers copy
#pragma omp parallel num_threads(teamSize()) reduction(min : first)
    {
        // OpenMP may give fewer threads than asked: the copiers take the
        // shares in turn, and a lone thread copies them all before handing
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const int c0 = T == 1 ? 1 : t, step = T == 1 ? 1 : T - 1;
        if (c0 > 0) {
            for (int c = c0; c <= table.copiers; c += step)
                first = std::min(first, copyShare(src, dst, d, table, c));
        }
        if (t == 0) handCopiedPieces(table, onPiece);
    }
    return first < n ? first : -1;
}

void copyBytesInParallel(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;  // (empty vectors may hand null pointers: memcpy must not see them)
    const int threads = copyThreads(int64_t(bytes / sizeof(float)));
    if (threads == 1) {
        std::memcpy(dst, src, bytes);
        return;
    }
#pragma omp parallel num_threads(teamSize())
    {
        // `threads` parts, whatever the team's size
        const int T = std::min(threads, omp_get_num_threads());
        for (int part = omp_get_thread_num(); part < threads; part += T) {
            const size_t lo = bytes * part / threads, hi = bytes * (part + 1) / threads;
            std::memcpy(static_cast<char*>(dst) + lo, static_cast<const char*>(src) + lo, hi - lo);
        }
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
