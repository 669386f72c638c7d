// The host side of the pipelined search of host queries
// (gpu/utils/HostStaging.h): the staging copy that checks for NaN / Inf in
// the same pass, and the chunk sizes the queries are paged through.
#include "faiss_ext/gpu/utils/HostStaging.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

using faiss_ext::gpu::copyRowsCheckingFinite;
using faiss_ext::gpu::hostQueryChunks;

namespace {

std::vector<float> randomRows(int64_t n, int d, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g;
    std::vector<float> x(size_t(n) * d);
    for (float& v : x) v = g(rng);
    return x;
}

TEST(CpuHostStaging, CopyIsExactAndFindsNoBadRowInFiniteData) {
    // small (one thread) and large (several threads) copies
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(20000)}) {
        const int d = 33;
        std::vector<float> src = randomRows(n, d, 5), dst(src.size(), -1.f);
        EXPECT_EQ(copyRowsCheckingFinite(src.data(), dst.data(), n, d), -1) << n;
        EXPECT_EQ(dst, src) << n;
    }
}

TEST(CpuHostStaging, FindsTheFirstRowHoldingANanOrAnInfinity) {
    const int d = 50;
    const int64_t n = 30000;  // copied on several threads
    const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity()};
    for (float v : bad) {
        for (int64_t row : {int64_t(0), int64_t(1), int64_t(12345), n - 1}) {
            std::vector<float> src = randomRows(n, d, 9), dst(src.size());
            src[size_t(row) * d + d - 1] = v;
            if (row + 7 < n) src[size_t(row + 7) * d] = v;  // a later bad row is not reported
            EXPECT_EQ(copyRowsCheckingFinite(src.data(), dst.data(), n, d), row)
                    << "value " << v << " row " << row;
        }
    }
    // the largest finite values and subnormals are finite
    std::vector<float> edge = {std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min(), -0.0f};
    std::vector<float> out(edge.size());
    EXPECT_EQ(copyRowsCheckingFinite(edge.data(), out.data(), 1, int(edge.size())), -1);
}

TEST(CpuHostStaging, ABadValueIsFoundAtEveryPositionAndAlignment) {
    // the copy streams aligned blocks of 8 floats with a scalar head and
    // tail: a bad value in the head, the blocks or the tail, with source and
    // destination at every offset from 16 bytes
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int d : {1, 3, 8, 13, 37}) {
        const int64_t n = 5;
        for (int shift = 0; shift < 4; ++shift) {
            // room for n rows after a shift of up to 3 floats
            std::vector<float> src0 = randomRows(n, d, unsigned(d)), dst0(src0.size() + 3);
            src0.resize(src0.size() + 3, 1.f);
            float* src = src0.data() + shift;
            float* dst = dst0.data() + (3 - shift);
            std::vector<float> clean(src, src + size_t(n) * d);
            ASSERT_EQ(copyRowsCheckingFinite(src, dst, n, d), -1);
            ASSERT_TRUE(std::equal(clean.begin(), clean.end(), dst)) << d << " " << shift;
            for (int64_t at = 0; at < n * d; ++at) {
                src[at] = nan;
                EXPECT_EQ(copyRowsCheckingFinite(src, dst, n, d), at / d)
                        << "d " << d << " shift " << shift << " at " << at;
                src[at] = clean[size_t(at)];
            }
        }
    }
}

TEST(CpuHostStaging, PiecesCoverEveryRowOnceAndStopAtABadRow) {
    const int d = 24;
    for (int64_t n : {int64_t(1), int64_t(500), int64_t(50000)}) {
        for (int64_t piece : {int64_t(1), int64_t(37), int64_t(100000)}) {
            std::vector<float> src = randomRows(n, d, 3), dst(src.size(), -1.f);
            std::mutex m;
            std::vector<int> seen(size_t(n), 0);
            int64_t nextRow = 0;  // pieces come in row order, each after the one before
            auto onPiece = [&](int64_t r0, int64_t rows) {
                std::lock_guard<std::mutex> l(m);
                EXPECT_LE(rows, piece);
                EXPECT_EQ(r0, nextRow);
                nextRow = r0 + rows;
                for (int64_t i = r0; i < r0 + rows; ++i) ++seen[size_t(i)];
            };
            EXPECT_EQ(faiss_ext::gpu::copyRowsCheckingFiniteInPieces(src.data(), dst.data(), n, d,
                                                                     piece, onPiece),
                      -1);
            EXPECT_EQ(dst, src) << n << " " << piece;
            EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), n) << n << " " << piece;
            if (n < 500) continue;
            // a bad row: found, and no reported piece holds or follows it
            const int64_t bad = n / 3 + 1;
            src[size_t(bad) * d + 5] = std::numeric_limits<float>::quiet_NaN();
            std::fill(seen.begin(), seen.end(), 0);
            nextRow = 0;
            EXPECT_EQ(faiss_ext::gpu::copyRowsCheckingFiniteInPieces(src.data(), dst.data(), n, d,
                                                                     piece, onPiece),
                      bad);
            EXPECT_EQ(std::count(seen.begin() + bad, seen.end(), 1), 0) << n << " " << piece;
            EXPECT_LE(nextRow, bad) << n << " " << piece;
        }
    }
}

TEST(CpuHostStaging, PiecesAreHandedOnTheCallingThreadWhateverTheTeam) {
    // onPiece queues uploads: only the caller's thread may call it (CUDA
    // calls from the copying threads contended in the driver). With one
    // thread, the default, and more threads than cores (one team size for
    // every region, copiers fewer than the team).
    const int saved = omp_get_max_threads();
    const int d = 16;
    const int64_t n = 40000;
    const std::vector<float> src = randomRows(n, d, 5);
    for (int threads : {1, saved, 8}) {
        omp_set_num_threads(threads);
        std::vector<float> dst(src.size(), -1.f);
        const std::thread::id caller = std::this_thread::get_id();
        int64_t rowsHanded = 0, foreign = 0;
        EXPECT_EQ(faiss_ext::gpu::copyRowsCheckingFiniteInPieces(
                          src.data(), dst.data(), n, d, 999,
                          [&](int64_t, int64_t rows) {
                              rowsHanded += rows;  // one thread: no lock needed
                              foreign += std::this_thread::get_id() != caller;
                          }),
                  -1)
                << threads;
        EXPECT_EQ(foreign, 0) << threads;
        EXPECT_EQ(rowsHanded, n) << threads;
        EXPECT_EQ(dst, src) << threads;
        std::vector<unsigned char> bytes(size_t(3) << 20, 7), out(bytes.size(), 0);
        faiss_ext::gpu::copyBytesInParallel(out.data(), bytes.data(), bytes.size());
        EXPECT_EQ(out, bytes) << threads;
    }
    omp_set_num_threads(saved);
}

TEST(CpuHostStaging, ParallelByteCopyIsExact) {
    for (size_t bytes : {size_t(0), size_t(3), size_t(1) << 20, (size_t(9) << 20) + 7}) {
        std::vector<unsigned char> src(bytes), dst(bytes, 0);
        for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
        faiss_ext::gpu::copyBytesInParallel(dst.data(), src.data(), bytes);
        EXPECT_EQ(dst, src) << bytes;
    }
}

TEST(CpuHostStaging, SlotLayoutIsAlignedAndRowsFitTheSlot) {
    using faiss_ext::gpu::stagingSlotBytes;
    using faiss_ext::gpu::stagingSlotLayout;
    using faiss_ext::gpu::stagingSlotRows;
    for (size_t pinned : {size_t(4096), size_t(1) << 20, size_t(256) << 20, size_t(1000003)}) {
        const size_t slot = stagingSlotBytes(pinned, 3);
        EXPECT_EQ(slot % 256, 0u);
        EXPECT_LE(3 * slot, pinned);
        for (int64_t d : {int64_t(3), int64_t(40), int64_t(784)}) {
            for (int64_t k : {int64_t(1), int64_t(17), int64_t(100)}) {
                const int64_t rows = stagingSlotRows(pinned, 3, d, k);
                const auto l = stagingSlotLayout(rows, d, k);
                EXPECT_LE(l.bytes, slot) << pinned << " " << d << " " << k;
                EXPECT_EQ(l.distances % 256, 0u);
                EXPECT_EQ(l.labels % 256, 0u);
                EXPECT_GE(l.distances, size_t(4 * rows * d));
                EXPECT_GE(l.labels - l.distances, size_t(4 * rows * k));
                EXPECT_GE(l.bytes - l.labels, size_t(8 * rows * k));
                // one row more would not fit
                EXPECT_GT(stagingSlotLayout(rows + 1, d, k).bytes, slot) << pinned << " " << d;
            }
        }
    }
    EXPECT_EQ(stagingSlotRows(300, 3, 16, 10), 0);  // not one row: the pageable path
}

TEST(CpuHostStaging, ChunksCoverTheBatchFirstSmallThenDoubling) {
    EXPECT_EQ(hostQueryChunks(10000, 2048, 1 << 20), (std::vector<int64_t>{2048, 4096, 3856}));
    EXPECT_EQ(hostQueryChunks(2500, 2048, 1 << 20), (std::vector<int64_t>{2500}));
    EXPECT_EQ(hostQueryChunks(10000, 1024, 1 << 20, 4), (std::vector<int64_t>{1024, 4096, 4880}));
    EXPECT_EQ(hostQueryChunks(10000, 1024, 1 << 20, 1),
              (std::vector<int64_t>{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1808}));
    EXPECT_EQ(hostQueryChunks(1, 2048, 1 << 20), (std::vector<int64_t>{1}));
    EXPECT_TRUE(hostQueryChunks(0, 2048, 100).empty());
    for (int64_t n : {int64_t(1), int64_t(999), int64_t(1024), int64_t(1025), int64_t(100000),
                      int64_t(1234567), int64_t(115012)}) {
        for (int64_t maxRows : {int64_t(3), int64_t(1000), int64_t(50000), int64_t(1) << 30}) {
            const int64_t first = 1024;
            std::vector<int64_t> c = hostQueryChunks(n, first, maxRows);
            EXPECT_EQ(std::accumulate(c.begin(), c.end(), int64_t(0)), n) << n << " " << maxRows;
            for (size_t i = 0; i < c.size(); ++i) {
                EXPECT_LE(c[i], maxRows);
                if (i > 0) EXPECT_LE(c[i], 2 * c[i - 1] + first);
                // no short tail unless the chunks are capped below it
                if (c.size() > 1 && maxRows >= 2 * first) EXPECT_GE(c[i], first);
            }
            EXPECT_EQ(c[0], c.size() == 1 ? n : std::min(first, maxRows));
        }
    }
}

TEST(CpuHostStaging, BadArgumentsAreRefused) {
    float x = 0;
    EXPECT_ANY_THROW(copyRowsCheckingFinite(&x, &x, -1, 1));
    EXPECT_ANY_THROW(copyRowsCheckingFinite(&x, &x, 1, 0));
    EXPECT_ANY_THROW(faiss_ext::gpu::copyRowsCheckingFiniteInPieces(&x, &x, 1, 1, 0,
                                                                    [](int64_t, int64_t) {}));
    EXPECT_ANY_THROW(hostQueryChunks(-1, 1, 1));
    EXPECT_ANY_THROW(hostQueryChunks(1, 0, 1));
    EXPECT_ANY_THROW(hostQueryChunks(1, 1, 0));
    EXPECT_ANY_THROW(hostQueryChunks(1, 1, 1, 0));
}

}  // namespace
