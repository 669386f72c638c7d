// Bad input to the three GPU indexes (README.md, "Bad inputs"): each refused
// call throws faiss::FaissException with a message that names the problem
// and leaves the index as it was (same ntotal, the same search results bit
// for bit). For each of GpuIndexQuickSelectFlat, GpuIndexBiLevelLSH and
// GpuKnnGraphGNND (GpuBadInput/Kinds.*):
//   KAndNq             k <= 0, n < 0 refused; nq = 0 a no-op (null pointers allowed)
//   KLargerThanNtotal  rows padded with label -1 and distance +inf (exact
//                      flat: exactly ntotal real results)
//   NullPointers       x / distances / labels null with n > 0 (add, search, train)
//   NanAndInf          the NaN / Inf policy: a NaN or +-Inf component in
//                      train / add / search input, host or device memory,
//                      is refused naming the row ("NaN or infinite")
//   WrongDimension     constructors with d <= 0, copyFrom of another d
//   HugeN              n x d past size_t and n past the index's limits, in
//                      a child process (a crash fails the test, not the suite)
// and per index the limits (k > 4096 for GNND search, k > 1024 with the
// LSH heap, k > 8192 with the merge queue), search before train (LSH),
// a device that does not exist and the cloner's null / bad arguments
// (GpuBadInputNoGpu.*: these run without a GPU too). Skipped without a GPU.
#include "BadInputTestUtils.h"
#include "TestUtils.h"

#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/impl/FaissException.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace faiss_ext {
namespace {

using gpu::GpuIndexBiLevelLSH;
using gpu::GpuIndexQuickSelectFlat;
using gpu::GpuKnnGraphGNND;
using gpu::StandardGpuResources;
using idx_t = int64_t;
using test::expectRefused;
using test::kSeed;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kD = 12;
constexpr int kTrain = 800;
constexpr int kK = 5;
constexpr int kGnndDegree = 8;

enum class Kind { Flat, Lsh, Gnnd };

std::string kindName(Kind k) {
    return k == Kind::Flat ? "QuickSelectFlat" : k == Kind::Lsh ? "BiLevelLSH" : "KnnGraphGNND";
}

BiLevelLSHConfig lshConfig() {
    BiLevelLSHConfig c;
    c.treeDepth = 3;
    c.nTables = 4;
    c.nProjections = 5;
    return c;
}

/// Device copy of host floats, freed at the end of the scope.
struct DeviceFloats {
    float* p = nullptr;
    explicit DeviceFloats(const std::vector<float>& h) {
        EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), h.size() * sizeof(float)), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice),
                  cudaSuccess);
        faiss_ext::test::syncAfterHostCopy();
    }
    ~DeviceFloats() { cudaFree(p); }
    DeviceFloats(const DeviceFloats&) = delete;
    DeviceFloats& operator=(const DeviceFloats&) = delete;
};

class GpuBadInput : public ::testing::TestWithParam<Kind> {
  protected:
    void SetUp() override {
        FAISS_EXT_REQUIRE_GPU();
        x_ = test::clusteredVectors(kTrain, kD, 8, kSeed);
        q_ = test::clusteredVectors(7, kD, 8, kSeed + 1);
        idx_ = make(kTrain);
    }

    /// A new index of this test's kind holding the first n training vectors
    /// (LSH: trained on all of them first).
    std::unique_ptr<gpu::GpuIndex> make(int64_t n) {
        std::unique_ptr<gpu::GpuIndex> idx;
        switch (GetParam()) {
            case Kind::Flat:
                idx = std::make_unique<GpuIndexQuickSelectFlat>(&res_, kD);
                break;
            case Kind::Lsh:
                idx = std::make_unique<GpuIndexBiLevelLSH>(&res_, kD, lshConfig());
                idx->train(kTrain, x_.data());
                break;
            case Kind::Gnnd:
                idx = std::make_unique<GpuKnnGraphGNND>(&res_, kD, kGnndDegree);
                break;
        }
        if (n > 0) idx->add(n, x_.data());
        return idx;
    }

    StandardGpuResources res_;
    std::vector<float> x_, q_;
    std::unique_ptr<gpu::GpuIndex> idx_;
};

TEST_P(GpuBadInput, KAndNq) {
    gpu::GpuIndex& idx = *idx_;
    std::vector<float> D(7 * 10);
    std::vector<idx_t> I(7 * 10);
    for (idx_t k : {idx_t(0), idx_t(-1), std::numeric_limits<idx_t>::min()}) {
        expectRefused(idx, q_, kK, "k = " + std::to_string(k), {"k must be > 0"},
                      [&] { idx.search(7, q_.data(), k, D.data(), I.data()); });
    }
    expectRefused(idx, q_, kK, "search n = -1", {"n must be >= 0"},
                  [&] { idx.search(-1, q_.data(), kK, D.data(), I.data()); });
    expectRefused(idx, q_, kK, "add n = -1", {"n must be >= 0"},
                  [&] { idx.add(-1, x_.data()); });
    // n = 0: no-ops, null pointers allowed
    const test::IndexSnapshot before = test::snapshotOf(idx, q_, kK);
    idx.search(0, nullptr, kK, nullptr, nullptr);
    idx.add(0, nullptr);
    EXPECT_TRUE(test::sameSnapshot(before, test::snapshotOf(idx, q_, kK)));
}

TEST_P(GpuBadInput, KLargerThanNtotalPadsWithMinusOneAndInf) {
    const int64_t n = 20;
    auto small = make(n);
    for (idx_t k : {idx_t(21), idx_t(64), idx_t(3000)}) {
        std::vector<float> D(size_t(7 * k));
        std::vector<idx_t> I(size_t(7 * k));
        small->search(7, q_.data(), k, D.data(), I.data());
        for (int q = 0; q < 7; ++q) {
            int valid = 0;
            for (idx_t j = 0; j < k; ++j) {
                const idx_t id = I[q * k + j];
                const float dist = D[q * k + j];
                if (j == valid && id >= 0) {
                    ASSERT_LT(id, n) << kindName(GetParam()) << " query " << q << " rank " << j;
                    ASSERT_TRUE(std::isfinite(dist));
                    if (j > 0) {
                        ASSERT_LE(D[q * k + j - 1], dist) << "query " << q << " k " << k;
                    }
                    valid = int(j) + 1;
                } else {
                    ASSERT_EQ(id, -1) << kindName(GetParam()) << " query " << q << " rank " << j
                                      << " k " << k << ": padding must be a suffix of -1";
                    ASSERT_TRUE(std::isinf(dist) && dist > 0) << "padding distance must be +inf";
                }
            }
            if (GetParam() == Kind::Flat) {
                EXPECT_EQ(valid, n) << "exact search returns every vector, k " << k;
            } else if (GetParam() == Kind::Gnnd) {
                EXPECT_GE(valid, 1) << "GNND k " << k;
            }  // LSH: a query whose group holds none of the 20 vectors finds nothing
        }
    }
}

TEST_P(GpuBadInput, NullPointers) {
    gpu::GpuIndex& idx = *idx_;
    std::vector<float> D(7 * kK);
    std::vector<idx_t> I(7 * kK);
    expectRefused(idx, q_, kK, "search x null", {"null"},
                  [&] { idx.search(7, nullptr, kK, D.data(), I.data()); });
    expectRefused(idx, q_, kK, "search distances null", {"distances"},
                  [&] { idx.search(7, q_.data(), kK, nullptr, I.data()); });
    expectRefused(idx, q_, kK, "search labels null", {"labels"},
                  [&] { idx.search(7, q_.data(), kK, D.data(), nullptr); });
    expectRefused(idx, q_, kK, "add x null", {"null"}, [&] { idx.add(30, nullptr); });
    if (GetParam() == Kind::Lsh) {
        GpuIndexBiLevelLSH fresh(&res_, kD, lshConfig());
        expectRefused(fresh, q_, kK, "train x null", {"null"},
                      [&] { fresh.train(100, nullptr); });
        EXPECT_FALSE(fresh.is_trained);
    }
}

TEST_P(GpuBadInput, NanAndInfAreRefusedNamingTheRow) {
    gpu::GpuIndex& idx = *idx_;
    std::vector<float> D(7 * kK);
    std::vector<idx_t> I(7 * kK);
    for (const auto& [name, value] : std::vector<std::pair<const char*, float>>{
                 {"NaN", kNaN}, {"+Inf", kInf}, {"-Inf", -kInf}}) {
        const std::string tag = std::string(" (") + name + ")";
        std::vector<float> q = q_;
        q[5 * kD + 3] = value;
        expectRefused(idx, q_, kK, "search" + tag, {"NaN or infinite", " 5 "},
                      [&] { idx.search(7, q.data(), kK, D.data(), I.data()); });
        std::vector<float> add = test::clusteredVectors(30, kD, 8, kSeed + 2);
        add[17 * kD + kD - 1] = value;
        expectRefused(idx, q_, kK, "add" + tag, {"NaN or infinite", " 17 "},
                      [&] { idx.add(30, add.data()); });
        {
            DeviceFloats dq(q), dadd(add);
            expectRefused(idx, q_, kK, "search, device queries" + tag, {"NaN or infinite", " 5 "},
                          [&] { idx.search(7, dq.p, kK, D.data(), I.data()); });
            expectRefused(idx, q_, kK, "add, device vectors" + tag, {"NaN or infinite", " 17 "},
                          [&] { idx.add(30, dadd.p); });
        }
        if (GetParam() == Kind::Lsh) {
            GpuIndexBiLevelLSH fresh(&res_, kD, lshConfig());
            std::vector<float> train(x_.begin(), x_.begin() + 100 * kD);
            train[63 * kD] = value;
            expectRefused(fresh, q_, kK, "train" + tag, {"NaN or infinite", " 63 "},
                          [&] { fresh.train(100, train.data()); });
            DeviceFloats dtrain(train);
            expectRefused(fresh, q_, kK, "train, device vectors" + tag,
                          {"NaN or infinite", " 63 "}, [&] { fresh.train(100, dtrain.p); });
            EXPECT_FALSE(fresh.is_trained) << tag;
        }
    }
}

TEST_P(GpuBadInput, WrongDimension) {
    for (int d : {0, -1, std::numeric_limits<int>::min()}) {
        std::string problem;
        switch (GetParam()) {
            case Kind::Flat:
                problem = test::refusalProblem(
                        [&] { GpuIndexQuickSelectFlat bad(&res_, d); }, {"must be > 0"});
                break;
            case Kind::Lsh:
                problem = test::refusalProblem(
                        [&] { GpuIndexBiLevelLSH bad(&res_, d, lshConfig()); }, {"must be > 0"});
                break;
            case Kind::Gnnd:
                problem = test::refusalProblem(
                        [&] { GpuKnnGraphGNND bad(&res_, d, kGnndDegree); }, {"must be > 0"});
                break;
        }
        EXPECT_EQ(problem, "") << kindName(GetParam()) << " d = " << d;
    }
    // copyFrom a twin of another dimension: refused, nothing changed
    if (GetParam() == Kind::Lsh) {
        auto& lsh = static_cast<GpuIndexBiLevelLSH&>(*idx_);
        IndexBiLevelLSH other(kD + 1, lshConfig());
        expectRefused(lsh, q_, kK, "LSH copyFrom d + 1", {"dimension"},
                      [&] { lsh.copyFrom(&other); });
        expectRefused(lsh, q_, kK, "LSH copyFrom null", {"null"}, [&] { lsh.copyFrom(nullptr); });
    } else if (GetParam() == Kind::Gnnd) {
        auto& g = static_cast<GpuKnnGraphGNND&>(*idx_);
        faiss::IndexNNDescentFlat other(kD + 1, kGnndDegree);
        expectRefused(g, q_, kK, "GNND copyFrom d + 1", {"dimension"},
                      [&] { g.copyFrom(&other); });
        expectRefused(g, q_, kK, "GNND copyFrom null", {"null"}, [&] { g.copyFrom(nullptr); });
        for (int k : {0, -1, 100000}) {
            EXPECT_EQ(test::refusalProblem([&] { GpuKnnGraphGNND bad(&res_, kD, k); }, {}), "")
                << "degree " << k;
        }
    } else {
        auto& f = static_cast<GpuIndexQuickSelectFlat&>(*idx_);
        expectRefused(f, q_, kK, "Flat copyFrom null", {"null"}, [&] { f.copyFrom(nullptr); });
    }
}

// In child processes (gtest death tests): a crash fails only the expectation.
TEST_P(GpuBadInput, HugeNIsRefusedWithoutTouchingTheVectors) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    gpu::GpuIndex& idx = *idx_;
    const test::IndexSnapshot before = test::snapshotOf(idx, q_, kK);
    auto unchanged = [&] { return test::sameSnapshot(before, test::snapshotOf(idx, q_, kK)); };
    std::vector<float> D(7 * kK);
    std::vector<idx_t> I(7 * kK);
    const idx_t huge = std::numeric_limits<idx_t>::max();
    // n x d floats past size_t: nobody can hold them; refused before x is read
    EXPECT_REFUSED_IN_CHILD(idx.add(huge, x_.data()), "", unchanged);
    EXPECT_REFUSED_IN_CHILD(idx.add(huge / 2, x_.data()), "", unchanged);
    EXPECT_REFUSED_IN_CHILD(idx.search(huge / 2, q_.data(), kK, D.data(), I.data()), "",
                            unchanged);
    // past the index's own documented limit (2^31 - 2 vectors for LSH,
    // 0x7FFFFFF0 for GNND's 32-bit ids)
    if (GetParam() != Kind::Flat) {
        EXPECT_REFUSED_IN_CHILD(idx.add(idx_t(1) << 31, x_.data()), "", unchanged);
    }
    if (GetParam() == Kind::Lsh) {
        GpuIndexBiLevelLSH fresh(&res_, kD, lshConfig());
        EXPECT_REFUSED_IN_CHILD(fresh.train(huge / 2, x_.data()), "",
                                [&] { return !fresh.is_trained; });
    }
}

INSTANTIATE_TEST_SUITE_P(Kinds, GpuBadInput,
                         ::testing::Values(Kind::Flat, Kind::Lsh, Kind::Gnnd),
                         [](const ::testing::TestParamInfo<Kind>& i) { return kindName(i.param); });

// ---- per-index limits ----

TEST(GpuBadInputLimits, EachIndexRefusesKPastItsLimit) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // Sanitizer-sized: 256 vectors, still past 2 x GNND's list length 32 (an
    // iterated build, not the exact small-set graph) and LSH's 8 groups.
    const int n = test::sized(kTrain, 256);
    auto x = test::clusteredVectors(n, kD, 8, kSeed);
    auto q = test::clusteredVectors(3, kD, 8, kSeed + 1);
    std::vector<float> D(3 * 8193);
    std::vector<idx_t> I(3 * 8193);

    GpuKnnGraphGNND g(&res, kD, kGnndDegree);
    g.add(n, x.data());
    expectRefused(g, q, kK, "GNND k = 4097", {"4096"},
                  [&] { g.search(3, q.data(), 4097, D.data(), I.data()); });
    gpu::SearchParametersGNND gp;
    gp.searchL = 10;
    expectRefused(g, q, kK, "GNND searchL < k", {"searchL"},
                  [&] { g.search(3, q.data(), 20, D.data(), I.data(), &gp); });

    GpuIndexBiLevelLSH lsh(&res, kD, lshConfig());
    // before training: add and search refused
    expectRefused(lsh, q, kK, "LSH add before train", {"not trained"},
                  [&] { lsh.add(10, x.data()); });
    expectRefused(lsh, q, kK, "LSH search before train", {"not trained"},
                  [&] { lsh.search(3, q.data(), kK, D.data(), I.data()); });
    lsh.train(n, x.data());
    lsh.add(n, x.data());
    SearchParametersBiLevelLSH heap;
    heap.shortList = BiLevelShortList::Heap;
    expectRefused(lsh, q, kK, "LSH heap k = 1025", {"1024"},
                  [&] { lsh.search(3, q.data(), 1025, D.data(), I.data(), &heap); });

    GpuIndexQuickSelectFlat flat(&res, kD);
    flat.add(n, x.data());
    (void)flat;  // the merge queue's k <= 8192 needs ntotal > 8192
    auto big = test::clusteredVectors(9000, kD, 8, kSeed + 3);
    GpuIndexQuickSelectFlat f2(&res, kD);
    f2.add(9000, big.data());
    gpu::SearchParametersQuickSelectFlat mq;
    mq.selectAlgo = gpu::SelectAlgo::MergeQueue;
    expectRefused(f2, q, kK, "merge queue k = 8193", {"merge queue"},
                  [&] { f2.search(3, q.data(), 8193, D.data(), I.data(), &mq); });
}

// ---- no GPU needed: a device that does not exist, the cloner's arguments ----

TEST(GpuBadInputNoGpu, ADeviceThatDoesNotExistIsRefused) {
    StandardGpuResources res;
    gpu::GpuIndexQuickSelectFlatConfig fc;
    fc.device = 64;
    EXPECT_EQ(test::refusalProblem([&] { GpuIndexQuickSelectFlat i(&res, kD, FlatMetric::L2, fc); },
                                   {"device 64"}),
              "");
    gpu::GpuIndexBiLevelLSHConfig lc;
    lc.device = 64;
    EXPECT_EQ(test::refusalProblem([&] { GpuIndexBiLevelLSH i(&res, kD, lshConfig(), lc); },
                                   {"device 64"}),
              "");
    gpu::GpuKnnGraphGNNDConfig gc;
    gc.device = 64;
    EXPECT_EQ(test::refusalProblem(
                      [&] { GpuKnnGraphGNND i(&res, kD, kGnndDegree, FlatMetric::L2, gc); },
                      {"device 64"}),
              "");
    gc.device = -1;
    EXPECT_EQ(test::refusalProblem(
                      [&] { GpuKnnGraphGNND i(&res, kD, kGnndDegree, FlatMetric::L2, gc); },
                      {"device -1"}),
              "");
    EXPECT_EQ(test::refusalProblem([&] { GpuIndexQuickSelectFlat i(nullptr, kD); }, {"null"}),
              "");
}

TEST(GpuBadInputNoGpu, ClonerRefusesNullAndMissingDevices) {
    StandardGpuResources res;
    faiss::IndexFlatL2 flat(kD);
    EXPECT_EQ(test::refusalProblem([&] { delete gpu::index_cpu_to_gpu(&res, 0, nullptr); },
                                   {"null index"}),
              "");
    EXPECT_EQ(test::refusalProblem([&] { delete gpu::index_cpu_to_gpu(nullptr, 0, &flat); },
                                   {"null"}),
              "");
    EXPECT_EQ(test::refusalProblem([&] { delete gpu::index_cpu_to_gpu(&res, 64, &flat); },
                                   {"device 64"}),
              "");
    EXPECT_EQ(test::refusalProblem([&] { delete gpu::index_gpu_to_cpu(nullptr); }, {"null"}), "");
}

}  // namespace
}  // namespace faiss_ext
