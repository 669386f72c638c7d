// DistancePrecision::TF32Bounded against the FP32 path of the same index:
// a grid of metrics, dimensions and k; duplicates and near ties; data far
// from the origin (inner product: the fallback, counted; L2: certified
// through the centred copy); a certified case (the fast route
// really runs); tiling; host storage (streamed tiles, merged); real sets; bad knob values. And the
// hardware model behind the bound: the TF32 GEMM of this GPU against exact
// dot products on inputs made to lose the most to TF32.
//
// What "equal" means: BoundedTestCompare.h.
#include <cuda_runtime_api.h>
#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "BoundedTestCompare.h"
#include "LshTestData.h"
#include "TestUtils.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/Tf32ErrorBound.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

using faiss_ext::FlatMetric;
using faiss_ext::gpu::BoundedSearchStats;
using faiss_ext::gpu::DistancePrecision;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::GpuIndexQuickSelectFlatConfig;
using faiss_ext::gpu::SearchParametersQuickSelectFlat;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

const FlatMetric kMetrics[] = {FlatMetric::L2, FlatMetric::InnerProduct, FlatMetric::Cosine,
                               FlatMetric::Pearson};

}  // namespace

TEST(GpuFlatBounded, GridEqualsFp32) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(12000, 9000);  // above 2 * 4097: m < nb at every k
    const int64_t nq = sized<int64_t>(40, 8);
    PartUnits units;
    for (int d : {1, 3, 97, 128, 960}) {
        const auto xb = clusteredVectors(nb, d, 30, kSeed + uint64_t(d));
        const auto xq = clusteredVectors(nq, d, 30, kSeed + 7 + uint64_t(d));
        for (FlatMetric m : kMetrics) {
            for (int64_t k : {1, 10, 1024, 4097}) {
                if (!units.next()) continue;
                compareOn(res, m, d, xb, xq, k, describe(m, d, k, "clustered"));
            }
        }
    }
}

TEST(GpuFlatBounded, KAboveCandidatesAndPadding) {
    // m = nb (every vector a candidate: certified by construction) and k > nb.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 33;
    const auto xb = randomVectors(500, d, kSeed);
    const auto xq = randomVectors(20, d, kSeed + 1);
    for (FlatMetric m : kMetrics) {
        for (int64_t k : {300, 500, 700}) {
            const BoundedSearchStats s =
                compareOn(res, m, d, xb, xq, k, describe(m, d, k, "uniform"));
            EXPECT_EQ(s.fallbackQueries, 0) << describe(m, d, k, "every vector a candidate");
        }
    }
}

TEST(GpuFlatBounded, DuplicatesAndNearTies) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 64;
    const int64_t distinct = sized<int64_t>(3000, 1000);
    auto base = clusteredVectors(distinct, d, 10, kSeed);
    std::vector<float> xb;
    std::mt19937_64 rng(kSeed);
    std::normal_distribution<float> noise(0.f, 1e-6f);
    for (int copy = 0; copy < 4; ++copy) {  // exact duplicates, then near duplicates
        for (float v : base) xb.push_back(copy < 2 ? v : v + v * noise(rng));
    }
    // Queries: some are stored vectors themselves (distance 0, tied copies).
    auto xq = clusteredVectors(30, d, 10, kSeed + 1);
    xq.insert(xq.end(), base.begin(), base.begin() + 10 * d);
    for (FlatMetric m : kMetrics) {
        for (int64_t k : {1, 10, 1024})
            compareOn(res, m, d, xb, xq, k, describe(m, d, k, "duplicates"));
    }
}

TEST(GpuFlatBounded, FarFromOriginIsCentredAndCounted) {
    // Large norms, small differences: without the copy centred on the
    // corpus mean (CentredCorpus.h) the bound (proportional to |q| |x|)
    // dwarfs every gap and all queries fall back. L2 searches the centred
    // copy, where the bound scales with the spread (0.01 per coordinate):
    // no query may fall back. Inner product searches q.(x - c): its bound
    // shrinks the same way, but the similarities of points in so small a
    // box are ties within the FP32 path's own rounding, so some queries
    // still fall back; either way every query is counted once and the
    // results equal the FP32 path's.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (int d : {3, 128}) {
        auto xb = randomVectors(20000, d, kSeed, 1000.f, 1000.01f);
        auto xq = randomVectors(50, d, kSeed + 1, 1000.f, 1000.01f);
        for (FlatMetric m : {FlatMetric::L2, FlatMetric::InnerProduct}) {
            for (int64_t k : {1, 10, 1024}) {
                const std::string what = describe(m, d, k, "far-from-origin");
                const BoundedSearchStats s = compareOn(res, m, d, xb, xq, k, what);
                EXPECT_EQ(s.certifiedQueries + s.fallbackQueries, 50) << what;
                if (m == FlatMetric::L2) EXPECT_EQ(s.fallbackQueries, 0) << what;
            }
        }
    }
}

TEST(GpuFlatBounded, WellSeparatedDataIsCertified) {
    // Unit vectors in d = 16 and queries within 1e-4 per coordinate of
    // stored ones: the nearest is at squared distance below 1e-6 and the
    // 33rd at more than 0.3, while the bound is about 2^-8 |q| |x| ~ 0.004: every query is
    // certified, so the TF32 route itself answers (and still equals FP32).
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    auto xb = randomVectors(20000, d, kSeed);
    faiss_ext::prepareVectors(FlatMetric::Cosine, 20000, d, xb.data());
    std::vector<float> xq(xb.begin(), xb.begin() + 100 * d);
    std::mt19937_64 rng(kSeed);
    std::uniform_real_distribution<float> jitter(-1e-4f, 1e-4f);
    for (float& v : xq) v += jitter(rng);
    for (FlatMetric m : kMetrics) {
        const BoundedSearchStats s =
            compareOn(res, m, d, xb, xq, 1, describe(m, d, 1, "separated"));
        EXPECT_EQ(s.certifiedQueries, 100) << describe(m, d, 1, "separated");
    }
}

TEST(GpuFlatBounded, L2OutliersOfLargeNormDoNotBlockCertification) {
    // The well-separated set of the test above plus 10 vectors of norm
    // ~1e4: e(q, x_max) alone would be ~40, far above every gap, but under
    // L2 a vector of large norm is far from these queries whatever its TF32
    // key (leftOutKeyLowerBound), so every L2 query is still certified. The
    // inner product gets no such help (a large norm can mean a close vector):
    // only equality with FP32 is checked there.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    auto xb = randomVectors(20000, d, kSeed);
    faiss_ext::prepareVectors(FlatMetric::Cosine, 20000, d, xb.data());
    for (int i = 0; i < 10; ++i) {
        for (int c = 0; c < d; ++c) xb[size_t((1000 + i * 1500) * d + c)] *= 1e4f;
    }
    std::vector<float> xq(xb.begin(), xb.begin() + 100 * d);
    std::mt19937_64 rng(kSeed);
    std::uniform_real_distribution<float> jitter(-1e-4f, 1e-4f);
    for (float& v : xq) v += jitter(rng);
    const BoundedSearchStats s =
        compareOn(res, FlatMetric::L2, d, xb, xq, 10, describe(FlatMetric::L2, d, 10, "outliers"));
    EXPECT_EQ(s.certifiedQueries, 100) << describe(FlatMetric::L2, d, 10, "outliers");
    compareOn(res, FlatMetric::InnerProduct, d, xb, xq, 10,
              describe(FlatMetric::InnerProduct, d, 10, "outliers"));
}

TEST(GpuFlatBounded, TiledSearchEqualsFp32) {
    // A small temporary memory forces several row blocks and column tiles in
    // both the candidate pass and the fallback.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    res.setTempMemory(size_t(24) << 20);
    const int d = 64;
    const auto xb = clusteredVectors(sized<int64_t>(60000, 20000), d, 40, kSeed);
    const auto xq = clusteredVectors(sized<int64_t>(700, 200), d, 40, kSeed + 1);
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::Cosine}) {
        compareOn(res, m, d, xb, xq, 100, describe(m, d, 100, "tiled"));
    }
    // And with the fallback (and, past the first row block, the bail-out
    // to FP32): two tiny boxes at +500 and -500 in every coordinate, so
    // that the corpus mean is near the origin and no centring helps; the
    // inner products within a box are ties at the bound's scale.
    auto twoBoxes = [&](int64_t n, uint64_t seed) {
        auto x = randomVectors(n, d, seed, 500.f, 500.01f);
        for (int64_t i = 0; i < n; i += 2) {
            for (int j = 0; j < d; ++j) x[size_t(i) * d + j] = -x[size_t(i) * d + j];
        }
        return x;
    };
    const auto farB = twoBoxes(30000, kSeed + 2);
    const auto farQ = twoBoxes(300, kSeed + 3);
    const BoundedSearchStats s =
        compareOn(res, FlatMetric::InnerProduct, d, farB, farQ, 50,
                  describe(FlatMetric::InnerProduct, d, 50, "tiled far"));
    EXPECT_EQ(s.fallbackQueries, 300);
}

// Vectors in pinned host memory: TF32Bounded streams them in tiles, each
// searched by the bounded path (HostBoundedSearch.cu), and equals FP32.
TEST(GpuFlatBounded, HostStorageEqualsFp32AndCertifies) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexQuickSelectFlatConfig config;
    config.storage = faiss_ext::gpu::VectorStorage::Host;
    const int d = 32;
    const auto xb = clusteredVectors(5000, d, 10, kSeed);
    const auto xq = clusteredVectors(20, d, 10, kSeed + 1);
    for (FlatMetric m : kMetrics) {
        const BoundedSearchStats s = compareOn(res, m, d, xb, xq, 10,
                                               describe(m, d, 10, "host storage"), config);
        EXPECT_EQ(s.certifiedQueries + s.fallbackQueries, 20) << describe(m, d, 10, "host");
        EXPECT_GT(s.certifiedQueries, 10) << describe(m, d, 10, "host storage");
    }
}

// A temporary memory that holds a few thousand rows a tile: the corpus is
// searched in several tiles whose answers are merged (ties across tiles,
// k up to 2,000, data far from the origin centred on the first tile's
// mean, an inner product shifted back by q.c).
TEST(GpuFlatBounded, HostStorageTilesMergeToTheWholeAnswer) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    res.setTempMemory(size_t(24) << 20);  // about 20,000 rows of d 32 a tile: 3 tiles
    GpuIndexQuickSelectFlatConfig config;
    config.storage = faiss_ext::gpu::VectorStorage::Host;
    const int d = 32;
    const int64_t nb = sized<int64_t>(60000, 40000);
    auto xb = clusteredVectors(nb, d, 40, kSeed + 5);
    for (int64_t i = 0; i < 300; ++i) {  // duplicates in other tiles: ties across tiles
        std::copy(xb.begin() + i * d, xb.begin() + (i + 1) * d, xb.begin() + (nb - 1 - i) * d);
    }
    auto xq = clusteredVectors(40, d, 40, kSeed + 6);
    std::copy(xb.begin(), xb.begin() + d, xq.begin());  // a query on a duplicated vector
    auto far = [](std::vector<float> v) {
        for (float& x : v) x += 100.f;
        return v;
    };
    for (int64_t k : {10, 100, 2000}) {
        BoundedSearchStats s = compareOn(res, FlatMetric::L2, d, xb, xq, k,
                                         describe(FlatMetric::L2, d, k, "host tiles"), config);
        EXPECT_EQ(s.certifiedQueries + s.fallbackQueries, 40);
        if (k <= 100) EXPECT_GT(s.certifiedQueries, 20) << "k " << k;
        s = compareOn(res, FlatMetric::L2, d, far(xb), far(xq), k,
                      describe(FlatMetric::L2, d, k, "host tiles, +100"), config);
        if (k <= 100) EXPECT_GT(s.certifiedQueries, 20) << "far, k " << k;
    }
    const BoundedSearchStats s = compareOn(res, FlatMetric::InnerProduct, d, far(xb), xq, 10,
                                           describe(FlatMetric::InnerProduct, d, 10,
                                                    "host tiles, +100"), config);
    EXPECT_EQ(s.certifiedQueries + s.fallbackQueries, 40);
}

TEST(GpuFlatBounded, ConfigDefaultAndReset) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexQuickSelectFlatConfig config;
    config.distancePrecision = DistancePrecision::TF32Bounded;
    const int d = 16;
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, config);
    const auto xb = randomVectors(3000, d, kSeed);
    index.add(3000, xb.data());
    EXPECT_EQ(index.resolveDistancePrecision(10, 10), DistancePrecision::TF32Bounded);
    std::vector<float> D(10 * 5);
    std::vector<int64_t> I(10 * 5);
    index.search(10, xb.data(), 5, D.data(), I.data());  // the config's precision
    BoundedSearchStats s = index.getBoundedStats();
    EXPECT_EQ(s.certifiedQueries + s.fallbackQueries, 10);
    index.resetBoundedStats();
    s = index.getBoundedStats();
    EXPECT_EQ(s.certifiedQueries + s.fallbackQueries, 0);
    // Auto resolves to FP32 until the crossover is measured (FlatOptions.h).
    SearchParametersQuickSelectFlat params;
    params.distancePrecision = DistancePrecision::FP32;
    EXPECT_EQ(index.resolveDistancePrecision(10, 10, &params), DistancePrecision::FP32);
    GpuIndexQuickSelectFlat autoIndex(&res, d, FlatMetric::L2);
    EXPECT_EQ(autoIndex.resolveDistancePrecision(10, 10), DistancePrecision::FP32);
}

TEST(GpuFlatBounded, BadPrecisionValuesAreRefused) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    GpuIndexQuickSelectFlatConfig bad;
    bad.distancePrecision = static_cast<DistancePrecision>(7);
    EXPECT_THROW(GpuIndexQuickSelectFlat(&res, d, FlatMetric::L2, bad), faiss::FaissException);
    bad.distancePrecision = static_cast<DistancePrecision>(-1);
    EXPECT_THROW(GpuIndexQuickSelectFlat(&res, d, FlatMetric::L2, bad), faiss::FaissException);

    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
    const auto xb = randomVectors(100, d, kSeed);
    index.add(100, xb.data());
    std::vector<float> D(4 * 3, 42.f);
    std::vector<int64_t> I(4 * 3, 42);
    SearchParametersQuickSelectFlat params;
    params.distancePrecision = static_cast<DistancePrecision>(4);  // past BF16x3Bounded
    EXPECT_THROW(index.search(4, xb.data(), 3, D.data(), I.data(), &params), faiss::FaissException);
    // Nothing was written or counted.
    for (float v : D) EXPECT_EQ(v, 42.f);
    for (int64_t v : I) EXPECT_EQ(v, 42);
    EXPECT_EQ(index.getBoundedStats().certifiedQueries + index.getBoundedStats().fallbackQueries,
              0);
    EXPECT_THROW(faiss_ext::gpu::distancePrecisionFromName("tf16"), faiss::FaissException);
    EXPECT_EQ(faiss_ext::gpu::distancePrecisionFromName("TF32-Bounded"),
              DistancePrecision::TF32Bounded);
}

TEST(GpuFlatBounded, RealSets) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    int ran = 0;
    for (const char* name : {"siftsmall", "fashion-mnist"}) {
        // 18k base rows: the GPU machine's staged Fashion-MNIST holds 20k
        // rows and the queries come from the rows past the base.
        const auto& set = faiss_ext::lshtest::realVectors(name, sized<int64_t>(18000, 5000),
                                                          sized<int64_t>(200, 30));
        if (!set.missing.empty()) {
            std::fprintf(stderr, "[bounded] %s skipped: %s\n", name, set.missing.c_str());
            continue;
        }
        ++ran;
        for (FlatMetric m : {FlatMetric::L2, FlatMetric::Cosine}) {
            for (int64_t k : {10, 100}) {
                const BoundedSearchStats s =
                    compareOn(res, m, set.d, set.base, set.query, k, describe(m, set.d, k, name));
                std::fprintf(stderr, "[bounded] %s %s k=%lld: %lld certified, %lld fallback\n",
                             name, faiss_ext::flatMetricName(m), (long long)k,
                             (long long)s.certifiedQueries, (long long)s.fallbackQueries);
            }
        }
    }
    if (ran == 0) GTEST_SKIP() << "no real set found under " << dataDir();
}

namespace {

/// Floats whose mantissa bits below TF32's 10 are all ones: truncation to
/// TF32 loses almost a full TF32 unit on each (round to nearest loses 2^-23).
std::vector<float> worstForTruncation(int64_t n, int d, uint64_t seed) {
    std::vector<float> v = randomVectors(n, d, seed, 0.5f, 4.f);
    for (float& x : v) {
        uint32_t b;
        std::memcpy(&b, &x, 4);
        b |= 0x1FFFu;
        std::memcpy(&x, &b, 4);
    }
    return v;
}

}  // namespace

TEST(GpuFlatBounded, Tf32GemmStaysWithinTheModelledError) {
    // The bound assumes: TF32 inputs within 2^-10 (truncation), exact
    // products, FP32 accumulation with truncated alignment (unit 2^-22).
    // Checked here on this GPU: |TF32 GEMM - exact q.x| <= (2 * 2^-10 +
    // 2^-20 + (1 + 2^-10)^2 gamma(d + 2, 2^-22)) sum |q_i x_i|, on
    // non-negative data (no cancellation: errors add up), data made to lose
    // the most to truncation, and mixed signs. The largest ratio observed is
    // printed: about 0.5 means truncation, far less means rounding.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    cublasHandle_t blas = res.getResources()->getBlasHandle(0);
    const int64_t nq = 64, nx = 2048;
    for (int d : {1, 97, 128, 960, 4096}) {
        const faiss_ext::gpu::Tf32BoundTerms t = faiss_ext::gpu::tf32BoundTerms(d, false);
        const double delta = std::ldexp(1.0, -10);
        const double tf32Coef =
            2 * delta + delta * delta +
            (1 + delta) * (1 + delta) * faiss_ext::gpu::errorGamma(d + 2.0, std::ldexp(1.0, -22));
        ASSERT_LT(tf32Coef, t.dotCoef);
        struct Data {
            const char* name;
            std::vector<float> q, x;
        };
        const uint64_t s = kSeed + uint64_t(d);
        std::vector<Data> sets;
        sets.push_back({"non-negative", randomVectors(nq, d, s, 0.f, 1.f),
                        randomVectors(nx, d, s + 1, 0.f, 1.f)});
        sets.push_back({"worst-for-truncation", worstForTruncation(nq, d, s + 2),
                        worstForTruncation(nx, d, s + 3)});
        sets.push_back({"mixed-sign", randomVectors(nq, d, s + 4), randomVectors(nx, d, s + 5)});
        for (const Data& data : sets) {
            DeviceCopy<float> dq(data.q), dx(data.x);
            DeviceCopy<float> dOut(std::vector<float>(size_t(nq * nx)));
            faiss_ext::gpu::gemmDotProductsTf32(blas, dq.p, nq, dx.p, nx, d, -1.f, dOut.p, nx);
            FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<float> out(size_t(nq * nx));
            FAISS_EXT_CUDA_CHECK(
                cudaMemcpy(out.data(), dOut.p, sizeof(float) * out.size(), cudaMemcpyDeviceToHost));
            double worst = 0;
            for (int64_t i = 0; i < nq; ++i) {
                for (int64_t j = 0; j < nx; ++j) {
                    double exact = 0, absSum = 0;
                    for (int c = 0; c < d; ++c) {
                        const double p =
                            double(data.q[size_t(i * d + c)]) * double(data.x[size_t(j * d + c)]);
                        exact += p;
                        absSum += std::fabs(p);
                    }
                    const double err = std::fabs(double(out[size_t(i * nx + j)]) + exact);
                    const double bound = tf32Coef * absSum + 1e-30;
                    ASSERT_LE(err, bound) << data.name << " d=" << d << " query " << i << " vector "
                                          << j << " seed " << kSeed;
                    worst = std::max(worst, err / bound);
                }
            }
            std::fprintf(stderr, "[bounded] TF32 GEMM, %s d=%d: largest error / modelled = %.3f\n",
                         data.name, d, worst);
        }
    }
}

// Stores of every size modulo 4, large enough for the sampled candidate
// selection: the bounded GEMMs over the whole storage run over its zero
// padding rows up to a multiple of 4 (FlatStorage::zeroPaddingRows_), which
// must never come back; TF32 and BF16x3 (whose kept split has no padding).
TEST(GpuFlatBounded, StoresOfEverySizeModulo4EqualFp32) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 96;
    const auto xq = clusteredVectors(sized<int64_t>(200, 40), d, 30, kSeed + 41);
    for (int64_t nb : {20000, 20001, 20002, 20003}) {
        const auto xb = clusteredVectors(nb, d, 30, kSeed + 40);
        for (FlatMetric m : {FlatMetric::L2, FlatMetric::InnerProduct}) {
            for (auto p : {DistancePrecision::TF32Bounded, DistancePrecision::BF16x3Bounded}) {
                const std::string data =
                        "nb " + std::to_string(nb) + ", precision " + std::to_string(int(p));
                compareOn(res, m, d, xb, xq, 10, describe(m, d, 10, data.c_str()), {}, p);
            }
        }
    }
}
