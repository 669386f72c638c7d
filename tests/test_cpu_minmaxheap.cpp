// TH-heap's CPU min-max heap (faiss_ext/MinMaxHeap.h) against std::sort /
// std::partial_sort references.
#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/MinMaxHeap.h"

namespace faiss_ext {
namespace {

using test::kSeed;

std::vector<uint64_t> randomKeys(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> v(n);
    for (auto& x : v) x = rng();
    return v;
}

/// (value << 32) | id with value in [0, distinct) and ids 0..n-1 shuffled:
/// many equal high halves, all keys distinct.
std::vector<uint64_t> tiedHighKeys(size_t n, uint32_t distinct, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0u);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<uint64_t> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = (uint64_t(rng() % distinct) << 32) | ids[i];
    }
    return v;
}

/// The k smallest of keys, ascending (std::partial_sort reference).
std::vector<uint64_t> reference(const std::vector<uint64_t>& keys, size_t k) {
    std::vector<uint64_t> v = keys;
    const size_t m = std::min(k, v.size());
    std::partial_sort(v.begin(), v.begin() + m, v.end());
    v.resize(m);
    return v;
}

std::vector<uint64_t> viaPartialSort(const std::vector<uint64_t>& keys, size_t k) {
    std::vector<uint64_t> out(std::min(k, keys.size()) + 1, 0xABABABABABABABABull);
    const size_t m = minMaxHeapPartialSort(keys.data(), keys.size(), k, out.data());
    EXPECT_EQ(m, std::min(k, keys.size()));
    EXPECT_EQ(out.back(), 0xABABABABABABABABull) << "wrote past min(n, k)";
    out.resize(m);
    return out;
}

/// One push() per key, then popAllSorted.
std::vector<uint64_t> viaPushes(const std::vector<uint64_t>& keys, size_t k) {
    MinMaxKHeap heap(k);
    for (uint64_t key : keys) heap.push(key);
    EXPECT_TRUE(heap.checkInvariant());
    EXPECT_EQ(heap.size(), std::min(k, keys.size()));
    std::vector<uint64_t> out(heap.size());
    heap.popAllSorted(out.data());
    EXPECT_EQ(heap.size(), 0u);
    return out;
}

void expectAllWays(const std::vector<uint64_t>& keys, size_t k, const char* what) {
    const auto ref = reference(keys, k);
    EXPECT_EQ(viaPartialSort(keys, k), ref) << what << ": partial sort, n=" << keys.size() << " k=" << k;
    EXPECT_EQ(viaPushes(keys, k), ref) << what << ": pushes, n=" << keys.size() << " k=" << k;
}

TEST(MinMaxHeap, RandomManySizes) {
    const size_t ns[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 13, 31, 32, 33, 100, 257, 1000, 4097};
    uint64_t seed = kSeed;
    for (size_t n : ns) {
        const auto keys = randomKeys(n, seed++);
        std::vector<size_t> ks = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 64, 100, 255};
        ks.push_back(n > 0 ? n : 1);
        if (n > 1) ks.push_back(n - 1);
        ks.push_back(n + 1);
        ks.push_back(2 * n + 3);
        for (size_t k : ks) {
            SCOPED_TRACE(testing::Message() << "seed " << seed - 1);
            expectAllWays(keys, k, "random");
        }
    }
}

TEST(MinMaxHeap, LargeNK1000) {
    const auto keys = randomKeys(100000, kSeed + 7);
    expectAllWays(keys, 1000, "n=100000 k=1000");
    expectAllWays(keys, 1, "n=100000 k=1");
}

TEST(MinMaxHeap, EmptyInput) {
    std::vector<uint64_t> out(4, 42);
    EXPECT_EQ(minMaxHeapPartialSort(nullptr, 0, 5, out.data()), 0u);
    EXPECT_EQ(out[0], 42u);
    MinMaxKHeap heap(3);
    heap.pushMany(nullptr, 0);
    EXPECT_EQ(heap.size(), 0u);
    EXPECT_FALSE(heap.full());
    heap.popAllSorted(out.data());
    EXPECT_EQ(out[0], 42u);
}

TEST(MinMaxHeap, TiedHighHalvesDistinctIds) {
    for (uint32_t distinct : {1u, 2u, 5u, 50u}) {
        for (size_t n : {10u, 333u, 5000u}) {
            const auto keys = tiedHighKeys(n, distinct, kSeed + distinct * 1000 + n);
            for (size_t k : {1u, 2u, 3u, 10u, 64u, 100u, 4999u, 6000u}) {
                expectAllWays(keys, k, "tied high halves");
            }
        }
    }
}

TEST(MinMaxHeap, FullyEqualKeys) {
    // All equal, then a few values repeated many times each.
    const std::vector<uint64_t> allSame(777, 0x0123456789ABCDEFull);
    for (size_t k : {1u, 2u, 3u, 50u, 777u, 1000u}) expectAllWays(allSame, k, "all equal");

    std::mt19937_64 rng(kSeed + 3);
    const uint64_t vals[] = {0, 5, 5, 9, UINT64_MAX, UINT64_MAX - 1};
    std::vector<uint64_t> few(3000);
    for (auto& x : few) x = vals[rng() % 6];
    for (size_t k : {1u, 2u, 3u, 7u, 100u, 999u, 2999u, 3000u, 4000u}) {
        expectAllWays(few, k, "few distinct values");
    }
}

TEST(MinMaxHeap, TinyValueRangeEverySize) {
    // Values in [0, range) for every n up to 300: exact ties at every depth
    // of the bulk-built heap and of the delete-min path near the bottom.
    std::mt19937_64 rng(kSeed + 5);
    for (uint64_t range : {2u, 3u, 4u}) {
        for (size_t n = 1; n <= 300; ++n) {
            for (int trial = 0; trial < 3; ++trial) {
                std::vector<uint64_t> keys(n);
                for (auto& x : keys) x = rng() % range;
                for (size_t k : {n, n / 2 + 1, size_t(3), size_t(7)}) {
                    const auto ref = reference(keys, k);
                    ASSERT_EQ(viaPartialSort(keys, k), ref) << "range " << range << " n=" << n << " k=" << k;
                    ASSERT_EQ(viaPushes(keys, k), ref) << "range " << range << " n=" << n << " k=" << k;
                }
            }
        }
    }
}

TEST(MinMaxHeap, ExtremeKeys) {
    // 0 and UINT64_MAX are ordinary keys (UINT64_MAX must be kept while not full).
    const std::vector<uint64_t> keys = {UINT64_MAX, 0, UINT64_MAX, 1, UINT64_MAX - 1, 0};
    for (size_t k = 1; k <= 7; ++k) expectAllWays(keys, k, "extreme keys");
    MinMaxKHeap heap(2);
    EXPECT_TRUE(heap.push(UINT64_MAX));
    EXPECT_TRUE(heap.push(UINT64_MAX));
    EXPECT_FALSE(heap.push(UINT64_MAX));
    EXPECT_EQ(heap.max(), UINT64_MAX);
}

TEST(MinMaxHeap, AscendingAndDescending) {
    for (size_t n : {1u, 2u, 17u, 1000u, 10000u}) {
        std::vector<uint64_t> asc(n);
        for (size_t i = 0; i < n; ++i) asc[i] = (uint64_t(i) << 32) | (n - i);
        std::vector<uint64_t> desc(asc.rbegin(), asc.rend());
        for (size_t k : {1u, 2u, 3u, 10u, 100u, 1000u, 20000u}) {
            expectAllWays(asc, k, "ascending");
            expectAllWays(desc, k, "descending");
        }
    }
}

TEST(MinMaxHeap, InvariantAfterEveryPush) {
    std::mt19937_64 rng(kSeed + 11);
    for (size_t k = 1; k <= 40; ++k) {
        MinMaxKHeap heap(k);
        std::multiset<uint64_t> kept;  // reference: the k smallest so far
        for (int step = 0; step < 300; ++step) {
            // Small value range: plenty of exact ties.
            const uint64_t key = rng() % 64;
            bool expectKept = true;
            if (kept.size() == k) {
                const uint64_t oldMax = *kept.rbegin();
                expectKept = key < oldMax;
                if (expectKept) {
                    kept.erase(std::prev(kept.end()));
                    kept.insert(key);
                }
            } else {
                kept.insert(key);
            }
            ASSERT_EQ(heap.push(key), expectKept) << "k=" << k << " step " << step;
            ASSERT_TRUE(heap.checkInvariant()) << "k=" << k << " step " << step;
            ASSERT_EQ(heap.size(), kept.size());
            ASSERT_EQ(heap.full(), kept.size() == k);
            ASSERT_EQ(heap.min(), *kept.begin()) << "k=" << k << " step " << step;
            ASSERT_EQ(heap.max(), *kept.rbegin()) << "k=" << k << " step " << step;
        }
        std::vector<uint64_t> out(heap.size());
        heap.popAllSorted(out.data());
        EXPECT_EQ(out, std::vector<uint64_t>(kept.begin(), kept.end())) << "k=" << k;
    }
}

TEST(MinMaxHeap, InvariantAfterBulkFill) {
    // pushMany's bulk fill (PHEAPIFYMINMAX) for every size up to 70.
    for (size_t n = 1; n <= 70; ++n) {
        const auto keys = tiedHighKeys(n, 4, kSeed + n);
        MinMaxKHeap heap(n);
        heap.pushMany(keys.data(), n);
        ASSERT_TRUE(heap.full());
        ASSERT_TRUE(heap.checkInvariant()) << "n=" << n;
        ASSERT_EQ(heap.min(), *std::min_element(keys.begin(), keys.end()));
        ASSERT_EQ(heap.max(), *std::max_element(keys.begin(), keys.end()));
    }
}

TEST(MinMaxHeap, ChunkedEqualsOneShot) {
    std::mt19937_64 rng(kSeed + 21);
    for (size_t k : {1u, 2u, 3u, 37u, 256u, 1000u}) {
        for (int trial = 0; trial < 5; ++trial) {
            const size_t n = 500 + rng() % 3000;
            const auto keys = (trial % 2) ? tiedHighKeys(n, 3, rng()) : randomKeys(n, rng());
            MinMaxKHeap one(k);
            one.pushMany(keys.data(), n);
            MinMaxKHeap chunked(k);
            // Pieces of random sizes, from 0 up to about k (both fill paths:
            // bulk heapify and per-key bubble up), mixed with single pushes.
            size_t pos = 0;
            while (pos < n) {
                size_t len = std::min(n - pos, size_t(rng() % (k + 2)));
                if (rng() % 4 == 0) {
                    chunked.push(keys[pos]);
                    len = 1;
                } else {
                    chunked.pushMany(keys.data() + pos, len);
                }
                pos += len;
                ASSERT_TRUE(chunked.checkInvariant()) << "k=" << k << " pos=" << pos;
            }
            ASSERT_EQ(one.size(), chunked.size());
            ASSERT_EQ(one.min(), chunked.min());
            ASSERT_EQ(one.max(), chunked.max());
            std::vector<uint64_t> a(one.size()), b(chunked.size());
            one.popAllSorted(a.data());
            chunked.popAllSorted(b.data());
            EXPECT_EQ(a, b) << "k=" << k << " trial " << trial;
            EXPECT_EQ(a, reference(keys, k)) << "k=" << k << " trial " << trial;
        }
    }
}

TEST(MinMaxHeap, ClearAndResetReuse) {
    const auto keys = randomKeys(2000, kSeed + 31);
    MinMaxKHeap heap(10);
    heap.pushMany(keys.data(), keys.size());
    EXPECT_EQ(heap.capacity(), 10u);
    heap.clear();
    EXPECT_EQ(heap.size(), 0u);
    EXPECT_EQ(heap.capacity(), 10u);
    heap.pushMany(keys.data(), 100);
    std::vector<uint64_t> out(10);
    heap.popAllSorted(out.data());
    EXPECT_EQ(out, reference(std::vector<uint64_t>(keys.begin(), keys.begin() + 100), 10));

    heap.pushMany(keys.data(), keys.size());
    heap.reset(300);
    EXPECT_EQ(heap.size(), 0u);
    EXPECT_EQ(heap.capacity(), 300u);
    heap.pushMany(keys.data(), keys.size());
    out.assign(300, 0);
    heap.popAllSorted(out.data());
    EXPECT_EQ(out, reference(keys, 300));
}

/// CSR batch of 300 rows of varying lengths (some empty), heaps of varying k.
void checkRows(int nthreads) {
    const size_t rows = 300;
    std::mt19937_64 rng(kSeed + 41);
    std::vector<int64_t> offsets(rows + 1);
    offsets[0] = 12345;  // rows index keys relative to offsets[0]
    for (size_t r = 0; r < rows; ++r) {
        size_t len = rng() % 700;
        if (r % 7 == 3 || r == 0 || r == rows - 1) len = 0;
        offsets[r + 1] = offsets[r] + int64_t(len);
    }
    const size_t total = size_t(offsets[rows] - offsets[0]);
    const auto keys = tiedHighKeys(total, 50, kSeed + 42);

    std::vector<size_t> ks(rows);
    size_t maxK = 0;
    std::vector<MinMaxKHeap> heaps;
    for (size_t r = 0; r < rows; ++r) {
        ks[r] = 1 + rng() % 120;
        maxK = std::max(maxK, ks[r]);
        heaps.emplace_back(ks[r]);
    }
    // Fed in two calls, as a caller streaming the data would: the first third
    // of every row, then the rest. The second batch's offsets start at 1000
    // (keys are indexed relative to offsets[0]).
    std::vector<int64_t> offA(rows + 1), offB(rows + 1);
    std::vector<uint64_t> partA, partB;
    offA.assign(rows + 1, 0);
    offB.assign(rows + 1, 1000);
    for (size_t r = 0; r < rows; ++r) {
        const size_t s = size_t(offsets[r] - offsets[0]), e = size_t(offsets[r + 1] - offsets[0]);
        const size_t mid = s + (e - s) / 3;
        partA.insert(partA.end(), keys.begin() + s, keys.begin() + mid);
        partB.insert(partB.end(), keys.begin() + mid, keys.begin() + e);
        offA[r + 1] = int64_t(partA.size());
        offB[r + 1] = 1000 + int64_t(partB.size());
    }
    minMaxHeapFeedRows(heaps.data(), rows, partA.data(), offA.data(), nthreads);
    minMaxHeapFeedRows(heaps.data(), rows, partB.data(), offB.data(), nthreads);

    const size_t stride = maxK + 3;
    const uint64_t sentinel = 0x5A5A5A5A5A5A5A5Aull;
    std::vector<uint64_t> out(rows * stride, sentinel);
    minMaxHeapPopRows(heaps.data(), rows, out.data(), stride, nthreads);
    for (size_t r = 0; r < rows; ++r) {
        const std::vector<uint64_t> rowKeys(keys.begin() + (offsets[r] - offsets[0]),
                                            keys.begin() + (offsets[r + 1] - offsets[0]));
        const auto ref = reference(rowKeys, ks[r]);
        const std::vector<uint64_t> got(out.begin() + r * stride, out.begin() + r * stride + ref.size());
        ASSERT_EQ(got, ref) << "row " << r << " k=" << ks[r] << " nthreads=" << nthreads;
        for (size_t j = ref.size(); j < stride; ++j) {
            ASSERT_EQ(out[r * stride + j], sentinel) << "row " << r << " written past its size";
        }
        ASSERT_EQ(heaps[r].size(), 0u) << "row " << r << " not emptied";
    }
}

TEST(MinMaxHeap, FeedPopRowsOneThread) {
    checkRows(1);
}

TEST(MinMaxHeap, FeedPopRowsFourThreads) {
    checkRows(4);
}

TEST(MinMaxHeap, FeedPopRowsDefaultThreads) {
    checkRows(0);
}

TEST(MinMaxHeap, BadInputThrows) {
    EXPECT_THROW(MinMaxKHeap(0), faiss::FaissException);
    MinMaxKHeap heap(4);
    EXPECT_THROW(heap.reset(0), faiss::FaissException);
    EXPECT_THROW(heap.min(), faiss::FaissException);
    EXPECT_THROW(heap.max(), faiss::FaissException);
    heap.push(3);
    EXPECT_EQ(heap.min(), 3u);
    EXPECT_EQ(heap.max(), 3u);
    heap.clear();
    EXPECT_THROW(heap.min(), faiss::FaissException);

    const uint64_t keys[] = {5, 4, 3};
    uint64_t out[3];
    EXPECT_THROW(minMaxHeapPartialSort(keys, 3, 0, out), faiss::FaissException);

    // Row holding more keys than the output stride.
    std::vector<MinMaxKHeap> heaps(2, MinMaxKHeap(3));
    heaps[1].pushMany(keys, 3);
    std::vector<uint64_t> rowsOut(4, 0);
    EXPECT_THROW(minMaxHeapPopRows(heaps.data(), 2, rowsOut.data(), 2), faiss::FaissException);
    EXPECT_EQ(heaps[1].size(), 3u);  // untouched on error
    // Decreasing offsets.
    const int64_t badOffsets[] = {0, 2, 1};
    EXPECT_THROW(minMaxHeapFeedRows(heaps.data(), 2, keys, badOffsets), faiss::FaissException);
}

}  // namespace
}  // namespace faiss_ext
