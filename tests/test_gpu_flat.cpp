// GpuIndexQuickSelectFlat against faiss::IndexFlat (ties aside), edge cases,
// bad input, device pointers, tiling.
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <memory>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

struct Case {
    int64_t nb, nq, k;
    int d;
    FlatMetric metric;
};

std::string describe(const Case& c) {
    return "nb=" + std::to_string(c.nb) + " nq=" + std::to_string(c.nq) +
           " k=" + std::to_string(c.k) + " d=" + std::to_string(c.d) +
           " metric=" + faiss_ext::flatMetricName(c.metric) + " seed=" + std::to_string(kSeed);
}

/// Runs ours and faiss::IndexFlat (on prepared vectors) and compares.
void checkAgainstFaiss(StandardGpuResources& res, const Case& c, const std::vector<float>& xb,
                       const std::vector<float>& xq) {
    GpuIndexQuickSelectFlat gpu(&res, c.d, c.metric);
    gpu.add(c.nb, xb.data());
    ASSERT_EQ(gpu.ntotal, c.nb);

    std::vector<float> pb(xb), pq(xq);
    faiss_ext::prepareVectors(c.metric, c.nb, c.d, pb.data());
    faiss_ext::prepareVectors(c.metric, c.nq, c.d, pq.data());
    faiss::IndexFlat cpu(c.d, faiss_ext::toFaissMetric(c.metric));
    cpu.add(c.nb, pb.data());

    std::vector<float> D(c.nq * c.k), refD(c.nq * c.k);
    std::vector<int64_t> I(c.nq * c.k), refI(c.nq * c.k);
    gpu.search(c.nq, xq.data(), c.k, D.data(), I.data());
    cpu.search(c.nq, pq.data(), c.k, refD.data(), refI.data());
    bool ip = c.metric != FlatMetric::L2;
    std::string err = compareKnn(c.nq, c.k, D.data(), I.data(), refD.data(), refI.data(), ip);
    EXPECT_EQ(err, "") << describe(c);
}

class GpuFlatGrid : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(GpuFlatGrid, MatchesIndexFlat) {
    FAISS_EXT_REQUIRE_GPU();
    const Case c = GetParam();
    StandardGpuResources res;
    auto xb = clusteredVectors(c.nb, c.d, 20, kSeed);
    auto xq = clusteredVectors(c.nq, c.d, 20, kSeed + 1);
    checkAgainstFaiss(res, c, xb, xq);
}

INSTANTIATE_TEST_SUITE_P(
        Grid, GpuFlatGrid,
        ::testing::Values(Case{1000, 50, 1, 32, FlatMetric::L2},           // k = 1
                          Case{1000, 50, 1000, 32, FlatMetric::L2},        // k = ntotal
                          Case{1000, 5, 1500, 32, FlatMetric::L2},         // k > ntotal: padding
                          Case{20000, 20, 5000, 64, FlatMetric::L2},       // k = 5000 (> 4096 sort)
                          Case{20000, 1, 10, 64, FlatMetric::L2},          // nq = 1
                          Case{5000, 30, 10, 1, FlatMetric::L2},           // d = 1 (many ties)
                          Case{5000, 30, 10, 3, FlatMetric::L2},           // d = 3
                          Case{5000, 30, 100, 97, FlatMetric::L2},         // d = 97
                          Case{5000, 30, 100, 960, FlatMetric::L2},        // d = 960
                          Case{30000, 3000, 10, 32, FlatMetric::L2},       // warp per row
                          Case{30000, 3000, 300, 16, FlatMetric::InnerProduct},
                          Case{50000, 40, 64, 128, FlatMetric::InnerProduct},
                          Case{5000, 40, 20, 96, FlatMetric::Cosine},
                          Case{5000, 40, 20, 96, FlatMetric::Pearson},
                          Case{1, 3, 1, 5, FlatMetric::L2},               // nb = 1
                          Case{7, 3, 5, 5, FlatMetric::L2},               // odd nb
                          Case{4099, 33, 17, 13, FlatMetric::L2},         // odd nb and d
                          Case{100003, 2500, 100, 8, FlatMetric::L2}));  // odd nb, many rows

TEST(GpuFlat, EmptyIndexPadsResults) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        GpuIndexQuickSelectFlat gpu(&res, 8, m);
        auto xq = randomVectors(3, 8, kSeed);
        std::vector<float> D(3 * 4, 0.f);
        std::vector<int64_t> I(3 * 4, 7);
        gpu.search(3, xq.data(), 4, D.data(), I.data());
        for (int i = 0; i < 12; ++i) {
            EXPECT_EQ(I[i], -1);
            EXPECT_TRUE(std::isinf(D[i]));
            EXPECT_EQ(D[i] > 0, m == FlatMetric::L2);
        }
    }
}

TEST(GpuFlat, ZeroQueriesIsANoOp) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexQuickSelectFlat gpu(&res, 8);
    auto xb = randomVectors(10, 8, kSeed);
    gpu.add(10, xb.data());
    gpu.search(0, nullptr, 5, nullptr, nullptr);
    EXPECT_EQ(gpu.ntotal, 10);
}

TEST(GpuFlat, AllEqualVectorsTieBreakBySmallestId) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 4;
    const int64_t nb = 10000, k = 300;
    std::vector<float> xb(nb * d, 0.5f);
    GpuIndexQuickSelectFlat gpu(&res, d);
    gpu.add(nb, xb.data());
    std::vector<float> q(d, 0.25f), D(k);
    std::vector<int64_t> I(k);
    gpu.search(1, q.data(), k, D.data(), I.data());
    for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(I[j], j) << "rank " << j;
        EXPECT_NEAR(D[j], 4 * 0.0625f, 1e-5f);
    }
}

TEST(GpuFlat, DuplicatedVectors) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    auto base = randomVectors(500, d, kSeed);
    std::vector<float> xb;
    for (int rep = 0; rep < 8; ++rep) xb.insert(xb.end(), base.begin(), base.end());
    auto xq = randomVectors(20, d, kSeed + 5);
    checkAgainstFaiss(res, Case{4000, 20, 50, d, FlatMetric::L2}, xb, xq);
}

TEST(GpuFlat, DevicePointers) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 24;
    const int64_t nb = 3000, nq = 17, k = 33;
    auto xb = randomVectors(nb, d, kSeed);
    auto xq = randomVectors(nq, d, kSeed + 2);
    float *dxb, *dxq, *dD;
    int64_t* dI;
    ASSERT_EQ(cudaMalloc((void**)&dxb, sizeof(float) * nb * d), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void**)&dxq, sizeof(float) * nq * d), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void**)&dD, sizeof(float) * nq * k), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void**)&dI, sizeof(int64_t) * nq * k), cudaSuccess);
    cudaMemcpy(dxb, xb.data(), sizeof(float) * nb * d, cudaMemcpyHostToDevice);
    faiss_ext::test::syncAfterHostCopy();
    cudaMemcpy(dxq, xq.data(), sizeof(float) * nq * d, cudaMemcpyHostToDevice);
    faiss_ext::test::syncAfterHostCopy();

    GpuIndexQuickSelectFlat gpu(&res, d);
    gpu.add(nb, dxb);
    // device in, device out
    gpu.search(nq, dxq, k, dD, dI);
    std::vector<float> D(nq * k), D2(nq * k), D3(nq * k);
    std::vector<int64_t> I(nq * k), I2(nq * k), I3(nq * k);
    cudaMemcpy(D.data(), dD, sizeof(float) * nq * k, cudaMemcpyDeviceToHost);
    cudaMemcpy(I.data(), dI, sizeof(int64_t) * nq * k, cudaMemcpyDeviceToHost);
    // device in, host out; host in, host out
    gpu.search(nq, dxq, k, D2.data(), I2.data());
    gpu.search(nq, xq.data(), k, D3.data(), I3.data());
    EXPECT_EQ(I, I2);
    EXPECT_EQ(I, I3);
    EXPECT_EQ(D, D2);

    faiss::IndexFlatL2 cpu(d);
    cpu.add(nb, xb.data());
    std::vector<float> refD(nq * k);
    std::vector<int64_t> refI(nq * k);
    cpu.search(nq, xq.data(), k, refD.data(), refI.data());
    EXPECT_EQ(compareKnn(nq, k, D.data(), I.data(), refD.data(), refI.data(), false), "");
    cudaFree(dxb);
    cudaFree(dxq);
    cudaFree(dD);
    cudaFree(dI);
}

TEST(GpuFlat, TiledSearchEqualsUntiled) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 32;
    // Sanitizer-sized: still 8 corpus tiles of >= 8 * 700 columns (so every
    // tile and the k = 700 merge take the filtered first pass) and 2-4 query tiles.
    const int64_t nb = sized<int64_t>(60003, 48003), nq = sized<int64_t>(300, 20);
    auto xb = clusteredVectors(nb, d, 30, kSeed);
    auto xq = clusteredVectors(nq, d, 30, kSeed + 3);
    for (int64_t k : {1, 10, 700}) {
        StandardGpuResources big, small;
        // forces corpus and query tiles
        small.setTempMemory(sized<size_t>(size_t(24) << 20, size_t(3) << 19));
        GpuIndexQuickSelectFlat a(&big, d), b(&small, d);
        a.add(nb, xb.data());
        b.add(nb, xb.data());
        std::vector<float> Da(nq * k), Db(nq * k);
        std::vector<int64_t> Ia(nq * k), Ib(nq * k);
        a.search(nq, xq.data(), k, Da.data(), Ia.data());
        b.search(nq, xq.data(), k, Db.data(), Ib.data());
        // Different tile shapes may use different GEMM kernels: equal up to
        // float rounding (and so up to near-ties).
        EXPECT_EQ(compareKnn(nq, k, Db.data(), Ib.data(), Da.data(), Ia.data(), false, 1e-5f, 1e-5f),
                  "")
                << "k=" << k;
    }
}

TEST(GpuFlat, TempMemoryTooSmallIsAClearError) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    res.setTempMemory(1024);
    const int d = 16, nb = 20000, k = 10, nq = 64;
    GpuIndexQuickSelectFlat gpu(&res, d);
    auto xb = randomVectors(nb, d, kSeed);
    gpu.add(nb, xb.data());
    // 64 queries take the tiled path, whose distance tile cannot fit 1 KiB.
    std::vector<float> D(size_t(nq) * k);
    std::vector<int64_t> I(size_t(nq) * k);
    EXPECT_THROW(gpu.search(nq, xb.data(), k, D.data(), I.data()), faiss::FaissException);
    EXPECT_EQ(gpu.ntotal, nb);
    // One query takes the fused path, which needs no temporary memory when
    // it keeps a single chunk: it runs, and equals the CPU reference.
    faiss::IndexFlatL2 cpu(d);
    cpu.add(nb, xb.data());
    std::vector<float> Dc(k);
    std::vector<int64_t> Ic(k);
    cpu.search(1, xb.data() + d, k, Dc.data(), Ic.data());
    ASSERT_NO_THROW(gpu.search(1, xb.data() + d, k, D.data(), I.data()));
    EXPECT_EQ(compareKnn(1, k, Dc.data(), Ic.data(), D.data(), I.data(), false, 1e-4f, 1e-4f), "");
}

TEST(GpuFlat, BadInputThrowsAndLeavesIndexUnchanged) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    auto xb = randomVectors(100, d, kSeed);
    GpuIndexQuickSelectFlat gpu(&res, d);
    gpu.add(100, xb.data());
    std::vector<float> D(10);
    std::vector<int64_t> I(10);
    EXPECT_THROW(gpu.search(1, xb.data(), 0, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(gpu.search(1, xb.data(), -3, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(gpu.search(1, nullptr, 5, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(gpu.search(1, xb.data(), 5, nullptr, I.data()), faiss::FaissException);
    EXPECT_THROW(gpu.search(1, xb.data(), 5, D.data(), nullptr), faiss::FaissException);
    EXPECT_THROW(gpu.search(-1, xb.data(), 5, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(gpu.add(5, nullptr), faiss::FaissException);
    EXPECT_THROW(gpu.add(-5, xb.data()), faiss::FaissException);
    std::vector<int64_t> ids(5, 1);
    EXPECT_THROW(gpu.add_with_ids(5, xb.data(), ids.data()), faiss::FaissException);
    EXPECT_THROW(gpu.reconstruct(100, D.data()), faiss::FaissException);
    EXPECT_THROW(gpu.reconstruct_n(90, 20, D.data()), faiss::FaissException);
    EXPECT_EQ(gpu.ntotal, 100);
    std::vector<float> r(d);
    gpu.reconstruct(42, r.data());
    for (int j = 0; j < d; ++j) EXPECT_EQ(r[j], xb[42 * d + j]);
    // copyFrom of an unsupported index leaves the index unchanged.
    faiss::IndexFlat l1(d, faiss::METRIC_L1);
    EXPECT_THROW(gpu.copyFrom(&l1), faiss::FaissException);
    EXPECT_EQ(gpu.ntotal, 100);
    EXPECT_EQ(gpu.getFlatMetric(), FlatMetric::L2);
}

TEST(GpuFlat, ConstructionErrors) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    EXPECT_THROW(GpuIndexQuickSelectFlat(&res, 0), faiss::FaissException);
    EXPECT_THROW(GpuIndexQuickSelectFlat(nullptr, 8), faiss::FaissException);
    faiss_ext::gpu::GpuIndexQuickSelectFlatConfig cfg;
    cfg.device = faiss_ext::gpu::getNumDevices();
    EXPECT_THROW(GpuIndexQuickSelectFlat(&res, 8, FlatMetric::L2, cfg), faiss::FaissException);
    EXPECT_THROW(GpuIndexQuickSelectFlat(&res, 8, faiss::METRIC_L1), faiss::FaissException);
}

TEST(GpuFlat, CopyFromAndToIndexFlat) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 20;
    const int64_t nb = 2000, nq = 10, k = 15;
    auto xb = randomVectors(nb, d, kSeed);
    auto xq = randomVectors(nq, d, kSeed + 9);
    for (faiss::MetricType m : {faiss::METRIC_L2, faiss::METRIC_INNER_PRODUCT}) {
        faiss::IndexFlat cpu(d, m);
        cpu.add(nb, xb.data());
        GpuIndexQuickSelectFlat gpu(&res, &cpu);
        EXPECT_EQ(gpu.ntotal, nb);
        EXPECT_EQ(gpu.metric_type, m);
        faiss::IndexFlat back(1);
        gpu.copyTo(&back);
        EXPECT_EQ(back.ntotal, nb);
        EXPECT_EQ(back.d, d);
        EXPECT_EQ(back.metric_type, m);
        EXPECT_EQ(back.codes, cpu.codes);
        std::vector<float> D(nq * k), refD(nq * k);
        std::vector<int64_t> I(nq * k), refI(nq * k);
        gpu.search(nq, xq.data(), k, D.data(), I.data());
        back.search(nq, xq.data(), k, refD.data(), refI.data());
        EXPECT_EQ(compareKnn(nq, k, D.data(), I.data(), refD.data(), refI.data(),
                             m == faiss::METRIC_INNER_PRODUCT),
                  "");
    }
}

TEST(GpuFlat, CosineAndPearsonTwinsRoundTrip) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 12;
    const int64_t nb = 800, nq = 9, k = 7;
    auto xb = randomVectors(nb, d, kSeed);
    auto xq = randomVectors(nq, d, kSeed + 4);
    for (FlatMetric m : {FlatMetric::Cosine, FlatMetric::Pearson}) {
        GpuIndexQuickSelectFlat gpu(&res, d, m);
        gpu.add(nb, xb.data());
        std::unique_ptr<faiss::Index> twin(gpu.copyToCpuIndex());
        GpuIndexQuickSelectFlat again(&res, twin.get());
        EXPECT_EQ(again.getFlatMetric(), m);
        std::vector<float> D(nq * k), D2(nq * k), D3(nq * k);
        std::vector<int64_t> I(nq * k), I2(nq * k), I3(nq * k);
        gpu.search(nq, xq.data(), k, D.data(), I.data());
        again.search(nq, xq.data(), k, D2.data(), I2.data());
        twin->search(nq, xq.data(), k, D3.data(), I3.data());
        EXPECT_EQ(I, I2);
        EXPECT_EQ(D, D2);
        EXPECT_EQ(compareKnn(nq, k, D.data(), I.data(), D3.data(), I3.data(), true), "")
                << faiss_ext::flatMetricName(m);
    }
}

TEST(GpuFlat, RealDataSiftSmall) {
    FAISS_EXT_REQUIRE_GPU();
    std::string dir = dataDir();
    if (dir.empty()) GTEST_SKIP() << "shared/data not found: real-data test skipped";
    int d = 0, dq = 0;
    auto xb = readFvecs(dir + "/siftsmall/siftsmall_base.fvecs", &d);
    auto xq = readFvecs(dir + "/siftsmall/siftsmall_query.fvecs", &dq);
    ASSERT_EQ(d, dq);
    int64_t nb = xb.size() / d, nq = xq.size() / d;
    StandardGpuResources res;
    checkAgainstFaiss(res, Case{nb, nq, 100, d, FlatMetric::L2}, xb, xq);
}

TEST(GpuFlat, HostInputPagedInChunksWithAndWithoutPinnedStaging) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 40;
    // Sanitizer-sized: 31 queries are still 3 chunks of 10 and one of 1.
    const int64_t nb = sized<int64_t>(5000, 2500), nq = sized<int64_t>(301, 31), k = 17;
    auto xb = randomVectors(nb, d, kSeed);
    auto xq = randomVectors(nq, d, kSeed + 11);
    std::vector<float> refD(nq * k);
    std::vector<int64_t> refI(nq * k);
    {
        StandardGpuResources res;
        GpuIndexQuickSelectFlat gpu(&res, d);
        gpu.add(nb, xb.data());
        gpu.search(nq, xq.data(), k, refD.data(), refI.data());  // one chunk
    }
    for (size_t pinnedBytes : {size_t(0), size_t(1) << 12, size_t(256) << 20}) {
        StandardGpuResources res;
        res.setPinnedMemory(pinnedBytes);
        GpuIndexQuickSelectFlat gpu(&res, d);
        gpu.add(nb, xb.data());
        gpu.setMinPagingSize(10 * (d * 4 + k * 12));  // about 10 queries a chunk
        std::vector<float> D(nq * k);
        std::vector<int64_t> I(nq * k);
        gpu.search(nq, xq.data(), k, D.data(), I.data());
        // Chunks of other sizes may use other GEMM kernels: equal up to float
        // rounding (and so near-ties).
        EXPECT_EQ(compareKnn(nq, k, D.data(), I.data(), refD.data(), refI.data(), false, 1e-5f,
                             1e-5f),
                  "")
                << "pinned bytes " << pinnedBytes;
    }
}
