// Bad input to the CPU twins that crashed or gave a silent wrong result
// (issue 21), on the C++ side: the LSH twin's reconstruct_n out of range and
// its copies while another thread adds; the GNND twin's searches FAISS cannot
// answer (k reaching ntotal, an empty or unbuilt graph, 100 vectors or fewer)
// and files whose pool reaches ntotal. docs/bad-inputs.md lists the behaviour
// each test pins. The factory and I/O cases are in
// test_cpu_bad_inputs_factory_io.cpp; the Python side in
// python_bindings/tests/test_cpu_bad_inputs.py.
#include "BadInputTestUtils.h"
#include "TestUtils.h"

#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/IndexNNDescentFlatChecked.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

#include <faiss/IndexIDMap.h>
#include <faiss/impl/FaissException.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace faiss_ext {
namespace {

using idx_t = int64_t;
using Bytes = std::vector<uint8_t>;

/// Expects stmt to throw a faiss::FaissException whose message holds needle.
#define EXPECT_THROW_WITH(stmt, needle) \
    EXPECT_EQ("", ::faiss_ext::test::refusalProblem([&] { stmt; }, {needle}))

// R2: reconstruct_n past ntotal threw inside FAISS's OpenMP loop
// (std::terminate).
TEST(CpuBadInputTwins, LshReconstructNOutOfRangeThrows) {
    std::unique_ptr<faiss::Index> idx(index_factory(8, "BiLSH4x4_t2"));
    auto x = test::clusteredVectors(200, 8, 4, test::kSeed);
    idx->train(200, x.data());
    idx->add(200, x.data());
    std::vector<float> out(500 * 8);
    EXPECT_THROW_WITH(idx->reconstruct_n(0, 500, out.data()), "out of");
    EXPECT_THROW_WITH(idx->reconstruct_n(-1, 2, out.data()), "out of");
    EXPECT_THROW_WITH(idx->reconstruct_n(199, 2, out.data()), "out of");
    idx->reconstruct_n(190, 10, out.data());
    EXPECT_EQ(0, std::memcmp(out.data(), x.data() + 190 * 8, 10 * 8 * sizeof(float)));
}

// R1: copies of the vectors (and files) made while another thread adds and
// resets are consistent snapshots (under ThreadSanitizer or ASan a race
// shows; here sizes and contents are checked).
TEST(CpuBadInputTwins, LshVectorsCopiedWhileAddingAreConsistent) {
    IndexBiLevelLSH idx(16, [] {
        BiLevelLSHConfig c;
        c.treeDepth = 3;
        return c;
    }());
    auto x = test::clusteredVectors(2000, 16, 8, test::kSeed);
    idx.train(2000, x.data());
    std::atomic<bool> stop{false};
    std::thread writer([&] {
        for (int round = 0; round < 6; ++round) {
            idx.reset();
            for (int b = 0; b < 4; ++b) idx.add(500, x.data() + size_t(b) * 500 * 16);
        }
        stop = true;
    });
    int copies = 0;
    while (!stop) {
        std::vector<float> v = idx.copyVectors();
        ASSERT_EQ(v.size() % (500 * 16), 0u);
        // (bit for bit; an empty copy may hold a null pointer, which memcmp must not see)
        ASSERT_TRUE(v.empty() || std::memcmp(v.data(), x.data(), v.size() * sizeof(float)) == 0);
        Bytes b = serialize_index(&idx);
        std::unique_ptr<faiss::Index> back(deserialize_index(b));
        ASSERT_EQ(back->ntotal % 500, 0);
        ++copies;
    }
    writer.join();
    EXPECT_GT(copies, 0);
}

/// A "GNND8" twin holding n clustered rows of dimension 8.
std::unique_ptr<faiss::Index> gnndTwin(int n, const char* desc = "GNND8_it3") {
    std::unique_ptr<faiss::Index> idx(index_factory(8, desc));
    auto x = test::clusteredVectors(n, 8, 4, test::kSeed);
    if (auto m = dynamic_cast<faiss::IndexIDMap*>(idx.get())) {
        std::vector<idx_t> ids(n);
        for (int i = 0; i < n; ++i) ids[i] = 10 + i;
        m->add_with_ids(n, x.data(), ids.data());
    } else {
        idx->add(n, x.data());
    }
    return idx;
}

// R6: the GNND twin's search: SIGFPE at k == ntotal, out-of-range reads past
// it, std::terminate before the graph is built.
TEST(CpuBadInputTwins, GnndTwinRefusesSearchesFaissCannotAnswer) {
    std::unique_ptr<faiss::Index> empty(index_factory(8, "GNND8"));
    ASSERT_NE(dynamic_cast<IndexNNDescentFlatChecked*>(empty.get()), nullptr);
    std::vector<float> q(8 * 2, 0.5f);
    std::vector<float> D(2 * 201);
    std::vector<idx_t> I(2 * 201);
    EXPECT_THROW_WITH(empty->search(2, q.data(), 5, D.data(), I.data()), "empty");

    auto idx = gnndTwin(200);
    EXPECT_THROW_WITH(idx->search(2, q.data(), 200, D.data(), I.data()), "candidate pool");
    EXPECT_THROW_WITH(idx->search(2, q.data(), 201, D.data(), I.data()), "candidate pool");
    idx->search(2, q.data(), 10, D.data(), I.data());
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(I[i] >= 0 && I[i] < 200) << I[i];
    std::vector<float> r(8 * 3);
    EXPECT_THROW_WITH(idx->reconstruct(200, r.data()), "out of");
    EXPECT_THROW_WITH(idx->reconstruct(-1, r.data()), "out of");
    EXPECT_THROW_WITH(idx->reconstruct_n(199, 2, r.data()), "out of");
    idx->reset();
    EXPECT_THROW_WITH(idx->search(2, q.data(), 5, D.data(), I.data()), "empty");

    // 100 rows or fewer: FAISS's build divided by zero (SIGFPE at 100);
    // refused with nothing stored
    std::unique_ptr<faiss::Index> small(index_factory(8, "GNND8"));
    auto x = test::clusteredVectors(101, 8, 4, test::kSeed);
    for (int n : {40, 100}) {
        EXPECT_THROW_WITH(small->add(n, x.data()), "more than 100");
        EXPECT_EQ(small->ntotal, 0);
    }
    EXPECT_THROW_WITH(small->search(2, q.data(), 5, D.data(), I.data()), "empty");
    small->add(101, x.data());
    EXPECT_EQ(small->ntotal, 101);
    // a graph that is not built (FAISS's state after a failed build)
    auto* unbuilt = dynamic_cast<IndexNNDescentFlatChecked*>(small.get());
    unbuilt->nndescent.has_built = false;
    EXPECT_THROW_WITH(small->search(2, q.data(), 5, D.data(), I.data()), "not built");

    // under an id map the same checks run
    auto mapped = gnndTwin(200, "IDMap,GNND8_it3");
    EXPECT_THROW_WITH(mapped->search(2, q.data(), 200, D.data(), I.data()), "candidate pool");
}

// R5: a file whose search_L was raised past ntotal read, then crashed the
// first search; it still reads (our writers write such files for small
// graphs), and the search is refused.
TEST(CpuBadInputTwins, GnndFileWithPoolPastNtotalReadsAndRefusesSearch) {
    auto idx = gnndTwin(200);
    Bytes b = serialize_index(idx.get());
    // INNf: fourcc, header (33 bytes for L2), ntotal, d, K, S, R, L, iter, search_L
    const size_t at = 4 + 33 + 7 * 4;
    int32_t searchL = 0;
    std::memcpy(&searchL, b.data() + at, 4);
    for (int32_t v : {200, 201, 1 << 19}) {
        Bytes bumped = b;
        std::memcpy(bumped.data() + at, &v, 4);
        std::unique_ptr<faiss::Index> back(deserialize_index(bumped));
        auto* nnd = dynamic_cast<IndexNNDescentFlatChecked*>(back.get());
        ASSERT_NE(nnd, nullptr);
        ASSERT_EQ(nnd->nndescent.search_L, v);
        std::vector<float> q(8, 0.5f), D(5);
        std::vector<idx_t> I(5);
        EXPECT_THROW_WITH(back->search(1, q.data(), 5, D.data(), I.data()), "candidate pool");
    }
    // a graph entry of -1 (a list of a graph with fewer than K + 1 nodes)
    Bytes padded = b;
    const size_t graphAt = at + 4 + 4 + 1 + 8;  // random_seed, has_built, vector size
    const int32_t minusOne = -1;
    std::memcpy(padded.data() + graphAt, &minusOne, 4);
    std::unique_ptr<faiss::Index> back(deserialize_index(padded));
    std::vector<float> q(8, 0.5f), D(5);
    std::vector<idx_t> I(5);
    EXPECT_THROW_WITH(back->search(1, q.data(), 5, D.data(), I.data()), "outside");
}

}  // namespace
}  // namespace faiss_ext
