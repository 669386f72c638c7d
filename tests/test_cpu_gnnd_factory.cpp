// faiss_ext::index_factory's "GNND<k>[_p<samples>][_it<iterations>]": the CPU
// twin (faiss::IndexNNDescentFlat) and its parameters, FAISS prefixes around
// it, the defaults shared with GpuKnnGraphGNNDConfig, and bad strings.
#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>

#include <memory>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"

namespace faiss_ext {
namespace {

using test::kSeed;
using idx_t = faiss::Index::idx_t;

template <class T>
const T* as(const faiss::Index* idx) {
    return dynamic_cast<const T*>(idx);
}

/// The twin's NN-Descent parameters and storage, checked in one place.
void expectTwin(const faiss::Index* idx, int d, int k, int samples, int iterations,
                faiss::MetricType metric, const std::string& what) {
    auto nnd = as<faiss::IndexNNDescentFlat>(idx);
    ASSERT_NE(nnd, nullptr) << what;
    EXPECT_EQ(nnd->d, d) << what;
    EXPECT_EQ(nnd->metric_type, metric) << what;
    EXPECT_TRUE(nnd->is_trained) << what;
    EXPECT_EQ(nnd->ntotal, 0) << what;
    EXPECT_EQ(nnd->nndescent.K, k) << what;
    EXPECT_EQ(nnd->nndescent.S, samples) << what;
    EXPECT_EQ(nnd->nndescent.iter, iterations) << what;
    EXPECT_EQ(nnd->nndescent.random_seed, kGnndDefaultSeed) << what;
    EXPECT_FALSE(nnd->nndescent.has_built) << what;
    EXPECT_GE(nnd->nndescent.L, k) << what;  // FAISS's build needs L >= K
    auto storage = as<faiss::IndexFlat>(nnd->storage);
    ASSERT_NE(storage, nullptr) << what;
    EXPECT_TRUE(nnd->own_fields) << what;
    EXPECT_EQ(storage->d, d) << what;
    EXPECT_EQ(storage->metric_type, metric) << what;
}

/// The message of the FaissException `description` throws ("" when none).
std::string factoryError(const char* description, int d = 8,
                         faiss::MetricType metric = faiss::METRIC_L2) {
    try {
        std::unique_ptr<faiss::Index> idx(index_factory(d, description, metric));
    } catch (const faiss::FaissException& e) {
        return e.what();
    }
    return "";
}

TEST(CpuGnndFactory, DefaultsAreThoseOfTheGpuConfig) {
    const gpu::GpuKnnGraphGNNDConfig config;
    EXPECT_EQ(config.samples, kGnndDefaultSamples);
    EXPECT_EQ(config.maxIterations, kGnndDefaultIterations);
    EXPECT_EQ(config.seed, uint64_t(kGnndDefaultSeed));
}

TEST(CpuGnndFactory, TwinAndParameters) {
    struct Case {
        const char* description;
        int k, samples, iterations;
    };
    const Case cases[] = {
        {"GNND64", 64, kGnndDefaultSamples, kGnndDefaultIterations},
        {"GNND32_p16", 32, 16, kGnndDefaultIterations},
        {"GNND64_p24_it10", 64, 24, 10},
        {"GNND8_it3_p4", 8, 4, 3},  // suffixes in either order
        {"GNND16_it1", 16, kGnndDefaultSamples, 1},
        {"GNND1_p1", 1, 1, kGnndDefaultIterations},
        {"GNND1024_p32", 1024, 32, kGnndDefaultIterations},
    };
    for (const Case& c : cases) {
        for (faiss::MetricType metric : {faiss::METRIC_L2, faiss::METRIC_INNER_PRODUCT}) {
            std::unique_ptr<faiss::Index> idx(index_factory(12, c.description, metric));
            expectTwin(idx.get(), 12, c.k, c.samples, c.iterations, metric,
                       std::string(c.description) + " metric " + std::to_string(int(metric)));
        }
    }
}

TEST(CpuGnndFactory, TwinBuildsAGraphOnTheCpu) {
    const int d = 8, n = 500, k = 10;
    std::unique_ptr<faiss::Index> idx(index_factory(d, "GNND10_p8_it5"));
    auto xb = test::clusteredVectors(n, d, 10, kSeed);
    idx->add(n, xb.data());
    auto nnd = as<faiss::IndexNNDescentFlat>(idx.get());
    ASSERT_NE(nnd, nullptr);
    EXPECT_TRUE(nnd->nndescent.has_built);
    ASSERT_EQ(nnd->nndescent.final_graph.size(), size_t(n) * k);
    for (int id : nnd->nndescent.final_graph) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, n);
    }
    // a stored vector finds itself (FAISS's pool is max(search_L, k) nodes:
    // search_L = 0 with k = 1 would start from one random node)
    EXPECT_EQ(nnd->nndescent.search_L, 0);
    const_cast<faiss::IndexNNDescentFlat*>(nnd)->nndescent.search_L = 64;
    std::vector<float> D(1);
    std::vector<idx_t> I(1);
    idx->search(1, xb.data() + 17 * d, 1, D.data(), I.data());
    EXPECT_EQ(I[0], 17);
    EXPECT_NEAR(D[0], 0.f, 1e-5f);
}

/// Sets the twin's search pool under a wrapper (see TwinBuildsAGraphOnTheCpu).
void setSearchL(faiss::Index* idx, int searchL) {
    while (true) {
        if (auto m = dynamic_cast<faiss::IndexIDMap*>(idx)) {
            idx = m->index;
        } else if (auto pt = dynamic_cast<faiss::IndexPreTransform*>(idx)) {
            idx = pt->index;
        } else {
            break;
        }
    }
    auto nnd = dynamic_cast<faiss::IndexNNDescentFlat*>(idx);
    ASSERT_NE(nnd, nullptr);
    nnd->nndescent.search_L = searchL;
}

TEST(CpuGnndFactory, IDMapPrefix) {
    for (const char* s : {"IDMap,GNND16", "IDMap2,GNND16_p8"}) {
        std::unique_ptr<faiss::Index> idx(index_factory(8, s));
        auto m = as<faiss::IndexIDMap>(idx.get());
        ASSERT_NE(m, nullptr) << s;
        EXPECT_TRUE(m->own_fields) << s;
        EXPECT_EQ(as<faiss::IndexIDMap2>(idx.get()) != nullptr,
                  std::string(s).rfind("IDMap2", 0) == 0)
            << s;
        const int samples = std::string(s) == "IDMap,GNND16" ? kGnndDefaultSamples : 8;
        expectTwin(m->index, 8, 16, samples, kGnndDefaultIterations, faiss::METRIC_L2, s);

        const int n = 300;
        auto xb = test::clusteredVectors(n, 8, 6, kSeed);
        std::vector<idx_t> ids(n);
        for (int i = 0; i < n; ++i) ids[i] = 1000 + 3 * i;
        idx->add_with_ids(n, xb.data(), ids.data());
        setSearchL(idx.get(), 64);
        std::vector<float> D(1);
        std::vector<idx_t> I(1);
        idx->search(1, xb.data() + 42 * 8, 1, D.data(), I.data());
        EXPECT_EQ(I[0], 1000 + 3 * 42) << s;
    }
}

TEST(CpuGnndFactory, CosineIsL2normWithInnerProduct) {
    const int d = 16;
    std::unique_ptr<faiss::Index> idx(
        index_factory(d, "L2norm,GNND16", faiss::METRIC_INNER_PRODUCT));
    auto pt = as<faiss::IndexPreTransform>(idx.get());
    ASSERT_NE(pt, nullptr);
    EXPECT_TRUE(pt->own_fields);
    ASSERT_EQ(pt->chain.size(), 1u);
    auto nt = dynamic_cast<const faiss::NormalizationTransform*>(pt->chain[0]);
    ASSERT_NE(nt, nullptr);
    EXPECT_EQ(nt->norm, 2.0f);
    EXPECT_EQ(pt->metric_type, faiss::METRIC_INNER_PRODUCT);
    expectTwin(pt->index, d, 16, kGnndDefaultSamples, kGnndDefaultIterations,
               faiss::METRIC_INNER_PRODUCT, "L2norm,GNND16");

    // searching gives cosine similarities
    const int n = 400;
    auto xb = test::clusteredVectors(n, d, 8, kSeed);
    idx->add(n, xb.data());
    setSearchL(idx.get(), 64);
    std::vector<float> q(xb.begin() + 5 * d, xb.begin() + 6 * d);
    for (auto& v : q) v *= 4.f;  // cosine ignores the scale
    std::vector<float> D(1);
    std::vector<idx_t> I(1);
    idx->search(1, q.data(), 1, D.data(), I.data());
    EXPECT_EQ(I[0], 5);
    EXPECT_NEAR(D[0], 1.f, 1e-4f);
}

TEST(CpuGnndFactory, TransformPrefixes) {
    std::unique_ptr<faiss::Index> idx(index_factory(32, "PCA8,GNND16"));
    auto pt = as<faiss::IndexPreTransform>(idx.get());
    ASSERT_NE(pt, nullptr);
    ASSERT_EQ(pt->chain.size(), 1u);
    EXPECT_NE(dynamic_cast<const faiss::PCAMatrix*>(pt->chain[0]), nullptr);
    expectTwin(pt->index, 8, 16, kGnndDefaultSamples, kGnndDefaultIterations, faiss::METRIC_L2,
               "PCA8,GNND16");  // the leaf takes the transformed dimension
    EXPECT_FALSE(idx->is_trained);
    auto xt = test::clusteredVectors(600, 32, 10, kSeed);
    idx->train(600, xt.data());
    idx->add(600, xt.data());
    EXPECT_EQ(pt->index->ntotal, 600);
    EXPECT_TRUE(as<faiss::IndexNNDescentFlat>(pt->index)->nndescent.has_built);

    idx.reset(index_factory(64, "IDMap,PCA32,GNND32_p16"));
    auto m = as<faiss::IndexIDMap>(idx.get());
    ASSERT_NE(m, nullptr);
    pt = as<faiss::IndexPreTransform>(m->index);
    ASSERT_NE(pt, nullptr);
    expectTwin(pt->index, 32, 32, 16, kGnndDefaultIterations, faiss::METRIC_L2,
               "IDMap,PCA32,GNND32_p16");
}

TEST(CpuGnndFactory, BadStringsNameTheProblem) {
    struct Case {
        const char* description;
        const char* mentions;  // a part of the message
    };
    const Case cases[] = {
        {"GNND0", "graph degree"},
        {"GNND-3", "graph degree"},
        {"GNND", "graph degree"},
        {"GNNDx", "graph degree"},
        {"GNND1025", "[1, 1024]"},
        {"GNND99999999999999999999", "graph degree"},
        {"GNND64_p0", "samples"},
        {"GNND64_p33", "[1, 32]"},
        {"GNND64_p-1", "samples"},
        {"GNND64_pp", "samples"},
        {"GNND64_it0", "iteration"},
        {"GNND64_it-2", "iteration"},
        {"GNND64_x", "unknown suffix '_x'"},
        {"GNND64_", "unknown suffix"},
        {"GNND64_p", "unknown suffix"},
        {"GNND64_it", "unknown suffix"},
        {"GNND64__p8", "unknown suffix"},
        {"GNND64_p8_p8", "'_p' is given twice"},
        {"GNND64_it3_it4", "'_it' is given twice"},
        {"IDMap,GNND0", "graph degree"},
        {"IVF4,GNND16", "cannot follow"},
        {"GNND16,IDMap", ""},  // FAISS's own parse error
        {"Bogus,GNND16", ""},
    };
    for (const Case& c : cases) {
        const std::string msg = factoryError(c.description);
        EXPECT_FALSE(msg.empty()) << c.description << ": no exception";
        EXPECT_NE(msg.find(c.mentions), std::string::npos)
            << c.description << ": message '" << msg << "' lacks '" << c.mentions << "'";
        if (std::string(c.description).find("GNND") == 0 && std::string(c.mentions) != "") {
            // our own messages name the component
            const std::string first =
                std::string(c.description).substr(0, std::string(c.description).find(','));
            EXPECT_NE(msg.find("'" + first + "'"), std::string::npos) << msg;
        }
    }
    // metrics other than L2 / IP
    const std::string msg = factoryError("GNND16", 8, faiss::METRIC_L1);
    EXPECT_NE(msg.find("METRIC_L2 and METRIC_INNER_PRODUCT"), std::string::npos) << msg;
    EXPECT_NE(msg.find("L2norm,GNND"), std::string::npos) << msg;
    EXPECT_FALSE(factoryError("IDMap,GNND16", 8, faiss::METRIC_Linf).empty());
    EXPECT_FALSE(factoryError("GNND16", 0).empty());
    EXPECT_FALSE(factoryError("GNND16", -4).empty());
}

}  // namespace
}  // namespace faiss_ext
