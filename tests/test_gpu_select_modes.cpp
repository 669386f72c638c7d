// Every k-selection mode of GpuIndexQuickSelectFlat (QuickMultiSelect,
// MergeQueue, THHeap, Auto), chosen through GpuIndexQuickSelectFlatConfig or
// SearchParametersQuickSelectFlat, against CPU references:
//  - a grid of (k, nb, nq) against faiss::IndexFlatL2 / IndexFlatIP (ties
//    aside), padding past ntotal, many exact copies, all-equal vectors (ids
//    must be 0..k-1), and integer-valued data whose every distance is exact
//    in float, so that the order by (distance, id) is unique and every mode
//    must return exactly the same ids as an exact CPU oracle (and each other);
//  - the merge queue's group sizes and the TH-heap's sample factors;
//  - tiled (small temporary memory) = untiled, per mode;
//  - vectors kept in host memory (VectorStorage::Host, and Auto past
//    StandardGpuResources::setDeviceMemoryLimit) = device storage, per mode;
//  - knnGraph against brute force, duplicates, device outputs, tiling, bad input;
//  - resolveSelectAlgo never answers Auto; unknown algorithms throw.
#include "DeviceArray.h"
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuSelect.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/select/MergeQueue.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::GpuIndexQuickSelectFlatConfig;
using faiss_ext::gpu::SearchParametersQuickSelectFlat;
using faiss_ext::gpu::selectAlgoName;
using faiss_ext::gpu::SelectAlgo;
using faiss_ext::gpu::StandardGpuResources;
using faiss_ext::gpu::VectorStorage;
using namespace faiss_ext::test;

namespace {

const SelectAlgo kModes[] = {SelectAlgo::QuickMultiSelect, SelectAlgo::MergeQueue,
                             SelectAlgo::THHeap, SelectAlgo::Auto};

bool isConcrete(SelectAlgo a) {
    return a == SelectAlgo::QuickMultiSelect || a == SelectAlgo::MergeQueue ||
           a == SelectAlgo::THHeap;
}

const char* metricName(FlatMetric m) { return m == FlatMetric::L2 ? "L2" : "IP"; }

std::string describe(SelectAlgo mode, int64_t k, int64_t nb, int64_t nq, int d, FlatMetric m,
                     const char* data) {
    std::ostringstream s;
    s << "mode=" << selectAlgoName(mode) << " k=" << k << " nb=" << nb << " nq=" << nq << " d=" << d
      << " metric=" << metricName(m) << " data=" << data << " seed=" << kSeed;
    return s.str();
}

/// A k-NN result or reference: nq rows of k entries.
struct Knn {
    int64_t nq = 0, k = 0;
    std::vector<float> D;
    std::vector<int64_t> I;
};

/// The first n rows of a k-NN result.
Knn firstRows(const Knn& r, int64_t n) {
    Knn h;
    h.nq = n;
    h.k = r.k;
    h.D.assign(r.D.begin(), r.D.begin() + n * r.k);
    h.I.assign(r.I.begin(), r.I.begin() + n * r.k);
    return h;
}

// ---------------------------------------------------------------- data

/// n x d integers in [-range, range] stored as floats. Every squared L2
/// distance and inner product of such vectors (below 2^24) is exact in float
/// whatever the GEMM kernel, tiling or summation order, so the order by
/// (distance, id) is unique and known exactly on the CPU; distances repeat a
/// lot, so ties (broken by the smaller id) are everywhere.
std::vector<float> integerVectors(int64_t n, int d, uint64_t seed, int range = 8) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> u(-range, range);
    std::vector<float> v(size_t(n) * d);
    for (auto& x : v) x = float(u(rng));
    return v;
}

/// Multiples of 1/8 in [-1, 1]: exact arithmetic against all-0.5 vectors.
std::vector<float> dyadicVectors(int64_t n, int d, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> u(-8, 8);
    std::vector<float> v(size_t(n) * d);
    for (auto& x : v) x = float(u(rng)) / 8.f;
    return v;
}

/// n vectors, each one of `distinct` uniform random vectors (many exact copies).
std::vector<float> copiesOf(const std::vector<float>& distinct, int64_t n, int d, uint64_t seed) {
    const int64_t u = int64_t(distinct.size()) / d;
    std::mt19937_64 rng(seed);
    std::vector<float> v(size_t(n) * d);
    for (int64_t i = 0; i < n; ++i) {
        int64_t s = int64_t(rng() % uint64_t(u));
        std::copy(distinct.begin() + s * d, distinct.begin() + (s + 1) * d, v.begin() + i * d);
    }
    return v;
}

enum class Data { Random, Duplicates, AllEqual, Integer };

const char* dataName(Data x) {
    switch (x) {
        case Data::Random:
            return "random";
        case Data::Duplicates:
            return "duplicates";
        case Data::AllEqual:
            return "all-equal";
        case Data::Integer:
            return "integer";
    }
    return "?";
}

void makeData(Data kind, int64_t nb, int64_t nq, int d, uint64_t seed, std::vector<float>* xb,
              std::vector<float>* xq) {
    switch (kind) {
        case Data::Random:
            *xb = randomVectors(nb, d, seed);
            *xq = randomVectors(nq, d, seed + 1);
            break;
        case Data::Duplicates: {
            // nb / 10 distinct vectors (about 10 exact copies each); half the
            // queries are copies of stored vectors (a block of ~0 distances).
            auto distinct = randomVectors(std::max<int64_t>(1, nb / 10), d, seed);
            *xb = copiesOf(distinct, nb, d, seed + 2);
            *xq = randomVectors(nq, d, seed + 1);
            auto same = copiesOf(distinct, nq, d, seed + 3);
            for (int64_t q = 0; q < nq; q += 2)
                std::copy(same.begin() + q * d, same.begin() + (q + 1) * d, xq->begin() + q * d);
            break;
        }
        case Data::AllEqual:
            xb->assign(size_t(nb) * d, 0.5f);
            *xq = dyadicVectors(nq, d, seed + 1);
            break;
        case Data::Integer:
            *xb = integerVectors(nb, d, seed);
            *xq = integerVectors(nq, d, seed + 1);
            break;
    }
}

// ---------------------------------------------------------------- references

/// Exact k-NN of integer-valued data (see integerVectors) ordered by
/// (distance, id): rows of min(kmax, candidates) entries; ranks past that are
/// padding. excludeSelf: query q is stored vector q and is not its own
/// neighbour (knnGraph's rule: by id, so copies of it still count).
Knn exactKnn(const std::vector<float>& xb, int64_t nb, const std::vector<float>& xq, int64_t nq,
             int d, int64_t kmax, bool ip, bool excludeSelf = false) {
    Knn r;
    r.nq = nq;
    r.k = std::max<int64_t>(0, std::min(kmax, nb - (excludeSelf ? 1 : 0)));
    r.D.resize(size_t(nq) * r.k);
    r.I.resize(size_t(nq) * r.k);
    std::vector<int32_t> ib(xb.size()), iq(xq.size());
    for (size_t i = 0; i < xb.size(); ++i) ib[i] = int32_t(std::lround(xb[i]));
    for (size_t i = 0; i < xq.size(); ++i) iq[i] = int32_t(std::lround(xq[i]));
    constexpr int64_t kOffset = int64_t(1) << 30;
    parallelFor(nq, [&](int64_t q0, int64_t q1) {
        std::vector<uint64_t> keys;
        keys.reserve(nb);
        for (int64_t q = q0; q < q1; ++q) {
            keys.clear();
            const int32_t* a = iq.data() + q * d;
            for (int64_t i = 0; i < nb; ++i) {
                if (excludeSelf && i == q) continue;
                const int32_t* b = ib.data() + i * d;
                int64_t s = 0;
                if (ip) {
                    for (int j = 0; j < d; ++j) s -= int64_t(a[j]) * b[j];
                } else {
                    for (int j = 0; j < d; ++j) s += int64_t(a[j] - b[j]) * (a[j] - b[j]);
                }
                keys.push_back((uint64_t(s + kOffset) << 32) | uint64_t(i));
            }
            if (r.k < int64_t(keys.size()))
                std::nth_element(keys.begin(), keys.begin() + r.k, keys.end());
            std::sort(keys.begin(), keys.begin() + r.k);
            for (int64_t j = 0; j < r.k; ++j) {
                int64_t s = int64_t(keys[j] >> 32) - kOffset;
                r.D[q * r.k + j] = float(ip ? -s : s);
                r.I[q * r.k + j] = int64_t(keys[j] & 0xffffffffu);
            }
        }
    });
    return r;
}

/// faiss::IndexFlat's k-NN at min(kmax, nb). A sorted k-NN list's prefix is a
/// k-NN list for a smaller k (up to ties, which the comparison allows), so
/// one reference serves every k of a grid and every mode.
Knn faissKnn(const std::vector<float>& xb, int64_t nb, const std::vector<float>& xq, int64_t nq,
             int d, int64_t kmax, bool ip) {
    Knn r;
    r.nq = nq;
    r.k = std::min(kmax, nb);
    r.D.resize(size_t(nq) * r.k);
    r.I.resize(size_t(nq) * r.k);
    faiss::IndexFlat index(d, ip ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2);
    index.add(nb, xb.data());
    index.search(nq, xq.data(), r.k, r.D.data(), r.I.data());
    return r;
}

/// The exact answer on all-equal stored vectors (every entry `value`): every
/// distance of a query ties, so the ids are 0 .. min(k, nb) - 1.
Knn allEqualKnn(const std::vector<float>& xq, int64_t nq, int d, int64_t nb, int64_t kmax, bool ip,
                float value) {
    Knn r;
    r.nq = nq;
    r.k = std::min(kmax, nb);
    r.D.resize(size_t(nq) * r.k);
    r.I.resize(size_t(nq) * r.k);
    for (int64_t q = 0; q < nq; ++q) {
        double s = 0;
        for (int j = 0; j < d; ++j) {
            double x = xq[q * d + j];
            s += ip ? x * value : (x - value) * (x - value);
        }
        for (int64_t j = 0; j < r.k; ++j) {
            r.D[q * r.k + j] = float(s);
            r.I[q * r.k + j] = j;
        }
    }
    return r;
}

// ---------------------------------------------------------------- checks

bool isWorst(float v, bool ip) { return ip ? v <= -FLT_MAX : v >= FLT_MAX; }

bool closeTo(float a, float b, float relTol, float absTol) {
    if (std::isinf(a) || std::isinf(b)) return a == b;
    return std::fabs(a - b) <= absTol + relTol * std::max(std::fabs(a), std::fabs(b));
}

std::string rankMessage(int64_t j, const float* d, const int64_t* id, int64_t kr, const float* rd,
                        const int64_t* rid, const char* why) {
    std::ostringstream m;
    m << "rank " << j << ": got (" << id[j] << ", " << d[j] << ")";
    if (j < kr) m << " expected (" << rid[j] << ", " << rd[j] << ")";
    m << " [" << why << "]";
    return m.str();
}

/// Per-id scratch of the tie-tolerant row check (stamps instead of clearing).
struct TieScratch {
    explicit TieScratch(int64_t nb) : refStamp(nb, -1), seenStamp(nb, -1), refDist(nb) {}
    std::vector<int64_t> refStamp, seenStamp;
    std::vector<float> refDist;
    int64_t next = 0;
};

/// compareKnn's rule in O(k) per row: a result row of k entries against a
/// reference row of kr <= k valid entries. Distances agree rank by rank,
/// ids are in range and distinct, the row is sorted, an id differing from the
/// reference's is a tie, and ranks >= kr are padding (id -1, worst distance:
/// +inf / FLT_MAX for L2, -inf / -FLT_MAX for IP).
std::string checkRowTies(TieScratch& s, int64_t nb, int64_t k, const float* d, const int64_t* id,
                         int64_t kr, const float* rd, const int64_t* rid, bool ip, float relTol,
                         float absTol) {
    const int64_t stamp = s.next++;
    for (int64_t t = 0; t < kr; ++t) {
        if (rid[t] >= 0 && rid[t] < nb) {
            s.refStamp[rid[t]] = stamp;
            s.refDist[rid[t]] = rd[t];
        }
    }
    for (int64_t j = 0; j < k; ++j) {
        auto fail = [&](const char* why) { return rankMessage(j, d, id, kr, rd, rid, why); };
        if (j >= kr) {
            if (id[j] != -1 || !isWorst(d[j], ip))
                return fail("padding expected: id -1 and the worst distance");
            continue;
        }
        if (id[j] < 0 || id[j] >= nb) return fail("id out of range");
        if (!closeTo(d[j], rd[j], relTol, absTol)) return fail("distance differs");
        if (s.seenStamp[id[j]] == stamp) return fail("duplicate id");
        s.seenStamp[id[j]] = stamp;
        if (j > 0 && !(ip ? d[j] <= d[j - 1] : d[j] >= d[j - 1])) return fail("not sorted");
        if (id[j] != rid[j]) {
            bool ok =
                (s.refStamp[id[j]] == stamp && closeTo(s.refDist[id[j]], d[j], relTol, absTol)) ||
                closeTo(d[j], rd[kr - 1], relTol, absTol);
            if (!ok) return fail("id differs, not a tie");
        }
    }
    return "";
}

/// Exact check: the same ids rank by rank, distances equal (to float
/// rounding of an exact value), padding past kr.
std::string checkRowExact(int64_t k, const float* d, const int64_t* id, int64_t kr, const float* rd,
                          const int64_t* rid, bool ip) {
    for (int64_t j = 0; j < k; ++j) {
        auto fail = [&](const char* why) { return rankMessage(j, d, id, kr, rd, rid, why); };
        if (j >= kr) {
            if (id[j] != -1 || !isWorst(d[j], ip))
                return fail("padding expected: id -1 and the worst distance");
            continue;
        }
        if (id[j] != rid[j]) return fail("id differs (the order by (distance, id) is exact here)");
        if (!closeTo(d[j], rd[j], 1e-6f, 1e-6f)) return fail("distance differs");
    }
    return "";
}

/// got (k per row) against a reference of ref.k per row (its first
/// min(k, ref.k) entries; further ranks must be padding). "" when equal.
std::string compareToRef(const Knn& got, const Knn& ref, int64_t nb, bool ip, bool exact,
                         float tol = 1e-4f) {
    if (got.nq != ref.nq) return "row counts differ";
    std::unique_ptr<TieScratch> scratch(exact ? nullptr : new TieScratch(nb));
    const int64_t kr = std::min(got.k, ref.k);
    for (int64_t q = 0; q < got.nq; ++q) {
        const float* d = got.D.data() + q * got.k;
        const int64_t* id = got.I.data() + q * got.k;
        const float* rd = ref.D.data() + q * ref.k;
        const int64_t* rid = ref.I.data() + q * ref.k;
        std::string err = exact
                              ? checkRowExact(got.k, d, id, kr, rd, rid, ip)
                              : checkRowTies(*scratch, nb, got.k, d, id, kr, rd, rid, ip, tol, tol);
        if (!err.empty()) return "query " + std::to_string(q) + " " + err;
    }
    return "";
}

/// Two modes' results on the same float data. Every mode orders by
/// (distance, id), so where two rows' distances are bitwise equal, the ids
/// must be identical except among exactly equal distances (two candidates
/// whose selection keys differ by an ulp can round to the same reported
/// distance). Rows whose distances differ in the last bits (another GEMM
/// tile shape rounds differently) may swap near-tied neighbours only. The
/// exact identity of ids is checked on integer data, where no rounding
/// happens (the grid's oracle checks).
std::string compareModes(const Knn& a, const Knn& b, int64_t nb, bool ip) {
    if (a.nq != b.nq || a.k != b.k) return "shapes differ";
    TieScratch scratch(nb);
    const int64_t k = a.k, kr = std::min(k, nb);
    for (int64_t q = 0; q < a.nq; ++q) {
        const float* da = a.D.data() + q * k;
        const float* db = b.D.data() + q * k;
        const int64_t* ia = a.I.data() + q * k;
        const int64_t* ib = b.I.data() + q * k;
        const bool bitwise = std::memcmp(da, db, sizeof(float) * k) == 0;
        const float tol = bitwise ? 0.f : 1e-5f;
        std::string err = checkRowTies(scratch, nb, k, db, ib, kr, da, ia, ip, tol, tol);
        if (!err.empty())
            return "query " + std::to_string(q) +
                   (bitwise ? " (distances bitwise equal) " : " (distances differ by rounding) ") +
                   err;
    }
    return "";
}

// ---------------------------------------------------------------- running

/// Runs f; on an exception records a failure (with the SCOPED_TRACE context)
/// and returns false.
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

/// Searches into fresh arrays pre-filled with sentinels (NaN, -7), so that
/// entries left unwritten fail the checks.
bool searchKnn(const faiss::Index& index, int64_t nq, const float* xq, int64_t k, Knn* out,
               const faiss::SearchParameters* params = nullptr) {
    out->nq = nq;
    out->k = k;
    out->D.assign(size_t(nq) * k, std::nanf(""));
    out->I.assign(size_t(nq) * k, -7);
    return noThrow([&] { index.search(nq, xq, k, out->D.data(), out->I.data(), params); });
}

bool knnGraph(const GpuIndexQuickSelectFlat& index, int64_t k, bool excludeSelf, Knn* out,
              const SearchParametersQuickSelectFlat* params = nullptr) {
    out->nq = index.ntotal;
    out->k = k;
    out->D.assign(size_t(index.ntotal) * k, std::nanf(""));
    out->I.assign(size_t(index.ntotal) * k, -7);
    return noThrow([&] { index.knnGraph(k, excludeSelf, out->D.data(), out->I.data(), params); });
}

GpuIndexQuickSelectFlatConfig configFor(SelectAlgo mode,
                                        VectorStorage storage = VectorStorage::Auto) {
    GpuIndexQuickSelectFlatConfig cfg;
    cfg.selectAlgo = mode;
    cfg.storage = storage;
    return cfg;
}

const int64_t kGridK[] = {1, 2, 31, 32, 33, 256, 1024, 2048, 2049, 8192};
constexpr int64_t kGridKMax = 8192;

// The merge queue lives in shared memory and refuses k past
// select::kMergeQueueMaxK with a FaissException (the public headers do not
// say so); the whole grid must be within it.
static_assert(kGridKMax <= faiss_ext::gpu::select::kMergeQueueMaxK,
              "every mode must run the grid's largest k");

}  // namespace

// ======================================================================
// 1. Every mode over the grid k x nb x nq, L2 and IP, four kinds of data.
// ======================================================================

class SelectModesGrid : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(SelectModesGrid, EveryModeMatchesReferenceAndTheOtherModes) {
    FAISS_EXT_REQUIRE_GPU();
    // Small: nb 100000 -> 66000, still >= 8 x 8192 (quick multi-select's first-pass
    // filter at k = 8192), > 65536 (Auto's merge-queue limit) and < 16 x 8192
    // (TH-heap sampling); nq 2048 -> 64, but see rowsFor.
    const int64_t nb = smallTests() ? std::min<int64_t>(std::get<0>(GetParam()), 66000)
                                    : std::get<0>(GetParam());
    const int64_t nqFull = std::get<1>(GetParam());
    const int64_t nq = smallTests() ? std::min<int64_t>(nqFull, 64) : nqFull;
    const int d = 16;
    StandardGpuResources res;
    // A unit: (metric, data, k). The data, indexes and reference of a
    // (metric, data) block are made when one of its k is this part's.
    PartUnits units;
    const int64_t nK = int64_t(std::size(kGridK));
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        const bool ip = metric == FlatMetric::InnerProduct;
        for (Data data : {Data::Random, Data::Duplicates, Data::AllEqual, Data::Integer}) {
            if (!units.anyOfNext(nK)) {
                units.skip(nK);
                continue;
            }
            std::vector<float> xb, xq;
            makeData(data, nb, nqFull, d, kSeed + uint64_t(nb) * 7 + uint64_t(nqFull), &xb, &xq);
            const bool exact = data == Data::AllEqual || data == Data::Integer;
            std::vector<std::unique_ptr<GpuIndexQuickSelectFlat>> indexes;
            for (SelectAlgo mode : kModes) {
                SCOPED_TRACE(describe(mode, 0, nb, nq, d, metric, dataName(data)));
                bool ok = noThrow([&] {
                    indexes.emplace_back(
                        new GpuIndexQuickSelectFlat(&res, d, metric, configFor(mode)));
                    indexes.back()->add(nb, xb.data());
                });
                ASSERT_TRUE(ok);
                ASSERT_EQ(indexes.back()->ntotal, nb);
            }
            // Small: a mode whose algorithm depends on the query count (Auto:
            // the merge queue from 2048 queries) still searches all nqFull.
            auto rowsFor = [&](int m, int64_t k) {
                return nq < nqFull && indexes[m]->resolveSelectAlgo(nq, k) !=
                                              indexes[m]->resolveSelectAlgo(nqFull, k)
                               ? nqFull
                               : nq;
            };
            int64_t nqRef = nq;
            for (int64_t k : kGridK)
                for (int m = 0; m < 4; ++m) nqRef = std::max(nqRef, rowsFor(m, k));
            // One reference per (nb, nq, data, metric), at the largest k.
            Knn ref;
            if (data == Data::Integer) {
                ref = exactKnn(xb, nb, xq, nqRef, d, kGridKMax, ip);
            } else if (data == Data::AllEqual) {
                ref = allEqualKnn(xq, nqRef, d, nb, kGridKMax, ip, 0.5f);
            } else {
                ref = faissKnn(xb, nb, xq, nqRef, d, kGridKMax, ip);
            }
            const Knn refHead = nqRef > nq ? firstRows(ref, nq) : Knn();
            bool failed[4] = {false, false, false, false};
            for (int64_t k : kGridK) {
                if (!units.next()) continue;
                Knn first;  // QuickMultiSelect's result at this k
                for (int m = 0; m < 4; ++m) {
                    if (failed[m]) continue;  // one failure per (metric, data, mode) is enough
                    const int64_t rows = rowsFor(m, k);
                    SCOPED_TRACE(describe(kModes[m], k, nb, rows, d, metric, dataName(data)));
                    Knn got;
                    if (!searchKnn(*indexes[m], rows, xq.data(), k, &got)) {
                        failed[m] = true;
                        continue;
                    }
                    std::string err =
                            compareToRef(got, rows == ref.nq ? ref : refHead, nb, ip, exact);
                    EXPECT_EQ(err, "")
                        << "against the " << (exact ? "exact CPU oracle" : "faiss::IndexFlat");
                    if (err.empty() && m > 0 && first.k == k) {
                        // Exact data: equality with the oracle already makes
                        // the modes identical; float data: identical where the
                        // distances are.
                        err = compareModes(first, rows == first.nq ? got : firstRows(got, first.nq),
                                           nb, ip);
                        EXPECT_EQ(err, "") << "against QuickMultiSelect's result";
                    }
                    if (!err.empty()) failed[m] = true;
                    if (m == 0) first = std::move(got);
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SelectModesGrid,
                         ::testing::Combine(::testing::Values<int64_t>(1, 100, 8192, 100000),
                                            ::testing::Values<int64_t>(1, 7, 2048)),
                         [](const ::testing::TestParamInfo<std::tuple<int64_t, int64_t>>& shape) {
                             return "nb" + std::to_string(std::get<0>(shape.param)) + "_nq" +
                                    std::to_string(std::get<1>(shape.param));
                         });

// The mode through SearchParametersQuickSelectFlat: overrides the index's
// selectAlgo (Auto in the parameters: the index's), gives the same exact
// answer, and resolveSelectAlgo reports it.
TEST(SelectModes, SearchParametersOverrideTheConfiguredMode) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    // Small nb: still >= 8 x 2049 (first-pass filter at k = 2049), > 16 x 1024
    // (TH-heap sampling, two merge-queue levels at k = 1024) and < 16 x 2049.
    const int64_t nb = sized<int64_t>(20000, 16800), nq = sized<int64_t>(100, 5);
    auto xb = integerVectors(nb, d, kSeed);
    auto xq = integerVectors(nq, d, kSeed + 1);
    const int64_t ks[] = {1, 33, 1024, 2049};
    Knn ref = exactKnn(xb, nb, xq, nq, d, 2049, false);
    StandardGpuResources res;
    PartUnits units;  // a unit: (configured mode, k)
    for (SelectAlgo cfgMode : kModes) {
        GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, configFor(cfgMode));
        index.add(nb, xb.data());
        for (int64_t k : ks) {
            if (!units.next()) continue;
            faiss::SearchParameters plain;
            SelectAlgo r0 = SelectAlgo::Auto;
            SCOPED_TRACE(std::string("config mode=") + selectAlgoName(cfgMode) +
                         " k=" + std::to_string(k));
            ASSERT_TRUE(noThrow([&] { r0 = index.resolveSelectAlgo(nq, k, &plain); }));
            EXPECT_TRUE(isConcrete(r0)) << selectAlgoName(r0);
            if (cfgMode != SelectAlgo::Auto) {
                EXPECT_EQ(r0, cfgMode) << selectAlgoName(r0);
            }
            for (SelectAlgo paramMode : kModes) {
                SCOPED_TRACE(describe(paramMode, k, nb, nq, d, FlatMetric::L2,
                                      "integer, mode via SearchParametersQuickSelectFlat"));
                SearchParametersQuickSelectFlat p;
                p.selectAlgo = paramMode;
                SelectAlgo want = paramMode != SelectAlgo::Auto ? paramMode : cfgMode;
                SelectAlgo r = SelectAlgo::Auto;
                ASSERT_TRUE(noThrow([&] { r = index.resolveSelectAlgo(nq, k, &p); }));
                EXPECT_TRUE(isConcrete(r)) << selectAlgoName(r);
                if (want != SelectAlgo::Auto) {
                    EXPECT_EQ(r, want) << selectAlgoName(r);
                }
                Knn got;
                if (!searchKnn(index, nq, xq.data(), k, &got, &p)) continue;
                EXPECT_EQ(compareToRef(got, ref, nb, false, true), "");
            }
        }
    }
}

// The merge queue's hierarchical partition group size G (2 .. 16) and the
// TH-heap's sample factor (n_S = factor * k, 1 .. 1024) on one shape: exact
// answers on integer data (ties everywhere) and all-equal data.
TEST(SelectModes, MergeQueueGroupSizesAndTHHeapSampleFactors) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    // Small nb: still > 8 x 8192 (one merge-queue level at k = 8192, G = 8),
    // >= 2 x 33 x 1024 (TH-heap sampling at k = 33, factor 1024), < 16 x 8192.
    const int64_t nb = sized<int64_t>(100000, 70000), nq = sized<int64_t>(64, 4);
    const int64_t ks[] = {1, 33, 1024, 8192};
    StandardGpuResources res;
    PartUnits units;  // a unit: (data, knob)
    for (Data data : {Data::Integer, Data::AllEqual}) {
        std::vector<float> xb, xq;
        makeData(data, nb, nq, d, kSeed + 77, &xb, &xq);
        Knn ref = data == Data::Integer ? exactKnn(xb, nb, xq, nq, d, 8192, false)
                                        : allEqualKnn(xq, nq, d, nb, 8192, false, 0.5f);
        struct Knob {
            SelectAlgo mode;
            int group, factor;
        };
        std::vector<Knob> knobs;
        for (int g : {2, 4, 8, 16}) knobs.push_back({SelectAlgo::MergeQueue, g, 8});
        for (int f : {1, 8, 32, 1024}) knobs.push_back({SelectAlgo::THHeap, 4, f});
        for (const Knob& kn : knobs) {
            if (!units.next()) continue;
            GpuIndexQuickSelectFlatConfig cfg = configFor(kn.mode);
            cfg.mergeQueueGroup = kn.group;
            cfg.thheapSampleFactor = kn.factor;
            std::string what = std::string(dataName(data)) +
                               " mergeQueueGroup=" + std::to_string(kn.group) +
                               " thheapSampleFactor=" + std::to_string(kn.factor);
            std::unique_ptr<GpuIndexQuickSelectFlat> index;
            {
                SCOPED_TRACE(describe(kn.mode, 0, nb, nq, d, FlatMetric::L2, what.c_str()));
                ASSERT_TRUE(noThrow([&] {
                    index.reset(new GpuIndexQuickSelectFlat(&res, d, FlatMetric::L2, cfg));
                    index->add(nb, xb.data());
                }));
            }
            for (int64_t k : ks) {
                SCOPED_TRACE(describe(kn.mode, k, nb, nq, d, FlatMetric::L2, what.c_str()));
                Knn got;
                if (!searchKnn(*index, nq, xq.data(), k, &got)) continue;
                EXPECT_EQ(compareToRef(got, ref, nb, false, true), "");
            }
        }
    }
}

// The knobs' documented ranges are enforced (at construction or, at the
// latest, at the first search).
TEST(SelectModes, KnobsOutOfRangeThrow) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    auto xb = randomVectors(100, d, kSeed);
    auto throwsSomewhere = [&](const GpuIndexQuickSelectFlatConfig& cfg) {
        try {
            GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, cfg);
            index.add(100, xb.data());
            std::vector<float> D(10);
            std::vector<int64_t> I(10);
            index.search(1, xb.data(), 10, D.data(), I.data());
        } catch (const faiss::FaissException&) {
            return true;
        }
        return false;
    };
    for (int g : {-1, 0, 1, 17}) {
        GpuIndexQuickSelectFlatConfig cfg = configFor(SelectAlgo::MergeQueue);
        cfg.mergeQueueGroup = g;
        EXPECT_TRUE(throwsSomewhere(cfg)) << "mergeQueueGroup=" << g << " (documented 2..16)";
    }
    for (int f : {-1, 0, 1025}) {
        GpuIndexQuickSelectFlatConfig cfg = configFor(SelectAlgo::THHeap);
        cfg.thheapSampleFactor = f;
        EXPECT_TRUE(throwsSomewhere(cfg)) << "thheapSampleFactor=" << f << " (documented 1..1024)";
    }
}

// ======================================================================
// 2. Tiled = untiled, per mode.
// ======================================================================

// 4 MiB of temporary memory forces corpus tiles of ~8k vectors and query
// tiles of a few rows (60003 x 300); the default gives one tile. On integer
// data every tile shape computes the same exact distances, so the ids and
// distances must be identical; on float data equal up to rounding. Small:
// 17 queries with 640 KiB: the same 8 corpus tiles, several query tiles per mode.
TEST(SelectModes, TiledSearchEqualsUntiled) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    const int64_t nb = 60003, nq = sized<int64_t>(300, 17);
    const int64_t ks[] = {10, 1000};
    StandardGpuResources big, small;
    small.setTempMemory(sized<size_t>(size_t(4) << 20, size_t(640) << 10));
    PartUnits units;  // a unit: (metric, mode)
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        const bool ip = metric == FlatMetric::InnerProduct;
        auto xb = integerVectors(nb, d, kSeed + 5);
        auto xq = integerVectors(nq, d, kSeed + 6);
        auto fb = clusteredVectors(nb, d, 30, kSeed + 7);
        auto fq = clusteredVectors(nq, d, 30, kSeed + 8);
        Knn ref = exactKnn(xb, nb, xq, nq, d, 1000, ip);
        for (SelectAlgo mode : kModes) {
            if (!units.next()) continue;
            GpuIndexQuickSelectFlat a(&big, d, metric, configFor(mode));
            GpuIndexQuickSelectFlat b(&small, d, metric, configFor(mode));
            GpuIndexQuickSelectFlat fa(&big, d, metric, configFor(mode));
            GpuIndexQuickSelectFlat fbIdx(&small, d, metric, configFor(mode));
            a.add(nb, xb.data());
            b.add(nb, xb.data());
            fa.add(nb, fb.data());
            fbIdx.add(nb, fb.data());
            for (int64_t k : ks) {
                SCOPED_TRACE(
                    describe(mode, k, nb, nq, d, metric, "integer / clustered, 4 MiB temp"));
                Knn ra, rb, rfa, rfb;
                if (!searchKnn(a, nq, xq.data(), k, &ra) || !searchKnn(b, nq, xq.data(), k, &rb))
                    continue;
                EXPECT_EQ(compareToRef(ra, ref, nb, ip, true), "") << "untiled vs exact oracle";
                EXPECT_EQ(compareToRef(rb, ra, nb, ip, true), "")
                    << "tiled vs untiled (integer data)";
                EXPECT_EQ(ra.D, rb.D) << "tiled vs untiled distances (integer data)";
                if (!searchKnn(fa, nq, fq.data(), k, &rfa) ||
                    !searchKnn(fbIdx, nq, fq.data(), k, &rfb))
                    continue;
                EXPECT_EQ(compareModes(rfa, rfb, nb, ip), "") << "tiled vs untiled (float data)";
            }
        }
    }
}

// ======================================================================
// 3. Vectors in host memory, per mode.
// ======================================================================

// VectorStorage::Host: getStorage() == Host, no device pointer, the same ids
// and distances as device storage (integer data: exact), still after adding
// more vectors; reconstruct works; reset empties it and it is usable again.
TEST(SelectModes, HostStorageEqualsDeviceStorage) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 32;
    // nb, more: full size (three merge-queue levels at k = 1000 need > 64000 after the second add).
    const int64_t nb = 50000, more = 20000, nq = sized<int64_t>(100, 5), small = 1000;
    const int64_t ks[] = {1, 10, 1000};
    auto xb = integerVectors(nb + more, d, kSeed + 9);
    auto xq = integerVectors(nq, d, kSeed + 10);
    std::vector<float> first(xb.begin(), xb.begin() + nb * d);
    Knn ref1 = exactKnn(first, nb, xq, nq, d, 1000, false);
    Knn ref2 = exactKnn(xb, nb + more, xq, nq, d, 1000, false);
    std::vector<float> smallSet(xb.begin(), xb.begin() + small * d);
    Knn ref3 = exactKnn(smallSet, small, xq, nq, d, 1000, false);
    StandardGpuResources res;
    for (SelectAlgo mode : kModes) {
        SCOPED_TRACE(std::string("mode=") + selectAlgoName(mode) + " storage=Host");
        GpuIndexQuickSelectFlat host(&res, d, FlatMetric::L2, configFor(mode, VectorStorage::Host));
        GpuIndexQuickSelectFlat dev(&res, d, FlatMetric::L2,
                                    configFor(mode, VectorStorage::Device));
        ASSERT_TRUE(noThrow([&] {
            host.add(nb, xb.data());
            dev.add(nb, xb.data());
        }));
        EXPECT_EQ(host.getStorage(), VectorStorage::Host);
        EXPECT_EQ(host.getVectorsDevice(), nullptr);
        EXPECT_EQ(dev.getStorage(), VectorStorage::Device);
        EXPECT_NE(dev.getVectorsDevice(), nullptr);
        for (int step = 0; step < 2; ++step) {
            const int64_t n = step == 0 ? nb : nb + more;
            const Knn& ref = step == 0 ? ref1 : ref2;
            for (int64_t k : ks) {
                SCOPED_TRACE(describe(mode, k, n, nq, d, FlatMetric::L2,
                                      step == 0 ? "integer, host storage"
                                                : "integer, host storage after a second add"));
                Knn rh, rd;
                if (!searchKnn(host, nq, xq.data(), k, &rh) ||
                    !searchKnn(dev, nq, xq.data(), k, &rd))
                    continue;
                EXPECT_EQ(compareToRef(rh, ref, n, false, true), "") << "host storage vs oracle";
                EXPECT_EQ(rh.I, rd.I) << "host storage vs device storage ids";
                EXPECT_EQ(rh.D, rd.D) << "host storage vs device storage distances";
            }
            if (step == 0) {
                ASSERT_TRUE(noThrow([&] {
                    host.add(more, xb.data() + nb * d);
                    dev.add(more, xb.data() + nb * d);
                }));
                EXPECT_EQ(host.ntotal, nb + more);
                EXPECT_EQ(host.getStorage(), VectorStorage::Host);
            }
        }
        std::vector<float> rec(size_t(3) * d);
        ASSERT_TRUE(noThrow([&] { host.reconstruct_n(nb - 1, 3, rec.data()); }));
        EXPECT_TRUE(std::equal(rec.begin(), rec.end(), xb.begin() + (nb - 1) * d))
            << "reconstruct_n across the two adds";

        ASSERT_TRUE(noThrow([&] { host.reset(); }));
        EXPECT_EQ(host.ntotal, 0);
        Knn empty;
        if (searchKnn(host, 3, xq.data(), 5, &empty)) {
            for (size_t i = 0; i < empty.I.size(); ++i) {
                EXPECT_EQ(empty.I[i], -1) << "after reset, entry " << i;
                EXPECT_TRUE(isWorst(empty.D[i], false)) << "after reset, entry " << i;
            }
        }
        ASSERT_TRUE(noThrow([&] { host.add(small, smallSet.data()); }));
        EXPECT_EQ(host.getStorage(), VectorStorage::Host);
        Knn again;
        if (searchKnn(host, nq, xq.data(), 1000, &again)) {
            EXPECT_EQ(compareToRef(again, ref3, small, false, true), "") << "after reset and add";
        }
    }
}

// VectorStorage::Auto past the resources' device memory limit (1 MiB for
// 200k x 32 floats = 25.6 MB; 16 MiB of temporary memory): the vectors go to
// host memory, and searches give exactly the device-storage answers.
// Small: 64401 (+ 1000) x 32 (8.5 MB, still past 1 MiB), 8 queries, 3 MiB:
// the first add still in several chunks, the second in one; host tiles as at
// full size (at k = 1000 quick multi-select's 8 tiles of >= 8000 vectors need
// 64000 <= n <= 65536, and several query tiles).
TEST(SelectModes, AutoStoragePastDeviceMemoryLimitUsesHostMemory) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 32;
    const int64_t nb = sized<int64_t>(200000, 64401), more = sized<int64_t>(20000, 1000),
                  nq = sized<int64_t>(100, 8), small = 1000;
    const int64_t ks[] = {1, 10, 1000};
    auto xb = integerVectors(nb + more, d, kSeed + 11);
    auto xq = integerVectors(nq, d, kSeed + 12);
    std::vector<float> first(xb.begin(), xb.begin() + nb * d);
    Knn ref1 = exactKnn(first, nb, xq, nq, d, 1000, false);
    Knn ref2 = exactKnn(xb, nb + more, xq, nq, d, 1000, false);
    std::vector<float> smallSet(xb.begin(), xb.begin() + small * d);
    Knn ref3 = exactKnn(smallSet, small, xq, nq, d, 1000, false);
    StandardGpuResources limited, plain;
    limited.setDeviceMemoryLimit(size_t(1) << 20);
    limited.setTempMemory(sized<size_t>(size_t(16) << 20, size_t(3) << 20));
    PartUnits units;  // a unit: a mode
    for (SelectAlgo mode : kModes) {
        if (!units.next()) continue;
        SCOPED_TRACE(std::string("mode=") + selectAlgoName(mode) +
                     " storage=Auto, device memory limit 1 MiB, temp memory 16 MiB");
        GpuIndexQuickSelectFlat autoIdx(&limited, d, FlatMetric::L2, configFor(mode));
        GpuIndexQuickSelectFlat dev(&plain, d, FlatMetric::L2, configFor(mode));
        ASSERT_TRUE(noThrow([&] {
            autoIdx.add(nb, xb.data());
            dev.add(nb, xb.data());
        }));
        EXPECT_EQ(autoIdx.getStorage(), VectorStorage::Host);
        EXPECT_EQ(autoIdx.getVectorsDevice(), nullptr);
        EXPECT_EQ(dev.getStorage(), VectorStorage::Device) << "Auto without a limit";
        for (int step = 0; step < 2; ++step) {
            const int64_t n = step == 0 ? nb : nb + more;
            for (int64_t k : ks) {
                SCOPED_TRACE(describe(mode, k, n, nq, d, FlatMetric::L2,
                                      step == 0 ? "integer, auto storage on host"
                                                : "integer, auto storage after a second add"));
                Knn ra, rd;
                if (!searchKnn(autoIdx, nq, xq.data(), k, &ra) ||
                    !searchKnn(dev, nq, xq.data(), k, &rd))
                    continue;
                EXPECT_EQ(compareToRef(ra, step == 0 ? ref1 : ref2, n, false, true), "")
                    << "host-kept vs exact oracle";
                EXPECT_EQ(ra.I, rd.I) << "host-kept vs device storage ids";
                EXPECT_EQ(ra.D, rd.D) << "host-kept vs device storage distances";
            }
            if (step == 0) {
                ASSERT_TRUE(noThrow([&] {
                    autoIdx.add(more, xb.data() + nb * d);
                    dev.add(more, xb.data() + nb * d);
                }));
                EXPECT_EQ(autoIdx.ntotal, nb + more);
                EXPECT_EQ(autoIdx.getStorage(), VectorStorage::Host);
            }
        }
        ASSERT_TRUE(noThrow([&] { autoIdx.reset(); }));
        EXPECT_EQ(autoIdx.ntotal, 0);
        EXPECT_NE(autoIdx.getStorage(), VectorStorage::Auto);
        ASSERT_TRUE(noThrow([&] { autoIdx.add(small, smallSet.data()); }));
        EXPECT_NE(autoIdx.getStorage(), VectorStorage::Auto);
        Knn again;
        if (searchKnn(autoIdx, nq, xq.data(), 1000, &again)) {
            EXPECT_EQ(compareToRef(again, ref3, small, false, true), "") << "after reset and add";
        }
    }
}

// ======================================================================
// 4. knnGraph.
// ======================================================================

namespace {

/// Brute-force graph from faiss::IndexFlatL2: the stored vectors searched
/// against themselves (at k = nb, whose prefixes serve every k), with each
/// row's own id removed for excludeSelf.
Knn faissGraph(const std::vector<float>& xb, int64_t nb, int d, bool excludeSelf) {
    Knn all = faissKnn(xb, nb, xb, nb, d, nb, false);
    if (!excludeSelf) return all;
    Knn r;
    r.nq = nb;
    r.k = nb - 1;
    r.D.resize(size_t(nb) * r.k);
    r.I.resize(size_t(nb) * r.k);
    for (int64_t q = 0; q < nb; ++q) {
        int64_t t = 0;
        for (int64_t j = 0; j < nb && t < r.k; ++j) {
            if (all.I[q * nb + j] == q) continue;
            r.D[q * r.k + t] = all.D[q * nb + j];
            r.I[q * r.k + t] = all.I[q * nb + j];
            ++t;
        }
    }
    return r;
}

std::string graphWhat(bool excludeSelf, const char* data) {
    return std::string(data) + (excludeSelf ? " excludeSelf" : " includeSelf");
}

}  // namespace

// Random float data (no exact duplicates) against faiss::IndexFlatL2 (ties
// aside), every mode through the configuration, k up to ntotal - 1 (ntotal
// with self). With excludeSelf no row holds its own id; without, a vector is
// its own first neighbour at distance ~0.
TEST(KnnGraph, MatchesFaissBruteForce) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    // Small nb: still >= 2112 (quick multi-select's warp per row: 16 x 132 SMs).
    const int64_t nb = sized<int64_t>(3001, 2401);
    auto xb = randomVectors(nb, d, kSeed + 15);
    Knn refEx = faissGraph(xb, nb, d, true);
    Knn refIn = faissGraph(xb, nb, d, false);
    StandardGpuResources res;
    PartUnits units;  // a unit: (mode, excludeSelf, k)
    for (SelectAlgo mode : kModes) {
        GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, configFor(mode));
        index.add(nb, xb.data());
        for (bool excludeSelf : {true, false}) {
            for (int64_t k : {int64_t(1), int64_t(10), int64_t(100), int64_t(1000),
                              excludeSelf ? nb - 1 : nb}) {
                if (!units.next()) continue;
                SCOPED_TRACE(describe(mode, k, nb, nb, d, FlatMetric::L2,
                                      graphWhat(excludeSelf, "random").c_str()));
                Knn g;
                if (!knnGraph(index, k, excludeSelf, &g)) continue;
                EXPECT_EQ(compareToRef(g, excludeSelf ? refEx : refIn, nb, false, false), "");
                for (int64_t q = 0; q < nb; ++q) {
                    const int64_t* row = g.I.data() + q * k;
                    if (excludeSelf) {
                        if (std::find(row, row + k, q) != row + k) {
                            ADD_FAILURE() << "row " << q << " holds its own id";
                            break;
                        }
                    } else if (row[0] != q || std::fabs(g.D[q * k]) > 1e-4f) {
                        ADD_FAILURE() << "row " << q << " starts with (" << row[0] << ", "
                                      << g.D[q * k] << "), expected itself at distance ~0";
                        break;
                    }
                }
            }
        }
    }
}

// Integer data (exact distances, many ties), L2 and IP, every mode through
// SearchParametersQuickSelectFlat: ids equal to the exact CPU oracle's.
TEST(KnnGraph, ExactOnIntegerDataEveryMode) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    // Small nb: still >= 8 x 1024 (first-pass filter at k = 1024), < 16 x 1024.
    const int64_t nb = sized<int64_t>(12000, 8200);
    auto xb = integerVectors(nb, d, kSeed + 16);
    StandardGpuResources res;
    PartUnits units;  // a unit: (metric, excludeSelf, mode, k)
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        const bool ip = metric == FlatMetric::InnerProduct;
        GpuIndexQuickSelectFlat index(&res, d, metric);
        index.add(nb, xb.data());
        for (bool excludeSelf : {true, false}) {
            Knn ref = exactKnn(xb, nb, xb, nb, d, 1024, ip, excludeSelf);
            for (SelectAlgo mode : kModes) {
                SearchParametersQuickSelectFlat p;
                p.selectAlgo = mode;
                for (int64_t k : {int64_t(1), int64_t(33), int64_t(1024)}) {
                    if (!units.next()) continue;
                    SCOPED_TRACE(
                        describe(mode, k, nb, nb, d, metric,
                                 graphWhat(excludeSelf, "integer, mode via params").c_str()));
                    Knn g;
                    if (!knnGraph(index, k, excludeSelf, &g, &p)) continue;
                    EXPECT_EQ(compareToRef(g, ref, nb, ip, true), "");
                }
            }
        }
    }
}

// Many exact copies (400 distinct vectors x 8, shuffled): with excludeSelf no
// row holds its own id, ids are distinct, distances sorted, and the first 7
// are the other copies at distance ~0; without, the first 8 are all copies.
TEST(KnnGraph, DuplicatesNeverHoldTheirOwnId) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    const int64_t distinctN = 400, copies = 8, nb = distinctN * copies;
    auto distinct = randomVectors(distinctN, d, kSeed + 17);
    std::vector<int64_t> owner(nb);
    for (int64_t i = 0; i < nb; ++i) owner[i] = i % distinctN;
    std::shuffle(owner.begin(), owner.end(), std::mt19937_64(kSeed + 18));
    std::vector<float> xb(size_t(nb) * d);
    std::vector<std::set<int64_t>> group(distinctN);
    for (int64_t i = 0; i < nb; ++i) {
        std::copy(distinct.begin() + owner[i] * d, distinct.begin() + (owner[i] + 1) * d,
                  xb.begin() + i * d);
        group[owner[i]].insert(i);
    }
    StandardGpuResources res;
    for (SelectAlgo mode : kModes) {
        GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, configFor(mode));
        index.add(nb, xb.data());
        for (bool excludeSelf : {true, false}) {
            for (int64_t k : {copies - 1, copies, int64_t(50)}) {
                SCOPED_TRACE(describe(mode, k, nb, nb, d, FlatMetric::L2,
                                      graphWhat(excludeSelf, "8 copies of each vector").c_str()));
                Knn g;
                if (!knnGraph(index, k, excludeSelf, &g)) continue;
                const int64_t close = std::min(k, excludeSelf ? copies - 1 : copies);
                for (int64_t q = 0; q < nb; ++q) {
                    const int64_t* row = g.I.data() + q * k;
                    const float* dist = g.D.data() + q * k;
                    std::string err;
                    std::set<int64_t> seen(row, row + k);
                    if (int64_t(seen.size()) != k) err = "duplicate ids";
                    if (*seen.begin() < 0 || *seen.rbegin() >= nb) err = "id out of range";
                    if (excludeSelf && seen.count(q)) err = "holds its own id";
                    if (!excludeSelf && k >= copies && !seen.count(q)) err = "misses its own id";
                    for (int64_t j = 1; j < k && err.empty(); ++j)
                        if (!(dist[j] >= dist[j - 1])) err = "distances not sorted";
                    // The first `close` neighbours are copies of x_q (all of
                    // them when k allows; x_q itself only without excludeSelf).
                    std::set<int64_t> head(row, row + close), want = group[owner[q]];
                    if (excludeSelf) want.erase(q);
                    bool subset = std::includes(want.begin(), want.end(), head.begin(), head.end());
                    if (err.empty() && (!subset || (close == int64_t(want.size()) && head != want)))
                        err = "the first neighbours are not the copies";
                    for (int64_t j = 0; j < close && err.empty(); ++j)
                        if (std::fabs(dist[j]) > 1e-4f) err = "a copy at distance not ~0";
                    if (!err.empty()) {
                        ADD_FAILURE() << "row " << q << ": " << err << "; row starts (" << row[0]
                                      << ", " << dist[0] << ")";
                        break;
                    }
                }
            }
        }
    }
}

// Device output pointers (distances and labels, labels only) and host
// labels without distances give exactly the host result.
TEST(KnnGraph, HostAndDeviceOutputPointers) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    // Small nb: still >= 2112 (quick multi-select's warp per row: 16 x 132 SMs).
    const int64_t nb = sized<int64_t>(12000, 2400), k = 33;
    auto xb = integerVectors(nb, d, kSeed + 19);
    Knn ref = exactKnn(xb, nb, xb, nb, d, k, false, true);
    StandardGpuResources res;
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
    index.add(nb, xb.data());
    for (SelectAlgo mode : kModes) {
        SCOPED_TRACE(describe(mode, k, nb, nb, d, FlatMetric::L2, "integer excludeSelf"));
        SearchParametersQuickSelectFlat p;
        p.selectAlgo = mode;
        Knn host;
        if (!knnGraph(index, k, true, &host, &p)) continue;
        EXPECT_EQ(compareToRef(host, ref, nb, false, true), "");
        DeviceArray<float> dD(size_t(nb) * k);
        DeviceArray<int64_t> dI(size_t(nb) * k);
        ASSERT_TRUE(dD.p && dI.p);
        if (noThrow([&] { index.knnGraph(k, true, dD.p, dI.p, &p); })) {
            EXPECT_EQ(dI.download(), host.I) << "device distances and labels";
            EXPECT_EQ(dD.download(), host.D) << "device distances and labels";
        }
        ASSERT_EQ(cudaMemset(dI.p, 0xff, sizeof(int64_t) * nb * k), cudaSuccess);
        if (noThrow([&] { index.knnGraph(k, true, nullptr, dI.p, &p); })) {
            EXPECT_EQ(dI.download(), host.I) << "device labels, no distances";
        }
        std::vector<int64_t> hI(size_t(nb) * k, -7);
        if (noThrow([&] { index.knnGraph(k, true, nullptr, hI.data(), &p); })) {
            EXPECT_EQ(hI, host.I) << "host labels, no distances";
        }
        std::vector<float> hD(size_t(nb) * k);
        if (noThrow([&] { index.knnGraph(k, true, hD.data(), dI.p, &p); })) {
            EXPECT_EQ(dI.download(), host.I) << "host distances, device labels";
            EXPECT_EQ(hD, host.D) << "host distances, device labels";
        }
    }
}

// 4 MiB of temporary memory (many tiles) = the default (one tile), exactly,
// on integer data, per mode.
TEST(KnnGraph, TiledEqualsUntiled) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    // Small nb: still >= 8 x 1000 (quick multi-select's first-pass filter at
    // k = 1000); 4 MiB holds at most 128 rows of 8200 distances: still many
    // tiles. The merge queue lives in shared memory, every access of which
    // racecheck tracks (8200 rows at k = 1000 ran past 555 s alone on an
    // H100): small, it takes the first 2100 rows, still > k = 1000 and still
    // 5 tiles of at most 499 rows.
    const int64_t nbAll = sized<int64_t>(20000, 8200);
    auto xb = integerVectors(nbAll, d, kSeed + 20);
    std::map<int64_t, Knn> refs;  // exact k = 1000 graph of the first n rows, by n
    auto refOf = [&](int64_t n) -> const Knn& {
        auto it = refs.find(n);
        if (it == refs.end()) it = refs.emplace(n, exactKnn(xb, n, xb, n, d, 1000, false, true)).first;
        return it->second;
    };
    StandardGpuResources big, small;
    small.setTempMemory(size_t(4) << 20);
    const int64_t ks[] = {10, 1000};
    PartUnits units;  // a unit: (mode, k)
    for (SelectAlgo mode : kModes) {
        if (!units.anyOfNext(2)) {
            units.skip(2);
            continue;
        }
        const int64_t nb = mode == SelectAlgo::MergeQueue ? sized<int64_t>(nbAll, 2100) : nbAll;
        GpuIndexQuickSelectFlat a(&big, d, FlatMetric::L2, configFor(mode));
        GpuIndexQuickSelectFlat b(&small, d, FlatMetric::L2, configFor(mode));
        a.add(nb, xb.data());
        b.add(nb, xb.data());
        for (int64_t k : ks) {
            if (!units.next()) continue;
            SCOPED_TRACE(describe(mode, k, nb, nb, d, FlatMetric::L2,
                                  "integer excludeSelf, 4 MiB temp vs default"));
            Knn ga, gb;
            if (!knnGraph(a, k, true, &ga) || !knnGraph(b, k, true, &gb)) continue;
            EXPECT_EQ(compareToRef(ga, refOf(nb), nb, false, true), "") << "untiled vs exact oracle";
            EXPECT_EQ(ga.I, gb.I) << "tiled vs untiled ids";
            EXPECT_EQ(ga.D, gb.D) << "tiled vs untiled distances";
        }
    }
}

// Vectors kept in host memory give the same graph as device storage.
TEST(KnnGraph, HostStorageEqualsDeviceStorage) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    // Small nb: still > 16 x 4 x 100 (three merge-queue levels at k = 100).
    const int64_t nb = sized<int64_t>(12000, 6500);
    auto xb = integerVectors(nb, d, kSeed + 21);
    StandardGpuResources res;
    PartUnits units;  // a unit: (excludeSelf, mode, k)
    for (bool excludeSelf : {true, false}) {
        Knn ref = exactKnn(xb, nb, xb, nb, d, 100, false, excludeSelf);
        for (SelectAlgo mode : kModes) {
            GpuIndexQuickSelectFlat host(&res, d, FlatMetric::L2,
                                         configFor(mode, VectorStorage::Host));
            GpuIndexQuickSelectFlat dev(&res, d, FlatMetric::L2,
                                        configFor(mode, VectorStorage::Device));
            host.add(nb, xb.data());
            dev.add(nb, xb.data());
            EXPECT_EQ(host.getStorage(), VectorStorage::Host);
            for (int64_t k : {int64_t(10), int64_t(100)}) {
                if (!units.next()) continue;
                SCOPED_TRACE(describe(mode, k, nb, nb, d, FlatMetric::L2,
                                      graphWhat(excludeSelf, "integer, host storage").c_str()));
                Knn gh, gd;
                if (!knnGraph(host, k, excludeSelf, &gh) || !knnGraph(dev, k, excludeSelf, &gd))
                    continue;
                EXPECT_EQ(compareToRef(gh, ref, nb, false, true), "") << "host storage vs oracle";
                EXPECT_EQ(gh.I, gd.I) << "host vs device storage ids";
                EXPECT_EQ(gh.D, gd.D) << "host vs device storage distances";
            }
        }
    }
}

// k <= 0, k past ntotal - 1 with excludeSelf (ntotal without), null labels,
// an empty index: faiss::FaissException, index unchanged. The limits
// themselves are accepted.
TEST(KnnGraph, BadInputThrows) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 8;
    const int64_t nb = 100;
    auto xb = randomVectors(nb, d, kSeed + 22);
    StandardGpuResources res;
    GpuIndexQuickSelectFlat index(&res, d);
    index.add(nb, xb.data());
    std::vector<float> D(size_t(nb) * (nb + 1));
    std::vector<int64_t> I(size_t(nb) * (nb + 1));
    EXPECT_THROW(index.knnGraph(0, true, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(index.knnGraph(0, false, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(index.knnGraph(-3, false, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(index.knnGraph(nb, true, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(index.knnGraph(nb + 1, false, D.data(), I.data()), faiss::FaissException);
    EXPECT_THROW(index.knnGraph(5, true, D.data(), nullptr), faiss::FaissException);
    EXPECT_THROW(index.knnGraph(5, false, nullptr, nullptr), faiss::FaissException);
    EXPECT_EQ(index.ntotal, nb);
    EXPECT_NO_THROW(index.knnGraph(nb - 1, true, D.data(), I.data()));
    EXPECT_NO_THROW(index.knnGraph(nb, false, D.data(), I.data()));
    EXPECT_NO_THROW(index.knnGraph(5, true, nullptr, I.data()));

    GpuIndexQuickSelectFlat empty(&res, d);
    EXPECT_THROW(empty.knnGraph(1, false, D.data(), I.data()), faiss::FaissException);
    GpuIndexQuickSelectFlat one(&res, d);
    one.add(1, xb.data());
    EXPECT_THROW(one.knnGraph(1, true, D.data(), I.data()), faiss::FaissException);
    I[0] = -7;
    EXPECT_NO_THROW(one.knnGraph(1, false, D.data(), I.data()));
    EXPECT_EQ(I[0], 0);
}

// ======================================================================
// 6. resolveSelectAlgo and unknown algorithms.
// ======================================================================

// resolveSelectAlgo answers a concrete algorithm for every shape (the
// configured one when it is concrete), with or without parameters.
TEST(SelectModes, ResolveSelectAlgoNeverReturnsAuto) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 16;
    StandardGpuResources res;
    auto xb = randomVectors(100000, d, kSeed + 13);
    for (int64_t ntotal : {int64_t(0), int64_t(100), int64_t(100000)}) {
        for (SelectAlgo cfgMode : kModes) {
            GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, configFor(cfgMode));
            index.add(ntotal, xb.data());
            for (int64_t nq : {int64_t(1), int64_t(7), int64_t(2048), int64_t(1000000)}) {
                for (int64_t k :
                     {int64_t(1), int64_t(32), int64_t(2048), int64_t(8192), int64_t(100000)}) {
                    SCOPED_TRACE(describe(cfgMode, k, ntotal, nq, d, FlatMetric::L2, "random"));
                    SearchParametersQuickSelectFlat autoParams;  // selectAlgo Auto: the index's
                    if (cfgMode == SelectAlgo::MergeQueue &&
                        std::min(k, ntotal) > faiss_ext::gpu::select::kMergeQueueMaxK) {
                        // Beyond the merge queue's limit: a clear error, not Auto.
                        EXPECT_THROW(index.resolveSelectAlgo(nq, k), faiss::FaissException);
                        continue;
                    }
                    SelectAlgo r1 = SelectAlgo::Auto, r2 = SelectAlgo::Auto;
                    if (!noThrow([&] {
                            r1 = index.resolveSelectAlgo(nq, k);
                            r2 = index.resolveSelectAlgo(nq, k, &autoParams);
                        }))
                        continue;
                    EXPECT_TRUE(isConcrete(r1)) << "got " << selectAlgoName(r1) << " (" << int(r1) << ")";
                    EXPECT_EQ(r1, r2) << "Auto in the parameters means the index's choice";
                    if (cfgMode != SelectAlgo::Auto) {
                        EXPECT_EQ(r1, cfgMode) << selectAlgoName(r1);
                    }
                }
            }
        }
    }
}

// A SelectAlgo value outside the enum throws faiss::FaissException wherever
// it enters: the configuration, search parameters, resolveSelectAlgo and
// knnGraph; the index is left unchanged and usable.
TEST(SelectModes, UnknownSelectAlgoThrows) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 8;
    const int64_t nb = 1000;
    StandardGpuResources res;
    auto xb = randomVectors(nb, d, kSeed + 14);
    for (int bad : {9, -1, 4}) {
        SCOPED_TRACE("selectAlgo=" + std::to_string(bad));
        const SelectAlgo algo = static_cast<SelectAlgo>(bad);
        EXPECT_THROW(GpuIndexQuickSelectFlat(&res, d, FlatMetric::L2, configFor(algo)),
                     faiss::FaissException);
        GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
        index.add(nb, xb.data());
        SearchParametersQuickSelectFlat p;
        p.selectAlgo = algo;
        std::vector<float> D(size_t(nb) * 5);
        std::vector<int64_t> I(size_t(nb) * 5);
        EXPECT_THROW(index.search(3, xb.data(), 5, D.data(), I.data(), &p), faiss::FaissException);
        EXPECT_THROW(index.resolveSelectAlgo(3, 5, &p), faiss::FaissException);
        EXPECT_THROW(index.knnGraph(5, true, D.data(), I.data(), &p), faiss::FaissException);
        EXPECT_EQ(index.ntotal, nb);
        Knn ok;
        if (searchKnn(index, 3, xb.data(), 5, &ok)) {
            for (int q = 0; q < 3; ++q) EXPECT_EQ(ok.I[q * 5], q) << "query " << q;
        }
    }
}
