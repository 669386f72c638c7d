// "SGraph<R>": the factory string of GpuIndexSearchGraph and its CPU twin
// (faiss::IndexHNSWFlat whose level 0 holds R neighbours), composed with
// FAISS prefixes, saved and read back; bad strings refused.
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <memory>

#include "TestUtils.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

using namespace faiss_ext;

namespace {

int levelZeroDegree(const faiss::IndexHNSWFlat& h) {
    return h.hnsw.cum_nneighbor_per_level[1] - h.hnsw.cum_nneighbor_per_level[0];
}

}  // namespace

TEST(CpuSearchGraphFactory, TwinIsHnswWithTheRequestedLevelZeroDegree) {
    for (int R : {4, 32, 64, 128}) {
        std::string desc = "SGraph" + std::to_string(R);
        std::unique_ptr<faiss::Index> idx(index_factory(16, desc.c_str()));
        auto h = dynamic_cast<faiss::IndexHNSWFlat*>(idx.get());
        ASSERT_NE(h, nullptr) << desc;
        EXPECT_EQ(levelZeroDegree(*h), R) << desc;
        EXPECT_EQ(h->metric_type, faiss::METRIC_L2);
    }
    std::unique_ptr<faiss::Index> ip(index_factory(8, "SGraph32", faiss::METRIC_INNER_PRODUCT));
    EXPECT_EQ(ip->metric_type, faiss::METRIC_INNER_PRODUCT);
}

TEST(CpuSearchGraphFactory, ComposesWithFaissPrefixesAndRoundTrips) {
    const int d = 12;
    std::unique_ptr<faiss::Index> idx(index_factory(d, "IDMap,SGraph16"));
    auto map = dynamic_cast<faiss::IndexIDMap*>(idx.get());
    ASSERT_NE(map, nullptr);
    auto h = dynamic_cast<faiss::IndexHNSWFlat*>(map->index);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(levelZeroDegree(*h), 16);
    std::vector<float> x = test::randomVectors(300, d, 7);
    std::vector<int64_t> ids(300);
    for (int i = 0; i < 300; ++i) ids[i] = 1000 + i;
    idx->add_with_ids(300, x.data(), ids.data());
    std::vector<uint8_t> bytes = serialize_index(idx.get());
    std::unique_ptr<faiss::Index> back(deserialize_index(bytes));
    ASSERT_EQ(back->ntotal, 300);
    std::vector<float> D(5);
    std::vector<int64_t> I(5);
    back->search(1, x.data() + 7 * d, 5, D.data(), I.data());
    EXPECT_EQ(I[0], 1007);
}

TEST(CpuSearchGraphFactory, BadStringsAreRefused) {
    for (const char* bad : {"SGraph", "SGraph0", "SGraph2", "SGraph63", "SGraph130", "SGraph256",
                            "SGraph64x", "SGraph-2", "IDMap,SGraph7"}) {
        EXPECT_THROW(delete index_factory(8, bad), faiss::FaissException) << bad;
    }
    EXPECT_THROW(delete index_factory(8, "SGraph64", faiss::METRIC_L1), faiss::FaissException);
}
