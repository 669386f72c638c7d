// faiss_ext::index_factory: our strings, FAISS prefixes around them, strings
// delegated to FAISS, and bad input.
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>

#include <memory>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/RowCenteringTransform.h"
#include "faiss_ext/index_factory.h"

namespace faiss_ext {
namespace {

using test::kSeed;

template <class T>
const T* as(const faiss::Index* idx) {
    return dynamic_cast<const T*>(idx);
}

const faiss::NormalizationTransform* asL2Norm(const faiss::VectorTransform* vt) {
    auto nt = dynamic_cast<const faiss::NormalizationTransform*>(vt);
    return nt && nt->norm == 2.0f ? nt : nullptr;
}

TEST(CpuFactory, QSFlatL2AndIP) {
    std::unique_ptr<faiss::Index> l2(index_factory(16, "QSFlat"));
    auto f = as<faiss::IndexFlat>(l2.get());
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->d, 16);
    EXPECT_EQ(f->metric_type, faiss::METRIC_L2);
    EXPECT_TRUE(f->is_trained);

    std::unique_ptr<faiss::Index> ip(index_factory(8, "QSFlat", faiss::METRIC_INNER_PRODUCT));
    f = as<faiss::IndexFlat>(ip.get());
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->d, 8);
    EXPECT_EQ(f->metric_type, faiss::METRIC_INNER_PRODUCT);
}

TEST(CpuFactory, QSFlatCosine) {
    std::unique_ptr<faiss::Index> idx(index_factory(12, "QSFlatCosine"));
    auto pt = as<faiss::IndexPreTransform>(idx.get());
    ASSERT_NE(pt, nullptr);
    EXPECT_TRUE(pt->own_fields);
    ASSERT_EQ(pt->chain.size(), 1u);
    ASSERT_NE(asL2Norm(pt->chain[0]), nullptr);
    EXPECT_EQ(pt->chain[0]->d_in, 12);
    auto f = as<faiss::IndexFlat>(pt->index);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->metric_type, faiss::METRIC_INNER_PRODUCT);
    EXPECT_EQ(f->d, 12);
    EXPECT_EQ(pt->metric_type, faiss::METRIC_INNER_PRODUCT);

    // searching gives cosine similarities
    const int d = 12;
    auto xb = test::randomVectors(100, d, kSeed);
    idx->add(100, xb.data());
    std::vector<float> D(1);
    std::vector<faiss::Index::idx_t> I(1);
    std::vector<float> q(xb.begin() + 7 * d, xb.begin() + 8 * d);
    for (auto& v : q) v *= 3.f;  // cosine ignores the scale
    idx->search(1, q.data(), 1, D.data(), I.data());
    EXPECT_EQ(I[0], 7);
    EXPECT_NEAR(D[0], 1.f, 1e-5);
}

TEST(CpuFactory, QSFlatPearson) {
    const int d = 10;
    std::unique_ptr<faiss::Index> idx(index_factory(d, "QSFlatPearson"));
    auto pt = as<faiss::IndexPreTransform>(idx.get());
    ASSERT_NE(pt, nullptr);
    EXPECT_TRUE(pt->own_fields);
    ASSERT_EQ(pt->chain.size(), 2u);
    EXPECT_NE(dynamic_cast<const RowCenteringTransform*>(pt->chain[0]), nullptr);
    EXPECT_NE(asL2Norm(pt->chain[1]), nullptr);
    auto f = as<faiss::IndexFlat>(pt->index);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->metric_type, faiss::METRIC_INNER_PRODUCT);

    // Pearson is invariant to an affine change of the query
    auto xb = test::randomVectors(100, d, kSeed + 1);
    idx->add(100, xb.data());
    std::vector<float> q(xb.begin() + 42 * d, xb.begin() + 43 * d);
    for (auto& v : q) v = 2.f * v + 5.f;
    float D;
    faiss::Index::idx_t I;
    idx->search(1, q.data(), 1, &D, &I);
    EXPECT_EQ(I, 42);
    EXPECT_NEAR(D, 1.f, 1e-5);
}

TEST(CpuFactory, IDMapPrefix) {
    for (const char* s : {"IDMap,QSFlat", "IDMap2,QSFlat"}) {
        std::unique_ptr<faiss::Index> idx(index_factory(8, s, faiss::METRIC_INNER_PRODUCT));
        auto m = as<faiss::IndexIDMap>(idx.get());
        ASSERT_NE(m, nullptr) << s;
        EXPECT_EQ(as<faiss::IndexIDMap2>(idx.get()) != nullptr, std::string(s) == "IDMap2,QSFlat");
        EXPECT_TRUE(m->own_fields);
        auto f = as<faiss::IndexFlat>(m->index);
        ASSERT_NE(f, nullptr) << s;
        EXPECT_EQ(f->metric_type, faiss::METRIC_INNER_PRODUCT);
        EXPECT_EQ(f->d, 8);

        auto xb = test::randomVectors(5, 8, kSeed);
        std::vector<faiss::Index::idx_t> ids = {100, 200, 300, 400, 500};
        idx->add_with_ids(5, xb.data(), ids.data());
        std::vector<float> D(5);
        std::vector<faiss::Index::idx_t> I(5);
        idx->search(1, xb.data() + 2 * 8, 1, D.data(), I.data());
        EXPECT_EQ(I[0], 300) << s;
    }
}

TEST(CpuFactory, IDMapAroundCosineAndPearson) {
    std::unique_ptr<faiss::Index> idx(index_factory(6, "IDMap,QSFlatCosine"));
    auto m = as<faiss::IndexIDMap>(idx.get());
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->metric_type, faiss::METRIC_INNER_PRODUCT);
    auto pt = as<faiss::IndexPreTransform>(m->index);
    ASSERT_NE(pt, nullptr);
    ASSERT_EQ(pt->chain.size(), 1u);

    idx.reset(index_factory(6, "IDMap2,QSFlatPearson"));
    auto m2 = as<faiss::IndexIDMap2>(idx.get());
    ASSERT_NE(m2, nullptr);
    pt = as<faiss::IndexPreTransform>(m2->index);
    ASSERT_NE(pt, nullptr);
    ASSERT_EQ(pt->chain.size(), 2u);
}

TEST(CpuFactory, TransformPrefixes) {
    std::unique_ptr<faiss::Index> idx(index_factory(32, "PCA8,QSFlat"));
    auto pt = as<faiss::IndexPreTransform>(idx.get());
    ASSERT_NE(pt, nullptr);
    ASSERT_EQ(pt->chain.size(), 1u);
    EXPECT_NE(dynamic_cast<const faiss::PCAMatrix*>(pt->chain[0]), nullptr);
    auto f = as<faiss::IndexFlat>(pt->index);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->d, 8);  // the leaf takes the transformed dimension
    EXPECT_FALSE(idx->is_trained);

    // training goes through the PCA, then vectors land in our leaf
    auto xt = test::clusteredVectors(500, 32, 10, kSeed);
    idx->train(500, xt.data());
    idx->add(500, xt.data());
    EXPECT_EQ(f->ntotal, 500);

    idx.reset(index_factory(16, "L2norm,QSFlat", faiss::METRIC_INNER_PRODUCT));
    pt = as<faiss::IndexPreTransform>(idx.get());
    ASSERT_NE(pt, nullptr);
    EXPECT_NE(as<faiss::IndexFlat>(pt->index), nullptr);
    EXPECT_EQ(pt->index->metric_type, faiss::METRIC_INNER_PRODUCT);

    idx.reset(index_factory(32, "IDMap,PCA8,QSFlatPearson"));
    auto m = as<faiss::IndexIDMap>(idx.get());
    ASSERT_NE(m, nullptr);
    pt = as<faiss::IndexPreTransform>(m->index);
    ASSERT_NE(pt, nullptr);
    auto inner = as<faiss::IndexPreTransform>(pt->index);
    ASSERT_NE(inner, nullptr);
    ASSERT_EQ(inner->chain.size(), 2u);
    EXPECT_EQ(inner->chain[0]->d_in, 8);
    EXPECT_EQ(inner->index->d, 8);
}

TEST(CpuFactory, DelegatesFaissStrings) {
    std::unique_ptr<faiss::Index> idx(index_factory(16, "Flat"));
    EXPECT_NE(as<faiss::IndexFlat>(idx.get()), nullptr);
    idx.reset(index_factory(16, "IVF4,Flat", faiss::METRIC_INNER_PRODUCT));
    auto ivf = as<faiss::IndexIVFFlat>(idx.get());
    ASSERT_NE(ivf, nullptr);
    EXPECT_EQ(ivf->nlist, 4u);
    EXPECT_EQ(ivf->metric_type, faiss::METRIC_INNER_PRODUCT);
    idx.reset(index_factory(16, "HNSW8"));
    EXPECT_NE(as<faiss::IndexHNSWFlat>(idx.get()), nullptr);
    idx.reset(index_factory(16, "IDMap,Flat"));
    EXPECT_NE(as<faiss::IndexIDMap>(idx.get()), nullptr);
    // other metrics pass through for FAISS's own strings
    idx.reset(index_factory(16, "Flat", faiss::METRIC_L1));
    EXPECT_EQ(idx->metric_type, faiss::METRIC_L1);
}

TEST(CpuFactory, BadInput) {
    EXPECT_THROW(index_factory(0, "QSFlat"), faiss::FaissException);
    EXPECT_THROW(index_factory(-3, "QSFlat"), faiss::FaissException);
    EXPECT_THROW(index_factory(-3, "Flat"), faiss::FaissException);
    EXPECT_THROW(index_factory(8, nullptr), faiss::FaissException);
    EXPECT_THROW(index_factory(8, ""), faiss::FaissException);
    EXPECT_THROW(index_factory(8, "QSFlatX"), faiss::FaissException);
    EXPECT_THROW(index_factory(8, "qsflat"), faiss::FaissException);
    EXPECT_THROW(index_factory(8, "QSFlat,IDMap"), faiss::FaissException);
    EXPECT_THROW(index_factory(8, ",QSFlat"), faiss::FaissException);
    EXPECT_THROW(index_factory(8, "Bogus,QSFlat"), faiss::FaissException);
    EXPECT_THROW(index_factory(8, "QSFlat,QSFlat"), faiss::FaissException);
    // our leaf cannot follow an index that is no wrapper
    EXPECT_THROW(index_factory(8, "IVF4,QSFlat"), faiss::FaissException);
    // QSFlat takes L2 and IP only; cosine and Pearson go by name
    EXPECT_THROW(index_factory(8, "QSFlat", faiss::METRIC_L1), faiss::FaissException);
    EXPECT_THROW(index_factory(8, "QSFlatCosine", faiss::METRIC_Linf), faiss::FaissException);
    EXPECT_THROW(index_factory(8, "IDMap,QSFlat", faiss::METRIC_L1), faiss::FaissException);

    try {
        index_factory(8, "QSFlat", faiss::METRIC_L1);
        FAIL() << "no exception";
    } catch (const faiss::FaissException& e) {
        EXPECT_NE(std::string(e.what()).find("QSFlat"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace faiss_ext
