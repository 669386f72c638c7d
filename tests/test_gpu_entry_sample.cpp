// The entry-point sample of the search graph (impl/graph/EntrySample.h):
// each query's nearest sampled nodes by TF32 products and a warp per query
// (up to 32 per query) against the exact answer computed here in double
// precision, for L2 and inner products, samples smaller and larger than a
// warp's 32, data far from the origin (the sample is centred), duplicates,
// and the exact engine beyond 32 per query.
#include <cuda_runtime_api.h>
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "DeviceBuffer.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/graph/EntrySample.h"
#include "faiss_ext/gpu/impl/graph/NearestEntryPoints.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

using namespace faiss_ext;
using namespace faiss_ext::gpu;
using namespace faiss_ext::test;

namespace {

/// The sample's node ids on the host.
std::vector<int> nodeIdsOf(const graph::EntrySample& sample) {
    std::vector<int> ids(size_t(sample.size()));
    FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
    FAISS_EXT_CUDA_CHECK(cudaMemcpy(ids.data(), sample.nodeIds(), sizeof(int) * ids.size(),
                                    cudaMemcpyDeviceToHost));
    return ids;
}

/// Distance (L2) or negated product (inner product) of two rows, in double.
double keyOf(const float* a, const float* b, int d, bool l2) {
    double s = 0;
    for (int t = 0; t < d; ++t) s += l2 ? (double(a[t]) - b[t]) * (double(a[t]) - b[t])
                                        : -double(a[t]) * b[t];
    return s;
}

/// Runs EntrySample::nearest for xq over a sample of `count` of xb and
/// checks each query's row: perQuery distinct positions, nearest first up
/// to tol, and the j-th found no farther than the true j-th + tol (tol: a
/// relative slack of TF32's products, on data spread `spread`).
void checkNearest(int d, int64_t nb, int count, int perQuery, bool l2, float offset,
                  const std::string& what, int64_t nq = 40) {
    StandardGpuResources res;
    auto xb = randomVectors(nb, d, kSeed + uint64_t(nb), offset - 1.f, offset + 1.f);
    auto xq = randomVectors(nq, d, kSeed + 3, offset - 1.f, offset + 1.f);
    if (nb >= 4) std::copy(xb.begin(), xb.begin() + d, xb.begin() + 3 * d);  // a duplicate row
    DeviceBuffer<float> dB(xb), dQ(xq);
    DeviceBuffer<int64_t> dOut(std::vector<int64_t>(size_t(nq) * perQuery, -7));
    graph::EntrySample sample(res.getResources().get(), 0, d,
                              l2 ? FlatMetric::L2 : FlatMetric::InnerProduct, dB.p, nb, count,
                              1234);
    ASSERT_EQ(sample.size(), int(std::min<int64_t>(nb, count))) << what;
    sample.nearest(dQ.p, nq, perQuery, dOut.p);
    const std::vector<int> ids = nodeIdsOf(sample);
    const std::vector<int64_t> got = dOut.toHost();
    // TF32 keeps 10 bits of each factor: products within ~2^-10 of |q||x|
    const double tol = 4e-3 * double(d) * (std::fabs(offset) + 1) * (std::fabs(offset) + 1) + 1e-5;
    for (int64_t i = 0; i < nq; ++i) {
        const float* q = xq.data() + size_t(i) * d;
        std::vector<double> all;
        for (int id : ids) all.push_back(keyOf(q, xb.data() + size_t(id) * d, d, l2));
        std::vector<double> sorted = all;
        std::sort(sorted.begin(), sorted.end());
        std::set<int64_t> seen;
        for (int j = 0; j < perQuery; ++j) {
            const int64_t pos = got[size_t(i) * perQuery + j];
            ASSERT_TRUE(pos >= 0 && pos < sample.size()) << what << " row " << i << " slot " << j
                                                         << ": " << pos;
            ASSERT_TRUE(seen.insert(pos).second) << what << " row " << i << " repeats " << pos;
            const double key = all[size_t(pos)];
            EXPECT_LE(key, sorted[size_t(j)] + tol) << what << " row " << i << " rank " << j;
            if (j > 0) {
                const double before = all[size_t(got[size_t(i) * perQuery + j - 1])];
                EXPECT_LE(before, key + tol) << what << " row " << i << " not sorted at " << j;
            }
        }
    }
}

}  // namespace

TEST(GpuEntrySample, NearestByWarpsMatchesTheExactAnswer) {
    FAISS_EXT_REQUIRE_GPU();
    for (bool l2 : {true, false}) {
        for (int count : {1, 5, 31, 32, 33, 100, 4096}) {
            for (int perQuery : {1, 8, 32}) {
                if (perQuery > count) continue;
                for (int d : {3, 96}) {
                    checkNearest(d, 6000, count, perQuery, l2, 0.f,
                                 std::string(l2 ? "L2" : "IP") + " count=" +
                                         std::to_string(count) + " perQuery=" +
                                         std::to_string(perQuery) + " d=" + std::to_string(d));
                }
            }
        }
    }
}

TEST(GpuEntrySample, BatchesOfAnySizeArePaddedForTheGemm) {
    // the product GEMM runs on entryGemmRows(nq) rows, zeros past nq: every
    // query's seeds are right whatever the padding (none at 256, most at 257)
    FAISS_EXT_REQUIRE_GPU();
    EXPECT_EQ(graph::entryGemmRows(1), 1);
    EXPECT_EQ(graph::entryGemmRows(3), 4);
    EXPECT_EQ(graph::entryGemmRows(255), 256);
    EXPECT_EQ(graph::entryGemmRows(257), 512);
    EXPECT_EQ(graph::entryGemmRows(10000), 10240);
    for (bool l2 : {true, false}) {
        for (int64_t nq : {1, 3, 255, 256, 257, 700}) {
            checkNearest(24, 6000, 4096, 8, l2, 0.f,
                         std::string(l2 ? "L2" : "IP") + " nq=" + std::to_string(nq), nq);
        }
    }
}

TEST(GpuEntrySample, DataFarFromTheOriginKeepsItsSeeds) {
    // Norms of about 50 x sqrt(d) against neighbour gaps of about 1: TF32
    // products of the raw rows would err by more than the gaps; the sample
    // and (L2) the queries are centred, so the tolerance stays that of data
    // spread 1 around the origin.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    auto xb = randomVectors(5000, d, kSeed + 9, 49.f, 51.f);
    auto xq = randomVectors(40, d, kSeed + 10, 49.f, 51.f);
    for (float& v : xb) v -= 50.f;  // the reference: the same data at the origin
    std::vector<float> farB = xb;
    for (float& v : farB) v += 50.f;
    DeviceBuffer<float> dFar(farB), dQ(xq);
    DeviceBuffer<int64_t> dOut(std::vector<int64_t>(40 * 8, -7));
    graph::EntrySample sample(res.getResources().get(), 0, d, FlatMetric::L2, dFar.p, 5000, 1000,
                              99);
    sample.nearest(dQ.p, 40, 8, dOut.p);
    const std::vector<int> ids = nodeIdsOf(sample);
    const std::vector<int64_t> got = dOut.toHost();
    for (int i = 0; i < 40; ++i) {
        std::vector<float> q(xq.begin() + i * d, xq.begin() + (i + 1) * d);
        for (float& v : q) v -= 50.f;
        std::vector<double> all;
        for (int id : ids) all.push_back(keyOf(q.data(), xb.data() + size_t(id) * d, d, true));
        std::vector<double> sorted = all;
        std::sort(sorted.begin(), sorted.end());
        for (int j = 0; j < 8; ++j) {
            const int64_t pos = got[size_t(i) * 8 + j];
            ASSERT_TRUE(pos >= 0 && pos < 1000) << "row " << i;
            EXPECT_LE(all[size_t(pos)], sorted[size_t(j)] + 0.15) << "row " << i << " rank " << j;
        }
    }
}

TEST(GpuEntrySample, BeyondAWarpTheExactEngineAnswers) {
    FAISS_EXT_REQUIRE_GPU();
    for (bool l2 : {true, false}) {
        checkNearest(16, 3000, 500, 33, l2, 0.f, l2 ? "L2 perQuery=33" : "IP perQuery=33");
        checkNearest(16, 3000, 500, 128, l2, 0.f, l2 ? "L2 perQuery=128" : "IP perQuery=128");
    }
}

TEST(GpuEntrySample, BadArgumentsAreRefused) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    auto xb = randomVectors(100, 8, kSeed, -1.f, 1.f);
    DeviceBuffer<float> dB(xb);
    DeviceBuffer<int64_t> dOut(std::vector<int64_t>(64, 0));
    graph::EntrySample sample(res.getResources().get(), 0, 8, FlatMetric::L2, dB.p, 100, 10, 1);
    EXPECT_THROW(sample.nearest(dB.p, 2, 0, dOut.p), faiss::FaissException);
    EXPECT_THROW(sample.nearest(dB.p, 2, 11, dOut.p), faiss::FaissException);
    EXPECT_THROW(graph::EntrySample(res.getResources().get(), 0, 8, FlatMetric::L2, dB.p, 0, 10, 1),
                 faiss::FaissException);
}
