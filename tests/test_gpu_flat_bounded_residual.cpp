// Auto's TF32 pass over the residual copy (impl/flat/ResidualCorpus.h,
// ResidualBound.h; issue 39): on clusters far from each other and from the
// origin, where the first TF32 pass bails out, the queries it hands over
// are certified over k-means residuals with the FP32 path's results; adds
// after a search are seen (the copy is rebuilt); filtered searches, which
// do not use the copy, stay exact.
#include <faiss/impl/IDSelector.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "BoundedTestCompare.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/FlatOptions.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/ResidualCorpus.h"

using faiss_ext::FlatMetric;
using faiss_ext::gpu::BoundedSearchStats;
using faiss_ext::gpu::DistancePrecision;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::kResidualMinQueries;
using faiss_ext::gpu::kResidualMinVectors;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

constexpr int kDim = 32;

/// n points of `clusters` anisotropic clusters (spreads 0.1-1 per axis)
/// whose centres lie on a sphere of radius 35 around an offset of norm 35
/// (bench/gen_far_clusters.py's shape): stream 0 base, 1 queries.
std::vector<float> farClusters(int64_t n, int clusters, int stream) {
    std::mt19937_64 rng(kSeed + 7);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::uniform_real_distribution<float> spread(0.1f, 1.f);
    auto onSphere = [&](float* v, float radius) {
        double s = 0;
        for (int j = 0; j < kDim; ++j) s += double(v[j] = normal(rng)) * v[j];
        for (int j = 0; j < kDim; ++j) v[j] = float(v[j] * radius / std::sqrt(s));
    };
    std::vector<float> offset(kDim), centres(size_t(clusters) * kDim), scales(centres.size());
    onSphere(offset.data(), 35.f);
    for (int c = 0; c < clusters; ++c) {
        onSphere(&centres[size_t(c) * kDim], 35.f);
        for (int j = 0; j < kDim; ++j) {
            centres[size_t(c) * kDim + j] += offset[size_t(j)];
            scales[size_t(c) * kDim + j] = spread(rng);
        }
    }
    std::mt19937_64 rows(kSeed + 11 + uint64_t(stream));
    std::uniform_int_distribution<int> pick(0, clusters - 1);
    std::vector<float> x(size_t(n) * kDim);
    for (int64_t i = 0; i < n; ++i) {
        const size_t c = size_t(pick(rows)) * kDim;
        for (int j = 0; j < kDim; ++j) {
            x[size_t(i) * kDim + j] = centres[c + j] + scales[c + j] * normal(rows);
        }
    }
    return x;
}

/// Auto against FP32 on `index`; returns Auto's counters for this search.
BoundedSearchStats autoAgainstFp32(GpuIndexQuickSelectFlat& index, const std::vector<float>& xq,
                                   int64_t k, const std::string& what,
                                   const faiss::IDSelector* sel = nullptr) {
    return boundedAgainstFp32(index, FlatMetric::L2, kDim, xq, k, DistancePrecision::Auto, what,
                              sel);
}

/// A far-cluster corpus of nb vectors (FAISS_EXT_TEST_SMALL: just above
/// kResidualMinVectors) and queries enough for the residual pass.
struct FarSet {
    int64_t nb, nq;
    std::vector<float> xb, xq;
    explicit FarSet(int64_t fullSize)
        : nb(sized<int64_t>(fullSize, kResidualMinVectors + 5000)),
          nq(kResidualMinQueries + 1000),
          xb(farClusters(nb, 40, 0)),
          xq(farClusters(nq, 40, 1)) {}
};

}  // namespace

TEST(GpuFlatBoundedResidual, CertifiesFarClustersOverResiduals) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const FarSet set(300000);
    GpuIndexQuickSelectFlat index(&res, kDim, FlatMetric::L2);
    index.add(set.nb, set.xb.data());
    for (int64_t k : {10, 100}) {
        const std::string what = describe(FlatMetric::L2, kDim, k, "far clusters, residual");
        const BoundedSearchStats s = autoAgainstFp32(index, set.xq, k, what);
        EXPECT_GE(s.residualQueries, set.nq / 2) << what;
        EXPECT_LE(s.fallbackQueries, set.nq / 50) << what;
    }
}

TEST(GpuFlatBoundedResidual, AddsAfterASearchAreSeen) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const FarSet set(200000);
    GpuIndexQuickSelectFlat index(&res, kDim, FlatMetric::L2);
    index.add(set.nb - 20000, set.xb.data());
    autoAgainstFp32(index, set.xq, 10, "before the add");
    // The queries themselves added: each must now find itself first.
    index.add(20000, set.xb.data() + size_t(set.nb - 20000) * kDim);
    index.add(set.nq, set.xq.data());
    const BoundedSearchStats s = autoAgainstFp32(index, set.xq, 10, "after the adds");
    EXPECT_GE(s.residualQueries, set.nq / 2);
    const Results r = searchWith(index, set.xq, 1, DistancePrecision::Auto);
    int found = 0;
    for (int64_t i = 0; i < set.nq; ++i) found += r.I[size_t(i)] == set.nb + i ? 1 : 0;
    EXPECT_GE(found, set.nq * 99 / 100) << "queries added as vectors must be their own nearest";
}

TEST(GpuFlatBoundedResidual, FilteredSearchesStayExact) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const FarSet set(200000);
    GpuIndexQuickSelectFlat index(&res, kDim, FlatMetric::L2);
    index.add(set.nb, set.xb.data());
    autoAgainstFp32(index, set.xq, 10, "unfiltered (builds the copy)");
    faiss::IDSelectorRange range(1000, set.nb - 1000);
    const BoundedSearchStats s = autoAgainstFp32(index, set.xq, 10, "range filter", &range);
    EXPECT_EQ(s.residualQueries, 0) << "a filtered subset does not search the residual copy";
}
