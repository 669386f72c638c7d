// The public k-selection faiss_ext::gpu::selectK, every algorithm, against
// std::partial_sort on the CPU (ties to the smaller column, NaN last),
// smallest and largest, host and device pointers, input ids, row streaming
// through a small temporary memory, bad input; chooseSelectAlgo; the name
// functions of SelectAlgo and VectorStorage.
#include "DeviceArray.h"
#include "TestUtils.h"

#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuSelect.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/select/MergeQueue.h"

#include <faiss/impl/FaissException.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using faiss_ext::gpu::chooseSelectAlgo;
using faiss_ext::gpu::SelectAlgo;
using faiss_ext::gpu::selectAlgoName;
using faiss_ext::gpu::selectK;
using faiss_ext::gpu::SelectKOptions;
using faiss_ext::gpu::StandardGpuResources;
using faiss_ext::gpu::VectorStorage;
using namespace faiss_ext::test;

namespace {

const SelectAlgo kAlgos[] = {SelectAlgo::Auto, SelectAlgo::QuickMultiSelect, SelectAlgo::MergeQueue,
                             SelectAlgo::THHeap};

bool isConcrete(SelectAlgo a) {
    return a == SelectAlgo::QuickMultiSelect || a == SelectAlgo::MergeQueue ||
           a == SelectAlgo::THHeap;
}

/// Row contents. Mixed: row r takes the pattern Random, FewValues, NaNInf,
/// AllEqual by r % 4.
enum class Pattern { Mixed, Random, FewValues, NaNInf, AllEqual };

const char* patternName(Pattern p) {
    switch (p) {
        case Pattern::Mixed:
            return "mixed";
        case Pattern::Random:
            return "random";
        case Pattern::FewValues:
            return "few-values";
        case Pattern::NaNInf:
            return "nan-inf";
        case Pattern::AllEqual:
            return "all-equal";
    }
    return "?";
}

std::string describe(SelectAlgo algo, int64_t rows, int64_t n, int64_t k, bool largest, Pattern p,
                     const std::string& more = "") {
    std::ostringstream s;
    s << "algo=" << selectAlgoName(algo) << " rows=" << rows << " n=" << n << " k=" << k
      << (largest ? " largest" : " smallest") << " pattern=" << patternName(p) << " seed=" << kSeed
      << (more.empty() ? "" : " ") << more;
    return s.str();
}

/// rows x n values; never 0 (so -0 / +0 never meet); NaN is the one quiet NaN.
std::vector<float> makeMatrix(int64_t rows, int64_t n, Pattern p, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-10.f, 10.f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    const float few[] = {-1.5f, 0.5f, 2.5f};
    std::vector<float> v(size_t(rows) * n);
    for (int64_t r = 0; r < rows; ++r) {
        Pattern rp = p == Pattern::Mixed ? Pattern(1 + r % 4) : p;
        for (int64_t j = 0; j < n; ++j) {
            float x = u(rng);
            if (x == 0.f) x = 0.5f;
            if (rp == Pattern::FewValues) x = few[rng() % 3];
            if (rp == Pattern::AllEqual) x = 1.25f;
            if (rp == Pattern::NaNInf) {
                uint64_t c = rng() % 100;
                if (c < 5)
                    x = nan;
                else if (c < 7)
                    x = inf;
                else if (c < 9)
                    x = -inf;
            }
            v[size_t(r) * n + j] = x;
        }
    }
    return v;
}

/// The CPU answer: per row, the first kmax columns by std::partial_sort in
/// the documented order: ascending (descending when largest) values, ties
/// to the smaller column, NaN after every number.
std::vector<int32_t> referenceOrder(const std::vector<float>& v, int64_t rows, int64_t n,
                                    int64_t kmax, bool largest) {
    std::vector<int32_t> out(size_t(rows) * kmax);
    parallelFor(rows, [&](int64_t r0, int64_t r1) {
        std::vector<int32_t> cols(n);
        for (int64_t r = r0; r < r1; ++r) {
            const float* row = v.data() + size_t(r) * n;
            for (int64_t j = 0; j < n; ++j) cols[j] = int32_t(j);
            std::partial_sort(cols.begin(), cols.begin() + kmax, cols.end(),
                              [&](int32_t a, int32_t b) {
                                  float va = row[a], vb = row[b];
                                  bool na = std::isnan(va), nb = std::isnan(vb);
                                  if (na || nb) return na != nb ? nb : a < b;
                                  if (va != vb) return largest ? va > vb : va < vb;
                                  return a < b;
                              });
            std::copy(cols.begin(), cols.begin() + kmax, out.begin() + r * kmax);
        }
    });
    return out;
}

bool sameValue(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

/// outV / outI (either may be null): rows x k against the reference order
/// (rows x kmax); ids are inIds[r, col] when given, else col.
std::string checkSelect(int64_t rows, int64_t n, int64_t k, const std::vector<float>& v,
                        const std::vector<int32_t>& order, int64_t kmax, const float* outV,
                        const int64_t* outI, const int64_t* inIds) {
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < k; ++j) {
            const int64_t col = order[size_t(r) * kmax + j];
            const float wantV = v[size_t(r) * n + col];
            const int64_t wantI = inIds ? inIds[size_t(r) * n + col] : col;
            const size_t o = size_t(r) * k + j;
            bool badI = outI && outI[o] != wantI;
            bool badV = outV && !sameValue(outV[o], wantV);
            if (badI || badV) {
                std::ostringstream m;
                m << "row " << r << " rank " << j << ": got (";
                if (outV) m << outV[o];
                m << ", ";
                if (outI) m << outI[o];
                m << ") expected (" << wantV << ", " << wantI << ") [column " << col
                  << (badI ? "; index differs" : "") << (badV ? "; value differs" : "")
                  << "; ties go to the smaller column, NaN last]";
                return m.str();
            }
        }
    }
    return "";
}

template <typename F>
bool noThrow(F f) {
    try {
        f();
        return true;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "threw: " << e.what();
    } catch (...) {
        ADD_FAILURE() << "threw a non-std exception";
    }
    return false;
}

struct Shape {
    int64_t rows, n;
};

const Shape kShapes[] = {{1, 1}, {7, 100}, {2048, 8192}, {64, 100000}};

/// k in {1, 32, 33, 2049, n} where k <= n.
std::vector<int64_t> gridKs(int64_t n) {
    std::vector<int64_t> ks;
    for (int64_t k : {int64_t(1), int64_t(32), int64_t(33), int64_t(2049), n})
        if (k <= n && std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
    return ks;
}

/// The rows a call selects over: all of them, or sanitizer-sized
/// (smallTests()) the first 4 (every row kind of Pattern::Mixed), unless
/// fewer rows take another path: Auto's pick (chooseSelectAlgo: the merge
/// queue from 2048 rows) or quick multi-select's one warp per row (from 16
/// rows per multiprocessor, QuickMultiSelectWarp.cu).
int64_t rowsToRun(int64_t rows, int64_t n, int64_t k, SelectAlgo algo) {
    const int64_t few = std::min<int64_t>(rows, 4);
    if (!smallTests() || few == rows) return rows;
    const SelectAlgo picked = algo == SelectAlgo::Auto ? chooseSelectAlgo(rows, n, k) : algo;
    if (algo == SelectAlgo::Auto && chooseSelectAlgo(few, n, k) != picked) return rows;
    if (picked == SelectAlgo::QuickMultiSelect) {
        int dev = 0, sms = 0;
        EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);
        EXPECT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
        if ((rows >= int64_t(sms) * 16) != (few >= int64_t(sms) * 16)) return rows;
    }
    return few;
}

/// Ids of the input entries that decrease with the column, so that "ties to
/// the smaller column" and "ties to the smaller id" differ.
std::vector<int64_t> makeInIds(int64_t rows, int64_t n) {
    std::vector<int64_t> ids(size_t(rows) * n);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) ids[size_t(r) * n + j] = (r << 40) + 3 * (n - 1 - j) + 5;
    return ids;
}

}  // namespace

// Every shape, k, direction and algorithm; host pointers in and out.
TEST(SelectK, MatchesPartialSortEveryAlgo) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (const Shape& s : kShapes) {
        std::vector<Pattern> patterns = {Pattern::Mixed};
        if (s.rows * s.n <= 1000)
            patterns = {Pattern::Mixed, Pattern::Random, Pattern::FewValues, Pattern::NaNInf,
                        Pattern::AllEqual};
        const std::vector<int64_t> ks = gridKs(s.n);
        const int64_t kmax = ks.back();
        for (Pattern p : patterns) {
            auto v = makeMatrix(s.rows, s.n, p, kSeed + uint64_t(s.n) + int(p));
            for (bool largest : {false, true}) {
                auto order = referenceOrder(v, s.rows, s.n, kmax, largest);
                for (SelectAlgo algo : kAlgos) {
                    for (int64_t k : ks) {
                        // All rows, or sanitizer-sized a prefix (rowsToRun).
                        const int64_t rows = rowsToRun(s.rows, s.n, k, algo);
                        SCOPED_TRACE(describe(algo, rows, s.n, k, largest, p, "host pointers"));
                        SelectKOptions opt;
                        opt.algo = algo;
                        std::vector<float> outV(size_t(rows) * k, -7.f);
                        std::vector<int64_t> outI(size_t(rows) * k, -7);
                        if (algo == SelectAlgo::MergeQueue &&
                            k > faiss_ext::gpu::select::kMergeQueueMaxK) {
                            // The merge queue lives in shared memory: past its
                            // limit a clear error (not said in GpuSelect.h).
                            EXPECT_THROW(selectK(&res, v.data(), rows, s.n, k, largest,
                                                 outV.data(), outI.data(), opt),
                                         faiss::FaissException);
                            continue;
                        }
                        if (!noThrow([&] {
                                selectK(&res, v.data(), rows, s.n, k, largest, outV.data(),
                                        outI.data(), opt);
                            }))
                            continue;
                        EXPECT_EQ(checkSelect(rows, s.n, k, v, order, kmax, outV.data(),
                                              outI.data(), nullptr),
                                  "");
                    }
                }
            }
        }
    }
}

// Values, outputs and input ids each on the host or the device.
TEST(SelectK, HostAndDevicePointersWithInIndices) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    struct Case {
        Shape s;
        int64_t k;
    };
    for (const Case& c : {Case{{7, 100}, 33}, Case{{2048, 8192}, 2049}}) {
        // k > 32: Auto picks quick multi-select for any rows, so one count serves every algo.
        const int64_t rows = rowsToRun(c.s.rows, c.s.n, c.k, SelectAlgo::Auto);
        const int64_t n = c.s.n, k = c.k;
        auto v = makeMatrix(rows, n, Pattern::Mixed, kSeed + 31);
        auto ids = makeInIds(rows, n);
        DeviceArray<float> dv(v.size()), doV(size_t(rows) * k);
        DeviceArray<int64_t> dids(ids.size()), doI(size_t(rows) * k);
        ASSERT_TRUE(dv.p && doV.p && dids.p && doI.p);
        dv.upload(v.data());
        dids.upload(ids.data());
        for (bool largest : {false, true}) {
            auto order = referenceOrder(v, rows, n, k, largest);
            for (SelectAlgo algo : kAlgos) {
                for (int valuesOnDevice : {0, 1}) {
                    for (int outOnDevice : {0, 1}) {
                        for (int idsWhere : {0, 1, 2}) {  // none, host, device
                            std::string more = std::string("values on ") +
                                               (valuesOnDevice ? "device" : "host") +
                                               ", outputs on " + (outOnDevice ? "device" : "host") +
                                               ", inIndices " +
                                               (idsWhere == 0   ? "none"
                                                : idsWhere == 1 ? "on host"
                                                                : "on device");
                            SCOPED_TRACE(describe(algo, rows, n, k, largest, Pattern::Mixed, more));
                            SelectKOptions opt;
                            opt.algo = algo;
                            opt.inIndices = idsWhere == 0   ? nullptr
                                            : idsWhere == 1 ? ids.data()
                                                            : dids.p;
                            std::vector<float> outV(size_t(rows) * k, -7.f);
                            std::vector<int64_t> outI(size_t(rows) * k, -7);
                            if (outOnDevice) {
                                ASSERT_EQ(cudaMemset(doV.p, 0xff, sizeof(float) * rows * k),
                                          cudaSuccess);
                                ASSERT_EQ(cudaMemset(doI.p, 0xff, sizeof(int64_t) * rows * k),
                                          cudaSuccess);
                            }
                            if (!noThrow([&] {
                                    selectK(&res, valuesOnDevice ? dv.p : v.data(), rows, n, k,
                                            largest, outOnDevice ? doV.p : outV.data(),
                                            outOnDevice ? doI.p : outI.data(), opt);
                                }))
                                continue;
                            if (outOnDevice) {
                                outV = doV.download();
                                outI = doI.download();
                            }
                            EXPECT_EQ(checkSelect(rows, n, k, v, order, k, outV.data(), outI.data(),
                                                  idsWhere ? ids.data() : nullptr),
                                      "");
                        }
                    }
                }
            }
        }
    }
}

// "either may be null when not wanted".
TEST(SelectK, EitherOutputMayBeNull) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (const Shape& full : {Shape{7, 100}, Shape{64, 100000}}) {
        const int64_t k = 33;
        // k > 32: Auto picks quick multi-select for any rows, so one count serves every algo.
        const Shape s{rowsToRun(full.rows, full.n, k, SelectAlgo::Auto), full.n};
        auto v = makeMatrix(s.rows, s.n, Pattern::Mixed, kSeed + 41);
        for (bool largest : {false, true}) {
            auto order = referenceOrder(v, s.rows, s.n, k, largest);
            for (SelectAlgo algo : kAlgos) {
                SCOPED_TRACE(describe(algo, s.rows, s.n, k, largest, Pattern::Mixed));
                SelectKOptions opt;
                opt.algo = algo;
                std::vector<float> outV(size_t(s.rows) * k, -7.f);
                std::vector<int64_t> outI(size_t(s.rows) * k, -7);
                if (noThrow([&] {
                        selectK(&res, v.data(), s.rows, s.n, k, largest, nullptr, outI.data(), opt);
                    })) {
                    EXPECT_EQ(
                        checkSelect(s.rows, s.n, k, v, order, k, nullptr, outI.data(), nullptr), "")
                        << "values not wanted";
                }
                if (noThrow([&] {
                        selectK(&res, v.data(), s.rows, s.n, k, largest, outV.data(), nullptr, opt);
                    })) {
                    EXPECT_EQ(
                        checkSelect(s.rows, s.n, k, v, order, k, outV.data(), nullptr, nullptr), "")
                        << "indices not wanted";
                }
            }
        }
    }
}

// Host matrices larger than the temporary memory (8 MiB here, for 64 MiB and
// 25.6 MB of values) are streamed in row tiles: same answers.
TEST(SelectK, HostMatrixLargerThanTempMemoryIsStreamed) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    struct Case {
        Shape s;
        size_t tempBytes;
    };
    // Sanitizer-sized: 16 and 8 rows (0.5 and 3.2 MB) through 384 KiB and
    // 2.5 MiB: still larger, and still several row blocks for every algo and k.
    const size_t full = size_t(8) << 20;
    for (const Case& c : {Case{{sized<int64_t>(2048, 16), 8192}, sized(full, size_t(384) << 10)},
                          Case{{sized<int64_t>(64, 8), 100000}, sized(full, size_t(5) << 19)}}) {
        const Shape& s = c.s;
        res.setTempMemory(c.tempBytes);
        auto v = makeMatrix(s.rows, s.n, Pattern::Mixed, kSeed + 51);
        for (bool largest : {false, true}) {
            auto order = referenceOrder(v, s.rows, s.n, 2049, largest);
            for (SelectAlgo algo : kAlgos) {
                for (int64_t k : {int64_t(33), int64_t(2049)}) {
                    SCOPED_TRACE(describe(algo, s.rows, s.n, k, largest, Pattern::Mixed,
                                          std::to_string(c.tempBytes) +
                                                  " bytes of temporary memory"));
                    SelectKOptions opt;
                    opt.algo = algo;
                    std::vector<float> outV(size_t(s.rows) * k, -7.f);
                    std::vector<int64_t> outI(size_t(s.rows) * k, -7);
                    if (!noThrow([&] {
                            selectK(&res, v.data(), s.rows, s.n, k, largest, outV.data(),
                                    outI.data(), opt);
                        }))
                        continue;
                    EXPECT_EQ(checkSelect(s.rows, s.n, k, v, order, 2049, outV.data(), outI.data(),
                                          nullptr),
                              "");
                }
            }
        }
    }
}

// k = 0, k < 0, k > n, null values, rows < 0, n <= 0, no provider, an unknown
// algorithm: faiss::FaissException. k = n is fine.
TEST(SelectK, BadInputThrows) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t rows = 7, n = 100;
    auto v = makeMatrix(rows, n, Pattern::Random, kSeed + 61);
    std::vector<float> outV(size_t(rows) * (n + 1));
    std::vector<int64_t> outI(size_t(rows) * (n + 1));
    float* ov = outV.data();
    int64_t* oi = outI.data();
    for (SelectAlgo algo : kAlgos) {
        SCOPED_TRACE(std::string("algo=") + selectAlgoName(algo));
        SelectKOptions opt;
        opt.algo = algo;
        EXPECT_THROW(selectK(&res, v.data(), rows, n, 0, false, ov, oi, opt),
                     faiss::FaissException);
        EXPECT_THROW(selectK(&res, v.data(), rows, n, -1, false, ov, oi, opt),
                     faiss::FaissException);
        EXPECT_THROW(selectK(&res, v.data(), rows, n, n + 1, true, ov, oi, opt),
                     faiss::FaissException);
        EXPECT_THROW(selectK(&res, nullptr, rows, n, 5, false, ov, oi, opt), faiss::FaissException);
        EXPECT_THROW(selectK(&res, v.data(), -1, n, 5, false, ov, oi, opt), faiss::FaissException);
        EXPECT_THROW(selectK(&res, v.data(), rows, 0, 1, false, ov, oi, opt),
                     faiss::FaissException);
        EXPECT_THROW(selectK(&res, v.data(), rows, -5, 1, false, ov, oi, opt),
                     faiss::FaissException);
        EXPECT_THROW(selectK(nullptr, v.data(), rows, n, 5, false, ov, oi, opt),
                     faiss::FaissException);
        EXPECT_NO_THROW(selectK(&res, v.data(), rows, n, n, false, ov, oi, opt));
    }
    for (int bad : {9, -1, 4}) {
        SelectKOptions opt;
        opt.algo = static_cast<SelectAlgo>(bad);
        EXPECT_THROW(selectK(&res, v.data(), rows, n, 5, false, ov, oi, opt), faiss::FaissException)
            << "algo=" << bad;
    }
}

// chooseSelectAlgo always names a concrete algorithm.
TEST(SelectK, ChooseSelectAlgoIsConcrete) {
    FAISS_EXT_REQUIRE_GPU();
    struct Q {
        int64_t rows, n, k, d;
    };
    for (const Q& q :
         {Q{1, 1, 1, 0}, Q{7, 100, 33, 0}, Q{2048, 8192, 2049, 0}, Q{64, 100000, 100000, 0},
          Q{10000, 1000000, 10, 128}, Q{1, 100000000, 8192, 16}, Q{100000, 8192, 1, 960},
          Q{1000, 1000000, 1024, 128}}) {
        SelectAlgo a = SelectAlgo::Auto;
        std::string what = "rows=" + std::to_string(q.rows) + " n=" + std::to_string(q.n) +
                           " k=" + std::to_string(q.k) + " d=" + std::to_string(q.d);
        ASSERT_NO_THROW(a = chooseSelectAlgo(q.rows, q.n, q.k, q.d)) << what;
        EXPECT_TRUE(isConcrete(a)) << what << ": got " << int(a);
        if (q.d == 0) {
            SelectAlgo b = chooseSelectAlgo(q.rows, q.n, q.k);
            EXPECT_EQ(a, b) << what << ": d defaults to 0";
        }
    }
}

// The name functions (pure host code: they run without a GPU too).
TEST(SelectModesNames, SelectAlgoAndVectorStorageNames) {
    using faiss_ext::gpu::selectAlgoFromName;
    using faiss_ext::gpu::vectorStorageName;
    EXPECT_STREQ(selectAlgoName(SelectAlgo::Auto), "auto");
    EXPECT_STREQ(selectAlgoName(SelectAlgo::QuickMultiSelect), "quick-multi-select");
    EXPECT_STREQ(selectAlgoName(SelectAlgo::MergeQueue), "merge-queue");
    EXPECT_STREQ(selectAlgoName(SelectAlgo::THHeap), "th-heap");
    for (SelectAlgo a : kAlgos) EXPECT_EQ(selectAlgoFromName(selectAlgoName(a)), a) << int(a);
    EXPECT_EQ(selectAlgoFromName("qms"), SelectAlgo::QuickMultiSelect);
    EXPECT_EQ(selectAlgoFromName("mq"), SelectAlgo::MergeQueue);
    EXPECT_EQ(selectAlgoFromName("thheap"), SelectAlgo::THHeap);
    EXPECT_THROW(selectAlgoFromName("bitonic"), faiss::FaissException);
    EXPECT_THROW(selectAlgoFromName(""), faiss::FaissException);
    EXPECT_STREQ(vectorStorageName(VectorStorage::Auto), "auto");
    EXPECT_STREQ(vectorStorageName(VectorStorage::Device), "device");
    EXPECT_STREQ(vectorStorageName(VectorStorage::Host), "host");
}
