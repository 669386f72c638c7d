// The rule that picks the exact flat search's engine (impl/flat/FlatSearchPath.h)
// and the checks on forced paths: host-side logic, no GPU needed.
#include "TestUtils.h"

#include "faiss_ext/gpu/FlatOptions.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPath.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"

#include <faiss/impl/FaissException.h>

#include <cstring>

using faiss_ext::gpu::chooseFlatSearchPath;
using faiss_ext::gpu::FlatSearchPath;
using faiss_ext::gpu::FlatSearchShape;
using faiss_ext::gpu::kFewQueryMaxK;
using faiss_ext::gpu::kFewQueryMaxQueries;
using faiss_ext::gpu::kRadixMaxQueries;
using faiss_ext::gpu::kRadixMinK;
using faiss_ext::gpu::resolveFlatSearchPath;

namespace {

FlatSearchShape shape(int64_t nq, int64_t nb, int64_t kk, int d = 128) {
    FlatSearchShape s;
    s.nq = nq;
    s.nb = nb;
    s.kk = kk;
    s.d = d;
    s.radixRowsFit = nq;  // memory for every row unless a test says otherwise
    return s;
}

TEST(CpuFlatSearchPath, FewQueriesTakeTheFusedPath) {
    EXPECT_EQ(chooseFlatSearchPath(shape(1, 1000000, 10)), FlatSearchPath::FusedFewQuery);
    EXPECT_EQ(chooseFlatSearchPath(shape(kFewQueryMaxQueries, 1000000, kFewQueryMaxK)),
              FlatSearchPath::FusedFewQuery);
    EXPECT_EQ(chooseFlatSearchPath(shape(3, 7, 7, 1)), FlatSearchPath::FusedFewQuery);
}

TEST(CpuFlatSearchPath, LargeKWithFewQueriesTakesTheRadixPath) {
    EXPECT_EQ(chooseFlatSearchPath(shape(256, 1000000, 32768)), FlatSearchPath::RadixLargeK);
    EXPECT_EQ(chooseFlatSearchPath(shape(200, 100000, 3000, 960)), FlatSearchPath::RadixLargeK);
    EXPECT_EQ(chooseFlatSearchPath(shape(1, 1000000, kRadixMinK)), FlatSearchPath::RadixLargeK);
    EXPECT_EQ(chooseFlatSearchPath(shape(kRadixMaxQueries, 1000000, kRadixMinK)),
              FlatSearchPath::RadixLargeK);
}

TEST(CpuFlatSearchPath, OtherShapesStayTiled) {
    EXPECT_EQ(chooseFlatSearchPath(shape(kFewQueryMaxQueries + 1, 1000000, 10)),
              FlatSearchPath::Tiled);
    EXPECT_EQ(chooseFlatSearchPath(shape(10000, 1000000, 10)), FlatSearchPath::Tiled);
    EXPECT_EQ(chooseFlatSearchPath(shape(kRadixMaxQueries + 1, 1000000, 4096)),
              FlatSearchPath::Tiled);
    EXPECT_EQ(chooseFlatSearchPath(shape(64, 1000000, kFewQueryMaxK + 1)), FlatSearchPath::Tiled);
    FlatSearchShape noRoom = shape(256, 1000000, 32768);
    noRoom.radixRowsFit = 0;
    EXPECT_EQ(chooseFlatSearchPath(noRoom), FlatSearchPath::Tiled);
}

TEST(CpuFlatSearchPath, HostStorageAndKnnGraphsStayTiled) {
    FlatSearchShape host = shape(1, 1000000, 10);
    host.onDevice = false;
    EXPECT_EQ(chooseFlatSearchPath(host), FlatSearchPath::Tiled);
    FlatSearchShape graph = shape(1, 1000000, 10);
    graph.selfExcluded = true;
    EXPECT_EQ(chooseFlatSearchPath(graph), FlatSearchPath::Tiled);
    FlatSearchShape hostLargeK = shape(256, 1000000, 32768);
    hostLargeK.onDevice = false;
    EXPECT_EQ(chooseFlatSearchPath(hostLargeK), FlatSearchPath::Tiled);
}

TEST(CpuFlatSearchPath, ForcedPathsAreCheckedAgainstTheShape) {
    EXPECT_EQ(resolveFlatSearchPath(FlatSearchPath::Auto, shape(1, 1000, 10)),
              FlatSearchPath::FusedFewQuery);
    EXPECT_EQ(resolveFlatSearchPath(FlatSearchPath::Tiled, shape(1, 1000, 10)),
              FlatSearchPath::Tiled);
    // The radix path runs any k when forced (tests), the fused one only its shapes.
    EXPECT_EQ(resolveFlatSearchPath(FlatSearchPath::RadixLargeK, shape(3, 1000, 10)),
              FlatSearchPath::RadixLargeK);
    EXPECT_THROW(resolveFlatSearchPath(FlatSearchPath::FusedFewQuery,
                                       shape(kFewQueryMaxQueries + 1, 1000, 10)),
                 faiss::FaissException);
    EXPECT_THROW(resolveFlatSearchPath(FlatSearchPath::FusedFewQuery,
                                       shape(1, 100000, kFewQueryMaxK + 1)),
                 faiss::FaissException);
    FlatSearchShape host = shape(1, 1000, 10);
    host.onDevice = false;
    EXPECT_THROW(resolveFlatSearchPath(FlatSearchPath::FusedFewQuery, host), faiss::FaissException);
    EXPECT_THROW(resolveFlatSearchPath(FlatSearchPath::RadixLargeK, host), faiss::FaissException);
    FlatSearchShape noRoom = shape(3, 1000, 10);
    noRoom.radixRowsFit = 0;
    EXPECT_THROW(resolveFlatSearchPath(FlatSearchPath::RadixLargeK, noRoom),
                 faiss::FaissException);
    EXPECT_THROW(resolveFlatSearchPath(FlatSearchPath(7), shape(1, 1000, 10)),
                 faiss::FaissException);
}

TEST(CpuFlatSearchPath, Names) {
    EXPECT_STREQ(faiss_ext::gpu::flatSearchPathName(FlatSearchPath::Auto), "auto");
    EXPECT_STREQ(faiss_ext::gpu::flatSearchPathName(FlatSearchPath::Tiled), "tiled");
    EXPECT_STREQ(faiss_ext::gpu::flatSearchPathName(FlatSearchPath::FusedFewQuery),
                 "fused-few-query");
    EXPECT_STREQ(faiss_ext::gpu::flatSearchPathName(FlatSearchPath::RadixLargeK),
                 "radix-large-k");
}

}  // namespace

// Auto's distance precision (FlatOptions.h): the bounded TF32 path for the
// measured shapes (large batches, k up to 1024, vectors on the device or
// streamed from the host), FP32 everywhere else.
TEST(CpuDistancePrecisionRule, BoundedOnlyForLargeBatchesUpToTheMeasuredK) {
    using faiss_ext::FlatMetric;
    using faiss_ext::gpu::chooseDistancePrecision;
    using faiss_ext::gpu::DistancePrecision;
    using faiss_ext::gpu::kAutoBoundedMaxK;
    using faiss_ext::gpu::kAutoBoundedMinQueries;
    const int64_t nb = 1000000;
    const auto pick = [&](int64_t nq, int64_t k, int d, bool onDevice) {
        return chooseDistancePrecision(nq, nb, k, d, FlatMetric::L2, onDevice);
    };
    EXPECT_EQ(pick(kAutoBoundedMinQueries, 10, 128, true), DistancePrecision::TF32Bounded);
    EXPECT_EQ(pick(10000, kAutoBoundedMaxK, 960, true), DistancePrecision::TF32Bounded);
    EXPECT_EQ(pick(kAutoBoundedMinQueries - 1, 10, 128, true), DistancePrecision::FP32);
    EXPECT_EQ(pick(10000, kAutoBoundedMaxK + 1, 128, true), DistancePrecision::FP32);
    EXPECT_EQ(pick(10000, 10, 128, false), DistancePrecision::TF32Bounded) << "host-streamed";
    EXPECT_EQ(pick(kAutoBoundedMinQueries - 1, 10, 128, false), DistancePrecision::FP32);
    EXPECT_EQ(pick(10000, 10, 0, true), DistancePrecision::FP32) << "no dimension";
    for (FlatMetric m : {FlatMetric::InnerProduct, FlatMetric::Cosine, FlatMetric::Pearson}) {
        EXPECT_EQ(chooseDistancePrecision(10000, nb, 10, 128, m, true),
                  DistancePrecision::TF32Bounded);
    }
}

// Only Auto's TF32 hands the queries it cannot certify to BF16x3: a caller
// who asks for TF32 or BF16x3 by name gets that precision alone.
TEST(CpuDistancePrecisionRule, OnlyAutoCascadesToBf16x3) {
    using faiss_ext::FlatMetric;
    using faiss_ext::gpu::DistancePrecision;
    using faiss_ext::gpu::FlatSearchRequest;
    using faiss_ext::gpu::planFlatSearch;
    const auto plan = [](DistancePrecision p, int64_t nq) {
        FlatSearchRequest r;
        r.precision = p;
        return planFlatSearch(1000000, true, FlatMetric::L2, 96, nq, 10, r);
    };
    EXPECT_EQ(plan(DistancePrecision::Auto, 10000).precision, DistancePrecision::TF32Bounded);
    EXPECT_TRUE(plan(DistancePrecision::Auto, 10000).cascadeToBf16x3);
    EXPECT_FALSE(plan(DistancePrecision::Auto, 10).cascadeToBf16x3) << "Auto's FP32";
    EXPECT_FALSE(plan(DistancePrecision::TF32Bounded, 10000).cascadeToBf16x3);
    EXPECT_FALSE(plan(DistancePrecision::BF16x3Bounded, 10000).cascadeToBf16x3);
    EXPECT_FALSE(plan(DistancePrecision::FP32, 10000).cascadeToBf16x3);
}
