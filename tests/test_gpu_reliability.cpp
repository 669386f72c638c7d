// Reliability of the GPU indexes (issue 6): failure paths (a device
// allocation failure injected at every allocation of an operation in turn, a
// temporary memory limit too small, bad device numbers, no GPU) must throw a
// clear faiss::FaissException and leave the index unchanged and usable; and
// several host threads using one index, or one resources object, at once get
// the results of serial calls.
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "tests/TestUtils.h"

#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace {

using idx_t = faiss::Index::idx_t;
using test::clusteredVectors;
using test::PartUnits;
using test::sized;
using test::testPhase;

/// Search results of an index (and its size) at one moment.
struct Snapshot {
    int64_t ntotal = -1;
    std::vector<float> D;
    std::vector<idx_t> I;
    bool operator==(const Snapshot& o) const {
        // bitwise: the same index state must give the very same answers
        return ntotal == o.ntotal && I == o.I &&
               std::memcmp(D.data(), o.D.data(), D.size() * sizeof(float)) == 0 &&
               D.size() == o.D.size();
    }
};

/// Fraction of the ids of a found in the same row of b (rows of k).
double overlap(const Snapshot& a, const Snapshot& b, int64_t k) {
    if (a.I.size() != b.I.size() || a.I.empty()) return a.I.size() == b.I.size() ? 1.0 : 0.0;
    int64_t hit = 0;
    for (size_t r = 0; r < a.I.size() / k; ++r)
        for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j < k; ++j)
                if (a.I[r * k + i] == b.I[r * k + j]) {
                    hit++;
                    break;
                }
    return double(hit) / double(a.I.size());
}

/// Same results: bit for bit, or, for GNND (whose builds and merges are not
/// bit-reproducible: list updates race on the GPU), 90% of the same ids.
bool sameResults(const Snapshot& a, const Snapshot& b, int64_t k, bool bitwise) {
    if (bitwise) return a.I == b.I && a.D.size() == b.D.size() &&
                        std::memcmp(a.D.data(), b.D.data(), a.D.size() * sizeof(float)) == 0;
    return overlap(a, b, k) >= 0.9;
}

Snapshot snapshot(const faiss::Index& index, const std::vector<float>& q, int64_t k,
                  const faiss::SearchParameters* p = nullptr) {
    Snapshot s;
    s.ntotal = index.ntotal;
    const int64_t nq = int64_t(q.size()) / index.d;
    s.D.assign(size_t(nq * k), 0.f);
    s.I.assign(size_t(nq * k), 0);
    if (index.ntotal > 0 || index.is_trained) index.search(nq, q.data(), k, s.D.data(), s.I.data(), p);
    return s;
}

/// RAII: no injected failure outlives a test.
struct InjectionOff {
    ~InjectionOff() { setAllocFailureInjection(-1); }
};

/// A fresh index in the state the operation starts from.
using Factory = std::function<std::unique_ptr<faiss::Index>()>;
/// The operation under test (may throw).
using Operation = std::function<void(faiss::Index*)>;

/// For j = 0, 1, 2, ...: a fresh index, the j-th device allocation of `op`
/// made to fail. Each failing run must throw a FaissException that names the
/// memory, leave the index as it was (bitwise-equal searches) and usable (the
/// operation then succeeds and gives the reference result). Stops when `op`
/// makes fewer than j + 1 allocations. Returns the number of failures seen.
int injectAtEveryAllocation(const char* what, const Factory& make, const Operation& op,
                            const std::vector<float>& q, int64_t k, bool bitwiseAfter = true) {
    InjectionOff guard;
    // reference: the operation without failures
    std::unique_ptr<faiss::Index> ref = make();
    const Snapshot refBefore = snapshot(*ref, q, k);
    op(ref.get());
    const Snapshot refAfter = snapshot(*ref, q, k);
    int failures = 0;
    // FAISS_EXT_TEST_PART=P/N (tests/TestUtils.h): the points j = P, P + N, ...
    for (int64_t j = test::testPart().index; j < 2000; j += test::testPart().count) {
        std::unique_ptr<faiss::Index> index = make();
        // this index's own state before the operation (GNND builds are not
        // bit-reproducible, so compare with itself, not with `ref`)
        const Snapshot before = snapshot(*index, q, k);
        EXPECT_TRUE(before.ntotal == refBefore.ntotal &&
                    sameResults(before, refBefore, k, bitwiseAfter))
                << what << ": factory not reproducible";
        setAllocFailureInjection(j);
        std::string msg;
        bool threw = false;
        try {
            op(index.get());
        } catch (const faiss::FaissException& e) {
            threw = true;
            msg = e.what();
        }
        const bool fired = !allocFailureInjectionPending();
        setAllocFailureInjection(-1);
        if (!fired) {
            // op made only j allocations: done
            EXPECT_FALSE(threw) << what << ": threw without an injected failure: " << msg;
            const Snapshot got = snapshot(*index, q, k);
            EXPECT_TRUE(got.ntotal == refAfter.ntotal && sameResults(got, refAfter, k, bitwiseAfter))
                    << what;
            EXPECT_GT(j, 0) << what << ": the operation allocated nothing";
            return failures;
        }
        if (threw) {
            ++failures;
            EXPECT_TRUE(msg.find("memory") != std::string::npos)
                    << what << ", allocation " << j << ": unclear message: " << msg;
            EXPECT_EQ(snapshot(*index, q, k), before)
                    << what << ", allocation " << j << ": the index changed after a failure";
            // usable: the same operation now succeeds with the reference result
            op(index.get());
            const Snapshot got = snapshot(*index, q, k);
            EXPECT_TRUE(got.ntotal == refAfter.ntotal && sameResults(got, refAfter, k, bitwiseAfter))
                    << what << ", allocation " << j << ": wrong result after a failure";
        } else {
            // the failure was absorbed (e.g. flat storage falling back to host)
            const Snapshot got = snapshot(*index, q, k);
            EXPECT_TRUE(got.ntotal == refAfter.ntotal && sameResults(got, refAfter, k, bitwiseAfter))
                    << what << ", allocation " << j << ": absorbed failure gave a wrong result";
        }
        if (::testing::Test::HasFailure()) return failures;
    }
    ADD_FAILURE() << what << ": more than 2000 allocations";
    return failures;
}

/// Some injected failure threw. Checked only when this process runs the
/// whole test: one part of several may hold none of the points that throw.
void expectSomeThrew(int failures, const std::string& what = "") {
    if (test::wholeTest()) {
        EXPECT_GT(failures, 0) << what;
    }
}

BiLevelLSHConfig smallLshConfig() {
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 2;
    cfg.nTables = 4;
    cfg.nProjections = 6;
    cfg.bucketWidth = 1.f;
    return cfg;
}

constexpr int kD = 24;

TEST(GpuReliabilityFailures, InjectedAllocationFailuresFlat) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: nb stays >= 2048 (k = 2048 <= nb; the select's first pass needs
    // n >= 2048; knnGraph's 2048+ rows pick the merge queue); nq < 16 x SMs
    const int64_t nb = sized<int64_t>(3000, 2100);
    const int64_t nMore = sized<int64_t>(1500, 300);
    const int64_t nq = sized<int64_t>(64, 16);
    const auto x = clusteredVectors(nb, kD, 20, 11);
    const auto more = clusteredVectors(nMore, kD, 20, 12);
    const auto q = clusteredVectors(nq, kD, 20, 13);
    for (VectorStorage storage : {VectorStorage::Device, VectorStorage::Auto, VectorStorage::Host}) {
        GpuIndexQuickSelectFlatConfig cfg;
        cfg.storage = storage;
        Factory make = [&] {
            auto idx = std::make_unique<GpuIndexQuickSelectFlat>(&res, kD, FlatMetric::L2, cfg);
            idx->add(nb, x.data());
            return std::unique_ptr<faiss::Index>(std::move(idx));
        };
        const std::string tag = "flat storage " + std::to_string(int(storage));
        int f = injectAtEveryAllocation((tag + " add").c_str(), make,
                                        [&](faiss::Index* i) { i->add(nMore, more.data()); }, q, 10);
        if (storage == VectorStorage::Device) {
            expectSomeThrew(f);
        }
        for (int64_t k : {int64_t(1), int64_t(50), int64_t(2048)}) {
            std::vector<float> D(nq * k);
            std::vector<idx_t> I(nq * k);
            f = injectAtEveryAllocation(
                    (tag + " search k=" + std::to_string(k)).c_str(), make,
                    [&](faiss::Index* i) { i->search(nq, q.data(), k, D.data(), I.data()); }, q, 10);
            expectSomeThrew(f, "k=" + std::to_string(k));
        }
        std::vector<float> GD(nb * 8);
        std::vector<idx_t> GI(nb * 8);
        f = injectAtEveryAllocation((tag + " knnGraph").c_str(), make,
                                    [&](faiss::Index* i) {
                                        static_cast<GpuIndexQuickSelectFlat*>(i)->knnGraph(
                                                8, true, GD.data(), GI.data());
                                    },
                                    q, 10);
        expectSomeThrew(f);
    }
}

TEST(GpuReliabilityFailures, InjectedAllocationFailuresBiLevelLSH) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: n > 2304 keeps the training sort past CUB's single tile, and
    // Auto (the snapshots) still picks the work queue (> 256 candidates)
    const int64_t n = sized<int64_t>(4000, 2400);
    const int64_t nMore = sized<int64_t>(1000, 300);
    const int64_t nq = sized<int64_t>(64, 16);
    const auto x = clusteredVectors(n, kD, 20, 21);
    const auto more = clusteredVectors(nMore, kD, 20, 22);
    const auto q = clusteredVectors(nq, kD, 20, 23);
    Factory untrained = [&] {
        return std::unique_ptr<faiss::Index>(new GpuIndexBiLevelLSH(&res, kD, smallLshConfig()));
    };
    Factory trained = [&] {
        auto idx = std::make_unique<GpuIndexBiLevelLSH>(&res, kD, smallLshConfig());
        idx->train(n, x.data());
        idx->add(n, x.data());
        return std::unique_ptr<faiss::Index>(std::move(idx));
    };
    expectSomeThrew(injectAtEveryAllocation("lsh train", untrained,
                                      [&](faiss::Index* i) { i->train(n, x.data()); }, q, 10));
    expectSomeThrew(injectAtEveryAllocation("lsh add", trained,
                                      [&](faiss::Index* i) { i->add(nMore, more.data()); }, q, 10));
    for (BiLevelShortList sl : {BiLevelShortList::Heap, BiLevelShortList::WorkQueue}) {
        SearchParametersBiLevelLSH p;
        p.shortList = sl;
        p.nprobe = 4;
        std::vector<float> D(nq * 20);
        std::vector<idx_t> I(nq * 20);
        expectSomeThrew(injectAtEveryAllocation(
                          sl == BiLevelShortList::Heap ? "lsh search heap" : "lsh search queue",
                          trained,
                          [&](faiss::Index* i) { i->search(nq, q.data(), 20, D.data(), I.data(), &p); },
                          q, 10));
    }
}

TEST(GpuReliabilityFailures, InjectedAllocationFailuresGNND) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: every injection repeats a build; n and the merged batch stay
    // > 2 x 32 (GNND, not the exact small graph) and n >= searchL (128)
    const int64_t n = sized<int64_t>(3000, 300);
    const int64_t nMore = sized<int64_t>(1000, 100);
    const int64_t nq = sized<int64_t>(32, 8);
    const auto x = clusteredVectors(n, kD, 20, 31);
    const auto more = clusteredVectors(nMore, kD, 20, 32);
    const auto q = clusteredVectors(nq, kD, 20, 33);
    GpuKnnGraphGNNDConfig cfg;
    cfg.maxIterations = 4;
    Factory empty = [&] {
        return std::unique_ptr<faiss::Index>(new GpuKnnGraphGNND(&res, kD, 16, FlatMetric::L2, cfg));
    };
    Factory built = [&] {
        auto idx = std::make_unique<GpuKnnGraphGNND>(&res, kD, 16, FlatMetric::L2, cfg);
        idx->add(n, x.data());
        return std::unique_ptr<faiss::Index>(std::move(idx));
    };
    expectSomeThrew(injectAtEveryAllocation("gnnd build", empty,
                                      [&](faiss::Index* i) { i->add(n, x.data()); }, q, 10, false));
    expectSomeThrew(injectAtEveryAllocation("gnnd merge", built,
                                      [&](faiss::Index* i) { i->add(nMore, more.data()); }, q, 10, false));
    std::vector<float> D(nq * 10);
    std::vector<idx_t> I(nq * 10);
    expectSomeThrew(injectAtEveryAllocation(
                      "gnnd search", built,
                      [&](faiss::Index* i) { i->search(nq, q.data(), 10, D.data(), I.data()); }, q,
                      10, false));
}

TEST(GpuReliabilityFailures, InjectedAllocationFailuresSearchGraphFirstAdd) {
    // a first add allocates the optimisation's buffers, the traversal copy and
    // the entry sample after the k-NN build: a failure there must leave the
    // index empty again
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(3000, 300), nq = sized<int64_t>(32, 8);
    const auto x = clusteredVectors(n, kD, 20, 41);
    const auto q = clusteredVectors(nq, kD, 20, 43);
    GpuIndexSearchGraphConfig cfg;
    cfg.graphDegree = 16;
    cfg.knnDegree = 32;
    cfg.knnBuild.maxIterations = 4;
    Factory empty = [&] {
        return std::unique_ptr<faiss::Index>(new GpuIndexSearchGraph(&res, kD, FlatMetric::L2, cfg));
    };
    expectSomeThrew(injectAtEveryAllocation("search graph first add", empty,
                                            [&](faiss::Index* i) { i->add(n, x.data()); }, q, 10,
                                            false));
}

TEST(GpuReliabilityFailures, TinyTemporaryMemoryThrowsAndLeavesIndexUsable) {
    FAISS_EXT_REQUIRE_GPU();
    const auto x = clusteredVectors(5000, kD, 20, 41);
    const auto q = clusteredVectors(100, kD, 20, 42);
    StandardGpuResources res;
    std::vector<std::unique_ptr<faiss::Index>> indexes;
    indexes.emplace_back(new GpuIndexQuickSelectFlat(&res, kD));
    indexes.emplace_back(new GpuIndexBiLevelLSH(&res, kD, smallLshConfig()));
    indexes.emplace_back(new GpuKnnGraphGNND(&res, kD, 16));
    for (auto& idx : indexes) {
        if (!idx->is_trained) idx->train(5000, x.data());
        idx->add(5000, x.data());
        const Snapshot before = snapshot(*idx, q, 10);
        res.setTempMemory(256);
        std::vector<float> D(100 * 10);
        std::vector<idx_t> I(100 * 10);
        // host queries are paged through temporary memory by every index;
        // the exact index must throw, the others may have room to spare
        const bool usesTemp = dynamic_cast<GpuIndexQuickSelectFlat*>(idx.get()) != nullptr;
        try {
            idx->search(100, q.data(), 10, D.data(), I.data());
            EXPECT_FALSE(usesTemp) << "search with 256 bytes of temporary memory did not throw";
            EXPECT_TRUE(D == before.D && I == before.I);
        } catch (const faiss::FaissException& e) {
            EXPECT_TRUE(std::string(e.what()).find("temporary memory") != std::string::npos)
                    << e.what();
        }
        try {
            idx->add(100, q.data());
        } catch (const faiss::FaissException& e) {
            EXPECT_TRUE(std::string(e.what()).find("memory") != std::string::npos) << e.what();
            EXPECT_EQ(idx->ntotal, 5000);
        }
        res.setTempMemory(size_t(256) << 20);
        if (idx->ntotal == 5000) {
            EXPECT_EQ(snapshot(*idx, q, 10), before);
        } else {
            EXPECT_EQ(idx->ntotal, 5100);  // the add fit after all: the index must still work
            EXPECT_NO_THROW(snapshot(*idx, q, 10));
        }
    }
}

TEST(GpuReliabilityFailures, BadDeviceNumbersAreClearErrors) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int n = getNumDevices();
    for (int dev : {-1, n, n + 7, 1 << 20}) {
        GpuIndexQuickSelectFlatConfig fc;
        fc.device = dev;
        try {
            GpuIndexQuickSelectFlat idx(&res, 8, FlatMetric::L2, fc);
            ADD_FAILURE() << "device " << dev << " accepted";
        } catch (const faiss::FaissException& e) {
            EXPECT_TRUE(std::string(e.what()).find("does not exist") != std::string::npos)
                    << e.what();
        }
        GpuIndexConfig base;
        base.device = dev;
        GpuKnnGraphGNNDConfig gc;
        gc.device = dev;
        EXPECT_THROW(GpuKnnGraphGNND(&res, 8, 4, FlatMetric::L2, gc), faiss::FaissException);
        GpuIndexBiLevelLSHConfig lc;
        lc.device = dev;
        EXPECT_THROW(GpuIndexBiLevelLSH(&res, 8, smallLshConfig(), lc), faiss::FaissException);
    }
}

TEST(GpuReliabilityFailures, NoGpuIsAClearError) {
    if (test::haveGpu()) GTEST_SKIP() << "this machine has a GPU: the no-GPU error path is checked "
                                         "where there is none (CI)";
    StandardGpuResources res;
    try {
        GpuIndexQuickSelectFlat idx(&res, 8);
        ADD_FAILURE() << "constructed a GPU index without a GPU";
    } catch (const faiss::FaissException& e) {
        EXPECT_TRUE(std::string(e.what()).find("no CUDA GPU") != std::string::npos) << e.what();
    }
    EXPECT_THROW(GpuKnnGraphGNND(&res, 8, 4), faiss::FaissException);
    EXPECT_THROW(GpuIndexBiLevelLSH(&res, 8), faiss::FaissException);
}

TEST(GpuReliabilityFailures, NonFiniteInputsAreRejectedAndChangeNothing) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const auto x = clusteredVectors(3000, kD, 20, 51);
    const auto q = clusteredVectors(sized<int64_t>(50, 20), kD, 20, 52);
    // small: only the graph (the costly build) takes fewer rows; the exact
    // index keeps >= 2048 (the select's first pass) and the LSH > 256
    // candidates per query (Auto picks the work queue)
    const int64_t nGraph = sized<int64_t>(3000, 1500);
    std::vector<std::unique_ptr<faiss::Index>> indexes;
    indexes.emplace_back(new GpuIndexQuickSelectFlat(&res, kD));
    indexes.emplace_back(new GpuIndexBiLevelLSH(&res, kD, smallLshConfig()));
    indexes.emplace_back(new GpuKnnGraphGNND(&res, kD, 16));
    for (auto& idx : indexes) {
        const int64_t n = dynamic_cast<GpuKnnGraphGNND*>(idx.get()) ? nGraph : 3000;
        if (!idx->is_trained) idx->train(n, x.data());
        idx->add(n, x.data());
        const Snapshot before = snapshot(*idx, q, 10);
        for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
            std::vector<float> v = clusteredVectors(40, kD, 20, 53);
            v[size_t(17) * kD + 5] = bad;
            // host input
            try {
                idx->add(40, v.data());
                ADD_FAILURE() << "add accepted a non-finite vector";
            } catch (const faiss::FaissException& e) {
                EXPECT_TRUE(std::string(e.what()).find("vector 17 has a NaN or infinite") !=
                            std::string::npos)
                        << e.what();
            }
            std::vector<float> D(40 * 10);
            std::vector<idx_t> I(40 * 10);
            try {
                idx->search(40, v.data(), 10, D.data(), I.data());
                ADD_FAILURE() << "search accepted a non-finite query";
            } catch (const faiss::FaissException& e) {
                EXPECT_TRUE(std::string(e.what()).find("query 17 has a NaN or infinite") !=
                            std::string::npos)
                        << e.what();
            }
            // device input
            float* dv = nullptr;
            ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dv), v.size() * sizeof(float)), cudaSuccess);
            ASSERT_EQ(cudaMemcpy(dv, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
                      cudaSuccess);
            faiss_ext::test::syncAfterHostCopy();
            EXPECT_THROW(idx->add(40, dv), faiss::FaissException);
            EXPECT_THROW(idx->search(40, dv, 10, D.data(), I.data()), faiss::FaissException);
            cudaFree(dv);
            EXPECT_EQ(snapshot(*idx, q, 10), before);
        }
    }
}

// ---- concurrency ---------------------------------------------------------

/// Runs fn(t) on `threads` threads at once (released together).
void runThreads(int threads, const std::function<void(int)>& fn) {
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() < threads) std::this_thread::yield();
            fn(t);
        });
    }
    for (auto& th : pool) th.join();
}

/// Rows of the GNND index in the thread tests: in small mode the builds and
/// the graph searches dominate, and the graph takes no path from n (> 2 x 32,
/// >= searchL). The flat and LSH indexes keep all rows: the LSH's Auto short
/// list depends on the candidates per query (> 256: the work queue), which
/// grow with n.
int64_t graphRows(int64_t full) { return sized<int64_t>(full, std::min<int64_t>(full, 2000)); }

/// An index of the thread tests, trained and filled with the first n rows of
/// x: type 0 flat, 1 LSH, 2 GNND (small mode: fewer iterations of the same
/// sampling and local join).
std::unique_ptr<faiss::Index> builtIndex(int type, GpuResourcesProvider* res,
                                         const std::vector<float>& x, int64_t n) {
    std::unique_ptr<faiss::Index> idx;
    if (type == 0) idx.reset(new GpuIndexQuickSelectFlat(res, kD));
    if (type == 1) idx.reset(new GpuIndexBiLevelLSH(res, kD, smallLshConfig()));
    if (type == 2) {
        GpuKnnGraphGNNDConfig cfg;
        cfg.maxIterations = sized(cfg.maxIterations, 4);
        idx.reset(new GpuKnnGraphGNND(res, kD, 16, FlatMetric::L2, cfg));
    }
    if (!idx->is_trained) idx->train(n, x.data());
    idx->add(n, x.data());
    return idx;
}

/// Flat, LSH and GNND indexes (builtIndex types 0, 1, 2) of the rows of x
/// (the GNND index of the first nGraph rows when nGraph >= 0).
std::vector<std::unique_ptr<faiss::Index>> threeIndexes(GpuResourcesProvider* res,
                                                        const std::vector<float>& x,
                                                        int64_t nGraph = -1) {
    const int64_t n = int64_t(x.size()) / kD;
    std::vector<std::unique_ptr<faiss::Index>> v;
    for (int type = 0; type < 3; ++type)
        v.push_back(builtIndex(type, res, x, type == 2 && nGraph >= 0 ? nGraph : n));
    return v;
}

TEST(GpuReliabilityThreads, ConcurrentSearchesOfOneIndexEqualSerial) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const auto x = clusteredVectors(20000, kD, 50, 61);
    auto indexes = threeIndexes(&res, x, graphRows(20000));
    constexpr int kThreads = 8;
    const int kRounds = sized(6, 1);
    for (auto& idx : indexes) {
        std::vector<std::vector<float>> queries;
        std::vector<Snapshot> serial;
        for (int t = 0; t < kThreads; ++t) {
            queries.push_back(clusteredVectors(sized(200 + 37 * t, 20 + 4 * t), kD, 50, 100 + t));
            serial.push_back(snapshot(*idx, queries[t], 10 + t));
            EXPECT_EQ(snapshot(*idx, queries[t], 10 + t), serial[t]) << "serial runs differ";
        }
        std::atomic<int> mismatches{0}, errors{0};
        runThreads(kThreads, [&](int t) {
            for (int r = 0; r < kRounds; ++r) {
                try {
                    if (!(snapshot(*idx, queries[t], 10 + t) == serial[t])) mismatches++;
                } catch (...) {
                    errors++;
                }
            }
        });
        EXPECT_EQ(mismatches.load(), 0) << "index type " << typeid(*idx).name();
        EXPECT_EQ(errors.load(), 0);
    }
}

TEST(GpuReliabilityThreads, SharedResourcesAcrossThreadsAndIndexes) {
    FAISS_EXT_REQUIRE_GPU();
    // serial reference with its own resources
    const auto x = clusteredVectors(8000, kD, 30, 71);
    const auto q = clusteredVectors(sized(300, 50), kD, 30, 72);
    const int64_t nGraph = graphRows(8000);
    testPhase("serial reference (one index of each type) starts");
    std::vector<Snapshot> serial;  // thread t's reference: serial[t % 3]
    {
        StandardGpuResources own;
        for (auto& idx : threeIndexes(&own, x, nGraph)) serial.push_back(snapshot(*idx, q, 10));
    }
    // 6 threads, each building and searching its own index, one resources object
    StandardGpuResources shared;
    std::vector<Snapshot> got(6);
    std::atomic<int> errors{0};
    testPhase("6 threads start");
    runThreads(6, [&](int t) {
        try {
            auto idx = builtIndex(t % 3, &shared, x, t % 3 == 2 ? nGraph : 8000);
            got[t] = snapshot(*idx, q, 10);
        } catch (...) {
            errors++;
        }
    });
    testPhase("6 threads joined");
    EXPECT_EQ(errors.load(), 0);
    for (int t = 0; t < 6; ++t) {
        const Snapshot& ref = serial[t % 3];
        EXPECT_EQ(got[t].ntotal, ref.ntotal);
        EXPECT_TRUE(sameResults(got[t], ref, 10, t % 3 != 2))
                << "thread " << t << ": overlap " << overlap(got[t], ref, 10);
    }
}

TEST(GpuReliabilityThreads, AddAndResetDuringSearchesAreSerialised) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const auto x = clusteredVectors(6000, kD, 30, 81);
    const auto q = clusteredVectors(sized(150, 30), kD, 30, 82);
    constexpr int kAdds = 4;
    std::vector<std::vector<float>> batches;
    for (int b = 0; b < kAdds; ++b) batches.push_back(clusteredVectors(1000, kD, 30, 90 + b));
    PartUnits units;  // a unit: an index type
    for (int type = 0; type < 3; ++type) {
        if (!units.next()) continue;
        // small: the graph takes prefixes of x and of the batches (its build
        // and merges dominate); the LSH keeps all rows (Auto: the work queue
        // before the adds, > 256 candidates per query; the heap after them)
        const int64_t n0 = type == 2 ? graphRows(6000) : 6000;
        const int64_t nAdd = type == 2 ? sized<int64_t>(1000, 250) : 1000;
        auto make = [&] { return builtIndex(type, &res, x, n0); };
        // the states a search may see: after 0 .. kAdds adds, serially
        std::vector<Snapshot> states;
        {
            auto ref = make();
            states.push_back(snapshot(*ref, q, 10));
            for (int b = 0; b < kAdds; ++b) {
                ref->add(nAdd, batches[b].data());
                states.push_back(snapshot(*ref, q, 10));
            }
        }
        auto idx = make();
        std::atomic<bool> writerDone{false};
        std::atomic<int> bad{0}, errors{0}, searches{0};
        runThreads(4, [&](int t) {
            try {
                if (t == 0) {
                    for (int b = 0; b < kAdds; ++b) idx->add(nAdd, batches[b].data());
                    writerDone = true;
                    return;
                }
                do {
                    // (ntotal is read outside the search: compare the results only)
                    Snapshot s = snapshot(*idx, q, 10);
                    bool known = false;
                    for (auto& st : states) known = known || sameResults(s, st, 10, type != 2);
                    if (!known) bad++;
                    searches++;
                } while (!writerDone.load());
            } catch (...) {
                errors++;
            }
        });
        EXPECT_EQ(bad.load(), 0) << "type " << type << ": a search saw a state no serial run has";
        EXPECT_EQ(errors.load(), 0);
        EXPECT_GT(searches.load(), 0);
        EXPECT_TRUE(sameResults(snapshot(*idx, q, 10), states.back(), 10, type != 2));
        EXPECT_EQ(idx->ntotal, states.back().ntotal);
        // reset while searching: every search sees the full or the empty index
        Snapshot full = snapshot(*idx, q, 10);
        std::atomic<int> unknown{0};
        runThreads(3, [&](int t) {
            if (t == 0) {
                idx->reset();
                return;
            }
            for (int r = 0; r < sized(5, 2); ++r) {
                Snapshot s = snapshot(*idx, q, 10);
                bool empty = true;
                for (idx_t l : s.I) empty = empty && l == -1;
                if (!sameResults(s, full, 10, true) && !empty) unknown++;
            }
        });
        EXPECT_EQ(unknown.load(), 0);
        EXPECT_EQ(idx->ntotal, 0);
    }
}

}  // namespace
}  // namespace gpu
}  // namespace faiss_ext
