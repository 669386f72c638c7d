// Bad input on the CPU side (README.md, "Bad inputs"): the CPU twin
// faiss_ext::IndexBiLevelLSH, the factory and the I/O functions. Each
// refused call must throw faiss::FaissException with a message that names
// the problem, and leave the index as it was (same ntotal, the same search
// results bit for bit).
//   CpuBadInputLsh      k <= 0, k > ntotal (-1 / +inf padding), nq = 0,
//                       null pointers, NaN / +-Inf in train / add / search
//                       (refused naming the row), d <= 0, huge n (n x d past
//                       size_t in a child process: a crash fails the test,
//                       not the suite)
//   CpuBadInputFactory  d <= 0 for every kind of string, bad strings, null
//   CpuBadInputIo       every format of ours cut at EVERY byte, the same
//                       on disk, a wrong fourcc at the top and inside
// faiss::IndexFlat and faiss::IndexNNDescentFlat are FAISS's own classes and
// do not check for NaN / Inf: documented in the README, not tested here.
#include "BadInputTestUtils.h"
#include "TestUtils.h"

#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/impl/FaissException.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace faiss_ext {
namespace {

using idx_t = int64_t;
using Bytes = std::vector<uint8_t>;
using test::expectRefused;
using test::kSeed;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

/// The three non-finite values each check is tried with.
const std::vector<std::pair<const char*, float>>& nonFinite() {
    static const std::vector<std::pair<const char*, float>> v = {
            {"NaN", kNaN}, {"+Inf", kInf}, {"-Inf", -kInf}};
    return v;
}

// ---- IndexBiLevelLSH (the CPU twin of GpuIndexBiLevelLSH) ----

class CpuBadInputLsh : public ::testing::Test {
  protected:
    static constexpr int kD = 12;
    static constexpr int kN = 800;
    static constexpr int kK = 5;
    void SetUp() override {
        x_ = test::clusteredVectors(kN, kD, 8, kSeed);
        q_ = test::clusteredVectors(7, kD, 8, kSeed + 1);
        cfg_.treeDepth = 3;
        cfg_.nTables = 4;
        cfg_.nProjections = 5;
        idx_ = std::make_unique<IndexBiLevelLSH>(kD, cfg_);
        idx_->train(kN, x_.data());
        idx_->add(kN, x_.data());
    }
    std::vector<float> x_, q_;
    BiLevelLSHConfig cfg_;
    std::unique_ptr<IndexBiLevelLSH> idx_;
};

TEST_F(CpuBadInputLsh, KAndNq) {
    IndexBiLevelLSH& idx = *idx_;
    std::vector<float> D(7 * 10);
    std::vector<idx_t> I(7 * 10);
    for (idx_t k : {idx_t(0), idx_t(-1), std::numeric_limits<idx_t>::min()}) {
        expectRefused(idx, q_, kK, "k = " + std::to_string(k), {"k must be > 0"},
                      [&] { idx.search(7, q_.data(), k, D.data(), I.data()); });
    }
    expectRefused(idx, q_, kK, "n = -1", {"n must be >= 0"},
                  [&] { idx.search(-1, q_.data(), kK, D.data(), I.data()); });
    // nq = 0: a no-op, null pointers allowed, nothing written
    const test::IndexSnapshot before = test::snapshotOf(idx, q_, kK);
    idx.search(0, nullptr, kK, nullptr, nullptr);
    D.assign(D.size(), 42.f);
    idx.search(0, q_.data(), kK, D.data(), I.data());
    EXPECT_EQ(D[0], 42.f);
    EXPECT_TRUE(test::sameSnapshot(before, test::snapshotOf(idx, q_, kK)));
}

TEST_F(CpuBadInputLsh, KLargerThanNtotalPadsWithMinusOneAndInf) {
    IndexBiLevelLSH small(kD, cfg_);
    small.train(kN, x_.data());
    small.add(20, x_.data());
    for (idx_t k : {idx_t(21), idx_t(50), idx_t(5000)}) {
        std::vector<float> D(size_t(7 * k));
        std::vector<idx_t> I(size_t(7 * k));
        small.search(7, q_.data(), k, D.data(), I.data());
        for (int q = 0; q < 7; ++q) {
            int valid = 0;
            for (idx_t j = 0; j < k; ++j) {
                const idx_t id = I[q * k + j];
                const float dist = D[q * k + j];
                if (j < valid || (j == valid && id >= 0)) {
                    ASSERT_GE(id, 0);
                    ASSERT_LT(id, 20);
                    ASSERT_TRUE(std::isfinite(dist));
                    if (j > 0) {
                        ASSERT_LE(D[q * k + j - 1], dist) << "query " << q << " k " << k;
                    }
                    valid = int(j) + 1;
                } else {
                    ASSERT_EQ(id, -1) << "query " << q << " rank " << j << ": padding is a suffix";
                    ASSERT_TRUE(std::isinf(dist) && dist > 0) << "padding distance +inf";
                }
            }
            // a query whose group holds none of the 20 vectors finds nothing
            EXPECT_LE(valid, 20);
        }
    }
}

TEST_F(CpuBadInputLsh, NullPointers) {
    IndexBiLevelLSH& idx = *idx_;
    std::vector<float> D(7 * kK);
    std::vector<idx_t> I(7 * kK);
    expectRefused(idx, q_, kK, "search x null", {"x is null"},
                  [&] { idx.search(7, nullptr, kK, D.data(), I.data()); });
    expectRefused(idx, q_, kK, "search distances null", {"must not be null"},
                  [&] { idx.search(7, q_.data(), kK, nullptr, I.data()); });
    expectRefused(idx, q_, kK, "search labels null", {"must not be null"},
                  [&] { idx.search(7, q_.data(), kK, D.data(), nullptr); });
    expectRefused(idx, q_, kK, "add x null", {"x is null"}, [&] { idx.add(5, nullptr); });
    IndexBiLevelLSH fresh(kD, cfg_);
    expectRefused(fresh, q_, kK, "train x null", {"x is null"},
                  [&] { fresh.train(100, nullptr); });
    EXPECT_FALSE(fresh.is_trained);
}

TEST_F(CpuBadInputLsh, NanAndInfAreRefusedNamingTheRow) {
    IndexBiLevelLSH& idx = *idx_;
    std::vector<float> D(7 * kK);
    std::vector<idx_t> I(7 * kK);
    for (const auto& [name, value] : nonFinite()) {
        const std::string tag = std::string(" (") + name + ")";
        std::vector<float> q = q_;
        q[5 * kD + 3] = value;
        expectRefused(idx, q_, kK, "search" + tag, {"NaN or infinite", "vector 5 "},
                      [&] { idx.search(7, q.data(), kK, D.data(), I.data()); });
        std::vector<float> add(x_.begin(), x_.begin() + 30 * kD);
        add[17 * kD + kD - 1] = value;
        expectRefused(idx, q_, kK, "add" + tag, {"NaN or infinite", "vector 17 "},
                      [&] { idx.add(30, add.data()); });
        IndexBiLevelLSH fresh(kD, cfg_);
        std::vector<float> train(x_.begin(), x_.begin() + 100 * kD);
        train[63 * kD] = value;
        expectRefused(fresh, q_, kK, "train" + tag, {"NaN or infinite", "vector 63 "},
                      [&] { fresh.train(100, train.data()); });
        EXPECT_FALSE(fresh.is_trained) << tag;
    }
}

TEST_F(CpuBadInputLsh, WrongDimension) {
    for (int d : {-1, -100, std::numeric_limits<int>::min()}) {
        const std::string problem = test::refusalProblem(
                [&] { IndexBiLevelLSH bad(d, cfg_); }, {"d must be > 0"});
        EXPECT_EQ(problem, "") << "d = " << d;
    }
    // d = 0 is allowed for readers (documented); it cannot be trained
    IndexBiLevelLSH zero(0, cfg_);
    EXPECT_EQ(test::refusalProblem([&] { zero.train(kN, x_.data()); }, {"dimension 0"}), "");
    EXPECT_FALSE(zero.is_trained);
}

TEST_F(CpuBadInputLsh, HugeNPastTheVectorLimitIsRefused) {
    IndexBiLevelLSH& idx = *idx_;
    // past the documented limit of 2^31 - 2 vectors
    expectRefused(idx, q_, kK, "add 2^31", {"at most 2^31 - 2"},
                  [&] { idx.add(idx_t(1) << 31, x_.data()); });
    expectRefused(idx, q_, kK, "add 2^62", {"at most 2^31 - 2"},
                  [&] { idx.add(idx_t(1) << 62, x_.data()); });
}

// n x d floats past size_t: nobody can hold them, so they must be refused
// before x is read. Run in child processes: today the finiteness check reads
// x first and dies of SIGSEGV (README, "Bad inputs").
TEST_F(CpuBadInputLsh, HugeNPastSizeTIsRefusedBeforeReadingTheVectors) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    IndexBiLevelLSH& idx = *idx_;
    const test::IndexSnapshot before = test::snapshotOf(idx, q_, kK);
    auto unchanged = [&] { return test::sameSnapshot(before, test::snapshotOf(idx, q_, kK)); };
    const idx_t huge = std::numeric_limits<idx_t>::max();
    std::vector<float> D(7 * kK);
    std::vector<idx_t> I(7 * kK);
    EXPECT_REFUSED_IN_CHILD(idx.add(huge, x_.data()), "", unchanged);
    EXPECT_REFUSED_IN_CHILD(idx.search(huge / 2, q_.data(), kK, D.data(), I.data()), "",
                            unchanged);
    IndexBiLevelLSH fresh(kD, cfg_);
    EXPECT_REFUSED_IN_CHILD(fresh.train(huge / 2, x_.data()), "", [&] { return !fresh.is_trained; });
}

// ---- the factory ----

TEST(CpuBadInputFactory, DimensionAtMostZeroIsRefusedForEveryKind) {
    for (const char* s : {"QSFlat", "QSFlatCosine", "QSFlatPearson", "IDMap,QSFlat", "GNND32",
                          "IDMap,GNND32", "BiLSH4x4", "IDMap,BiLSH4x4", "Flat", "HNSW32"}) {
        for (int d : {0, -1, -4096}) {
            EXPECT_EQ(test::refusalProblem([&] { delete index_factory(d, s); }, {"must be > 0"}),
                      "")
                << "'" << s << "', d = " << d;
        }
    }
}

TEST(CpuBadInputFactory, BadStringsAndNullAreRefused) {
    const std::vector<std::pair<const char*, const char*>> cases = {
            {"GNND0", "GNND"},          {"GNND2000", "GNND"},     {"GNND64_p33", "_p"},
            {"GNND64_x", "suffix"},     {"BiLSH0x8", "BiLSH"},    {"BiLSH10x8_t15", "_t"},
            {"BiLSH10x8_wnan", "width"}, {"BiLSH10x8_t4_t5", "twice"}};
    for (const auto& [s, needle] : cases) {
        EXPECT_EQ(test::refusalProblem([&] { delete index_factory(16, s); }, {needle}), "")
            << "'" << s << "'";
    }
    // metrics our components do not take
    EXPECT_EQ(test::refusalProblem(
                      [] { delete index_factory(16, "BiLSH4x4", faiss::METRIC_INNER_PRODUCT); },
                      {"BiLSH"}),
              "");
    EXPECT_EQ(test::refusalProblem([] { delete index_factory(16, "QSFlat", faiss::METRIC_L1); },
                                   {"metric"}),
              "");
    EXPECT_EQ(test::refusalProblem([] { delete index_factory(16, nullptr); }, {"null"}), "");
    // strings nobody knows: FAISS's own factory refuses them
    EXPECT_EQ(test::refusalProblem([] { delete index_factory(16, "NoSuchIndex"); }, {}), "");
}

// ---- I/O: truncated files and wrong fourccs ----

/// Deserialises b and searches what was read: "ok", "FaissException", or
/// what else happened (another exception, a read index that cannot search).
std::string tryRead(const Bytes& b, std::string* message = nullptr) {
    std::unique_ptr<faiss::Index> idx;
    try {
        idx.reset(faiss_ext::deserialize_index(b));
    } catch (const faiss::FaissException& e) {
        if (message) *message = e.what();
        return "FaissException";
    } catch (const std::exception& e) {
        return std::string("std::exception: ") + e.what();
    } catch (...) {
        return "unknown exception";
    }
    if (!idx) return "null index";
    // (FAISS's IndexNNDescentFlat aborts the process when searched empty:
    // its "not built" exception leaves an OpenMP region)
    if (idx->d <= 0 || !idx->is_trained || idx->ntotal == 0) return "ok";
    try {
        std::vector<float> q(idx->d, 0.25f);
        std::vector<float> D(3);
        std::vector<idx_t> I(3);
        idx->search(1, q.data(), 3, D.data(), I.data());
    } catch (const std::exception& e) {
        return std::string("read, but search failed: ") + e.what();
    }
    return "ok";
}

/// One small file of each of our formats (and of the FAISS formats our
/// writer produces for our twins), with its name.
std::vector<std::pair<std::string, Bytes>> smallFiles() {
    std::vector<std::pair<std::string, Bytes>> out;
    auto filled = [](const char* s, int d, int n, faiss::MetricType m = faiss::METRIC_L2) {
        std::unique_ptr<faiss::Index> idx(index_factory(d, s, m));
        auto x = test::clusteredVectors(n, d, 4, kSeed);
        if (!idx->is_trained) idx->train(n, x.data());
        if (dynamic_cast<faiss::IndexIDMap*>(idx.get())) {
            std::vector<idx_t> ids(n);
            for (int i = 0; i < n; ++i) ids[i] = 3 * i + 1;
            idx->add_with_ids(n, x.data(), ids.data());
        } else {
            idx->add(n, x.data());
        }
        return serialize_index(idx.get());
    };
    out.emplace_back("QSFlat (IxF2)", filled("QSFlat", 4, 6));
    out.emplace_back("QSFlat IP (IxFI)", filled("QSFlat", 4, 6, faiss::METRIC_INNER_PRODUCT));
    out.emplace_back("QSFlatCosine (IxPT, VNrm)", filled("QSFlatCosine", 3, 4));
    out.emplace_back("QSFlatPearson (IxPT, FxRC)", filled("QSFlatPearson", 4, 5));
    out.emplace_back("IDMap2,QSFlat (IxM2)", filled("IDMap2,QSFlat", 3, 4));
    // FAISS builds the graph: 200 vectors (its NN-Descent dies of SIGFPE on 40)
    out.emplace_back("GNND4 (INNf, built graph)", filled("GNND4_p4_it3", 3, 200));
    {
        std::unique_ptr<faiss::Index> empty(index_factory(3, "GNND4"));
        out.emplace_back("GNND4 (INNf, empty)", serialize_index(empty.get()));
    }
    out.emplace_back("BiLSH (IxBL, trained, filled)", filled("BiLSH2x3_t1", 4, 40));
    {
        std::unique_ptr<faiss::Index> untrained(index_factory(4, "BiLSH2x3_t1"));
        out.emplace_back("BiLSH (IxBL, untrained)", serialize_index(untrained.get()));
    }
    out.emplace_back("IDMap,BiLSH (IxMp, IxBL)", filled("IDMap,BiLSH2x3_t1", 4, 30));
    return out;
}

TEST(CpuBadInputIo, EveryTruncationOfEveryFormatThrows) {
    for (const auto& [name, full] : smallFiles()) {
        ASSERT_EQ(tryRead(full), "ok") << name;
        size_t checked = 0;
        for (size_t len = 0; len < full.size(); ++len) {
            const Bytes cut(full.begin(), full.begin() + len);
            std::string msg;
            const std::string got = tryRead(cut, &msg);
            EXPECT_EQ(got, "FaissException") << name << " cut to " << len << " of " << full.size();
            if (got == "FaissException") {
                EXPECT_FALSE(msg.empty()) << name << " cut to " << len;
            }
            ++checked;
        }
        EXPECT_EQ(checked, full.size()) << name;
    }
    // with no bytes at all, and a null buffer
    EXPECT_EQ(tryRead(Bytes{}), "FaissException");
    EXPECT_EQ(test::refusalProblem([] { delete deserialize_index(nullptr, 8); }, {}), "");
}

// Every single-bit flip of every small file: the reader throws
// FaissException or reads an index whose search answers or throws
// FaissException (a crash fails the run). A flip in a GNND file's search_L
// reads and then makes FAISS 1.7.3's search crash unless the twin checks it
// (issue 21, R5).
TEST(CpuBadInputIo, EveryBitFlipOfEveryFormatThrowsOrReads) {
    for (const auto& [name, full] : smallFiles()) {
        size_t read = 0, refused = 0, searchRefused = 0;
        for (size_t bit = 0; bit < full.size() * 8; ++bit) {
            Bytes flipped = full;
            flipped[bit / 8] ^= uint8_t(1u << (bit % 8));
            const std::string got = tryRead(flipped);
            if (got == "ok") {
                ++read;
            } else if (got == "FaissException") {
                ++refused;
            } else if (got.rfind("read, but search failed", 0) == 0) {
                ++searchRefused;
            } else {
                ADD_FAILURE() << name << " bit " << bit << ": " << got;
            }
        }
        std::printf("[bit flips] %s: %zu bits, %zu read, %zu refused, %zu searches refused\n",
                    name.c_str(), full.size() * 8, read, refused, searchRefused);
    }
}

TEST(CpuBadInputIo, TruncatedFilesOnDiskThrow) {
    for (const auto& [name, full] : smallFiles()) {
        for (size_t len : {size_t(0), size_t(3), full.size() / 2, full.size() - 1}) {
            test::TempFile tmp("bad_input_io");
            FILE* f = std::fopen(tmp.path.c_str(), "wb");
            ASSERT_NE(f, nullptr);
            if (len) {
                ASSERT_EQ(std::fwrite(full.data(), 1, len, f), len);
            }
            std::fclose(f);
            EXPECT_EQ(test::refusalProblem([&] { delete read_index(tmp.path.c_str()); }, {}), "")
                << name << " cut to " << len;
        }
    }
    EXPECT_EQ(test::refusalProblem([] { delete read_index("/nonexistent/dir/x.index"); }, {}),
              "");
}

TEST(CpuBadInputIo, WrongFourccThrowsNamingIt) {
    for (const auto& [name, full] : smallFiles()) {
        Bytes wrong = full;
        std::memcpy(wrong.data(), "QqZz", 4);
        std::string msg;
        EXPECT_EQ(tryRead(wrong, &msg), "FaissException") << name;
        EXPECT_NE(msg.find("QqZz"), std::string::npos) << name << ": " << msg;
        if (name.rfind("QSFlat (", 0) == 0) std::printf("[wrong fourcc] %s\n", msg.c_str());
        // each single byte of the fourcc
        for (int b = 0; b < 4; ++b) {
            Bytes one = full;
            one[b] ^= 0x20;
            EXPECT_EQ(tryRead(one), "FaissException") << name << ", fourcc byte " << b;
        }
    }
    // a fourcc inside a wrapper: IxPT's first transform (FxRC) and the IDMap's inner index
    for (const auto& [name, full] : smallFiles()) {
        for (const char* inner : {"FxRC", "VNrm", "IxBL", "IxF2"}) {
            for (size_t at = 4; at + 4 <= full.size(); ++at) {
                if (std::memcmp(full.data() + at, inner, 4) != 0) continue;
                Bytes wrong = full;
                std::memcpy(wrong.data() + at, "QqZz", 4);
                EXPECT_EQ(tryRead(wrong), "FaissException")
                    << name << ": inner " << inner << " at " << at;
            }
        }
    }
}

}  // namespace
}  // namespace faiss_ext
