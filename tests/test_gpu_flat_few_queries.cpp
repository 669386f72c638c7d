// The few-query engines of the exact flat search (impl/flat/FlatSearchPath.h):
// the fused few-query kernel and the radix large-k path, each forced on
// FlatStorage and compared with the tiled FP32 path of the same vectors
// (compareKnn: distances within FP32 rounding rank by rank, differing ids
// only where tied), and through the index's Auto dispatch against
// faiss::IndexFlat. Grid: nq, k, d, metric, corpora that are not a
// multiple of the kernels' tiles, k > nb, duplicates and all-equal vectors;
// small k (the warp merge of the fused path's chunk lists) at every nq.
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPath.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <random>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::FlatSearchOptions;
using faiss_ext::gpu::FlatSearchPath;
using faiss_ext::gpu::FlatStorage;
using faiss_ext::gpu::StandardGpuResources;
using faiss_ext::gpu::VectorStorage;
using namespace faiss_ext::test;

namespace {

/// Device memory for one test buffer.
template <typename T>
struct DeviceBuf {
    T* p = nullptr;
    explicit DeviceBuf(size_t n) {
        if (cudaMalloc(reinterpret_cast<void**>(&p), sizeof(T) * std::max<size_t>(n, 1)) !=
            cudaSuccess) {
            throw std::runtime_error("cudaMalloc failed");
        }
    }
    ~DeviceBuf() { cudaFree(p); }
    DeviceBuf(const DeviceBuf&) = delete;
    DeviceBuf& operator=(const DeviceBuf&) = delete;
};

struct Knn {
    std::vector<float> D;
    std::vector<int64_t> I;
};

/// FlatStorage::search on `path` with host queries in and host results out.
Knn searchPath(const FlatStorage& store, const std::vector<float>& xq, int d, int64_t k,
               FlatSearchPath path) {
    const int64_t nq = int64_t(xq.size()) / d;
    DeviceBuf<float> q(xq.size()), D(size_t(nq * k));
    DeviceBuf<int64_t> I(size_t(nq * k));
    EXPECT_EQ(cudaMemcpy(q.p, xq.data(), sizeof(float) * xq.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    faiss_ext::test::syncAfterHostCopy();
    FlatSearchOptions opt;
    opt.path = path;
    store.search(q.p, nq, k, D.p, I.p, opt);
    Knn r;
    r.D.resize(size_t(nq * k));
    r.I.resize(size_t(nq * k));
    EXPECT_EQ(cudaMemcpy(r.D.data(), D.p, sizeof(float) * r.D.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(r.I.data(), I.p, sizeof(int64_t) * r.I.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return r;
}

std::string describe(const char* what, int64_t nb, int64_t nq, int64_t k, int d, FlatMetric m) {
    return std::string(what) + " nb=" + std::to_string(nb) + " nq=" + std::to_string(nq) +
           " k=" + std::to_string(k) + " d=" + std::to_string(d) + " metric=" +
           faiss_ext::flatMetricName(m) + " seed=" + std::to_string(kSeed);
}

/// `path` forced on a device FlatStorage of xb equals the tiled path.
void checkPathEqualsTiled(StandardGpuResources& res, FlatSearchPath path, FlatMetric metric, int d,
                          const std::vector<float>& xb, const std::vector<float>& xq, int64_t k) {
    const int64_t nb = int64_t(xb.size()) / d, nq = int64_t(xq.size()) / d;
    FlatStorage store(res.getResources().get(), 0, d, metric, VectorStorage::Device);
    store.append(xb.data(), nb, /*prepared=*/false);
    const Knn got = searchPath(store, xq, d, k, path);
    const Knn ref = searchPath(store, xq, d, k, FlatSearchPath::Tiled);
    const std::string err = compareKnn(nq, k, got.D.data(), got.I.data(), ref.D.data(),
                                       ref.I.data(), metric != FlatMetric::L2);
    EXPECT_EQ(err, "") << describe(faiss_ext::gpu::flatSearchPathName(path), nb, nq, k, d, metric);
}

TEST(GpuFlatFewQueries, FusedEqualsTiledOnGrid) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (int d : {1, 3, 97, 128, 960}) {
        // Not a multiple of the kernel's 256-vector tiles.
        const int64_t nb = d >= 960 ? 5003 : sized<int64_t>(20011, 3001);
        const std::vector<float> xb = randomVectors(nb, d, kSeed + d);
        for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
            for (int64_t nq : {1, 3, 17, 32}) {
                const std::vector<float> xq = randomVectors(nq, d, kSeed + 7 * d + nq);
                for (int64_t k : {1, 10, 100, 1024}) {
                    checkPathEqualsTiled(res, FlatSearchPath::FusedFewQuery, metric, d, xb, xq, k);
                }
            }
        }
    }
}

/// Small k (the warp merge of the chunk lists, k <= 32, and the quick
/// multi-select merge just above it) for every nq of the fused path, over
/// float4 rows (d 64) and scalar rows (d 37).
TEST(GpuFlatFewQueries, FusedSmallKEveryNq) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(50021, 20011);
    for (int d : {64, 37}) {
        const std::vector<float> xb = randomVectors(nb, d, kSeed + d);
        for (int64_t nq = 1; nq <= 32; ++nq) {
            const std::vector<float> xq = randomVectors(nq, d, kSeed + 3 * d + nq);
            for (int64_t k : {1, 10, 32, 33}) {
                checkPathEqualsTiled(res, FlatSearchPath::FusedFewQuery, FlatMetric::L2, d, xb,
                                     xq, k);
            }
        }
        const std::vector<float> xq = randomVectors(5, d, kSeed + 1);
        checkPathEqualsTiled(res, FlatSearchPath::FusedFewQuery, FlatMetric::InnerProduct, d, xb,
                             xq, 10);
    }
}

/// The corpus ends in a tile of 5 vectors: where it is a chunk of its own,
/// its list is shorter than k and padded, and the pads must lose the merge.
TEST(GpuFlatFewQueries, FusedSmallKShortLastChunk) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    const std::vector<float> xb = randomVectors(40 * 256 + 5, d, kSeed);
    for (int64_t nq : {1, 4, 32}) {
        const std::vector<float> xq = randomVectors(nq, d, kSeed + nq);
        for (int64_t k : {10, 32}) {
            checkPathEqualsTiled(res, FlatSearchPath::FusedFewQuery, FlatMetric::L2, d, xb, xq, k);
        }
    }
}

TEST(GpuFlatFewQueries, FusedCosinePearsonAndClustered) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 64;
    const std::vector<float> xb = clusteredVectors(9000, d, 20, kSeed);
    const std::vector<float> xq = clusteredVectors(9, d, 20, kSeed + 1);
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct, FlatMetric::Cosine,
                              FlatMetric::Pearson}) {
        for (int64_t k : {5, 64, 300}) {
            checkPathEqualsTiled(res, FlatSearchPath::FusedFewQuery, metric, d, xb, xq, k);
        }
    }
}

/// k > nb: ranks nb .. k-1 are id -1 and an infinite distance.
void checkFusedPadsBeyondNb(StandardGpuResources& res, FlatMetric metric, int64_t nb, int64_t nq,
                            int64_t k) {
    const int d = 16;
    const std::vector<float> xb = randomVectors(nb, d, kSeed);
    const std::vector<float> xq = randomVectors(nq, d, kSeed + 1);
    checkPathEqualsTiled(res, FlatSearchPath::FusedFewQuery, metric, d, xb, xq, k);
    FlatStorage store(res.getResources().get(), 0, d, metric, VectorStorage::Device);
    store.append(xb.data(), nb, false);
    const Knn r = searchPath(store, xq, d, k, FlatSearchPath::FusedFewQuery);
    for (int64_t q = 0; q < nq; ++q) {
        for (int64_t j = nb; j < k; ++j) {
            EXPECT_EQ(r.I[size_t(q * k + j)], -1) << "query " << q << " rank " << j;
            EXPECT_TRUE(std::isinf(r.D[size_t(q * k + j)]));
        }
    }
}

TEST(GpuFlatFewQueries, FusedKBeyondNbPads) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        checkFusedPadsBeyondNb(res, metric, 50, 4, 100);
        checkFusedPadsBeyondNb(res, metric, 20, 32, 32);  // small k: kk = nb = 20
        checkFusedPadsBeyondNb(res, metric, 1, 3, 10);
    }
}

/// All vectors equal: every distance ties, so both engines must return ids
/// 0 .. k-1 in order (ties go to the smaller id).
void checkAllEqualTakesSmallestIds(FlatSearchPath path, int64_t nb, int64_t nq, int64_t k) {
    StandardGpuResources res;
    const int d = 8;
    std::vector<float> xb(size_t(nb) * d, 0.25f);
    const std::vector<float> xq = randomVectors(nq, d, kSeed);
    FlatStorage store(res.getResources().get(), 0, d, FlatMetric::L2, VectorStorage::Device);
    store.append(xb.data(), nb, false);
    const Knn r = searchPath(store, xq, d, k, path);
    for (int64_t q = 0; q < nq; ++q) {
        for (int64_t j = 0; j < k; ++j) {
            ASSERT_EQ(r.I[size_t(q * k + j)], j) << faiss_ext::gpu::flatSearchPathName(path)
                                                 << " query " << q << " rank " << j;
        }
    }
}

TEST(GpuFlatFewQueries, AllEqualVectorsTieBreakBySmallestId) {
    FAISS_EXT_REQUIRE_GPU();
    checkAllEqualTakesSmallestIds(FlatSearchPath::FusedFewQuery, 10007, 3, 100);
    checkAllEqualTakesSmallestIds(FlatSearchPath::FusedFewQuery, 10007, 2, 1024);
    // Small k: the warp merge of the chunk lists decides the ties.
    for (int64_t nq : {1, 7, 32}) {
        for (int64_t k : {1, 10, 32}) {
            checkAllEqualTakesSmallestIds(FlatSearchPath::FusedFewQuery, 10007, nq, k);
        }
    }
    // Ties fill the k-th value: the radix path's column passes decide.
    checkAllEqualTakesSmallestIds(FlatSearchPath::RadixLargeK, 30011, 3, 4097);
}

TEST(GpuFlatFewQueries, DuplicatedVectors) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    const std::vector<float> base = randomVectors(4000, d, kSeed);
    std::vector<float> xb;
    for (int rep = 0; rep < 3; ++rep) xb.insert(xb.end(), base.begin(), base.end());
    const std::vector<float> xq(base.begin(), base.begin() + 5 * d);  // queries among the vectors
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        checkPathEqualsTiled(res, FlatSearchPath::FusedFewQuery, metric, d, xb, xq, 30);
        checkPathEqualsTiled(res, FlatSearchPath::RadixLargeK, metric, d, xb, xq, 3000);
    }
}

TEST(GpuFlatFewQueries, RadixLargeKEqualsTiled) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    struct Shape {
        int64_t nb, nq, k;
        int d;
    };
    const std::vector<Shape> shapes = {
            {sized<int64_t>(100003, 20011), 1, 3000, 128},
            {sized<int64_t>(100003, 20011), 7, 4097, 97},
            {sized<int64_t>(300001, 40009), sized<int64_t>(256, 16), 32768, 3},
            {sized<int64_t>(100003, 40009), sized<int64_t>(200, 9), 3000, 128},
            {20011, 5, 4097, 960},
            {5000, 3, 2048, 1},
            // rows of a multiple of 4 (float4 loads of the sampled filter)
            {sized<int64_t>(100000, 40000), 20, 2048, 64},
    };
    for (const Shape& s : shapes) {
        const std::vector<float> xb = randomVectors(s.nb, s.d, kSeed + s.d);
        const std::vector<float> xq = randomVectors(s.nq, s.d, kSeed + s.nq);
        for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
            checkPathEqualsTiled(res, FlatSearchPath::RadixLargeK, metric, s.d, xb, xq, s.k);
        }
    }
}

TEST(GpuFlatFewQueries, RadixPathSampledFilterFlagsAndRedoesRows) {
    // The radix large-k path selects by the sampled-threshold filter where
    // it applies and redoes a block with a flagged row by radix selection.
    // d = 1 and query 0: the query's L2 keys are x_j^2, so the stored
    // vectors write its distance row. Its sampled entries (the sample
    // positions of row 0 of a block) are made far larger than the others:
    // the threshold then passes the whole row, the candidate buffer
    // overflows and the row is flagged. Query 1 (row 1, other sample
    // positions) is ordinary. Both must equal the tiled path.
    FAISS_EXT_REQUIRE_GPU();
    using namespace faiss_ext::gpu::select;
    StandardGpuResources res;
    const int64_t nb = 100000, k = 3000;
    ASSERT_TRUE(sampledThresholdKeysApply(nb, k));
    std::mt19937_64 rng(kSeed);
    std::uniform_real_distribution<float> unit(0.f, 1.f);
    std::vector<float> xb(static_cast<size_t>(nb));
    for (float& x : xb) x = 1.f + unit(rng);
    const SampledThresholdPlan plan = sampledThresholdPlan(nb, k);
    const int64_t runs = plan.samples / kSampledThresholdRunLength;
    for (int64_t i = 0; i < runs; ++i) {
        const int64_t s0 = sampledThresholdRunStart(0, i, nb, runs);
        for (int64_t e = 0; e < kSampledThresholdRunLength; ++e) xb[size_t(s0 + e)] = 100.f + unit(rng);
    }
    const std::vector<float> xq = {0.f, 0.f};
    const SampledThresholdCounters before = sampledThresholdCounters();
    checkPathEqualsTiled(res, FlatSearchPath::RadixLargeK, FlatMetric::L2, 1, xb, xq, k);
    const SampledThresholdCounters after = sampledThresholdCounters();
    EXPECT_GE(after.rows - before.rows, 2) << "the filter did not run";
    EXPECT_GE(after.fallbackRows - before.fallbackRows, 1) << "the overflowing row was not flagged";
}

TEST(GpuFlatFewQueries, RadixKBeyondNbPads) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    const std::vector<float> xb = randomVectors(3001, d, kSeed);
    const std::vector<float> xq = randomVectors(2, d, kSeed + 1);
    checkPathEqualsTiled(res, FlatSearchPath::RadixLargeK, FlatMetric::L2, d, xb, xq, 4097);
}

/// The index's Auto dispatch (fused at nq <= 32, k <= 1024; radix at large
/// k) against faiss::IndexFlat on the CPU.
TEST(GpuFlatFewQueries, AutoDispatchMatchesIndexFlat) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    struct Shape {
        int64_t nq, k;
    };
    const int d = 40;
    const int64_t nb = 30011;
    const std::vector<float> xb = randomVectors(nb, d, kSeed);
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        faiss_ext::gpu::GpuIndexQuickSelectFlat gpu(&res, d, metric);
        gpu.add(nb, xb.data());
        faiss::IndexFlat cpu(d, faiss_ext::toFaissMetric(metric));
        cpu.add(nb, xb.data());
        for (Shape s : {Shape{1, 10}, Shape{3, 100}, Shape{17, 1024}, Shape{64, 10},
                        Shape{5, 3000}, Shape{40, 4097}}) {
            const std::vector<float> xq = randomVectors(s.nq, d, kSeed + s.nq);
            std::vector<float> D(size_t(s.nq * s.k)), refD(D.size());
            std::vector<int64_t> I(D.size()), refI(D.size());
            gpu.search(s.nq, xq.data(), s.k, D.data(), I.data());
            cpu.search(s.nq, xq.data(), s.k, refD.data(), refI.data());
            EXPECT_EQ(compareKnn(s.nq, s.k, D.data(), I.data(), refD.data(), refI.data(),
                                 metric != FlatMetric::L2),
                      "")
                    << describe("auto", nb, s.nq, s.k, d, metric);
        }
    }
}

TEST(GpuFlatFewQueries, ForcedPathThatCannotRunThrows) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    const std::vector<float> xb = randomVectors(2000, d, kSeed);
    const std::vector<float> xq = randomVectors(33, d, kSeed + 1);
    FlatStorage dev(res.getResources().get(), 0, d, FlatMetric::L2, VectorStorage::Device);
    dev.append(xb.data(), 2000, false);
    EXPECT_THROW(searchPath(dev, xq, d, 10, FlatSearchPath::FusedFewQuery), faiss::FaissException);
    const std::vector<float> one(xq.begin(), xq.begin() + d);
    EXPECT_THROW(searchPath(dev, one, d, 1025, FlatSearchPath::FusedFewQuery),
                 faiss::FaissException);
    FlatStorage host(res.getResources().get(), 0, d, FlatMetric::L2, VectorStorage::Host);
    host.append(xb.data(), 2000, false);
    EXPECT_THROW(searchPath(host, one, d, 10, FlatSearchPath::FusedFewQuery),
                 faiss::FaissException);
    EXPECT_THROW(searchPath(host, one, d, 3000, FlatSearchPath::RadixLargeK),
                 faiss::FaissException);
    // Auto on host storage keeps the tiled path and answers.
    const Knn r = searchPath(host, one, d, 10, FlatSearchPath::Auto);
    EXPECT_EQ(r.I[0] >= 0, true);
}

TEST(GpuFlatFewQueries, DeferredQueryCheckRefusesBeforeWritingResults) {
    // Device queries are checked by kernels queued before the search
    // (GpuIndex::defersFiniteCheck_): the host waits for them only before the
    // first result is written. A non-finite query must still be refused by
    // name (the first bad row) with the outputs untouched, on every path
    // (fused at k 10, radix at k 2048, tiled at 40 queries, TF32-bounded),
    // for inputs checked by one block and, past kSmallCheckEntries entries,
    // by a grid (tiled at 4,200 x 16, radix at 512 x 160), and the next
    // search of finite queries must answer as the CPU does.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = 5000;
    struct Case {
        int d;
        int64_t nq, k;
        faiss_ext::gpu::DistancePrecision precision;
    };
    using faiss_ext::gpu::DistancePrecision;
    for (const Case& c :
         {Case{16, 1, 10, DistancePrecision::FP32}, Case{16, 3, 10, DistancePrecision::FP32},
          Case{16, 3, 2048, DistancePrecision::FP32}, Case{16, 40, 10, DistancePrecision::FP32},
          Case{16, 3, 10, DistancePrecision::TF32Bounded},
          Case{16, 4200, 10, DistancePrecision::FP32},
          Case{160, 512, 2048, DistancePrecision::FP32}}) {
        const int d = c.d;
        ASSERT_EQ(c.nq * d > faiss_ext::gpu::kSmallCheckEntries, c.nq > 100);  // both checks run
        const std::vector<float> xb = randomVectors(nb, d, kSeed);
        faiss_ext::gpu::GpuIndexQuickSelectFlat gpu(&res, d);
        gpu.add(nb, xb.data());
        faiss::IndexFlatL2 cpu(d);
        cpu.add(nb, xb.data());
        faiss_ext::gpu::SearchParametersQuickSelectFlat params;
        params.distancePrecision = c.precision;
        std::vector<float> xq = randomVectors(c.nq, d, kSeed + c.nq);
        std::vector<float> bad = xq;
        // the last row, and in the grid's cases an earlier one: the first is named
        const int64_t firstBad = c.nq > 100 ? c.nq / 2 : c.nq - 1;
        bad[size_t(firstBad) * d + 3] = std::nanf("");
        bad[size_t(c.nq - 1) * d + 5] = std::numeric_limits<float>::infinity();
        DeviceBuf<float> q(xq.size()), D(size_t(c.nq * c.k));
        DeviceBuf<int64_t> I(size_t(c.nq * c.k));
        ASSERT_EQ(cudaMemset(D.p, 0x7f, sizeof(float) * c.nq * c.k), cudaSuccess);
        ASSERT_EQ(cudaMemset(I.p, 0x7f, sizeof(int64_t) * c.nq * c.k), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(q.p, bad.data(), sizeof(float) * bad.size(), cudaMemcpyHostToDevice),
                  cudaSuccess);
        syncAfterHostCopy();
        const std::string want = "query " + std::to_string(firstBad) + " has a NaN";
        try {
            gpu.search(c.nq, q.p, c.k, D.p, I.p, &params);
            ADD_FAILURE() << "a NaN query was searched, nq " << c.nq << " k " << c.k;
        } catch (const faiss::FaissException& e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
        std::vector<int64_t> hostI(size_t(c.nq * c.k));
        ASSERT_EQ(cudaMemcpy(hostI.data(), I.p, sizeof(int64_t) * hostI.size(),
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
        int64_t untouched;
        std::memset(&untouched, 0x7f, sizeof(untouched));
        EXPECT_EQ(std::count(hostI.begin(), hostI.end(), untouched), c.nq * c.k)
                << "labels written by a refused search, nq " << c.nq << " k " << c.k;
        // The same buffers, finite queries: the CPU's answer.
        ASSERT_EQ(cudaMemcpy(q.p, xq.data(), sizeof(float) * xq.size(), cudaMemcpyHostToDevice),
                  cudaSuccess);
        syncAfterHostCopy();
        gpu.search(c.nq, q.p, c.k, D.p, I.p, &params);
        std::vector<float> gotD(size_t(c.nq * c.k)), refD(gotD.size());
        std::vector<int64_t> gotI(gotD.size()), refI(gotD.size());
        ASSERT_EQ(cudaMemcpy(gotD.data(), D.p, sizeof(float) * gotD.size(), cudaMemcpyDeviceToHost),
                  cudaSuccess);
        ASSERT_EQ(cudaMemcpy(gotI.data(), I.p, sizeof(int64_t) * gotI.size(),
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
        cpu.search(c.nq, xq.data(), c.k, refD.data(), refI.data());
        EXPECT_EQ(compareKnn(c.nq, c.k, gotD.data(), gotI.data(), refD.data(), refI.data(), false,
                             1e-4f, 1e-4f),
                  "")
                << "nq " << c.nq << " k " << c.k;
    }
}

}  // namespace
