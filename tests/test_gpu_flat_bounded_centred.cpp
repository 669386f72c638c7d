// The bounded TF32 search on data far from the origin, through the copy
// centred on the corpus mean (impl/flat/CentredCorpus.h, issue 39): offset
// clustered data and SIFT-like bytes under L2, offset data under inner
// product and embeddings filling a cone under cosine are certified (at
// most 1% of the queries fall back) with the FP32 path's results; adds and
// removals after a search are seen (the copy is rebuilt); a filter that
// selects a run of the storage searches its slice of the copy.
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "BoundedTestCompare.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

using faiss_ext::FlatMetric;
using faiss_ext::gpu::BoundedSearchStats;
using faiss_ext::gpu::DistancePrecision;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

constexpr int kDim = 64;

/// Clustered vectors moved by `offset` in every coordinate.
std::vector<float> offsetClustered(int64_t n, uint64_t seed, float offset) {
    std::vector<float> x = clusteredVectors(n, kDim, 40, seed);
    for (float& v : x) v += offset;
    return x;
}

/// SIFT-like descriptors: clustered vectors mapped to whole numbers in
/// [0, 255], all coordinates non-negative (a mean far from the origin).
std::vector<float> byteDescriptors(int64_t n, uint64_t seed) {
    std::vector<float> x = clusteredVectors(n, kDim, 40, seed);
    for (float& v : x) v = std::min(255.f, std::max(0.f, std::round(100.f + 60.f * v)));
    return x;
}

/// Searches xq at FP32 and TF32Bounded (over `sel` when set), checks that
/// the results agree and returns this search's bounded counters.
BoundedSearchStats boundedAgainstFp32(GpuIndexQuickSelectFlat& index, const std::vector<float>& xq,
                                      int64_t k, const std::string& what,
                                      const faiss::IDSelector* sel = nullptr,
                                      FlatMetric metric = FlatMetric::L2) {
    return faiss_ext::test::boundedAgainstFp32(index, metric, kDim, xq, k,
                                               DistancePrecision::TF32Bounded, what, sel);
}

}  // namespace

TEST(GpuFlatBoundedCentred, OffsetAndByteDataAreCertified) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(30000, 10000), nq = 200;
    struct Set {
        const char* name;
        std::vector<float> xb, xq;
    };
    const Set sets[] = {
        {"offset 1000", offsetClustered(nb, kSeed, 1000.f), offsetClustered(nq, kSeed + 1, 1000.f)},
        {"bytes", byteDescriptors(nb, kSeed + 2), byteDescriptors(nq, kSeed + 3)},
    };
    for (const Set& set : sets) {
        GpuIndexQuickSelectFlat index(&res, kDim, FlatMetric::L2);
        index.add(nb, set.xb.data());
        for (int64_t k : {1, 10, 100}) {
            const std::string what = describe(FlatMetric::L2, kDim, k, set.name);
            const BoundedSearchStats s = boundedAgainstFp32(index, set.xq, k, what);
            EXPECT_LE(s.fallbackQueries, nq / 100) << what;
        }
    }
}

TEST(GpuFlatBoundedCentred, InnerProductMetricsSearchTheCopy) {
    // Inner product on clustered data moved by +50, and cosine on
    // embedding-like rows that fill a cone (clustered data moved by +2,
    // normalised by the index): the corpus mean takes most of every norm,
    // so the search runs on q.(x - c) and adds q.c back.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(30000, 10000), nq = 200;
    struct Set {
        const char* name;
        FlatMetric metric;
        std::vector<float> xb, xq;
    };
    const Set sets[] = {
        {"offset 50", FlatMetric::InnerProduct, offsetClustered(nb, kSeed + 8, 50.f),
         offsetClustered(nq, kSeed + 9, 50.f)},
        {"cone", FlatMetric::Cosine, offsetClustered(nb, kSeed + 10, 2.f),
         offsetClustered(nq, kSeed + 11, 2.f)},
    };
    for (const Set& set : sets) {
        GpuIndexQuickSelectFlat index(&res, kDim, set.metric);
        index.add(nb, set.xb.data());
        for (int64_t k : {1, 10, 100}) {
            const std::string what = describe(set.metric, kDim, k, set.name);
            const BoundedSearchStats s =
                boundedAgainstFp32(index, set.xq, k, what, nullptr, set.metric);
            EXPECT_LE(s.fallbackQueries, nq / 100) << what;
        }
    }
}

TEST(GpuFlatBoundedCentred, AddsAndRemovalsAfterASearchAreSeen) {
    // A stale copy would miss the added vectors (or return removed ones):
    // each search must equal FP32 over what the index holds then, through
    // the certified route (so the copy really answers).
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexQuickSelectFlat index(&res, kDim, FlatMetric::L2);
    const auto first = offsetClustered(10000, kSeed, 1000.f);
    const auto more = offsetClustered(6000, kSeed + 4, 1003.f);
    const auto xq = offsetClustered(100, kSeed + 5, 1002.f);
    index.add(10000, first.data());
    EXPECT_GE(boundedAgainstFp32(index, xq, 10, "before adds").certifiedQueries, 99);
    index.add(6000, more.data());
    EXPECT_GE(boundedAgainstFp32(index, xq, 10, "after adds").certifiedQueries, 99);
    const faiss::IDSelectorRange removed(0, 5000);
    EXPECT_EQ(index.remove_ids(removed), 5000);
    EXPECT_GE(boundedAgainstFp32(index, xq, 10, "after removals").certifiedQueries, 99);
    index.reset();
    index.add(6000, more.data());
    EXPECT_GE(boundedAgainstFp32(index, xq, 10, "after reset").certifiedQueries, 99);
}

TEST(GpuFlatBoundedCentred, RangeFilterSearchesItsSliceOfTheCopy) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexQuickSelectFlat index(&res, kDim, FlatMetric::L2);
    const auto xb = offsetClustered(20000, kSeed + 6, 500.f);
    const auto xq = offsetClustered(100, kSeed + 7, 500.f);
    index.add(20000, xb.data());
    const faiss::IDSelectorRange sel(7000, 15000);
    const BoundedSearchStats s = boundedAgainstFp32(index, xq, 10, "range filter", &sel);
    EXPECT_GE(s.certifiedQueries, 99);
}
