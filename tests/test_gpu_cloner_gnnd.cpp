// The cloner and the I/O for GpuKnnGraphGNND: factory twin ("GNND<k>...") ->
// GPU with the twin's NN-Descent parameters -> build -> CPU twin with the same
// graph -> file -> GPU again; FAISS's wrappers (IDMap, L2norm) walked; a graph
// built by FAISS on the CPU kept when moved to the GPU; bad twins refused.
// Skipped without a GPU.
#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

namespace faiss_ext {
namespace {

using gpu::GpuKnnGraphGNND;
using gpu::StandardGpuResources;
using test::kSeed;
using idx_t = faiss::Index::idx_t;

template <class T>
T* as(faiss::Index* idx) {
    return dynamic_cast<T*>(idx);
}

/// The index at the bottom of IDMap / PreTransform wrappers.
faiss::Index* leafOf(faiss::Index* idx) {
    while (true) {
        if (auto m = dynamic_cast<faiss::IndexIDMap*>(idx)) {
            idx = m->index;
        } else if (auto pt = dynamic_cast<faiss::IndexPreTransform*>(idx)) {
            idx = pt->index;
        } else {
            return idx;
        }
    }
}

TEST(GpuClonerGnnd, FactoryTwinBecomesGnndWithItsParameters) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16, n = test::sized(3000, 1000), k = 16;
    std::unique_ptr<faiss::Index> twin(index_factory(d, "GNND16_p12_it8"));
    std::unique_ptr<faiss::Index> g(gpu::index_cpu_to_gpu(&res, 0, twin.get()));
    auto* gnnd = as<GpuKnnGraphGNND>(g.get());
    ASSERT_NE(gnnd, nullptr);
    EXPECT_EQ(gnnd->d, d);
    EXPECT_EQ(gnnd->ntotal, 0);
    EXPECT_EQ(gnnd->metric_type, faiss::METRIC_L2);
    EXPECT_EQ(gnnd->getGraphDegree(), k);
    EXPECT_EQ(gnnd->getConfig().samples, 12);
    EXPECT_EQ(gnnd->getConfig().maxIterations, 8);
    EXPECT_EQ(gnnd->getConfig().seed, uint64_t(kGnndDefaultSeed));
    EXPECT_EQ(gnnd->getConfig().searchL, 0);
    EXPECT_EQ(gnnd->getConfig().device, 0);

    // built on the GPU, then back to the CPU with the same graph
    auto x = test::clusteredVectors(n, d, 20, kSeed);
    g->add(n, x.data());
    std::vector<int> graph = gnnd->getGraphInt();
    ASSERT_EQ(graph.size(), size_t(n) * k);

    std::unique_ptr<faiss::Index> back(gpu::index_gpu_to_cpu(g.get()));
    auto* nnd = as<faiss::IndexNNDescentFlat>(back.get());
    ASSERT_NE(nnd, nullptr);
    EXPECT_EQ(nnd->ntotal, n);
    EXPECT_EQ(nnd->nndescent.K, k);
    EXPECT_EQ(nnd->nndescent.S, 12);
    EXPECT_EQ(nnd->nndescent.iter, 8);
    EXPECT_EQ(nnd->nndescent.random_seed, kGnndDefaultSeed);
    EXPECT_TRUE(nnd->nndescent.has_built);
    EXPECT_EQ(nnd->nndescent.final_graph, graph);

    // saved from the GPU as its twin: our reader and plain FAISS's agree
    std::vector<uint8_t> bytes = serialize_index(g.get());
    std::unique_ptr<faiss::Index> loaded(deserialize_index(bytes));
    auto* lnnd = as<faiss::IndexNNDescentFlat>(loaded.get());
    ASSERT_NE(lnnd, nullptr);
    EXPECT_EQ(lnnd->nndescent.final_graph, graph);
    faiss::VectorIOReader r;
    r.data = bytes;
    std::unique_ptr<faiss::Index> plain(faiss::read_index(&r));
    auto* pnnd = as<faiss::IndexNNDescentFlat>(plain.get());
    ASSERT_NE(pnnd, nullptr);
    EXPECT_EQ(pnnd->nndescent.final_graph, graph);

    // and to the GPU again: the same graph and parameters
    std::unique_ptr<faiss::Index> g2(gpu::index_cpu_to_gpu(&res, 0, loaded.get()));
    auto* gnnd2 = as<GpuKnnGraphGNND>(g2.get());
    ASSERT_NE(gnnd2, nullptr);
    EXPECT_EQ(gnnd2->ntotal, n);
    EXPECT_EQ(gnnd2->getGraphInt(), graph);
    EXPECT_EQ(gnnd2->getConfig().samples, 12);
    EXPECT_EQ(gnnd2->getConfig().maxIterations, 8);

    // a GPU index given to index_cpu_to_gpu moves through its twin
    std::unique_ptr<faiss::Index> g3(gpu::index_cpu_to_gpu(&res, 0, g.get()));
    ASSERT_NE(as<GpuKnnGraphGNND>(g3.get()), nullptr);
    EXPECT_EQ(as<GpuKnnGraphGNND>(g3.get())->getGraphInt(), graph);
}

TEST(GpuClonerGnnd, ParametersAreMappedAndClamped) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    faiss::IndexNNDescentFlat twin(8, 24, faiss::METRIC_INNER_PRODUCT);
    twin.nndescent.S = 100;   // past 32: clamped
    twin.nndescent.iter = 0;  // at least one
    twin.nndescent.random_seed = 77;
    twin.nndescent.search_L = 90;
    std::unique_ptr<faiss::Index> g(gpu::index_cpu_to_gpu(&res, 0, &twin));
    auto* gnnd = as<GpuKnnGraphGNND>(g.get());
    ASSERT_NE(gnnd, nullptr);
    EXPECT_EQ(gnnd->metric_type, faiss::METRIC_INNER_PRODUCT);
    EXPECT_EQ(gnnd->getGraphDegree(), 24);
    EXPECT_EQ(gnnd->getConfig().samples, kGnndMaxSamples);
    EXPECT_EQ(gnnd->getConfig().maxIterations, 1);
    EXPECT_EQ(gnnd->getConfig().seed, 77u);
    EXPECT_EQ(gnnd->getConfig().searchL, 90);

    twin.nndescent.S = 0;
    g.reset(gpu::index_cpu_to_gpu(&res, 0, &twin));
    EXPECT_EQ(as<GpuKnnGraphGNND>(g.get())->getConfig().samples, 1);
}

TEST(GpuClonerGnnd, CpuBuiltGraphIsKept) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8, n = 2000, k = 16;
    std::unique_ptr<faiss::Index> twin(index_factory(d, "GNND16"));
    auto x = test::randomVectors(n, d, kSeed);
    twin->add(n, x.data());  // FAISS's NN-Descent on the CPU
    auto* nnd = as<faiss::IndexNNDescentFlat>(twin.get());
    ASSERT_TRUE(nnd->nndescent.has_built);
    std::unique_ptr<faiss::Index> g(gpu::index_cpu_to_gpu(&res, 0, twin.get()));
    auto* gnnd = as<GpuKnnGraphGNND>(g.get());
    ASSERT_NE(gnnd, nullptr);
    ASSERT_EQ(gnnd->ntotal, n);
    // not rebuilt: each list holds FAISS's neighbours (self and duplicates aside)
    std::vector<int> graph = gnnd->getGraphInt();
    ASSERT_EQ(graph.size(), size_t(n) * k);
    int64_t kept = 0, expected = 0;
    for (int i = 0; i < n; ++i) {
        std::set<int> cpuRow;
        for (int j = 0; j < k; ++j) {
            int id = nnd->nndescent.final_graph[size_t(i) * k + j];
            if (id != i) cpuRow.insert(id);
        }
        expected += int64_t(cpuRow.size());
        for (int j = 0; j < k; ++j) kept += cpuRow.count(graph[size_t(i) * k + j]);
    }
    EXPECT_EQ(kept, expected);
}

TEST(GpuClonerGnnd, WrappersAreWalked) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16, n = test::sized(2000, 600);
    auto x = test::clusteredVectors(n, d, 10, kSeed);
    std::vector<idx_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = 100 + 3 * i;

    std::unique_ptr<faiss::Index> idmap(index_factory(d, "IDMap,GNND16_p16"));
    std::unique_ptr<faiss::Index> g(gpu::index_cpu_to_gpu(&res, 0, idmap.get()));
    auto* m = as<faiss::IndexIDMap>(g.get());
    ASSERT_NE(m, nullptr);
    ASSERT_NE(as<GpuKnnGraphGNND>(m->index), nullptr);
    g->add_with_ids(n, x.data(), ids.data());
    std::vector<float> D(5);
    std::vector<idx_t> I(5);
    g->search(1, x.data() + 10 * d, 5, D.data(), I.data());
    EXPECT_EQ(I[0], 100 + 3 * 10);
    std::unique_ptr<faiss::Index> back(gpu::index_gpu_to_cpu(g.get()));
    auto* bm = as<faiss::IndexIDMap>(back.get());
    ASSERT_NE(bm, nullptr);
    EXPECT_EQ(bm->id_map, m->id_map);
    ASSERT_NE(as<faiss::IndexNNDescentFlat>(bm->index), nullptr);

    // cosine: the normalisation stays on the CPU, the graph is built on the GPU
    std::unique_ptr<faiss::Index> cosine(
        index_factory(d, "L2norm,GNND16", faiss::METRIC_INNER_PRODUCT));
    g.reset(gpu::index_cpu_to_gpu(&res, 0, cosine.get()));
    auto* pt = as<faiss::IndexPreTransform>(g.get());
    ASSERT_NE(pt, nullptr);
    auto* inner = as<GpuKnnGraphGNND>(pt->index);
    ASSERT_NE(inner, nullptr);
    EXPECT_EQ(inner->metric_type, faiss::METRIC_INNER_PRODUCT);
    g->add(n, x.data());
    EXPECT_EQ(inner->ntotal, n);
    std::vector<float> q(x.begin() + 7 * d, x.begin() + 8 * d);
    for (auto& v : q) v *= 3.f;
    g->search(1, q.data(), 5, D.data(), I.data());
    EXPECT_EQ(I[0], 7);
    EXPECT_NEAR(D[0], 1.f, 1e-3f);
    // saved as the twin under the same wrapper
    std::unique_ptr<faiss::Index> loaded(deserialize_index(serialize_index(g.get())));
    auto* lpt = as<faiss::IndexPreTransform>(loaded.get());
    ASSERT_NE(lpt, nullptr);
    auto* lnnd = as<faiss::IndexNNDescentFlat>(lpt->index);
    ASSERT_NE(lnnd, nullptr);
    EXPECT_EQ(lnnd->nndescent.final_graph, inner->getGraphInt());
}

TEST(GpuClonerGnnd, BadTwinsAreRefused) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    faiss::IndexNNDescentFlat tooWide(8, kGnndMaxDegree + 1);
    try {
        std::unique_ptr<faiss::Index> g(gpu::index_cpu_to_gpu(&res, 0, &tooWide));
        FAIL() << "no exception for K = " << kGnndMaxDegree + 1;
    } catch (const faiss::FaissException& e) {
        EXPECT_NE(std::string(e.what()).find("K = 1025"), std::string::npos) << e.what();
    }
    // a twin with too few vectors for its degree
    faiss::IndexNNDescentFlat few(8, 16);
    auto x = test::randomVectors(10, 8, kSeed);
    few.storage->add(10, x.data());
    few.ntotal = 10;
    EXPECT_THROW(std::unique_ptr<faiss::Index>(gpu::index_cpu_to_gpu(&res, 0, &few)),
                 faiss::FaissException);
}

}  // namespace
}  // namespace faiss_ext
