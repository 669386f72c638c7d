// Helpers shared by the test suites: seeded data, the comparison with FAISS's
// exact search (ties allowed), and the GPU skip.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace faiss_ext {
namespace test {

/// Seed of a test; printed in failure messages.
constexpr uint64_t kSeed = 1234;

/// n x d floats uniform in [lo, hi), from `seed`.
std::vector<float> randomVectors(int64_t n, int d, uint64_t seed, float lo = -1.f, float hi = 1.f);

/// n x d floats drawn around `clusters` centres (clustered, like real data).
std::vector<float> clusteredVectors(int64_t n, int d, int clusters, uint64_t seed);

/// Waits for the device after a cudaMemcpy from pageable host memory: that
/// copy may return before the data land, and our indexes read device
/// inputs on their own non-blocking stream (docs/resources.md). Without it,
/// three test processes sharing one GPU once made a search read
/// half-copied queries.
void syncAfterHostCopy();

/// Whether a usable GPU is present (cached).
bool haveGpu();

/// How many GPUs this process sees (0 without one).
int gpuCount();

/// Sanitizer-sized tests: FAISS_EXT_TEST_SMALL=1 (scripts/device/device-sanitize.sh
/// sets it for racecheck, whose cost grows with every shared-memory access)
/// makes the heavy GPU tests run on smaller inputs that take the same code
/// paths: the same modes, metrics, k values, data kinds and dimensions, and
/// the same relations that pick a path (tiled or not, host or device
/// storage, k against n, every injected failure point). Only row counts,
/// query counts and repetitions shrink. Off by default: CI and plain runs
/// use the full sizes. Prints a line to stderr the first time it is asked.
bool smallTests();

/// `full`, or `small` under FAISS_EXT_TEST_SMALL=1.
template <class T>
T sized(T full, T small) {
    return smallTests() ? small : full;
}

/// One part of a test, for parallel sanitizer runs: FAISS_EXT_TEST_PART=P/N
/// (scripts/device/device-sanitize.sh sets it for a list entry "Name parts=N", one
/// process per part) makes the tests that support it run only their units
/// (a mode, a metric, a data kind, an injection point...) numbered u with
/// u % N == P; the N processes together run the whole test. Unset: one part
/// of one, every unit. Checks that need every unit (say, "some injected
/// failure threw") are made only then (see wholeTest()). A malformed value
/// throws std::invalid_argument.
struct TestPart {
    int index = 0;
    int count = 1;
};
const TestPart& testPart();

/// Whether this process runs the whole test (no FAISS_EXT_TEST_PART, or 0/1).
inline bool wholeTest() {
    return testPart().count == 1;
}

/// Numbers the units of a test in the order it meets them: `if
/// (!units.next()) continue;` once per unit, at the same place in every part.
/// In a part or a sanitizer-sized run it prints to stderr when each of its
/// units starts (seconds since the test's PartUnits was made), so that a run
/// cut off by a time limit shows how far it got and what each unit cost.
class PartUnits {
   public:
    /// The units of `part` (this process's part by default).
    explicit PartUnits(TestPart part = testPart()) : part_(part) {}

    /// Whether the next unit is this part's.
    bool next();

    /// Whether any of the next `count` units is this part's (without taking
    /// them): lets a test skip the set-up shared by a block of units.
    bool anyOfNext(int64_t count) const;

    /// Passes over the next `count` units (a block none of which is ours).
    void skip(int64_t count) { u_ += count; }

   private:
    TestPart part_;
    int64_t u_ = 0;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// In a part or a sanitizer-sized run, prints to stderr "[faiss_ext tests]
/// <what> at +T s" (seconds since the process's first call): marks the phases
/// of a test that has no units, so that a tool's message between two marks
/// (or a time limit) places itself in the test. Silent in plain runs.
void testPhase(const char* what);

/// Directory of the shared real data sets: $FAISS_EXT_DATA_DIR, else
/// ../shared/data beside the checkout ("" when absent).
std::string dataDir();

/// Reads an .fvecs file (all rows); *d receives the dimension. Throws if unreadable.
std::vector<float> readFvecs(const std::string& path, int* d);

/// Checks that (D, I) is a correct exact k-NN result given the reference
/// (refD, refI) from faiss::IndexFlat: for each row, the distances agree
/// within tolerance rank by rank, and every id differing from the
/// reference's has a distance tied (within tolerance) with the reference's
/// at that rank. `larger_is_better` for inner product metrics. Returns an
/// empty string on success, else a description of the first mismatch.
std::string compareKnn(int64_t nq, int64_t k, const float* D, const int64_t* I,
                       const float* refD, const int64_t* refI, bool larger_is_better,
                       float relTol = 1e-4f, float absTol = 1e-4f);

/// A temporary file name (/tmp/faiss_ext_<tag>_XXXXXX, created empty),
/// removed at the end of the scope.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string& tag = "test");
    ~TempFile();
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
};

/// Runs f(begin, end) over [0, n) in contiguous parts, one thread per core
/// (the tests' host references of large selections).
template <typename F>
void parallelFor(int64_t n, F f) {
    int64_t t = std::max<int64_t>(1, std::thread::hardware_concurrency());
    t = std::max<int64_t>(1, std::min(t, n));
    const int64_t chunk = (n + t - 1) / t;
    std::vector<std::thread> threads;
    for (int64_t i = 0; i < t; ++i) {
        const int64_t b = i * chunk, e = std::min(n, b + chunk);
        if (b < e) threads.emplace_back([=, &f] { f(b, e); });
    }
    for (auto& th : threads) th.join();
}

}  // namespace test
}  // namespace faiss_ext

/// Skips the test visibly when no GPU is present.
#define FAISS_EXT_REQUIRE_GPU()                                    \
    do {                                                           \
        if (!::faiss_ext::test::haveGpu()) {                       \
            GTEST_SKIP() << "no GPU on this machine: GPU test skipped"; \
        }                                                          \
    } while (0)

/// Skips the test visibly when fewer than n GPUs are visible (none: as
/// FAISS_EXT_REQUIRE_GPU).
#define FAISS_EXT_REQUIRE_GPUS(n)                                                      \
    do {                                                                               \
        FAISS_EXT_REQUIRE_GPU();                                                       \
        const int visibleGpus_ = ::faiss_ext::test::gpuCount();                        \
        if (visibleGpus_ < (n)) {                                                      \
            GTEST_SKIP() << "needs " << (n) << " GPUs (" << visibleGpus_ << " visible)"; \
        }                                                                              \
    } while (0)
