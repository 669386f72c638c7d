// Saving and loading the CPU twin of GpuKnnGraphGNND (faiss::IndexNNDescentFlat,
// FAISS's fourcc "INNf") through faiss_ext::write_index / read_index: a graph
// built by FAISS on the CPU round-trips with the same final_graph and search
// results (bare and inside FAISS's wrappers), files of plain FAISS read back
// and ours read in plain FAISS, and corrupt or truncated input throws.
#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/IndexNNDescentFlatChecked.h"
#include "faiss_ext/CpuTwin.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

namespace faiss_ext {
namespace {

using test::kSeed;
using idx_t = faiss::Index::idx_t;
using Bytes = std::vector<uint8_t>;

/// The IndexNNDescentFlat at the bottom of IDMap / PreTransform wrappers.
const faiss::IndexNNDescentFlat* leafOf(const faiss::Index* idx) {
    while (true) {
        if (auto m = dynamic_cast<const faiss::IndexIDMap*>(idx)) {
            idx = m->index;
        } else if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(idx)) {
            idx = pt->index;
        } else {
            return dynamic_cast<const faiss::IndexNNDescentFlat*>(idx);
        }
    }
}

/// A factory twin with n random vectors (d = 8) added: FAISS builds the graph.
std::unique_ptr<faiss::Index> builtTwin(const char* description, int n = 2000, int d = 8,
                                        faiss::MetricType metric = faiss::METRIC_L2) {
    std::unique_ptr<faiss::Index> idx(index_factory(d, description, metric));
    auto x = test::randomVectors(n, d, kSeed);
    if (!idx->is_trained) idx->train(n, x.data());
    if (dynamic_cast<faiss::IndexIDMap*>(idx.get())) {
        std::vector<idx_t> ids(n);
        for (int i = 0; i < n; ++i) ids[i] = 7 * i + 5;
        idx->add_with_ids(n, x.data(), ids.data());
    } else {
        idx->add(n, x.data());
    }
    return idx;
}

/// The type of idx, our checked NN-Descent twin counted as FAISS's class
/// (plain faiss::read_index gives the latter for the same file).
std::string twinTypeName(const faiss::Index* idx) {
    if (dynamic_cast<const IndexNNDescentFlatChecked*>(idx))
        return typeid(faiss::IndexNNDescentFlat).name();
    return typeid(*idx).name();
}

/// Expects b to be a copy of a: same type (up to our checked twin), graph,
/// parameters, vectors, and the same search results on `nq` queries.
void expectSameTwin(const faiss::Index* a, const faiss::Index* b, const std::string& what) {
    ASSERT_NE(b, nullptr) << what;
    EXPECT_EQ(twinTypeName(a), twinTypeName(b)) << what;
    EXPECT_EQ(a->d, b->d) << what;
    EXPECT_EQ(a->ntotal, b->ntotal) << what;
    EXPECT_EQ(a->metric_type, b->metric_type) << what;
    const faiss::IndexNNDescentFlat* la = leafOf(a);
    const faiss::IndexNNDescentFlat* lb = leafOf(b);
    ASSERT_NE(la, nullptr) << what;
    ASSERT_NE(lb, nullptr) << what;
    const faiss::NNDescent& na = la->nndescent;
    const faiss::NNDescent& nb = lb->nndescent;
    EXPECT_EQ(na.K, nb.K) << what;
    EXPECT_EQ(na.S, nb.S) << what;
    EXPECT_EQ(na.R, nb.R) << what;
    EXPECT_EQ(na.L, nb.L) << what;
    EXPECT_EQ(na.iter, nb.iter) << what;
    EXPECT_EQ(na.search_L, nb.search_L) << what;
    EXPECT_EQ(na.random_seed, nb.random_seed) << what;
    EXPECT_EQ(na.has_built, nb.has_built) << what;
    EXPECT_EQ(na.ntotal, nb.ntotal) << what;
    EXPECT_TRUE(na.final_graph == nb.final_graph) << what << ": final_graph differs";
    auto fa = dynamic_cast<const faiss::IndexFlat*>(la->storage);
    auto fb = dynamic_cast<const faiss::IndexFlat*>(lb->storage);
    ASSERT_NE(fa, nullptr) << what;
    ASSERT_NE(fb, nullptr) << what;
    EXPECT_TRUE(fa->codes == fb->codes) << what << ": stored vectors differ";
    EXPECT_TRUE(lb->own_fields) << what;

    const int nq = 50, k = 10;
    auto q = test::randomVectors(nq, int(a->d), kSeed + 1);
    std::vector<float> Da(nq * k), Db(nq * k);
    std::vector<idx_t> Ia(nq * k), Ib(nq * k);
    a->search(nq, q.data(), k, Da.data(), Ia.data());
    b->search(nq, q.data(), k, Db.data(), Ib.data());
    EXPECT_EQ(Ia, Ib) << what << ": search results differ";
    EXPECT_EQ(Da, Db) << what << ": search distances differ";
}

Bytes faissSerialize(const faiss::Index* idx) {
    faiss::VectorIOWriter w;
    faiss::write_index(idx, &w);
    return w.data;
}

faiss::Index* faissDeserialize(const Bytes& b) {
    faiss::VectorIOReader r;
    r.data = b;
    return faiss::read_index(&r);
}

TEST(CpuGnndIo, FactoryTwinRoundTripsThroughFileAndBytes) {
    auto twin = builtTwin("GNND16");
    const faiss::IndexNNDescentFlat* leaf = leafOf(twin.get());
    ASSERT_NE(leaf, nullptr);
    ASSERT_TRUE(leaf->nndescent.has_built);
    ASSERT_EQ(leaf->nndescent.final_graph.size(), size_t(2000) * 16);

    test::TempFile tmp("gnnd_io");
    faiss_ext::write_index(twin.get(), tmp.path.c_str());
    std::unique_ptr<faiss::Index> fromFile(faiss_ext::read_index(tmp.path.c_str()));
    expectSameTwin(twin.get(), fromFile.get(), "file");

    Bytes bytes = faiss_ext::serialize_index(twin.get());
    std::unique_ptr<faiss::Index> fromBytes(faiss_ext::deserialize_index(bytes));
    expectSameTwin(twin.get(), fromBytes.get(), "bytes");

    // the file is FAISS's own format, fourcc "INNf", byte for byte
    ASSERT_GE(bytes.size(), 4u);
    EXPECT_EQ(std::memcmp(bytes.data(), "INNf", 4), 0);
    EXPECT_EQ(bytes, faissSerialize(twin.get()));

    // and a copy read back can be saved again identically
    EXPECT_EQ(faiss_ext::serialize_index(fromBytes.get()), bytes);
}

TEST(CpuGnndIo, WrappedAndInnerProductTwinsRoundTrip) {
    const char* descriptions[] = {"IDMap,GNND16", "IDMap2,GNND8_p8_it5", "PCA4,GNND16"};
    for (const char* s : descriptions) {
        auto twin = builtTwin(s, 1000);
        Bytes bytes = faiss_ext::serialize_index(twin.get());
        std::unique_ptr<faiss::Index> back(faiss_ext::deserialize_index(bytes));
        expectSameTwin(twin.get(), back.get(), s);
    }
    auto cosine = builtTwin("L2norm,GNND16", 1000, 8, faiss::METRIC_INNER_PRODUCT);
    std::unique_ptr<faiss::Index> back(
        faiss_ext::deserialize_index(faiss_ext::serialize_index(cosine.get())));
    expectSameTwin(cosine.get(), back.get(), "L2norm,GNND16 (IP)");
}

TEST(CpuGnndIo, PlainFaissFilesReadBackAndOursReadInFaiss) {
    faiss::IndexNNDescentFlat plain(8, 12, faiss::METRIC_INNER_PRODUCT);
    plain.nndescent.S = 9;
    plain.nndescent.search_L = 40;
    auto x = test::randomVectors(700, 8, kSeed);
    plain.add(700, x.data());
    std::unique_ptr<faiss::Index> ours(faiss_ext::deserialize_index(faissSerialize(&plain)));
    expectSameTwin(&plain, ours.get(), "plain FAISS file");

    auto twin = builtTwin("GNND16_p12", 800);
    std::unique_ptr<faiss::Index> theirs(faissDeserialize(faiss_ext::serialize_index(twin.get())));
    expectSameTwin(twin.get(), theirs.get(), "read by plain FAISS");

    // an empty (unbuilt) twin too
    std::unique_ptr<faiss::Index> empty(index_factory(8, "GNND16"));
    std::unique_ptr<faiss::Index> emptyBack(
        faiss_ext::deserialize_index(faiss_ext::serialize_index(empty.get())));
    ASSERT_NE(leafOf(emptyBack.get()), nullptr);
    EXPECT_EQ(emptyBack->ntotal, 0);
    EXPECT_FALSE(leafOf(emptyBack.get())->nndescent.has_built);
    EXPECT_EQ(leafOf(emptyBack.get())->nndescent.S, kGnndDefaultSamples);
}

TEST(CpuGnndIo, TwinIsClonedByTheTreeWalker) {
    // index_gpu_to_cpu / write_index walk CPU trees with cloneToCpu
    auto twin = builtTwin("IDMap,GNND16", 500);
    EXPECT_FALSE(containsCpuConvertible(twin.get()));
    std::unique_ptr<faiss::Index> copy(cloneToCpu(twin.get()));
    expectSameTwin(twin.get(), copy.get(), "cloneToCpu");
}

// ------------------------------------------------------------ corrupt input

/// "ok", "FaissException", or what else went wrong.
std::string tryRead(const Bytes& b) {
    try {
        std::unique_ptr<faiss::Index> idx(faiss_ext::deserialize_index(b));
        if (!idx) return "null index";
    } catch (const faiss::FaissException&) {
        return "FaissException";
    } catch (const std::exception& e) {
        return std::string("other exception: ") + e.what();
    }
    return "ok";
}

/// Byte offset of the NNDescent fields in a bare "INNf" file: fourcc, then
/// the header (d, ntotal, 2 x dummy, is_trained, metric_type).
constexpr size_t kNNDescentFieldsAt = 4 + 4 + 8 + 8 + 8 + 1 + 4;

void putInt(Bytes& b, size_t at, int32_t v) { std::memcpy(b.data() + at, &v, sizeof(v)); }

TEST(CpuGnndIoCorrupt, TruncationsThrow) {
    auto twin = builtTwin("GNND4_p4_it3", 200, 3);
    const Bytes full = faiss_ext::serialize_index(twin.get());
    ASSERT_EQ(tryRead(full), "ok");
    for (size_t len = 0; len < full.size(); ++len) {
        Bytes cut(full.begin(), full.begin() + len);
        EXPECT_EQ(tryRead(cut), "FaissException")
            << "truncated to " << len << " of " << full.size();
    }
}

TEST(CpuGnndIoCorrupt, BadFieldsThrow) {
    const int n = 200, K = 4;
    auto twin = builtTwin("GNND4_p4_it3", n, 3);
    const Bytes full = faiss_ext::serialize_index(twin.get());
    ASSERT_EQ(tryRead(full), "ok");
    const size_t f = kNNDescentFieldsAt;
    // fields: ntotal, d, K, S, R, L, iter, search_L, random_seed (int32), has_built (u8)
    struct Case {
        size_t at;
        int32_t value;
        const char* what;
    };
    const Case cases[] = {
        {f + 0, n + 1, "ntotal"},
        {f + 0, -1, "ntotal"},
        {f + 4, 5, "d"},
        {f + 8, 0, "K"},
        {f + 8, -4, "K"},
        {f + 8, 1 << 30, "K"},
        {f + 12, -1, "S"},
        {f + 16, 1 << 30, "R"},
        {f + 20, -3, "L"},
        {f + 24, -1, "iter"},
        {f + 28, 1 << 30, "search_L"},
    };
    for (const Case& c : cases) {
        Bytes bad = full;
        putInt(bad, c.at, c.value);
        EXPECT_EQ(tryRead(bad), "FaissException") << c.what << " = " << c.value;
    }
    {
        Bytes bad = full;
        bad[f + 36] = 7;  // has_built
        EXPECT_EQ(tryRead(bad), "FaissException") << "has_built byte";
    }
    // the graph: its size, then ids out of range
    const size_t graphAt = f + 37;
    {
        Bytes bad = full;
        const size_t wrong = size_t(n) * K - 1;
        std::memcpy(bad.data() + graphAt, &wrong, sizeof(wrong));
        EXPECT_EQ(tryRead(bad), "FaissException") << "graph size";
        const size_t huge = size_t(1) << 60;
        std::memcpy(bad.data() + graphAt, &huge, sizeof(huge));
        EXPECT_EQ(tryRead(bad), "FaissException") << "huge graph size";
    }
    for (int32_t id : {n, n + 1000, -2, int32_t(-1 - (1 << 30))}) {
        Bytes bad = full;
        putInt(bad, graphAt + 8 + 4 * 17, id);
        EXPECT_EQ(tryRead(bad), "FaissException") << "graph id " << id;
    }
    {
        // storage with another ntotal than the header's
        Bytes bad = full;
        const size_t storageAt = graphAt + 8 + 4 * size_t(n) * K;
        ASSERT_EQ(std::memcmp(bad.data() + storageAt, "IxF2", 4), 0);
        int64_t other = n - 1;
        std::memcpy(bad.data() + storageAt + 8, &other, sizeof(other));
        EXPECT_EQ(tryRead(bad), "FaissException") << "storage ntotal";
    }
}

}  // namespace
}  // namespace faiss_ext
