// The CPU twin of GpuIndexBiLevelLSH (faiss_ext::IndexBiLevelLSH) in the
// factory and the I/O layer: "BiLSH<L>x<M>[_t<treeDepth>][_w<bucketWidth>]"
// strings, good and bad, alone and behind FAISS prefixes; the "IxBL" file
// round trip (same configuration, model, vectors, candidates and search
// results; untrained and empty indexes too); truncated and corrupted files,
// which must throw faiss::FaissException and never crash or allocate what a
// corrupt size claims.
#include <faiss/IndexIDMap.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/CpuTwin.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

namespace faiss_ext {
namespace {

using test::kSeed;
using idx_t = int64_t;
using Bytes = std::vector<uint8_t>;

/// The IndexBiLevelLSH at the bottom of IDMap / PreTransform wrappers.
const IndexBiLevelLSH* leafOf(const faiss::Index* idx) {
    while (true) {
        if (auto m = dynamic_cast<const faiss::IndexIDMap*>(idx)) {
            idx = m->index;
        } else if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(idx)) {
            idx = pt->index;
        } else {
            return dynamic_cast<const IndexBiLevelLSH*>(idx);
        }
    }
}

/// The message of the FaissException that f throws, or "" (test failure)
/// when it throws nothing or something else.
template <typename F>
std::string faissError(F&& f) {
    try {
        f();
    } catch (const faiss::FaissException& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "threw a non-FAISS exception: " << e.what();
        return "";
    }
    ADD_FAILURE() << "threw nothing";
    return "";
}

// ---------------------------------------------------------------- factory

struct GoodString {
    const char* description;
    int L, M, depth;
    float width;
};

TEST(CpuLshFactory, GoodStringsGiveUntrainedTwins) {
    const BiLevelLSHConfig defaults;
    const GoodString cases[] = {
        {"BiLSH10x8", 10, 8, defaults.treeDepth, defaults.bucketWidth},
        {"BiLSH10x8_t6_w0.75", 10, 8, 6, 0.75f},
        {"BiLSH10x8_w0.75_t6", 10, 8, 6, 0.75f},
        {"BiLSH1x1_t0", 1, 1, 0, defaults.bucketWidth},
        {"BiLSH64x32_t14_w3", 64, 32, 14, 3.f},
        {"BiLSH16x8_w1e-1", 16, 8, defaults.treeDepth, 0.1f},
        {"BiLSH4x4_w.5", 4, 4, defaults.treeDepth, 0.5f},
        {"BiLSH4x4_w2", 4, 4, defaults.treeDepth, 2.f},
    };
    for (const GoodString& c : cases) {
        std::unique_ptr<faiss::Index> idx(index_factory(24, c.description));
        auto* lsh = dynamic_cast<IndexBiLevelLSH*>(idx.get());
        ASSERT_NE(lsh, nullptr) << c.description;
        EXPECT_EQ(lsh->d, 24) << c.description;
        EXPECT_EQ(lsh->ntotal, 0) << c.description;
        EXPECT_FALSE(lsh->is_trained) << c.description;
        EXPECT_EQ(lsh->metric_type, faiss::METRIC_L2) << c.description;
        const BiLevelLSHConfig& cfg = lsh->getConfig();
        EXPECT_EQ(cfg.nTables, c.L) << c.description;
        EXPECT_EQ(cfg.nProjections, c.M) << c.description;
        EXPECT_EQ(cfg.treeDepth, c.depth) << c.description;
        EXPECT_EQ(cfg.bucketWidth, c.width) << c.description;
        // the rest keeps the defaults
        EXPECT_EQ(cfg.meanRuleC, defaults.meanRuleC) << c.description;
        EXPECT_EQ(cfg.diameterIterations, defaults.diameterIterations) << c.description;
        EXPECT_EQ(cfg.cuckooSubTables, defaults.cuckooSubTables) << c.description;
        EXPECT_EQ(cfg.cuckooMaxLoad, defaults.cuckooMaxLoad) << c.description;
        EXPECT_EQ(cfg.seed, defaults.seed) << c.description;
    }
}

TEST(CpuLshFactory, PrefixesCompose) {
    std::unique_ptr<faiss::Index> idmap(index_factory(16, "IDMap,BiLSH10x8"));
    auto* m = dynamic_cast<faiss::IndexIDMap*>(idmap.get());
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->own_fields);
    ASSERT_NE(dynamic_cast<IndexBiLevelLSH*>(m->index), nullptr);
    EXPECT_EQ(leafOf(idmap.get())->getConfig().nTables, 10);

    std::unique_ptr<faiss::Index> pca(index_factory(128, "PCA64,BiLSH16x8"));
    auto* pt = dynamic_cast<faiss::IndexPreTransform*>(pca.get());
    ASSERT_NE(pt, nullptr);
    EXPECT_TRUE(pt->own_fields);
    ASSERT_EQ(pt->chain.size(), 1u);
    EXPECT_NE(dynamic_cast<faiss::PCAMatrix*>(pt->chain[0]), nullptr);
    ASSERT_NE(leafOf(pca.get()), nullptr);
    EXPECT_EQ(leafOf(pca.get())->d, 64);
    EXPECT_EQ(leafOf(pca.get())->getConfig().nTables, 16);
    EXPECT_FALSE(pca->is_trained);

    // a working pipeline: train, add with ids, search finds each vector itself
    const int n = 2000, d = 32;
    std::unique_ptr<faiss::Index> full(index_factory(d, "IDMap,PCA16,BiLSH8x6_t3"));
    auto x = test::clusteredVectors(n, d, 20, kSeed);
    full->train(n, x.data());
    EXPECT_TRUE(full->is_trained);
    EXPECT_TRUE(leafOf(full.get())->is_trained);
    std::vector<idx_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = 1000 + 3 * i;
    full->add_with_ids(n, x.data(), ids.data());
    const int nq = 20;
    std::vector<float> D(nq);
    std::vector<idx_t> I(nq);
    full->search(nq, x.data(), 1, D.data(), I.data());
    for (int i = 0; i < nq; ++i) {
        EXPECT_EQ(I[i], ids[i]) << "query " << i;
        EXPECT_LE(D[i], 1e-3f) << "query " << i;
    }
}

TEST(CpuLshFactory, BadStringsThrowNamingTheProblem) {
    const std::pair<const char*, const char*> cases[] = {
        {"BiLSH0x8", "hash tables L"},
        {"BiLSH65x8", "[1, 64]"},
        {"BiLSH-1x8", "hash tables L"},
        {"BiLSHx8", "hash tables L"},
        {"BiLSH10x0", "projections per table M"},
        {"BiLSH10x33", "[1, 32]"},
        {"BiLSH10x", "projections per table M"},
        {"BiLSH10x8x2", "projections per table M"},
        {"BiLSH10", "<L>x<M>"},
        {"BiLSH", "<L>x<M>"},
        {"BiLSH10x8_t15", "[0, 14]"},
        {"BiLSH10x8_t", "RP-tree depth"},
        {"BiLSH10x8_t-1", "RP-tree depth"},
        {"BiLSH10x8_t3.5", "RP-tree depth"},
        {"BiLSH10x8_w0", "bucket width"},
        {"BiLSH10x8_w0.0", "bucket width"},
        {"BiLSH10x8_w-1", "bucket width"},
        {"BiLSH10x8_w+1", "bucket width"},
        {"BiLSH10x8_w", "bucket width"},
        {"BiLSH10x8_winf", "bucket width"},
        {"BiLSH10x8_wnan", "bucket width"},
        {"BiLSH10x8_w1e99", "bucket width"},
        {"BiLSH10x8_w1e-99", "bucket width"},
        {"BiLSH10x8_wabc", "bucket width"},
        {"BiLSH10x8_w0.5x", "bucket width"},
        {"BiLSH10x8_w 1", "bucket width"},
        {"BiLSH10x8_q3", "unknown suffix '_q3'"},
        {"BiLSH10x8_", "unknown suffix '_'"},
        {"BiLSH10x8_t4_t5", "'_t' is given twice"},
        {"BiLSH10x8_w1_t2_w2", "'_w' is given twice"},
        {"IDMap,BiLSH0x8", "hash tables L"},
        {"PCA16,BiLSH10x8_t99", "[0, 14]"},
    };
    for (const auto& c : cases) {
        const std::string msg = faissError([&] { delete index_factory(32, c.first); });
        EXPECT_NE(msg.find(c.second), std::string::npos)
            << "'" << c.first << "': expected '" << c.second << "' in: " << msg;
        std::string component(c.first);
        component = component.substr(component.rfind(',') + 1);
        EXPECT_NE(msg.find("'" + component + "'"), std::string::npos)
            << "'" << c.first << "': the message should name the component: " << msg;
    }
}

TEST(CpuLshFactory, OnlyL2) {
    for (faiss::MetricType metric : {faiss::METRIC_INNER_PRODUCT, faiss::METRIC_L1}) {
        for (const char* description : {"BiLSH10x8", "IDMap,BiLSH10x8"}) {
            const std::string msg =
                faissError([&] { delete index_factory(16, description, metric); });
            EXPECT_NE(msg.find("METRIC_L2"), std::string::npos) << description << ": " << msg;
        }
    }
    // the twin's own constructor refuses them too
    EXPECT_THROW(IndexBiLevelLSH(16, BiLevelLSHConfig(), faiss::METRIC_INNER_PRODUCT),
                 faiss::FaissException);
}

// ---------------------------------------------------------------- round trip

constexpr int kD = 16;

/// A twin from the factory (by default L = 6, M = 6, depth 3) trained on and
/// holding n clustered vectors.
std::unique_ptr<IndexBiLevelLSH> filledTwin(int n = 3000, int d = kD,
                                            const char* description = "BiLSH6x6_t3_w0.75") {
    std::unique_ptr<faiss::Index> idx(index_factory(d, description));
    std::unique_ptr<IndexBiLevelLSH> lsh(dynamic_cast<IndexBiLevelLSH*>(idx.release()));
    auto x = test::clusteredVectors(n, d, 25, kSeed);
    lsh->train(n, x.data());
    lsh->add(n, x.data());
    return lsh;
}

void expectSameConfig(const BiLevelLSHConfig& a, const BiLevelLSHConfig& b) {
    EXPECT_EQ(a.treeDepth, b.treeDepth);
    EXPECT_EQ(a.nTables, b.nTables);
    EXPECT_EQ(a.nProjections, b.nProjections);
    EXPECT_EQ(a.bucketWidth, b.bucketWidth);
    EXPECT_EQ(a.meanRuleC, b.meanRuleC);
    EXPECT_EQ(a.diameterIterations, b.diameterIterations);
    EXPECT_EQ(a.cuckooSubTables, b.cuckooSubTables);
    EXPECT_EQ(a.cuckooMaxLoad, b.cuckooMaxLoad);
    EXPECT_EQ(a.seed, b.seed);
    EXPECT_EQ(int(a.widthRule), int(b.widthRule));
    EXPECT_EQ(a.widthNeighbours, b.widthNeighbours);
    EXPECT_EQ(a.defaultNprobe, b.defaultNprobe);
    EXPECT_EQ(a.defaultGroupProbes, b.defaultGroupProbes);
    EXPECT_EQ(a.defaultMinCandidates, b.defaultMinCandidates);
    EXPECT_EQ(a.defaultGroupMargin, b.defaultGroupMargin);
    EXPECT_EQ(a.autotuneRecall, b.autotuneRecall);
    EXPECT_EQ(a.lattice, b.lattice);
}

void expectSameModel(const BiLevelLSHModel& a, const BiLevelLSHModel& b) {
    EXPECT_EQ(a.d, b.d);
    EXPECT_EQ(a.depth, b.depth);
    EXPECT_EQ(a.nTables, b.nTables);
    EXPECT_EQ(a.nProjections, b.nProjections);
    EXPECT_EQ(a.bits, b.bits);
    EXPECT_EQ(a.lattice, b.lattice);
    EXPECT_TRUE(a.nodeRule == b.nodeRule);
    EXPECT_TRUE(a.nodeVec == b.nodeVec);
    EXPECT_TRUE(a.nodeThreshold == b.nodeThreshold);
    EXPECT_TRUE(a.leafMean == b.leafMean);
    EXPECT_TRUE(a.leafWidth == b.leafWidth);
    EXPECT_TRUE(a.leafOffset == b.leafOffset);
    EXPECT_TRUE(a.leafTrainCount == b.leafTrainCount);
    EXPECT_TRUE(a.proj == b.proj);
    EXPECT_TRUE(a.projBias == b.projBias);
}

/// Expects b to be a copy of a: configuration, model, vectors, group sizes,
/// and identical candidates and search results under a few search settings.
void expectSameTwin(const IndexBiLevelLSH& a, const faiss::Index* bIndex, const std::string& what) {
    SCOPED_TRACE(what);
    auto* bp = dynamic_cast<const IndexBiLevelLSH*>(bIndex);
    ASSERT_NE(bp, nullptr) << "not an IndexBiLevelLSH";
    const IndexBiLevelLSH& b = *bp;
    EXPECT_EQ(a.d, b.d);
    EXPECT_EQ(a.ntotal, b.ntotal);
    EXPECT_EQ(a.is_trained, b.is_trained);
    EXPECT_EQ(a.metric_type, b.metric_type);
    expectSameConfig(a.getConfig(), b.getConfig());
    expectSameModel(a.getModel(), b.getModel());
    EXPECT_TRUE(a.getVectors() == b.getVectors());
    EXPECT_EQ(a.groupSizes(), b.groupSizes());
    if (!a.is_trained) return;

    const int nq = 40;
    auto q = test::clusteredVectors(nq, a.d, 25, kSeed + 7);
    SearchParametersBiLevelLSH wide;
    wide.nprobe = 8;
    wide.minCandidates = 50;
    for (const SearchParametersBiLevelLSH* p :
         {static_cast<SearchParametersBiLevelLSH*>(nullptr), &wide}) {
        for (int k : {1, 10}) {
            std::vector<idx_t> limsA, idsA, limsB, idsB;
            a.getCandidates(nq, q.data(), k, &limsA, &idsA, p);
            b.getCandidates(nq, q.data(), k, &limsB, &idsB, p);
            EXPECT_EQ(limsA, limsB) << "k " << k;
            EXPECT_EQ(idsA, idsB) << "k " << k;
            std::vector<float> Da(nq * k), Db(nq * k);
            std::vector<idx_t> Ia(nq * k), Ib(nq * k);
            a.search(nq, q.data(), k, Da.data(), Ia.data(), p);
            b.search(nq, q.data(), k, Db.data(), Ib.data(), p);
            EXPECT_EQ(Ia, Ib) << "k " << k;
            EXPECT_EQ(Da, Db) << "k " << k;
        }
    }
}

TEST(CpuLshIo, RoundTripThroughFileBytesAndWriter) {
    auto twin = filledTwin();
    ASSERT_TRUE(twin->is_trained);
    ASSERT_EQ(twin->ntotal, 3000);

    test::TempFile tmp("lsh_io");
    faiss_ext::write_index(twin.get(), tmp.path.c_str());
    std::unique_ptr<faiss::Index> fromFile(faiss_ext::read_index(tmp.path.c_str()));
    expectSameTwin(*twin, fromFile.get(), "file");

    Bytes bytes = faiss_ext::serialize_index(twin.get());
    ASSERT_GE(bytes.size(), 4u);
    EXPECT_EQ(std::memcmp(bytes.data(), "IxBL", 4), 0);
    std::unique_ptr<faiss::Index> fromBytes(faiss_ext::deserialize_index(bytes));
    expectSameTwin(*twin, fromBytes.get(), "bytes");

    faiss::VectorIOWriter w;
    faiss_ext::write_index(twin.get(), &w);
    EXPECT_EQ(w.data, bytes);
    faiss::VectorIOReader r;
    r.data = w.data;
    std::unique_ptr<faiss::Index> fromReader(faiss_ext::read_index(&r));
    expectSameTwin(*twin, fromReader.get(), "reader");

    // a copy read back saves identically
    EXPECT_EQ(faiss_ext::serialize_index(fromBytes.get()), bytes);
    // and keeps working: adds and searches as the original does
    auto more = test::clusteredVectors(500, kD, 25, kSeed + 3);
    twin->add(500, more.data());
    auto* back = dynamic_cast<IndexBiLevelLSH*>(fromBytes.get());
    ASSERT_NE(back, nullptr);
    back->add(500, more.data());
    expectSameTwin(*twin, back, "bytes, after an add");
}

TEST(CpuLshIo, WrappedTwinRoundTrips) {
    const int n = 2000;
    std::unique_ptr<faiss::Index> idx(index_factory(kD, "IDMap,BiLSH4x6_t2"));
    auto x = test::clusteredVectors(n, kD, 25, kSeed);
    idx->train(n, x.data());
    std::vector<idx_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = 7 * i + 5;
    idx->add_with_ids(n, x.data(), ids.data());

    Bytes bytes = faiss_ext::serialize_index(idx.get());
    std::unique_ptr<faiss::Index> back(faiss_ext::deserialize_index(bytes));
    auto* m = dynamic_cast<faiss::IndexIDMap*>(back.get());
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->id_map, dynamic_cast<faiss::IndexIDMap*>(idx.get())->id_map);
    expectSameTwin(*leafOf(idx.get()), leafOf(back.get()), "IDMap");
    const int nq = 10, k = 5;
    std::vector<float> Da(nq * k), Db(nq * k);
    std::vector<idx_t> Ia(nq * k), Ib(nq * k);
    idx->search(nq, x.data(), k, Da.data(), Ia.data());
    back->search(nq, x.data(), k, Db.data(), Ib.data());
    EXPECT_EQ(Ia, Ib);
    EXPECT_EQ(Da, Db);
    EXPECT_EQ(Ia[0], ids[0]);
}

TEST(CpuLshIo, UntrainedIndexRoundTripsAndTrainsLikeTheOriginal) {
    std::unique_ptr<faiss::Index> fresh(index_factory(kD, "BiLSH5x7_t2_w1.25"));
    Bytes bytes = faiss_ext::serialize_index(fresh.get());
    std::unique_ptr<faiss::Index> back(faiss_ext::deserialize_index(bytes));
    auto* lsh = dynamic_cast<IndexBiLevelLSH*>(back.get());
    ASSERT_NE(lsh, nullptr);
    EXPECT_FALSE(lsh->is_trained);
    EXPECT_EQ(lsh->ntotal, 0);
    EXPECT_TRUE(lsh->getModel().empty());
    expectSameConfig(dynamic_cast<IndexBiLevelLSH*>(fresh.get())->getConfig(), lsh->getConfig());
    // searching an untrained index is a clear error
    std::vector<float> q(kD, 0.f), D(1);
    std::vector<idx_t> I(1);
    EXPECT_THROW(lsh->search(1, q.data(), 1, D.data(), I.data()), faiss::FaissException);

    // training both gives the same model (same seed)
    const int n = 1000;
    auto x = test::clusteredVectors(n, kD, 25, kSeed);
    fresh->train(n, x.data());
    lsh->train(n, x.data());
    fresh->add(n, x.data());
    lsh->add(n, x.data());
    expectSameTwin(*dynamic_cast<IndexBiLevelLSH*>(fresh.get()), lsh, "trained after reading");
}

TEST(CpuLshIo, TrainedEmptyIndexRoundTrips) {
    std::unique_ptr<IndexBiLevelLSH> twin(
        dynamic_cast<IndexBiLevelLSH*>(index_factory(kD, "BiLSH6x6_t3")));
    ASSERT_NE(twin, nullptr);
    auto x = test::clusteredVectors(500, kD, 25, kSeed);
    twin->train(500, x.data());
    ASSERT_TRUE(twin->is_trained);
    ASSERT_EQ(twin->ntotal, 0);
    std::unique_ptr<faiss::Index> back(
        faiss_ext::deserialize_index(faiss_ext::serialize_index(twin.get())));
    expectSameTwin(*twin, back.get(), "trained, empty");
    // search of an empty index: -1 / +inf padding
    std::vector<float> q(kD, 0.f), D(3);
    std::vector<idx_t> I(3);
    back->search(1, q.data(), 3, D.data(), I.data());
    for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(I[j], -1);
        EXPECT_TRUE(std::isinf(D[j]));
    }
}

TEST(CpuLshIo, CloneToCpuCopiesTheTwin) {
    // the CPU tree copy (used by index_gpu_to_cpu and the writer for shards)
    auto twin = filledTwin(1500);
    std::unique_ptr<faiss::Index> copy(cloneToCpu(twin.get()));
    expectSameTwin(*twin, copy.get(), "cloneToCpu");
}

TEST(CpuLshIo, PlainFaissRefusesOurFileCleanly) {
    auto twin = filledTwin(500);
    faiss::VectorIOReader r;
    r.data = faiss_ext::serialize_index(twin.get());
    EXPECT_THROW(delete faiss::read_index(&r), faiss::FaissException);
}

// ---------------------------------------------------------------- corrupt input

/// "ok" when bytes read back as a usable index, else what went wrong;
/// "FaissException" for the expected failure.
std::string tryRead(const Bytes& bytes) {
    try {
        std::unique_ptr<faiss::Index> idx(faiss_ext::deserialize_index(bytes));
        if (!idx) return "null index";
    } catch (const faiss::FaissException&) {
        return "FaissException";
    } catch (const std::exception& e) {
        return std::string("other exception: ") + e.what();
    }
    return "ok";
}

TEST(CpuLshIoCorrupt, TruncationAtEvery7thByteThrows) {
    std::vector<Bytes> files;
    files.push_back(faiss_ext::serialize_index(filledTwin(300, 8, "BiLSH4x4_t2").get()));
    std::unique_ptr<faiss::Index> untrained(index_factory(8, "BiLSH4x4_t2"));
    files.push_back(faiss_ext::serialize_index(untrained.get()));
    std::unique_ptr<faiss::Index> wrapped(index_factory(8, "IDMap,BiLSH3x5_t1"));
    {
        auto x = test::clusteredVectors(100, 8, 5, kSeed);
        wrapped->train(100, x.data());
        std::vector<idx_t> ids(100);
        for (int i = 0; i < 100; ++i) ids[i] = 2 * i;
        wrapped->add_with_ids(100, x.data(), ids.data());
    }
    files.push_back(faiss_ext::serialize_index(wrapped.get()));
    for (size_t f = 0; f < files.size(); ++f) {
        const Bytes& full = files[f];
        ASSERT_EQ(tryRead(full), "ok") << "file " << f;
        size_t tried = 0;
        for (size_t len = 0; len < full.size(); len += 7) {
            Bytes cut(full.begin(), full.begin() + len);
            EXPECT_EQ(tryRead(cut), "FaissException")
                << "file " << f << " truncated to " << len << " of " << full.size();
            ++tried;
        }
        // and one byte short
        EXPECT_EQ(tryRead(Bytes(full.begin(), full.end() - 1)), "FaissException") << "file " << f;
        EXPECT_GT(tried, 5u);
    }

    // a truncated file on disk
    test::TempFile tmp("lsh_io");
    FILE* fp = std::fopen(tmp.path.c_str(), "wb");
    ASSERT_NE(fp, nullptr);
    std::fwrite(files[0].data(), 1, files[0].size() - 11, fp);
    std::fclose(fp);
    EXPECT_THROW(delete faiss_ext::read_index(tmp.path.c_str()), faiss::FaissException);
}

// Byte offsets of the "IxBL" layout (see faiss_ext/index_io.cpp).
constexpr size_t kOffVersion = 4;
constexpr size_t kOffD = 8;
constexpr size_t kOffNtotal = 12;
constexpr size_t kOffTrained = 36;
constexpr size_t kOffMetric = 37;
constexpr size_t kOffTreeDepth = 41;
constexpr size_t kOffTables = 45;
constexpr size_t kOffProjections = 49;
constexpr size_t kOffBucketWidth = 53;
constexpr size_t kOffMaxLoad = 69;
constexpr size_t kOffSeed = 73;
constexpr size_t kOffWidthRule = 81;  // version 2: five fields after the seed
constexpr size_t kOffWidthNeighbours = 85;
constexpr size_t kOffDefaultNprobe = 89;
constexpr size_t kOffDefaultGroupProbes = 93;
constexpr size_t kOffDefaultMinCandidates = 97;
constexpr size_t kOffDefaultGroupMargin = 105;
constexpr size_t kOffAutotuneRecall = 109;
constexpr size_t kOffLattice = 113;
constexpr size_t kOffHasModel = 117;
constexpr size_t kOffModelD = 118;
constexpr size_t kOffModelBits = 134;
constexpr size_t kOffNodeRuleCount = 138;
constexpr size_t kOffNodeRule = 146;
/// Bytes version 2 added after the seed.
constexpr size_t kVersion2ConfigBytes = 36;

template <typename T>
Bytes patched(Bytes b, size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
    return b;
}

template <typename T>
T readAt(const Bytes& b, size_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof(T));
    return v;
}

/// Expects bytes to fail with a FaissException whose message holds `part`.
void expectCorrupt(const Bytes& bytes, const char* part, const char* what) {
    const std::string msg = faissError([&] { delete faiss_ext::deserialize_index(bytes); });
    EXPECT_NE(msg.find(part), std::string::npos)
        << what << ": expected '" << part << "' in: " << msg;
}

TEST(CpuLshIoCorrupt, CorruptHeaderAndConfigFieldsThrow) {
    // d = 8, depth 2 (3 nodes, 4 groups), L = 4, M = 4, 300 vectors
    auto twin = filledTwin(300, 8, "BiLSH4x4_t2");
    const Bytes good = faiss_ext::serialize_index(twin.get());
    ASSERT_EQ(tryRead(good), "ok");
    // the offsets above describe this file
    ASSERT_EQ(readAt<int32_t>(good, kOffVersion), 2);
    ASSERT_EQ(readAt<uint64_t>(good, kOffSeed), twin->getConfig().seed);
    ASSERT_EQ(readAt<int32_t>(good, kOffWidthRule),
              int32_t(faiss_ext::BiLevelWidthRule::NeighbourDistance));
    ASSERT_EQ(readAt<int32_t>(good, kOffWidthNeighbours), 10);
    ASSERT_EQ(readAt<int32_t>(good, kOffDefaultNprobe), 1);
    ASSERT_EQ(readAt<int32_t>(good, kOffDefaultGroupProbes), 4);
    ASSERT_EQ(readAt<float>(good, kOffDefaultGroupMargin), 0.05f);
    ASSERT_EQ(readAt<int64_t>(good, kOffDefaultMinCandidates), 0);
    ASSERT_EQ(readAt<int32_t>(good, kOffD), 8);
    ASSERT_EQ(readAt<int64_t>(good, kOffNtotal), 300);
    ASSERT_EQ(good[kOffTrained], 1);
    ASSERT_EQ(readAt<int32_t>(good, kOffMetric), int32_t(faiss::METRIC_L2));
    ASSERT_EQ(readAt<int32_t>(good, kOffTreeDepth), 2);
    ASSERT_EQ(readAt<int32_t>(good, kOffTables), 4);
    ASSERT_EQ(readAt<int32_t>(good, kOffProjections), 4);
    ASSERT_EQ(good[kOffHasModel], 1);
    ASSERT_EQ(readAt<int32_t>(good, kOffModelD), 8);
    ASSERT_EQ(readAt<size_t>(good, kOffNodeRuleCount), 3u);

    expectCorrupt(patched<int32_t>(good, kOffVersion, 3), "version", "version 3");
    expectCorrupt(patched<int32_t>(good, kOffVersion, 0), "version", "version 0");
    expectCorrupt(patched<int32_t>(good, kOffWidthRule, 2), "widthRule", "width rule 2");
    expectCorrupt(patched<int32_t>(good, kOffWidthNeighbours, 0), "widthNeighbours",
                  "width neighbours 0");
    expectCorrupt(patched<int32_t>(good, kOffDefaultNprobe, 0), "defaultNprobe", "nprobe 0");
    expectCorrupt(patched<int32_t>(good, kOffDefaultGroupProbes, 17), "defaultGroupProbes",
                  "group probes 17");
    expectCorrupt(patched<int64_t>(good, kOffDefaultMinCandidates, -1), "defaultMinCandidates",
                  "min candidates -1");
    expectCorrupt(patched<float>(good, kOffDefaultGroupMargin, -1.f), "defaultGroupMargin",
                  "group margin -1");
    expectCorrupt(patched<float>(good, kOffDefaultGroupMargin, INFINITY), "defaultGroupMargin",
                  "group margin inf");
    expectCorrupt(patched<float>(good, kOffAutotuneRecall, 1.5f), "autotuneRecall",
                  "autotune recall 1.5");
    expectCorrupt(patched<int32_t>(good, kOffLattice, 2), "lattice", "lattice 2");
    expectCorrupt(patched<int32_t>(good, kOffLattice, 1), "lattice", "E8 with M = 4");
    expectCorrupt(patched<int32_t>(good, kOffVersion, -1), "version", "version -1");
    expectCorrupt(patched<int32_t>(good, kOffD, 0), "d = 0", "d 0");
    expectCorrupt(patched<int32_t>(good, kOffD, -5), "d = -5", "d -5");
    expectCorrupt(patched<int32_t>(good, kOffD, 9), "does not match", "d 9");
    expectCorrupt(patched<int32_t>(good, kOffD, 1 << 30), "d = ", "d 2^30");
    expectCorrupt(patched<int64_t>(good, kOffNtotal, 301), "expected", "ntotal 301");
    expectCorrupt(patched<int64_t>(good, kOffNtotal, 299), "expected", "ntotal 299");
    expectCorrupt(patched<int64_t>(good, kOffNtotal, int64_t(1) << 35), "ntotal", "ntotal 2^35");
    expectCorrupt(patched<int64_t>(good, kOffNtotal, -1), "ntotal", "ntotal -1");
    expectCorrupt(patched<uint8_t>(good, kOffTrained, 0), "untrained", "is_trained 0");
    expectCorrupt(patched<uint8_t>(good, kOffTrained, 2), "is_trained", "is_trained 2");
    expectCorrupt(patched<int32_t>(good, kOffMetric, faiss::METRIC_INNER_PRODUCT), "METRIC_L2",
                  "inner product");
    expectCorrupt(patched<int32_t>(good, kOffMetric, 77), "metric_type", "metric 77");
    expectCorrupt(patched<int32_t>(good, kOffTreeDepth, 15), "treeDepth", "depth 15");
    expectCorrupt(patched<int32_t>(good, kOffTreeDepth, 3), "does not match", "depth 3");
    expectCorrupt(patched<int32_t>(good, kOffTables, 0), "nTables", "L 0");
    expectCorrupt(patched<int32_t>(good, kOffTables, 1000), "nTables", "L 1000");
    expectCorrupt(patched<int32_t>(good, kOffProjections, 33), "nProjections", "M 33");
    expectCorrupt(patched<float>(good, kOffBucketWidth, std::nanf("")), "bucketWidth", "width NaN");
    expectCorrupt(patched<float>(good, kOffBucketWidth, -1.f), "bucketWidth", "width -1");
    expectCorrupt(patched<float>(good, kOffMaxLoad, 2.f), "cuckooMaxLoad", "load 2");
    expectCorrupt(patched<uint8_t>(good, kOffHasModel, 0), "has_model", "has_model 0");
    expectCorrupt(patched<uint8_t>(good, kOffHasModel, 5), "has_model", "has_model 5");
    expectCorrupt(patched<int32_t>(good, kOffModelD, 7), "does not match", "model d 7");
    expectCorrupt(patched<int32_t>(good, kOffModelBits, 99), "does not match", "bits 99");
    expectCorrupt(patched<size_t>(good, kOffNodeRuleCount, 4), "nodeRule", "nodeRule count 4");
    expectCorrupt(patched<size_t>(good, kOffNodeRuleCount, size_t(1) << 62), "nodeRule",
                  "nodeRule count 2^62");
    expectCorrupt(patched<uint8_t>(good, kOffNodeRule, 7), "node rule", "node rule 7");

    // the last float of the file is a vector component
    expectCorrupt(patched<float>(good, good.size() - 4, std::nanf("")), "finite", "NaN vector");
    expectCorrupt(patched<float>(good, good.size() - 4, INFINITY), "finite", "Inf vector");
    // the vector count just before the vectors
    const size_t vecCountAt = good.size() - 300 * 8 * sizeof(float) - sizeof(size_t);
    ASSERT_EQ(readAt<size_t>(good, vecCountAt), 300u * 8u);
    expectCorrupt(patched<size_t>(good, vecCountAt, 300 * 8 - 1), "expected", "vector count - 1");
    expectCorrupt(patched<size_t>(good, vecCountAt, size_t(1) << 61), "vectors",
                  "vector count 2^61");
    // projBias is just before it: (FAISS vector of L x M floats)
    const size_t lastBiasAt = vecCountAt - sizeof(float);
    expectCorrupt(patched<float>(good, lastBiasAt, 1.5f), "projBias", "projBias 1.5");
    expectCorrupt(patched<float>(good, lastBiasAt, std::nanf("")), "projBias", "projBias NaN");
}

/// An IOReader that does not tell its size (like a pipe), so the reader cannot
/// check claims against what remains and must read in chunks.
struct StreamOnlyReader : faiss::IOReader {
    Bytes data;
    size_t pos = 0;
    size_t operator()(void* ptr, size_t size, size_t nitems) override {
        if (size == 0) return 0;
        size_t n = std::min(nitems, (data.size() - pos) / size);
        std::memcpy(ptr, data.data() + pos, n * size);
        pos += n * size;
        return n;
    }
};

TEST(CpuLshIo, Version1FilesReadWithTheRmsRadiusRule) {
    // a version 1 file is a version 2 file without the five fields after the
    // seed; its widths were set by the RMS radius, the only rule then
    auto twin = filledTwin(300, 8, "BiLSH4x4_t2");
    Bytes v1 = faiss_ext::serialize_index(twin.get());
    v1.erase(v1.begin() + kOffWidthRule, v1.begin() + kOffWidthRule + kVersion2ConfigBytes);
    std::memcpy(v1.data() + kOffVersion, "\1\0\0\0", 4);
    std::unique_ptr<faiss::Index> back(faiss_ext::deserialize_index(v1));
    auto* lsh = dynamic_cast<IndexBiLevelLSH*>(back.get());
    ASSERT_NE(lsh, nullptr);
    EXPECT_EQ(int(lsh->getConfig().widthRule), int(faiss_ext::BiLevelWidthRule::RmsRadius));
    EXPECT_EQ(lsh->getConfig().defaultNprobe, 1);
    EXPECT_EQ(lsh->getConfig().defaultGroupProbes, 1);
    EXPECT_EQ(lsh->getConfig().defaultGroupMargin, 0.f);
    expectSameModel(twin->getModel(), lsh->getModel());
    EXPECT_TRUE(twin->getVectors() == lsh->getVectors());
}

TEST(CpuLshIo, DefaultSearchSettingsTravelAndApply) {
    // the configuration's default search settings are saved, and a search
    // without parameters uses them (the autotuner's choice)
    auto twin = filledTwin(2000, kD, "BiLSH6x6_t3");
    BiLevelLSHConfig c = twin->getConfig();
    c.defaultNprobe = 5;
    c.defaultGroupProbes = 2;
    c.defaultMinCandidates = 40;
    c.defaultGroupMargin = 0.5f;
    twin->setContents(c, twin->getModel(), twin->getVectors());
    std::unique_ptr<faiss::Index> back(faiss_ext::deserialize_index(faiss_ext::serialize_index(twin.get())));
    expectSameTwin(*twin, back.get(), "bytes");
    const int nq = 30, k = 10;
    auto q = test::clusteredVectors(nq, kD, 25, kSeed + 11);
    SearchParametersBiLevelLSH same, plain;
    same.nprobe = 5;
    same.groupProbes = 2;
    same.minCandidates = 40;
    same.groupMargin = 0.5f;
    std::vector<idx_t> limsA, idsA, limsB, idsB, limsC, idsC;
    twin->getCandidates(nq, q.data(), k, &limsA, &idsA, nullptr);
    twin->getCandidates(nq, q.data(), k, &limsB, &idsB, &same);
    twin->getCandidates(nq, q.data(), k, &limsC, &idsC, &plain);
    EXPECT_EQ(limsA, limsB);
    EXPECT_EQ(idsA, idsB);
    EXPECT_GT(limsA.back(), limsC.back()) << "the defaults did not widen the search";
}

TEST(CpuLshIoCorrupt, LargeClaimsOnAStreamFailWithoutAllocatingThem) {
    // a model of d = 2^20 (the largest accepted) and depth 14: the nodeVec
    // claim is 16383 x 2^20 floats (64 GiB); the stream holds a few bytes
    auto twin = filledTwin(300, 8, "BiLSH4x4_t2");
    Bytes b = faiss_ext::serialize_index(twin.get());
    b = patched<int32_t>(b, kOffD, 1 << 20);
    b = patched<int32_t>(b, kOffModelD, 1 << 20);
    b = patched<int32_t>(b, kOffTreeDepth, 14);
    b = patched<int32_t>(b, kOffModelD + 4, 14);
    const size_t nodeVecCountAt = kOffNodeRule + 16383;
    b.resize(kOffNodeRule);
    b.resize(nodeVecCountAt, 0);  // 16383 rules (projection)
    Bytes count(sizeof(size_t));
    const size_t claim = size_t(16383) << 20;
    std::memcpy(count.data(), &claim, sizeof(size_t));
    b = patched<size_t>(b, kOffNodeRuleCount, 16383);
    b.insert(b.end(), count.begin(), count.end());
    for (int i = 0; i < 64; ++i) b.push_back(0);
    StreamOnlyReader r;
    r.data = b;
    const std::string msg = faissError([&] { delete faiss_ext::read_index(&r); });
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

    // the same on bytes (size known): refused before reading
    expectCorrupt(b, "nodeVec", "nodeVec claim on bytes");

    // and a valid index through the stream reader
    StreamOnlyReader ok;
    ok.data = faiss_ext::serialize_index(twin.get());
    std::unique_ptr<faiss::Index> back(faiss_ext::read_index(&ok));
    expectSameTwin(*twin, back.get(), "stream");
}

TEST(CpuLshIoCorrupt, RandomByteFlipsNeverCrash) {
    auto twin = filledTwin(200, 8, "BiLSH3x4_t2");
    const Bytes good = faiss_ext::serialize_index(twin.get());
    std::mt19937_64 rng(kSeed);
    // the header, configuration and model region (the vectors are plain floats)
    const size_t region = std::min<size_t>(good.size(), 400);
    for (int trial = 0; trial < 300; ++trial) {
        Bytes b = good;
        const int flips = 1 + int(rng() % 3);
        for (int f = 0; f < flips; ++f) b[rng() % region] ^= uint8_t(1u << (rng() % 8));
        const std::string got = tryRead(b);
        EXPECT_TRUE(got == "ok" || got == "FaissException") << "trial " << trial << ": " << got;
    }
}

}  // namespace
}  // namespace faiss_ext
