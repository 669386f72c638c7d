// Metric names, the FAISS mapping, host vector preparation and the
// RowCenteringTransform.
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>

#include <cmath>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/RowCenteringTransform.h"

namespace faiss_ext {
namespace {

using test::kSeed;

double rowNorm(const float* x, int d) {
    double s = 0;
    for (int j = 0; j < d; ++j) s += double(x[j]) * x[j];
    return std::sqrt(s);
}

double rowMean(const float* x, int d) {
    double s = 0;
    for (int j = 0; j < d; ++j) s += x[j];
    return s / d;
}

TEST(CpuMetric, ToFaissMetric) {
    EXPECT_EQ(toFaissMetric(FlatMetric::L2), faiss::METRIC_L2);
    EXPECT_EQ(toFaissMetric(FlatMetric::InnerProduct), faiss::METRIC_INNER_PRODUCT);
    EXPECT_EQ(toFaissMetric(FlatMetric::Cosine), faiss::METRIC_INNER_PRODUCT);
    EXPECT_EQ(toFaissMetric(FlatMetric::Pearson), faiss::METRIC_INNER_PRODUCT);
}

TEST(CpuMetric, FromFaissMetric) {
    EXPECT_EQ(fromFaissMetric(faiss::METRIC_L2), FlatMetric::L2);
    EXPECT_EQ(fromFaissMetric(faiss::METRIC_INNER_PRODUCT), FlatMetric::InnerProduct);
    EXPECT_THROW(fromFaissMetric(faiss::METRIC_L1), faiss::FaissException);
    EXPECT_THROW(fromFaissMetric(faiss::METRIC_Linf), faiss::FaissException);
    EXPECT_THROW(fromFaissMetric(faiss::METRIC_JensenShannon), faiss::FaissException);
}

TEST(CpuMetric, NamesRoundTrip) {
    for (FlatMetric m :
         {FlatMetric::L2, FlatMetric::InnerProduct, FlatMetric::Cosine, FlatMetric::Pearson}) {
        EXPECT_EQ(parseFlatMetric(flatMetricName(m)), m) << flatMetricName(m);
    }
    EXPECT_STREQ(flatMetricName(FlatMetric::L2), "L2");
    EXPECT_STREQ(flatMetricName(FlatMetric::InnerProduct), "IP");
    EXPECT_STREQ(flatMetricName(FlatMetric::Cosine), "Cosine");
    EXPECT_STREQ(flatMetricName(FlatMetric::Pearson), "Pearson");
}

TEST(CpuMetric, ParseIsCaseInsensitive) {
    EXPECT_EQ(parseFlatMetric("l2"), FlatMetric::L2);
    EXPECT_EQ(parseFlatMetric("ip"), FlatMetric::InnerProduct);
    EXPECT_EQ(parseFlatMetric("InnerProduct"), FlatMetric::InnerProduct);
    EXPECT_EQ(parseFlatMetric("COSINE"), FlatMetric::Cosine);
    EXPECT_EQ(parseFlatMetric("pearson"), FlatMetric::Pearson);
    EXPECT_THROW(parseFlatMetric("L1"), faiss::FaissException);
    EXPECT_THROW(parseFlatMetric(""), faiss::FaissException);
    EXPECT_THROW(parseFlatMetric("cosine "), faiss::FaissException);
}

TEST(CpuMetric, IsPreparedMetric) {
    EXPECT_FALSE(isPreparedMetric(FlatMetric::L2));
    EXPECT_FALSE(isPreparedMetric(FlatMetric::InnerProduct));
    EXPECT_TRUE(isPreparedMetric(FlatMetric::Cosine));
    EXPECT_TRUE(isPreparedMetric(FlatMetric::Pearson));
}

TEST(CpuMetric, PrepareL2AndIPLeaveVectorsAlone) {
    const int d = 7;
    auto x = test::randomVectors(20, d, kSeed);
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        auto y = x;
        prepareVectors(m, 20, d, y.data());
        EXPECT_EQ(x, y) << flatMetricName(m);
    }
}

TEST(CpuMetric, PrepareCosineNormalisesRows) {
    const int d = 13;
    const int64_t n = 300;  // past the OpenMP threshold
    auto x = test::randomVectors(n, d, kSeed, -3.f, 5.f);
    for (int j = 0; j < d; ++j) x[5 * d + j] = 0.f;  // a zero row
    auto y = x;
    prepareVectors(FlatMetric::Cosine, n, d, y.data());
    for (int64_t i = 0; i < n; ++i) {
        const float* yi = y.data() + i * d;
        if (i == 5) {
            for (int j = 0; j < d; ++j) EXPECT_EQ(yi[j], 0.f) << "zero row must stay zero";
            continue;
        }
        EXPECT_NEAR(rowNorm(yi, d), 1.0, 1e-5) << "row " << i << " seed " << kSeed;
        // same direction: y = x / |x|
        double nx = rowNorm(x.data() + i * d, d);
        for (int j = 0; j < d; ++j) EXPECT_NEAR(yi[j], x[i * d + j] / nx, 1e-5);
    }
}

TEST(CpuMetric, PreparePearsonCentresThenNormalises) {
    const int d = 9;
    const int64_t n = 200;
    auto x = test::randomVectors(n, d, kSeed + 1, 0.f, 10.f);
    for (int j = 0; j < d; ++j) x[3 * d + j] = 2.5f;  // a constant row
    auto y = x;
    prepareVectors(FlatMetric::Pearson, n, d, y.data());
    for (int64_t i = 0; i < n; ++i) {
        const float* yi = y.data() + i * d;
        if (i == 3) {
            for (int j = 0; j < d; ++j) EXPECT_EQ(yi[j], 0.f) << "constant row must become zero";
            continue;
        }
        EXPECT_NEAR(rowMean(yi, d), 0.0, 1e-6) << "row " << i;
        EXPECT_NEAR(rowNorm(yi, d), 1.0, 1e-5) << "row " << i;
    }
    // the inner product of prepared rows is the Pearson correlation
    const float* a = x.data();
    const float* b = x.data() + d;
    double ma = rowMean(a, d), mb = rowMean(b, d), sab = 0, saa = 0, sbb = 0;
    for (int j = 0; j < d; ++j) {
        sab += (a[j] - ma) * (b[j] - mb);
        saa += (a[j] - ma) * (a[j] - ma);
        sbb += (b[j] - mb) * (b[j] - mb);
    }
    double corr = sab / std::sqrt(saa * sbb);
    double ip = 0;
    for (int j = 0; j < d; ++j) ip += double(y[j]) * y[d + j];
    EXPECT_NEAR(ip, corr, 1e-5);
}

TEST(CpuMetric, PrepareChecksArguments) {
    std::vector<float> x(4, 1.f);
    EXPECT_THROW(prepareVectors(FlatMetric::Cosine, -1, 4, x.data()), faiss::FaissException);
    EXPECT_THROW(prepareVectors(FlatMetric::Cosine, 1, 0, x.data()), faiss::FaissException);
    EXPECT_NO_THROW(prepareVectors(FlatMetric::Cosine, 0, 4, nullptr));
}

TEST(CpuMetric, RowCenteringTransform) {
    const int d = 6;
    RowCenteringTransform rc(d);
    EXPECT_TRUE(rc.is_trained);
    EXPECT_EQ(rc.d_in, d);
    EXPECT_EQ(rc.d_out, d);
    auto x = test::randomVectors(150, d, kSeed + 2, -2.f, 7.f);
    std::vector<float> xt(x.size());
    rc.apply_noalloc(150, x.data(), xt.data());
    for (int i = 0; i < 150; ++i) {
        double m = rowMean(x.data() + i * d, d);
        for (int j = 0; j < d; ++j) EXPECT_NEAR(xt[i * d + j], x[i * d + j] - m, 1e-5);
        EXPECT_NEAR(rowMean(xt.data() + i * d, d), 0.0, 1e-6);
    }
    // reverse_transform copies, as NormalizationTransform's does
    std::vector<float> back(x.size());
    rc.reverse_transform(150, xt.data(), back.data());
    EXPECT_EQ(back, xt);
    // apply() allocates
    std::unique_ptr<float[]> y(rc.apply(150, x.data()));
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], xt[i]);
}

TEST(CpuMetric, PearsonChainMatchesPrepareVectors) {
    const int d = 11;
    auto x = test::randomVectors(50, d, kSeed + 3);
    RowCenteringTransform rc(d);
    faiss::NormalizationTransform nt(d, 2.0);
    std::vector<float> c(x.size()), viaChain(x.size());
    rc.apply_noalloc(50, x.data(), c.data());
    nt.apply_noalloc(50, c.data(), viaChain.data());
    auto viaPrepare = x;
    prepareVectors(FlatMetric::Pearson, 50, d, viaPrepare.data());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(viaChain[i], viaPrepare[i], 1e-5);
}

TEST(CpuMetric, RowCenteringCheckIdentical) {
    RowCenteringTransform a(4), b(4), c(5);
    faiss::NormalizationTransform n(4);
    EXPECT_NO_THROW(a.check_identical(b));
    EXPECT_THROW(a.check_identical(c), faiss::FaissException);
    EXPECT_THROW(a.check_identical(n), faiss::FaissException);
    EXPECT_THROW(RowCenteringTransform(-1), faiss::FaissException);
}

}  // namespace
}  // namespace faiss_ext
