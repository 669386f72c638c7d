// Helpers of the bad-input tests (test_cpu_bad_inputs.cpp,
// test_gpu_bad_inputs.cpp): a refused call must throw faiss::FaissException
// with a useful message and leave the index as it was (same ntotal, the same
// search results bit for bit). Calls that might crash instead of throwing
// (huge n) run in a child process (a gtest death test), so that a crash
// fails the test instead of killing the suite.
#pragma once

#include "TestUtils.h"

#include <faiss/Index.h>
#include <faiss/impl/FaissException.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace faiss_ext {
namespace test {

/// ntotal and the results of one search, to tell whether an index changed.
struct IndexSnapshot {
    int64_t ntotal = 0;
    std::vector<float> D;
    std::vector<int64_t> I;
};

/// The snapshot of idx for queries q (nq x idx.d) at k (no search while the
/// index is untrained).
inline IndexSnapshot snapshotOf(const faiss::Index& idx, const std::vector<float>& q, int64_t k,
                                const faiss::SearchParameters* params = nullptr) {
    IndexSnapshot s;
    s.ntotal = idx.ntotal;
    if (!idx.is_trained || idx.d <= 0) return s;
    const int64_t nq = int64_t(q.size()) / idx.d;
    s.D.resize(size_t(nq * k));
    s.I.resize(size_t(nq * k));
    idx.search(nq, q.data(), k, s.D.data(), s.I.data(), params);
    return s;
}

/// Whether two snapshots are equal, distances compared bit for bit.
inline bool sameSnapshot(const IndexSnapshot& a, const IndexSnapshot& b) {
    return a.ntotal == b.ntotal && a.I == b.I && a.D.size() == b.D.size() &&
           (a.D.empty() || std::memcmp(a.D.data(), b.D.data(), a.D.size() * sizeof(float)) == 0);
}

/// Runs f. "" when it threw a faiss::FaissException whose message contains
/// every needle; else what happened instead (no exception, another
/// exception, a message without a needle).
inline std::string refusalProblem(const std::function<void()>& f,
                                  const std::vector<std::string>& needles) {
    try {
        f();
    } catch (const faiss::FaissException& e) {
        const std::string msg = e.what();
        for (const std::string& n : needles)
            if (msg.find(n) == std::string::npos)
                return "the message lacks '" + n + "': " + msg;
        return "";
    } catch (const std::exception& e) {
        return std::string("not a faiss::FaissException: ") + e.what();
    } catch (...) {
        return "an exception that is not a std::exception";
    }
    return "no exception";
}

/// Expects f to throw a faiss::FaissException naming every needle, and idx
/// to give the same snapshot (queries q, k) afterwards.
inline void expectRefused(const faiss::Index& idx, const std::vector<float>& q, int64_t k,
                          const std::string& what, const std::vector<std::string>& needles,
                          const std::function<void()>& f,
                          const faiss::SearchParameters* params = nullptr) {
    const IndexSnapshot before = snapshotOf(idx, q, k, params);
    const std::string problem = refusalProblem(f, needles);
    EXPECT_EQ(problem, "") << what;
    EXPECT_TRUE(sameSnapshot(before, snapshotOf(idx, q, k, params)))
        << what << ": the index changed (ntotal " << before.ntotal << " -> " << idx.ntotal
        << ")";
}

/// Body of a death test: runs f in the child and exits with status 0,
/// printing "refused: <message>", when f throws a faiss::FaissException
/// containing `needle` and unchanged() still holds; otherwise prints what
/// happened and exits non-zero. A crash in f is a death by signal, which
/// the EXPECT_EXIT of EXPECT_REFUSED_IN_CHILD reports with this output.
[[noreturn]] inline void refuseOrExit(const std::function<void()>& f, const std::string& needle,
                                      const std::function<bool()>& unchanged) {
    const std::string problem = refusalProblem(f, {needle});
    if (!problem.empty()) {
        std::fprintf(stderr, "not refused cleanly: %s\n", problem.c_str());
        std::_Exit(2);
    }
    if (!unchanged()) {
        std::fprintf(stderr, "refused, but the index changed\n");
        std::_Exit(3);
    }
    std::fprintf(stderr, "refused: ok\n");
    std::_Exit(0);
}

/// FAISS_EXT_TEST_IN_PROCESS set (scripts/device/device-sanitize.sh sets it):
/// EXPECT_REFUSED_IN_CHILD runs in this process. compute-sanitizer does not
/// follow gtest's re-executed death-test children (they hang there), and a
/// crash still fails the test, only with the whole process.
inline bool refusalInProcess() {
    const char* v = std::getenv("FAISS_EXT_TEST_IN_PROCESS");
    return v && *v && std::string(v) != "0";
}

}  // namespace test
}  // namespace faiss_ext

/// Expects `stmt` to be refused with a faiss::FaissException containing
/// `needle` and `unchanged` (a bool() callable) to hold afterwards, run in
/// a child process so that a crash fails only this expectation. Needs the
/// death test style "threadsafe" (the child re-runs the test from its start:
/// safe with CUDA and OpenMP).
#define EXPECT_REFUSED_IN_CHILD(stmt, needle, unchanged)                                     \
    do {                                                                                     \
        if (::faiss_ext::test::refusalInProcess()) {                                         \
            EXPECT_EQ("", ::faiss_ext::test::refusalProblem([&] { stmt; }, {needle}));       \
            EXPECT_TRUE((unchanged)()) << "refused, but the index changed";                \
        } else {                                                                             \
            EXPECT_EXIT(::faiss_ext::test::refuseOrExit([&] { stmt; }, needle, unchanged),  \
                        ::testing::ExitedWithCode(0), "refused: ok");                        \
        }                                                                                    \
    } while (0)
