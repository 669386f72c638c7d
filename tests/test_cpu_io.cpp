// faiss_ext::write_index / read_index: round trips of FAISS's flat indexes and
// our cosine / Pearson twins (bare and inside IDMap), compatibility with plain
// FAISS files in both directions, and truncated or corrupt input, which must
// throw faiss::FaissException and never crash. Also the CPU-twin walker that
// write_index and index_gpu_to_cpu share.
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexShards.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/CpuConvertible.h"
#include "faiss_ext/CpuTwin.h"
#include "faiss_ext/RowCenteringTransform.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

namespace faiss_ext {
namespace {

using test::kSeed;
using idx_t = faiss::Index::idx_t;
using Bytes = std::vector<uint8_t>;

/// Bytes written by plain FAISS.
Bytes faissSerialize(const faiss::Index* idx) {
    faiss::VectorIOWriter w;
    faiss::write_index(idx, &w);
    return w.data;
}

/// Reads with plain FAISS.
faiss::Index* faissDeserialize(const Bytes& b) {
    faiss::VectorIOReader r;
    r.data = b;
    return faiss::read_index(&r);
}

/// Search results of an index.
struct Knn {
    std::vector<float> D;
    std::vector<idx_t> I;
};

Knn searchAll(const faiss::Index* idx, const std::vector<float>& q, int k) {
    int64_t nq = int64_t(q.size()) / idx->d;
    Knn r{std::vector<float>(nq * k), std::vector<idx_t>(nq * k)};
    idx->search(nq, q.data(), k, r.D.data(), r.I.data());
    return r;
}

void expectSameSearch(const faiss::Index* a, const faiss::Index* b, const std::vector<float>& q,
                      int k) {
    ASSERT_EQ(a->d, b->d);
    ASSERT_EQ(a->ntotal, b->ntotal);
    ASSERT_EQ(a->metric_type, b->metric_type);
    Knn ra = searchAll(a, q, k), rb = searchAll(b, q, k);
    EXPECT_EQ(ra.I, rb.I) << "seed " << kSeed;
    EXPECT_EQ(ra.D, rb.D) << "seed " << kSeed;
}

/// A filled index from our factory.
std::unique_ptr<faiss::Index> makeFilled(const char* desc, int d, int64_t n,
                                         faiss::MetricType metric = faiss::METRIC_L2) {
    std::unique_ptr<faiss::Index> idx(faiss_ext::index_factory(d, desc, metric));
    auto xb = test::clusteredVectors(n, d, 5, kSeed);
    if (dynamic_cast<faiss::IndexIDMap*>(idx.get())) {
        std::vector<idx_t> ids(n);
        for (int64_t i = 0; i < n; ++i) ids[i] = 1000 + 7 * i;
        idx->add_with_ids(n, xb.data(), ids.data());
    } else {
        idx->add(n, xb.data());
    }
    return idx;
}

const faiss::IndexPreTransform* asPT(const faiss::Index* idx) {
    return dynamic_cast<const faiss::IndexPreTransform*>(idx);
}

// ------------------------------------------------------------- round trips

class CpuIoRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuIoRoundTrip, BytesFileAndWriterGiveTheSameIndex) {
    const int d = 16;
    const faiss::MetricType metric = std::string(GetParam()).find("IP") != std::string::npos
                                         ? faiss::METRIC_INNER_PRODUCT
                                         : faiss::METRIC_L2;
    std::string desc = GetParam();
    if (desc.size() > 2 && desc.substr(desc.size() - 2) == "IP") desc.resize(desc.size() - 2);
    auto idx = makeFilled(desc.c_str(), d, 200, metric);
    auto q = test::randomVectors(20, d, kSeed + 5);

    Bytes bytes = faiss_ext::serialize_index(idx.get());
    ASSERT_FALSE(bytes.empty());
    std::unique_ptr<faiss::Index> fromBytes(faiss_ext::deserialize_index(bytes));
    expectSameSearch(idx.get(), fromBytes.get(), q, 10);

    test::TempFile tmp("io");
    faiss_ext::write_index(idx.get(), tmp.path.c_str());
    std::unique_ptr<faiss::Index> fromFile(faiss_ext::read_index(tmp.path.c_str()));
    expectSameSearch(idx.get(), fromFile.get(), q, 10);

    faiss::VectorIOWriter w;
    faiss_ext::write_index(idx.get(), &w);
    EXPECT_EQ(w.data, bytes);  // the same bytes whatever the medium
    faiss::VectorIOReader r;
    r.data = w.data;
    std::unique_ptr<faiss::Index> fromReader(faiss_ext::read_index(&r));
    EXPECT_EQ(r.rp, r.data.size());  // consumed exactly the index
    expectSameSearch(idx.get(), fromReader.get(), q, 10);

    // writing what was read gives the same bytes again
    EXPECT_EQ(faiss_ext::serialize_index(fromBytes.get()), bytes);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CpuIoRoundTrip,
                         ::testing::Values("QSFlat", "QSFlatIP", "QSFlatCosine", "QSFlatPearson",
                                           "IDMap,QSFlat", "IDMap2,QSFlatIP", "IDMap,QSFlatCosine",
                                           "IDMap2,QSFlatPearson"));

TEST(CpuIo, FlatKeepsTypeAndVectors) {
    const int d = 5;
    faiss::IndexFlatIP ip(d);
    auto xb = test::randomVectors(30, d, kSeed);
    ip.add(30, xb.data());
    std::unique_ptr<faiss::Index> back(
        faiss_ext::deserialize_index(faiss_ext::serialize_index(&ip)));
    auto f = dynamic_cast<faiss::IndexFlatIP*>(back.get());
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->code_size, sizeof(float) * d);
    ASSERT_EQ(f->codes.size(), ip.codes.size());
    EXPECT_EQ(0, std::memcmp(f->codes.data(), ip.codes.data(), ip.codes.size()));

    faiss::IndexFlatL2 l2(d);
    back.reset(faiss_ext::deserialize_index(faiss_ext::serialize_index(&l2)));  // empty index
    EXPECT_NE(dynamic_cast<faiss::IndexFlatL2*>(back.get()), nullptr);
    EXPECT_EQ(back->ntotal, 0);

    faiss::IndexFlat l1(d, faiss::METRIC_Lp);  // "IxFl" with a metric_arg
    l1.metric_arg = 3.f;
    l1.add(30, xb.data());
    back.reset(faiss_ext::deserialize_index(faiss_ext::serialize_index(&l1)));
    EXPECT_EQ(back->metric_type, faiss::METRIC_Lp);
    EXPECT_EQ(back->metric_arg, 3.f);
    expectSameSearch(&l1, back.get(), xb, 3);
}

TEST(CpuIo, PearsonTwinStructureSurvives) {
    auto idx = makeFilled("IDMap2,QSFlatPearson", 8, 50);
    std::unique_ptr<faiss::Index> back(
        faiss_ext::deserialize_index(faiss_ext::serialize_index(idx.get())));
    auto m2 = dynamic_cast<faiss::IndexIDMap2*>(back.get());
    ASSERT_NE(m2, nullptr);
    EXPECT_TRUE(m2->own_fields);
    EXPECT_EQ(m2->id_map, dynamic_cast<faiss::IndexIDMap*>(idx.get())->id_map);
    EXPECT_EQ(m2->rev_map.size(), 50u);  // rebuilt for reconstruct
    std::vector<float> a(8), b(8);
    idx->reconstruct(1000 + 7 * 3, a.data());
    back->reconstruct(1000 + 7 * 3, b.data());
    EXPECT_EQ(a, b);
    auto pt = asPT(m2->index);
    ASSERT_NE(pt, nullptr);
    EXPECT_TRUE(pt->own_fields);
    ASSERT_EQ(pt->chain.size(), 2u);
    auto rc = dynamic_cast<const RowCenteringTransform*>(pt->chain[0]);
    ASSERT_NE(rc, nullptr);
    EXPECT_EQ(rc->d_in, 8);
    EXPECT_EQ(rc->d_out, 8);
    EXPECT_TRUE(rc->is_trained);
    EXPECT_NE(dynamic_cast<const faiss::NormalizationTransform*>(pt->chain[1]), nullptr);
}

TEST(CpuIo, TwoIndexesBackToBackInOneStream) {
    auto a = makeFilled("QSFlatPearson", 6, 20);
    auto b = makeFilled("IDMap,QSFlat", 6, 30);
    faiss::VectorIOWriter w;
    faiss_ext::write_index(a.get(), &w);
    faiss_ext::write_index(b.get(), &w);
    faiss::VectorIOReader r;
    r.data = w.data;
    std::unique_ptr<faiss::Index> a2(faiss_ext::read_index(&r)), b2(faiss_ext::read_index(&r));
    EXPECT_EQ(r.rp, r.data.size());
    auto q = test::randomVectors(5, 6, kSeed);
    expectSameSearch(a.get(), a2.get(), q, 4);
    expectSameSearch(b.get(), b2.get(), q, 4);
}

// ----------------------------------------------------- FAISS compatibility

TEST(CpuIo, FilesOfPlainFaissReadBack) {
    const int d = 8;
    auto xb = test::clusteredVectors(300, d, 4, kSeed);
    auto q = test::randomVectors(10, d, kSeed + 1);
    std::vector<std::unique_ptr<faiss::Index>> indexes;
    indexes.emplace_back(new faiss::IndexFlatL2(d));
    indexes.emplace_back(new faiss::IndexFlatIP(d));
    indexes.emplace_back(faiss::index_factory(d, "IDMap2,Flat"));
    indexes.emplace_back(faiss::index_factory(d, "L2norm,Flat", faiss::METRIC_INNER_PRODUCT));
    indexes.emplace_back(faiss::index_factory(d, "PCA4,Flat"));
    indexes.emplace_back(faiss::index_factory(d, "IVF4,Flat"));
    indexes.emplace_back(faiss::index_factory(d, "HNSW8"));
    indexes.emplace_back(faiss::index_factory(d, "IDMap,PCA4,IVF2,Flat"));
    for (auto& idx : indexes) {
        idx->train(300, xb.data());
        if (dynamic_cast<faiss::IndexIDMap*>(idx.get())) {
            std::vector<idx_t> ids(300);
            for (int i = 0; i < 300; ++i) ids[i] = 5 * i + 1;
            idx->add_with_ids(300, xb.data(), ids.data());
        } else {
            idx->add(300, xb.data());
        }
        test::TempFile tmp("io");
        faiss::write_index(idx.get(), tmp.path.c_str());
        std::unique_ptr<faiss::Index> back(faiss_ext::read_index(tmp.path.c_str()));
        EXPECT_EQ(typeid(*back), typeid(*idx)) << typeid(*idx).name();
        expectSameSearch(idx.get(), back.get(), q, 5);
        // and we write the same bytes FAISS does
        EXPECT_EQ(faiss_ext::serialize_index(back.get()), faissSerialize(idx.get()))
            << typeid(*idx).name();
    }
}

TEST(CpuIo, OurFilesWithFaissTypesReadByPlainFaiss) {
    auto q = test::randomVectors(10, 12, kSeed + 2);
    for (const char* desc :
         {"QSFlat", "QSFlatCosine", "IDMap,QSFlatCosine", "IDMap2,QSFlat", "IDMap,L2norm,QSFlat"}) {
        auto idx = makeFilled(desc, 12, 100);
        test::TempFile tmp("io");
        faiss_ext::write_index(idx.get(), tmp.path.c_str());
        std::unique_ptr<faiss::Index> back(faiss::read_index(tmp.path.c_str()));
        expectSameSearch(idx.get(), back.get(), q, 5);
        EXPECT_EQ(faiss_ext::serialize_index(idx.get()), faissSerialize(idx.get())) << desc;
    }
}

TEST(CpuIo, PearsonFileIsOursOnly) {
    auto idx = makeFilled("QSFlatPearson", 4, 10);
    Bytes b = faiss_ext::serialize_index(idx.get());
    EXPECT_THROW(delete faissDeserialize(b), faiss::FaissException);
    // plain FAISS cannot write our transform either
    EXPECT_THROW(faissSerialize(idx.get()), faiss::FaissException);
}

// --------------------------------------------------------- the CPU twin walk

/// A CPU stand-in for a GPU index: a flat index that converts itself.
struct FakeGpuFlat : faiss::IndexFlatL2, CpuConvertible {
    explicit FakeGpuFlat(int d) : faiss::IndexFlatL2(d) {}
    mutable int conversions = 0;
    faiss::Index* copyToCpuIndex() const override {
        ++conversions;
        auto twin = new faiss::IndexFlatL2(d);
        twin->add(ntotal, get_xb());
        return twin;
    }
};

TEST(CpuTwin, GpuLeavesAreWrittenAsTheirTwin) {
    const int d = 6;
    auto xb = test::randomVectors(40, d, kSeed);
    auto q = test::randomVectors(5, d, kSeed + 1);
    auto* fake = new FakeGpuFlat(d);
    faiss::IndexIDMap idmap(fake);
    idmap.own_fields = true;
    std::vector<idx_t> ids(40);
    for (int i = 0; i < 40; ++i) ids[i] = 100 - i;
    idmap.add_with_ids(40, xb.data(), ids.data());

    EXPECT_TRUE(containsCpuConvertible(&idmap));
    Bytes b = faiss_ext::serialize_index(&idmap);
    EXPECT_GE(fake->conversions, 1);
    std::unique_ptr<faiss::Index> back(faissDeserialize(b));  // plain FAISS reads it
    auto m = dynamic_cast<faiss::IndexIDMap*>(back.get());
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(typeid(*m->index), typeid(faiss::IndexFlatL2));
    expectSameSearch(&idmap, back.get(), q, 5);

    std::unique_ptr<faiss::Index> cpu(cloneToCpu(&idmap));
    EXPECT_FALSE(containsCpuConvertible(cpu.get()));
    expectSameSearch(&idmap, cpu.get(), q, 5);
}

TEST(CpuTwin, WalksPreTransformAndShards) {
    const int d = 6;
    auto xb = test::randomVectors(40, d, kSeed);
    auto q = test::randomVectors(5, d, kSeed + 1);
    faiss::IndexShards shards(d, false, true);
    shards.own_fields = true;
    auto* s0 = new FakeGpuFlat(d);
    auto* s1 = new faiss::IndexFlatL2(d);
    s0->add(20, xb.data());
    s1->add(20, xb.data() + 20 * d);
    shards.add_shard(s0);
    shards.add_shard(s1);
    EXPECT_TRUE(containsCpuConvertible(&shards));
    std::unique_ptr<faiss::Index> cpu(cloneToCpu(&shards));
    auto cs = dynamic_cast<faiss::IndexShards*>(cpu.get());
    ASSERT_NE(cs, nullptr);
    ASSERT_EQ(cs->count(), 2);
    EXPECT_EQ(typeid(*cs->at(0)), typeid(faiss::IndexFlatL2));
    EXPECT_FALSE(containsCpuConvertible(cpu.get()));
    expectSameSearch(&shards, cpu.get(), q, 7);

    // a Pearson twin (our transform) in front of a GPU leaf
    faiss::IndexPreTransform pt(new FakeGpuFlat(d));
    pt.own_fields = true;
    pt.prepend_transform(new RowCenteringTransform(d));
    pt.add(40, xb.data());
    std::unique_ptr<faiss::Index> cpt(cloneToCpu(&pt));
    auto p = asPT(cpt.get());
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(p->chain.size(), 1u);
    EXPECT_NE(dynamic_cast<const RowCenteringTransform*>(p->chain[0]), nullptr);
    EXPECT_EQ(typeid(*p->index), typeid(faiss::IndexFlatL2));
    expectSameSearch(&pt, cpt.get(), q, 5);
    std::unique_ptr<faiss::Index> back(
        faiss_ext::deserialize_index(faiss_ext::serialize_index(&pt)));
    expectSameSearch(&pt, back.get(), q, 5);
}

TEST(CpuTwin, CloneOfCpuTreeEqualsOriginal) {
    auto idx = makeFilled("IDMap2,QSFlatPearson", 8, 60);
    EXPECT_FALSE(containsCpuConvertible(idx.get()));
    std::unique_ptr<faiss::Index> c(cloneToCpu(idx.get()));
    auto q = test::randomVectors(6, 8, kSeed + 9);
    expectSameSearch(idx.get(), c.get(), q, 6);
    EXPECT_EQ(faiss_ext::serialize_index(c.get()), faiss_ext::serialize_index(idx.get()));
    EXPECT_THROW(cloneToCpu(nullptr), faiss::FaissException);
}

// ------------------------------------------------------ bad and hostile input

/// Deserialises and searches what was read; returns "ok", "FaissException"
/// (when reading threw it) or a description of anything else, including a
/// read that succeeded but gave an index that cannot be searched.
std::string tryRead(const Bytes& b) {
    std::unique_ptr<faiss::Index> idx;
    try {
        idx.reset(faiss_ext::deserialize_index(b));
    } catch (const faiss::FaissException&) {
        return "FaissException";
    } catch (const std::exception& e) {
        return std::string("std::exception: ") + e.what();
    } catch (...) {
        return "unknown exception";
    }
    if (!idx) return "null index";
    if (idx->d <= 0 || !idx->is_trained) return "ok";
    try {
        std::vector<float> q(idx->d, 0.5f);
        std::vector<float> D(2);
        std::vector<idx_t> I(2);
        idx->search(1, q.data(), 2, D.data(), I.data());
    } catch (const std::exception& e) {
        return std::string("read, but search failed: ") + e.what();
    }
    return "ok";
}

TEST(CpuIoCorrupt, EveryTruncationThrows) {
    std::vector<Bytes> files;
    files.push_back(faiss_ext::serialize_index(makeFilled("IDMap2,QSFlatPearson", 4, 3).get()));
    files.push_back(faiss_ext::serialize_index(makeFilled("IDMap,QSFlatCosine", 3, 2).get()));
    files.push_back(faiss_ext::serialize_index(makeFilled("QSFlat", 3, 2).get()));
    faiss::IndexFlatIP emptyFlat(3);
    files.push_back(faissSerialize(&emptyFlat));
    for (size_t f = 0; f < files.size(); ++f) {
        const Bytes& full = files[f];
        ASSERT_EQ(tryRead(full), "ok") << "file " << f;
        for (size_t len = 0; len < full.size(); ++len) {
            Bytes cut(full.begin(), full.begin() + len);
            EXPECT_EQ(tryRead(cut), "FaissException")
                << "file " << f << " truncated to " << len << " of " << full.size();
        }
    }
}

TEST(CpuIoCorrupt, TruncatedFileThrows) {
    auto idx = makeFilled("IDMap,QSFlatPearson", 5, 4);
    Bytes full = faiss_ext::serialize_index(idx.get());
    test::TempFile tmp("io");
    FILE* f = std::fopen(tmp.path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(full.data(), 1, full.size() - 7, f);
    std::fclose(f);
    EXPECT_THROW(faiss_ext::read_index(tmp.path.c_str()), faiss::FaissException);
    EXPECT_THROW(faiss_ext::read_index("/nonexistent/dir/faiss_ext.index"), faiss::FaissException);
}

TEST(CpuIoCorrupt, RandomCorruptionsNeverCrash) {
    std::vector<Bytes> files;
    files.push_back(faiss_ext::serialize_index(makeFilled("IDMap2,QSFlatPearson", 4, 6).get()));
    files.push_back(faiss_ext::serialize_index(makeFilled("IDMap,QSFlatCosine", 5, 4).get()));
    files.push_back(
        faiss_ext::serialize_index(makeFilled("QSFlat", 3, 5, faiss::METRIC_INNER_PRODUCT).get()));
    std::mt19937_64 rng(kSeed);
    int ok = 0, thrown = 0;
    for (size_t f = 0; f < files.size(); ++f) {
        for (int trial = 0; trial < 3000; ++trial) {
            Bytes b = files[f];
            int nflips = 1 + int(rng() % 3);
            std::string what;
            for (int k = 0; k < nflips; ++k) {
                size_t pos = rng() % b.size();
                uint8_t v;
                switch (rng() % 3) {
                    case 0:
                        v = uint8_t(b[pos] ^ (1u << (rng() % 8)));  // bit flip
                        break;
                    case 1:
                        v = uint8_t(rng());  // random byte
                        break;
                    default:
                        v = (rng() % 2) ? 0xff : 0x7f;  // large values
                }
                b[pos] = v;
                what += " byte " + std::to_string(pos) + "=" + std::to_string(v);
            }
            std::string r = tryRead(b);
            if (r == "ok") {
                ++ok;
            } else {
                ++thrown;
                EXPECT_EQ(r, "FaissException")
                    << "file " << f << " trial " << trial << ":" << what << " seed " << kSeed;
            }
        }
    }
    // both outcomes happen: flips in vector data are harmless, in sizes fatal
    EXPECT_GT(ok, 0);
    EXPECT_GT(thrown, 0);
}

/// Little-endian bytes of a value, appended.
template <typename T>
void put(Bytes& b, T v) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
}

void putFourcc(Bytes& b, const char* s) {
    // byte by byte: g++ 12 -O3 warns (-Wstringop-overflow, a false positive)
    // on a range insert into the empty vector of a test
    for (int i = 0; i < 4; ++i) b.push_back(uint8_t(s[i]));
}

/// FAISS's index header.
void putHeader(Bytes& b, int32_t d, int64_t ntotal, int32_t metric = 1) {
    put<int32_t>(b, d);
    put<int64_t>(b, ntotal);
    put<int64_t>(b, int64_t(1) << 20);
    put<int64_t>(b, int64_t(1) << 20);
    put<uint8_t>(b, 1);
    put<int32_t>(b, metric);
}

std::string readError(const Bytes& b) {
    try {
        std::unique_ptr<faiss::Index> idx(faiss_ext::deserialize_index(b));
    } catch (const faiss::FaissException& e) {
        return e.what();
    }
    return "";
}

TEST(CpuIoCorrupt, HandMadeFilesMatchFaissFormat) {
    // a flat L2 index, written byte by byte as FAISS lays it out
    Bytes b;
    putFourcc(b, "IxF2");
    putHeader(b, 2, 3);
    put<size_t>(b, 6);
    for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}) put<float>(b, v);
    std::unique_ptr<faiss::Index> idx(faiss_ext::deserialize_index(b));
    ASSERT_EQ(idx->ntotal, 3);
    std::vector<float> r(2);
    idx->reconstruct(2, r.data());
    EXPECT_EQ(r, (std::vector<float>{5.f, 6.f}));
    std::unique_ptr<faiss::Index> viaFaiss(faissDeserialize(b));
    EXPECT_EQ(faiss_ext::serialize_index(idx.get()), b);
}

TEST(CpuIoCorrupt, AbsurdSizesThrow) {
    auto flat = [](int32_t d, int64_t ntotal, size_t count, const char* fcc = "IxF2",
                   int32_t metric = 1) {
        Bytes b;
        putFourcc(b, fcc);
        putHeader(b, d, ntotal, metric);
        put<size_t>(b, count);
        return b;
    };
    EXPECT_NE(readError(flat(-1, 0, 0)), "");                     // negative d
    EXPECT_NE(readError(flat(4, -5, 0)), "");                     // negative ntotal
    EXPECT_NE(readError(flat(4, int64_t(1) << 60, 0)), "");       // 2^60 vectors
    EXPECT_NE(readError(flat(1 << 30, 1, size_t(1) << 30)), "");  // huge d
    EXPECT_NE(readError(flat(4, 2, 7)), "");                      // count != ntotal * d
    EXPECT_NE(readError(flat(4, 1 << 30, size_t(4) << 30)), "");  // 16 GiB claimed
    EXPECT_NE(readError(flat(4, 1, 4, "IxF2", 0)), "");           // IxF2 with IP metric
    EXPECT_NE(readError(flat(4, 1, 4, "IxFI", 99)), "");          // unknown metric
    EXPECT_NE(readError(flat(4, 0, 0, "IxFI", 1)), "");           // IxFI with L2 metric

    // is_trained must be a bool
    Bytes b = flat(2, 0, 0);
    b[4 + 4 + 8 + 8 + 8] = 7;
    EXPECT_NE(readError(b), "");

    // IDMap: absurd id count, inner index of another size
    Bytes m;
    putFourcc(m, "IxMp");
    putHeader(m, 2, 1);
    Bytes inner = flat(2, 1, 2);
    put<float>(inner, 1.f);
    put<float>(inner, 2.f);
    m.insert(m.end(), inner.begin(), inner.end());
    Bytes good = m;
    put<size_t>(good, 1);
    put<int64_t>(good, 42);
    std::unique_ptr<faiss::Index> ok(faiss_ext::deserialize_index(good));
    EXPECT_EQ(dynamic_cast<faiss::IndexIDMap*>(ok.get())->id_map[0], 42);
    Bytes bad = m;
    put<size_t>(bad, size_t(1) << 61);
    EXPECT_NE(readError(bad), "");
    Bytes mismatch;
    putFourcc(mismatch, "IxMp");
    putHeader(mismatch, 2, 5);  // claims 5 vectors, inner has 1
    mismatch.insert(mismatch.end(), inner.begin(), inner.end());
    put<size_t>(mismatch, 5);
    for (int i = 0; i < 5; ++i) put<int64_t>(mismatch, i);
    EXPECT_NE(readError(mismatch), "");

    // IndexPreTransform: absurd chain length, our transform with bad dims
    Bytes pt;
    putFourcc(pt, "IxPT");
    putHeader(pt, 2, 1);
    Bytes longChain = pt;
    put<int32_t>(longChain, 1 << 30);
    EXPECT_NE(readError(longChain), "");
    Bytes negChain = pt;
    put<int32_t>(negChain, -1);
    EXPECT_NE(readError(negChain), "");
    Bytes badRc = pt;
    put<int32_t>(badRc, 1);
    putFourcc(badRc, "FxRC");
    put<int32_t>(badRc, 2);
    put<int32_t>(badRc, 3);  // d_out != d_in
    put<uint8_t>(badRc, 1);
    badRc.insert(badRc.end(), inner.begin(), inner.end());
    EXPECT_NE(readError(badRc), "");
    Bytes goodRc = pt;
    put<int32_t>(goodRc, 1);
    putFourcc(goodRc, "FxRC");
    put<int32_t>(goodRc, 2);
    put<int32_t>(goodRc, 2);
    put<uint8_t>(goodRc, 1);
    goodRc.insert(goodRc.end(), inner.begin(), inner.end());
    put<float>(goodRc, 0.f);  // trailing bytes are left unread
    std::unique_ptr<faiss::Index> rcIdx(faiss_ext::deserialize_index(goodRc));
    EXPECT_NE(asPT(rcIdx.get()), nullptr);

    // deep nesting is refused before the stack suffers
    Bytes deep;
    for (int i = 0; i < 100000; ++i) {
        putFourcc(deep, "IxMp");
        putHeader(deep, 2, 0);
    }
    EXPECT_NE(readError(deep), "");
}

/// An IOReader of unknown length (not bytes in memory, not a file).
struct StreamOnlyReader : faiss::IOReader {
    Bytes data;
    size_t pos = 0;
    size_t operator()(void* p, size_t size, size_t nitems) override {
        size_t n = std::min(nitems, (data.size() - pos) / size);
        std::memcpy(p, data.data() + pos, n * size);
        pos += n * size;
        return n;
    }
};

TEST(CpuIoCorrupt, LargeClaimsOnAStreamFailWithoutAllocatingThem) {
    // 2^30 vectors of d 64 (256 GiB) claimed, 16 floats present: the reader
    // must stop at the end of the data, not allocate the claim first
    StreamOnlyReader r;
    putFourcc(r.data, "IxF2");
    putHeader(r.data, 64, int64_t(1) << 30);
    put<size_t>(r.data, size_t(64) << 30);
    for (int i = 0; i < 16; ++i) put<float>(r.data, 1.f);
    EXPECT_THROW(faiss_ext::read_index(&r), faiss::FaissException);

    // a valid index through the same reader
    StreamOnlyReader ok;
    auto idx = makeFilled("IDMap2,QSFlatPearson", 4, 10);
    ok.data = faiss_ext::serialize_index(idx.get());
    std::unique_ptr<faiss::Index> back(faiss_ext::read_index(&ok));
    expectSameSearch(idx.get(), back.get(), test::randomVectors(3, 4, kSeed), 3);
}

TEST(CpuIoCorrupt, WrongFourccThrows) {
    auto idx = makeFilled("QSFlat", 4, 3);
    Bytes b = faiss_ext::serialize_index(idx.get());
    Bytes wrong = b;
    std::memcpy(wrong.data(), "XxYz", 4);
    EXPECT_EQ(tryRead(wrong), "FaissException");
    std::memcpy(wrong.data(), "FxRC", 4);  // a transform where an index belongs
    EXPECT_EQ(tryRead(wrong), "FaissException");

    auto pear = makeFilled("QSFlatPearson", 4, 3);
    Bytes p = faiss_ext::serialize_index(pear.get());
    // the first transform's fourcc comes after the IxPT fourcc, header and chain length
    size_t at = 4 + 4 + 8 + 8 + 8 + 1 + 4 + 4;
    ASSERT_EQ(0, std::memcmp(p.data() + at, "FxRC", 4));
    std::memcpy(p.data() + at, "FxZZ", 4);
    EXPECT_EQ(tryRead(p), "FaissException");

    EXPECT_EQ(tryRead(Bytes{}), "FaissException");
    EXPECT_THROW(faiss_ext::deserialize_index(nullptr, 5), faiss::FaissException);
}

TEST(CpuIoCorrupt, BadArguments) {
    EXPECT_THROW(faiss_ext::serialize_index(nullptr), faiss::FaissException);
    faiss::IndexFlatL2 f(2);
    EXPECT_THROW(faiss_ext::write_index(&f, static_cast<faiss::IOWriter*>(nullptr)),
                 faiss::FaissException);
    EXPECT_THROW(faiss_ext::write_index(&f, static_cast<const char*>(nullptr)),
                 faiss::FaissException);
    EXPECT_THROW(faiss_ext::read_index(static_cast<faiss::IOReader*>(nullptr)),
                 faiss::FaissException);
    EXPECT_THROW(faiss_ext::write_index(&f, "/nonexistent/dir/x.index"), faiss::FaissException);
}

}  // namespace
}  // namespace faiss_ext
