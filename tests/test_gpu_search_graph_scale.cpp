// GpuIndexSearchGraph past the size where GNND's own Auto switches to the
// partitioned build (kAutoPartitionedAddAbove, 2M vectors): with default
// settings the search graph must stay navigable, so that raising itopk
// alone reaches recall@10 0.99 (issue 38: partitioned lists gave a graph
// whose recall stopped at 0.87 on a hard 10M set, whatever itopk). The data
// is a mixture of many anisotropic clusters of Zipf-distributed sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "GnndTestUtils.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

using namespace faiss_ext;
using namespace faiss_ext::gpu;
using namespace faiss_ext::test;

namespace {

/// A mixture of `clusters` axis-aligned Gaussian clusters in d dimensions:
/// centres N(0, I), per-axis scales log-uniform in [0.1, 1], cluster c
/// drawn with weight (c + 1)^-1.1. Row i depends on (seed, stream, i) only,
/// so rows are generated on all threads.
struct ZipfMixture {
    int d = 32;
    int clusters = 2000;
    uint64_t seed = 77;
    std::vector<float> centres, scales;
    std::vector<double> cumulative;

    void make() {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> g;
        std::uniform_real_distribution<float> u(std::log(0.1f), 0.f);
        centres.resize(size_t(clusters) * d);
        scales.resize(size_t(clusters) * d);
        for (float& c : centres) c = g(rng);
        for (float& s : scales) s = std::exp(u(rng));
        cumulative.resize(clusters);
        double sum = 0;
        for (int c = 0; c < clusters; ++c) cumulative[c] = sum += std::pow(c + 1.0, -1.1);
        for (double& w : cumulative) w /= sum;
    }

    std::vector<float> rows(int64_t n, uint64_t stream) const {
        std::vector<float> x(size_t(n) * d);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull ^ (stream << 40) ^ uint64_t(i));
            std::uniform_real_distribution<double> pick(0, 1);
            std::normal_distribution<float> g;
            const double p = pick(rng);
            int c = int(std::lower_bound(cumulative.begin(), cumulative.end(), p) -
                        cumulative.begin());
            c = std::min(c, clusters - 1);
            for (int j = 0; j < d; ++j)
                x[size_t(i) * d + j] =
                        centres[size_t(c) * d + j] + scales[size_t(c) * d + j] * g(rng);
        }
        return x;
    }
};

TEST(GpuSearchGraphScale, DefaultBuildPast2MVectorsReachesRecall099ByItopkAlone) {
    FAISS_EXT_REQUIRE_GPU();
    if (smallTests()) GTEST_SKIP() << "2.5M vectors: not sanitizer-sized";
    const int64_t nb = 2500000, nq = 2000;
    ZipfMixture mix;
    mix.make();
    const std::vector<float> xb = mix.rows(nb, 0), xq = mix.rows(nq, 1);
    StandardGpuResources res;
    GpuIndexSearchGraph index(&res, mix.d);  // default settings
    index.add(nb, xb.data());
    std::fprintf(stderr, "[search graph 2.5M] k-NN lists %s, %.1f s + %.1f s\n",
                 addBuildName(index.getLastKnnAddBuild()), index.getKnnBuildSeconds(),
                 index.getOptimizeSeconds());
    EXPECT_EQ(index.getLastKnnAddBuild(), GnndAddBuild::OneShot)
            << "2.5M x 32 fits one GNND build on the device";
    const int k = 10;
    std::vector<float> D(size_t(nq) * k);
    std::vector<int64_t> I(size_t(nq) * k);
    SearchParametersSearchGraph sp;
    sp.itopk = 256;
    index.search(nq, xq.data(), k, D.data(), I.data(), &sp);
    const double recall = gnndtest::recallAgainstExactIndex(res, xb, nb, xq, nq, mix.d, k, I);
    std::fprintf(stderr, "[search graph 2.5M] recall@10 at itopk 256: %.4f\n", recall);
    EXPECT_GE(recall, 0.99);
}

}  // namespace
