// GpuIndexSearchGraph with several thread blocks per query (CAGRA's
// multi-CTA search, for small batches): each block searches the query on
// its own and the results are merged. Checked: rows sorted and distinct,
// exact distances, recall at least that of one block, padding, determinism,
// the automatic choice by batch size, and refused settings.
#include <cuda_runtime_api.h>
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "GnndTestUtils.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

using namespace faiss_ext;
using namespace faiss_ext::gpu;

namespace {

struct Searched {
    std::vector<float> D;
    std::vector<int64_t> I;
};

Searched searchWith(const GpuIndexSearchGraph& index, const std::vector<float>& q, int64_t nq,
                    int k, int blocks, int itopk = 32) {
    Searched s;
    s.D.resize(size_t(nq) * k);
    s.I.resize(size_t(nq) * k);
    SearchParametersSearchGraph sp;
    sp.itopk = itopk;
    sp.blocksPerQuery = blocks;
    index.search(nq, q.data(), k, s.D.data(), s.I.data(), &sp);
    return s;
}

/// Every row sorted (ascending, or descending for similarities), its ids
/// distinct, and each distance the FP32 squared L2 distance of its id.
void expectWellFormed(const Searched& s, const std::vector<float>& x, const std::vector<float>& q,
                      int64_t nq, int d, int k, bool l2) {
    for (int64_t i = 0; i < nq; ++i) {
        std::set<int64_t> ids;
        for (int j = 0; j < k; ++j) {
            int64_t id = s.I[i * k + j];
            ASSERT_GE(id, 0) << "row " << i << " slot " << j;
            ASSERT_TRUE(ids.insert(id).second) << "row " << i << " repeats " << id;
            if (j > 0) {
                float a = s.D[i * k + j - 1], b = s.D[i * k + j];
                ASSERT_TRUE(l2 ? a <= b : a >= b) << "row " << i << " not sorted at " << j;
            }
            if (!l2) continue;
            double ref = 0;
            for (int t = 0; t < d; ++t) {
                double v = double(q[i * d + t]) - x[size_t(id) * d + t];
                ref += v * v;
            }
            ASSERT_NEAR(s.D[i * k + j], ref, 1e-4 * (1 + ref)) << "row " << i << " id " << id;
        }
    }
}

int multiprocessors() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    return sms;
}

}  // namespace

TEST(GpuSearchGraphBlocks, SeveralBlocksFindAtLeastWhatOneFinds) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    int64_t n = test::sized<int64_t>(30000, 4000), nq = 200;
    int d = 32, k = 10;
    // many clusters: a narrow beam from one entry point misses some
    std::vector<float> x = test::clusteredVectors(n, d, 200, 31);
    std::vector<float> q = test::clusteredVectors(nq, d, 200, 32);
    GpuIndexSearchGraphConfig cfg;
    cfg.graphDegree = 16;
    cfg.knnDegree = 32;
    GpuIndexSearchGraph index(&res, d, FlatMetric::L2, cfg);
    index.add(n, x.data());
    double one = 0;
    for (int blocks : {1, 4, 16}) {
        Searched s = searchWith(index, q, nq, k, blocks, 16);
        expectWellFormed(s, x, q, nq, d, k, true);
        double r = gnndtest::recallAgainstExactIndex(res, x, n, q, nq, d, k, s.I);
        std::printf("[search graph] itopk 16, %2d blocks per query: recall@10 %.4f\n", blocks, r);
        if (blocks == 1) one = r;
        // the merge keeps the best of every block, and block 0 of several
        // starts from the query's best entry point as the single block does
        EXPECT_GE(r, one - 0.005) << blocks << " blocks";
        if (blocks == 16 && one < 0.99)
            EXPECT_GT(r, one) << "16 independent beams should find more than one";
    }
}

TEST(GpuSearchGraphBlocks, InnerProductResultsAreProductsLargestFirst) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    int64_t n = test::sized<int64_t>(20000, 3000), nq = 100;
    int d = 32, k = 10;
    std::vector<float> x = test::clusteredVectors(n, d, 64, 51);
    std::vector<float> q = test::clusteredVectors(nq, d, 64, 52);
    GpuIndexSearchGraph index(&res, d, FlatMetric::InnerProduct);
    index.add(n, x.data());
    Searched s = searchWith(index, q, nq, k, 8, 64);
    expectWellFormed(s, x, q, nq, d, k, false);
    for (int64_t i = 0; i < nq; ++i)
        for (int j = 0; j < k; ++j) {
            int64_t id = s.I[i * k + j];
            double dot = 0;
            for (int t = 0; t < d; ++t) dot += double(q[i * d + t]) * x[size_t(id) * d + t];
            ASSERT_NEAR(s.D[i * k + j], dot, 1e-4 * (1 + std::fabs(dot)));
        }
    double r = gnndtest::recallAgainstExactIndex(res, x, n, q, nq, d, k, s.I,
                                                      FlatMetric::InnerProduct);
    std::printf("[search graph] inner product, 8 blocks per query: recall@10 %.4f\n", r);
    EXPECT_GE(r, 0.9);
}

TEST(GpuSearchGraphBlocks, PadsAndDropsRepeatsAcrossBlocks) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexSearchGraphConfig cfg;
    cfg.graphDegree = 8;
    cfg.knnDegree = 16;
    int64_t n = 40;
    std::vector<float> x = test::randomVectors(n, 8, 3);
    GpuIndexSearchGraph index(&res, 8, FlatMetric::L2, cfg);
    index.add(n, x.data());
    // every block reaches all 40 nodes: the merge sees each 8 times
    int k = 64;
    Searched s = searchWith(index, x, 1, k, 8, 64);
    std::set<int64_t> distinct;
    for (int j = 0; j < k; ++j) {
        if (j < n) {
            ASSERT_GE(s.I[j], 0) << "slot " << j;
            ASSERT_TRUE(distinct.insert(s.I[j]).second) << "repeat " << s.I[j];
            if (j > 0) ASSERT_LE(s.D[j - 1], s.D[j]);
        } else {
            EXPECT_EQ(s.I[j], -1) << "slot " << j;
            EXPECT_TRUE(std::isinf(s.D[j]));
        }
    }
    EXPECT_EQ(s.I[0], 0);
}

TEST(GpuSearchGraphBlocks, DeterministicAndChosenByBatchSize) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    int64_t n = test::sized<int64_t>(20000, 3000);
    int d = 32, k = 10;
    std::vector<float> x = test::clusteredVectors(n, d, 64, 61);
    int sms = multiprocessors();
    int64_t nq = 4 * sms;
    std::vector<float> q = test::clusteredVectors(nq, d, 64, 62);
    GpuIndexSearchGraph index(&res, d);
    index.add(n, x.data());
    Searched a = searchWith(index, q, nq, k, 8);
    Searched b = searchWith(index, q, nq, k, 8);
    EXPECT_EQ(a.I, b.I);
    EXPECT_EQ(a.D, b.D);
    // a batch with a query per SM or more: one block per query
    Searched autoLarge = searchWith(index, q, nq, k, 0);
    Searched single = searchWith(index, q, nq, k, 1);
    EXPECT_EQ(autoLarge.I, single.I);
    // one query: 16 blocks (any GPU of 16 SMs or more)
    ASSERT_GE(sms, 16);
    Searched autoOne = searchWith(index, q, 1, k, 0);
    Searched sixteen = searchWith(index, q, 1, k, 16);
    EXPECT_EQ(autoOne.I, sixteen.I);
    EXPECT_EQ(autoOne.D, sixteen.D);
    // the index's default applies when the parameters leave it at 0
    GpuIndexSearchGraphConfig cfg;
    cfg.blocksPerQuery = 4;
    GpuIndexSearchGraph four(&res, d, FlatMetric::L2, cfg);
    four.add(n, x.data());
    EXPECT_EQ(searchWith(four, q, nq, k, 0).I, searchWith(four, q, nq, k, 4).I);
}

TEST(GpuSearchGraphBlocks, WideBlocksOfSmallBatchesSearchAsBatchesDo) {
    // a grid of no more blocks than SMs runs blocks of 512 threads, a batch
    // blocks of 128: the same search either way (random entry points only,
    // which depend on the query alone; the sampled ones come from a GEMM
    // whose kernel depends on the batch size), at FP32 and FP16 traversal
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    int64_t n = test::sized<int64_t>(20000, 3000);
    int k = 10;
    for (int d : {32, 200}) {
        std::vector<float> x = test::clusteredVectors(n, d, 64, 71);
        const int sms = multiprocessors();
        const int64_t nq = 2 * sms;  // a grid past the SMs even at one block a query
        std::vector<float> q = test::clusteredVectors(nq, d, 64, 72);
        GpuIndexSearchGraph index(&res, d);
        index.add(n, x.data());
        auto search = [&](int64_t m, int64_t q0, int blocks, int fp16) {
            Searched s;
            s.D.resize(size_t(m) * k);
            s.I.resize(size_t(m) * k);
            SearchParametersSearchGraph sp;
            sp.blocksPerQuery = blocks;
            sp.entrySeeds = 0;
            sp.fp16 = fp16;
            index.search(m, q.data() + size_t(q0) * d, k, s.D.data(), s.I.data(), &sp);
            return s;
        };
        for (int fp16 : {0, 1}) {
            for (int blocks : {1, 16}) {
                Searched batch = search(nq, 0, blocks, fp16);
                for (int64_t i = 0; i < nq; i += 7) {
                    Searched one = search(1, i, blocks, fp16);
                    for (int j = 0; j < k; ++j) {
                        ASSERT_EQ(one.I[j], batch.I[size_t(i) * k + j])
                                << "d " << d << " fp16 " << fp16 << " blocks " << blocks
                                << " query " << i << " rank " << j;
                        ASSERT_EQ(one.D[j], batch.D[size_t(i) * k + j]);
                    }
                }
            }
        }
    }
}

TEST(GpuSearchGraphBlocks, SeedPerSearch) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    int64_t n = test::sized<int64_t>(20000, 3000), nq = 200;
    int d = 32, k = 10;
    std::vector<float> x = test::clusteredVectors(n, d, 64, 81);
    std::vector<float> q = test::clusteredVectors(nq, d, 64, 82);
    GpuIndexSearchGraph index(&res, d);
    index.add(n, x.data());
    auto run = [&](int64_t seed) {
        SearchParametersSearchGraph sp;
        sp.itopk = 16;
        sp.entrySeeds = 0;  // random entry points only: the seed decides them
        sp.blocksPerQuery = 1;
        sp.maxIterations = 1;  // and, one step from them, the results
        sp.seed = seed;
        std::vector<float> D(nq * k);
        std::vector<int64_t> I(nq * k);
        index.search(nq, q.data(), k, D.data(), I.data(), &sp);
        return I;
    };
    EXPECT_EQ(run(-1), run(int64_t(index.getConfig().seed))) << "-1 is the index's seed";
    EXPECT_EQ(run(7), run(7));
    EXPECT_NE(run(7), run(8)) << "another seed, other random entry points";
    SearchParametersSearchGraph bad;
    bad.seed = -2;
    std::vector<float> D(k);
    std::vector<int64_t> I(k);
    EXPECT_THROW(index.search(1, q.data(), k, D.data(), I.data(), &bad), faiss::FaissException);
}

TEST(GpuSearchGraphBlocks, BadSettingsAreRefused) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexSearchGraphConfig bad;
    bad.blocksPerQuery = 33;
    EXPECT_THROW(GpuIndexSearchGraph(&res, 8, FlatMetric::L2, bad), faiss::FaissException);
    bad.blocksPerQuery = -1;
    EXPECT_THROW(GpuIndexSearchGraph(&res, 8, FlatMetric::L2, bad), faiss::FaissException);
    int64_t n = 2000;
    int d = 16;
    std::vector<float> x = test::clusteredVectors(n, d, 16, 71);
    GpuIndexSearchGraph index(&res, d);
    index.add(n, x.data());
    std::vector<float> D(512);
    std::vector<int64_t> I(512, 7);
    SearchParametersSearchGraph sp;
    sp.blocksPerQuery = 40;
    EXPECT_THROW(index.search(1, x.data(), 10, D.data(), I.data(), &sp), faiss::FaissException);
    // 32 blocks x k 512 is more than one block can merge
    sp.blocksPerQuery = 32;
    sp.itopk = 512;
    EXPECT_THROW(index.search(1, x.data(), 512, D.data(), I.data(), &sp), faiss::FaissException);
    EXPECT_EQ(I[0], 7) << "a refused search wrote results";
    // the largest k the automatic choice can merge still works
    sp.blocksPerQuery = 0;
    index.search(1, x.data(), 512, D.data(), I.data(), &sp);
    EXPECT_EQ(I[0], 0);
}
