// GpuKnnGraphGNND's CPU twin faiss::IndexNNDescentFlat: copyTo / copyFrom,
// FAISS I/O, NSG from our graph, FAISS's search on the twin (cosine queries
// prepared by the twin's transform).
#include "TestUtils.h"
#include "GnndTestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <gtest/gtest.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexNSG.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuKnnGraphGNND;
using faiss_ext::gpu::SearchParametersGNND;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;
using namespace faiss_ext::gnndtest;

// ---- the CPU twin: faiss::IndexNNDescentFlat, FAISS I/O, NSG ----

TEST(GpuGnnd, CpuTwinIoAndNsg) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(10000, 3000), nq = sized<int64_t>(500, 100);
    const int d = 32, k = 32, kq = 10, L = 64;
    auto all = clusteredVectors(n + nq, d, 20, kSeed + 17);
    std::vector<float> x(all.begin(), all.begin() + size_t(n) * d);
    std::vector<float> q(all.begin() + size_t(n) * d, all.end());
    auto ref = exactSearch(x.data(), n, q.data(), nq, d, kq, false);
    auto score = [&](const std::vector<int64_t>& I) {
        return searchRecall(x.data(), n, q.data(), nq, d, false, I.data(), kq, ref.data(), kq, kq);
    };

    GpuKnnGraphGNND index(&res, d, k);
    index.add(n, x.data());
    const std::vector<int> graph = index.getGraphInt();
    std::vector<float> D(size_t(nq) * kq);
    std::vector<int64_t> I(size_t(nq) * kq);
    SearchParametersGNND params;
    params.searchL = L;
    index.search(nq, q.data(), kq, D.data(), I.data(), &params);
    const double ours = score(I);

    // copyTo: vectors and graph; FAISS's own search on it.
    faiss::IndexNNDescentFlat cpu(d, 16);
    index.copyTo(&cpu);
    EXPECT_EQ(cpu.ntotal, n);
    EXPECT_EQ(cpu.d, d);
    EXPECT_EQ(cpu.nndescent.K, k);
    EXPECT_TRUE(cpu.nndescent.has_built);
    EXPECT_EQ(cpu.nndescent.ntotal, n);
    EXPECT_EQ(cpu.nndescent.final_graph, graph);
    std::vector<float> v(d);
    cpu.reconstruct(n / 2, v.data());
    EXPECT_TRUE(std::equal(v.begin(), v.end(), x.begin() + size_t(n / 2) * d));
    std::vector<float> cD(size_t(nq) * kq);
    std::vector<int64_t> cI(size_t(nq) * kq);
    {
        // With the search_L copyTo wrote (from our searchL = 0, "automatic"),
        // FAISS's search on the twin is as good as our default search.
        index.search(nq, q.data(), kq, D.data(), I.data());
        const double oursDefault = score(I);
        cpu.search(nq, q.data(), kq, cD.data(), cI.data());
        const double twinDefault = score(cI);
        std::printf("[gnnd] default search: ours %.4f, FAISS on the twin (search_L = %d) %.4f\n", oursDefault,
                    cpu.nndescent.search_L, twinDefault);
        EXPECT_GE(twinDefault, oursDefault - 0.05) << "the twin's search_L = " << cpu.nndescent.search_L;
    }
    cpu.nndescent.search_L = L;
    cpu.search(nq, q.data(), kq, cD.data(), cI.data());
    const double faissRecall = score(cI);
    std::printf("[gnnd] search recall@10 at L=%d: ours %.4f, FAISS CPU on our graph %.4f\n", L, ours, faissRecall);
    EXPECT_GE(ours, 0.9);
    EXPECT_GE(faissRecall, 0.9);
    EXPECT_NEAR(ours, faissRecall, 0.05);

    // FAISS I/O round trip.
    faiss::VectorIOWriter w;
    faiss::write_index(&cpu, &w);
    faiss::VectorIOReader r;
    r.data = w.data;
    std::unique_ptr<faiss::Index> back(faiss::read_index(&r));
    auto* nnd = dynamic_cast<faiss::IndexNNDescentFlat*>(back.get());
    ASSERT_NE(nnd, nullptr) << "read_index did not give an IndexNNDescentFlat";
    EXPECT_EQ(nnd->ntotal, n);
    EXPECT_EQ(nnd->nndescent.K, k);
    EXPECT_EQ(nnd->nndescent.final_graph, graph);
    std::vector<float> bD(size_t(nq) * kq);
    std::vector<int64_t> bI(size_t(nq) * kq);
    nnd->search(nq, q.data(), kq, bD.data(), bI.data());
    EXPECT_EQ(bI, cI);

    // copyFrom back: the same graph (K becomes the degree).
    GpuKnnGraphGNND again(&res, nnd);
    EXPECT_EQ(again.ntotal, n);
    EXPECT_EQ(again.getGraphDegree(), k);
    EXPECT_EQ(again.getGraphInt(), graph);
    GpuKnnGraphGNND other(&res, d, 16);
    other.copyFrom(nnd);
    EXPECT_EQ(other.getGraphDegree(), k);
    EXPECT_EQ(other.getGraphInt(), graph);
    const Graph g = fetchGraph(other);
    EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.ids.data(), g.dist.data(), k));
    other.search(nq, q.data(), kq, D.data(), I.data(), &params);
    EXPECT_GE(score(I), 0.9);

    // copyToCpuIndex: the twin as a new object.
    std::unique_ptr<faiss::Index> twin(index.copyToCpuIndex());
    auto* twinNnd = dynamic_cast<faiss::IndexNNDescentFlat*>(twin.get());
    ASSERT_NE(twinNnd, nullptr);
    EXPECT_EQ(twinNnd->nndescent.final_graph, graph);

    // NSG built from our graph.
    std::unique_ptr<faiss::IndexNSGFlat> nsg(index.toIndexNSG(32));
    ASSERT_NE(nsg, nullptr);
    EXPECT_EQ(nsg->ntotal, n);
    EXPECT_TRUE(nsg->is_built);
    nsg->nsg.search_L = L;
    std::vector<float> nD(size_t(nq) * kq);
    std::vector<int64_t> nI(size_t(nq) * kq);
    nsg->search(nq, q.data(), kq, nD.data(), nI.data());
    const double nsgRecall = score(nI);
    std::printf("[gnnd] NSG(32) from our graph: recall@10 %.4f at search_L=%d\n", nsgRecall, L);
    EXPECT_GE(nsgRecall, 0.9);
}

TEST(GpuGnnd, CosineCpuTwinPreparesQueries) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 5000, nq = 100;
    const int d = 24, k = 32, kq = 10;
    auto all = clusteredVectors(n + nq, d, 10, kSeed + 19);
    std::vector<float> x(all.begin(), all.begin() + size_t(n) * d);
    std::vector<float> q(all.begin() + size_t(n) * d, all.end());
    GpuKnnGraphGNND index(&res, d, k, FlatMetric::Cosine);
    index.add(n, x.data());
    std::unique_ptr<faiss::Index> twin(index.copyToCpuIndex());
    ASSERT_NE(dynamic_cast<faiss::IndexPreTransform*>(twin.get()), nullptr);
    std::vector<float> D(size_t(nq) * kq);
    std::vector<int64_t> I(size_t(nq) * kq);
    twin->search(nq, q.data(), kq, D.data(), I.data());
    auto xp = prepared(FlatMetric::Cosine, x, n, d), qp = prepared(FlatMetric::Cosine, q, nq, d);
    auto ref = exactSearch(xp.data(), n, qp.data(), nq, d, kq, true);
    auto* inner = dynamic_cast<faiss::IndexNNDescentFlat*>(dynamic_cast<faiss::IndexPreTransform*>(twin.get())->index);
    ASSERT_NE(inner, nullptr);
    EXPECT_GE(searchRecall(xp.data(), n, qp.data(), nq, d, true, I.data(), kq, ref.data(), kq, kq), 0.9)
            << "FAISS search on the twin, its search_L = " << inner->nndescent.search_L;
    int aboveOne = 0;
    for (int64_t i = 0; i < nq * kq; ++i) aboveOne += D[i] > 1.0f + 1e-5f;
    EXPECT_EQ(aboveOne, 0) << "cosines above 1: the queries were not normalised";
}
