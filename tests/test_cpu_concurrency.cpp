// Several host threads using the CPU twins at once (issue 6): concurrent
// searches equal serial ones for faiss::IndexFlat, faiss::IndexNNDescentFlat
// and our IndexBiLevelLSH; IndexBiLevelLSH also serialises add / reset with
// its searches (a reader-writer lock), so a search sees the index before or
// after an add, never half of one.
#include "faiss_ext/IndexBiLevelLSH.h"
#include "tests/TestUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexNNDescent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace faiss_ext {
namespace {

using idx_t = faiss::Index::idx_t;

struct Result {
    std::vector<float> D;
    std::vector<idx_t> I;
    bool operator==(const Result& o) const {
        return I == o.I && D.size() == o.D.size() &&
               std::memcmp(D.data(), o.D.data(), D.size() * sizeof(float)) == 0;
    }
};

Result searchOf(const faiss::Index& index, const std::vector<float>& q, int64_t k) {
    const int64_t nq = int64_t(q.size()) / index.d;
    Result r;
    r.D.resize(size_t(nq * k));
    r.I.resize(size_t(nq * k));
    index.search(nq, q.data(), k, r.D.data(), r.I.data());
    return r;
}

void runThreads(int threads, const std::function<void(int)>& fn) {
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() < threads) std::this_thread::yield();
            fn(t);
        });
    for (auto& th : pool) th.join();
}

BiLevelLSHConfig lshConfig() {
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 2;
    cfg.nTables = 4;
    cfg.nProjections = 6;
    cfg.bucketWidth = 1.f;
    return cfg;
}

constexpr int kD = 16;

void expectConcurrentSearchesEqualSerial(const faiss::Index& index, const char* what) {
    constexpr int kThreads = 6, kRounds = 4;
    std::vector<std::vector<float>> queries;
    std::vector<Result> serial;
    for (int t = 0; t < kThreads; ++t) {
        queries.push_back(test::clusteredVectors(50 + 13 * t, kD, 20, 500 + t));
        serial.push_back(searchOf(index, queries[t], 5 + t));
    }
    std::atomic<int> mismatches{0}, errors{0};
    runThreads(kThreads, [&](int t) {
        for (int r = 0; r < kRounds; ++r) {
            try {
                if (!(searchOf(index, queries[t], 5 + t) == serial[t])) mismatches++;
            } catch (...) {
                errors++;
            }
        }
    });
    EXPECT_EQ(mismatches.load(), 0) << what;
    EXPECT_EQ(errors.load(), 0) << what;
}

TEST(CpuTwinThreads, ConcurrentSearchesEqualSerial) {
    const auto x = test::clusteredVectors(4000, kD, 20, 1);
    faiss::IndexFlatL2 flat(kD);
    flat.add(4000, x.data());
    expectConcurrentSearchesEqualSerial(flat, "faiss::IndexFlatL2");

    faiss::IndexNNDescentFlat nnd(kD, 16);
    nnd.nndescent.S = 10;
    nnd.nndescent.iter = 4;
    nnd.verbose = false;
    nnd.add(4000, x.data());
    expectConcurrentSearchesEqualSerial(nnd, "faiss::IndexNNDescentFlat");

    IndexBiLevelLSH lsh(kD, lshConfig());
    lsh.train(4000, x.data());
    lsh.add(4000, x.data());
    expectConcurrentSearchesEqualSerial(lsh, "IndexBiLevelLSH");
}

TEST(CpuTwinThreads, BiLevelLSHAddAndResetDuringSearchesAreSerialised) {
    const auto x = test::clusteredVectors(3000, kD, 20, 2);
    const auto q = test::clusteredVectors(80, kD, 20, 3);
    constexpr int kAdds = 4;
    std::vector<std::vector<float>> batches;
    for (int b = 0; b < kAdds; ++b) batches.push_back(test::clusteredVectors(700, kD, 20, 10 + b));
    // the states a search may see, serially
    std::vector<Result> states;
    IndexBiLevelLSH ref(kD, lshConfig());
    ref.train(3000, x.data());
    ref.add(3000, x.data());
    states.push_back(searchOf(ref, q, 10));
    for (int b = 0; b < kAdds; ++b) {
        ref.add(700, batches[b].data());
        states.push_back(searchOf(ref, q, 10));
    }
    IndexBiLevelLSH idx(kD, lshConfig());
    idx.train(3000, x.data());
    idx.add(3000, x.data());
    std::atomic<bool> done{false};
    std::atomic<int> unknown{0}, searches{0};
    runThreads(4, [&](int t) {
        if (t == 0) {
            for (int b = 0; b < kAdds; ++b) idx.add(700, batches[b].data());
            done = true;
            return;
        }
        do {
            Result r = searchOf(idx, q, 10);
            bool known = false;
            for (auto& s : states) known = known || r == s;
            if (!known) unknown++;
            searches++;
        } while (!done.load());
    });
    EXPECT_EQ(unknown.load(), 0) << "a search saw a state that no serial run has";
    EXPECT_GT(searches.load(), 0);
    EXPECT_TRUE(searchOf(idx, q, 10) == states.back());
    // a copy of the index (with its own lock) works on its own
    IndexBiLevelLSH copy = idx;
    EXPECT_TRUE(searchOf(copy, q, 10) == states.back());
    // reset during searches: each sees the full or the empty index
    std::atomic<int> bad{0};
    runThreads(3, [&](int t) {
        if (t == 0) {
            idx.reset();
            return;
        }
        for (int r = 0; r < 5; ++r) {
            Result s = searchOf(idx, q, 10);
            bool empty = true;
            for (idx_t l : s.I) empty = empty && l == -1;
            if (!(s == states.back()) && !empty) bad++;
        }
    });
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(idx.ntotal, 0);
}

}  // namespace
}  // namespace faiss_ext
