// The sampled-threshold k-selection (impl/select/SampledThresholdSelect.h),
// alone and as selectK's Auto path for device matrices: every value and id
// against a sort of the keys on the host (ties to the smaller column, NaN
// last, -0 before +0, as the GPU keys order them) and against selectK with
// SelectAlgo::QuickMultiSelect (bit for bit); rows built on the sample
// positions (sampledThresholdRunStart) so that the buffer overflows or
// comes out short, which must flag the row and leave the result exact; the
// thresholds of the sample shared by every row (the fused candidates') at
// each of its sizes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "DeviceArray.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/GpuSelect.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/RowSelector.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"

using faiss_ext::gpu::SelectAlgo;
using faiss_ext::gpu::selectK;
using faiss_ext::gpu::SelectKOptions;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::gpu::select;
using namespace faiss_ext::test;

namespace {

/// Row contents.
enum class Pattern {
    Random,      ///< uniform in [-10, 10)
    Ties,        ///< values from {1, 2, 3}: thousands of equal values around the k-th
    NaNInf,      ///< random with 5% NaN, 2% +inf, 2% -inf
    NaNMost,     ///< NaN but for 16 numbers: NaN fills the k-th place for k > 16
    SignedZero,  ///< values from {-0, +0, -1, +1, -inf, +inf}
    SortedUp,    ///< random, sorted ascending
    SortedDown,  ///< random, sorted descending
    Overflow,    ///< sampled entries above all others: the whole row passes the threshold
    Shortfall,   ///< sampled entries below all others: only `rank` keys pass
};

const char* patternName(Pattern p) {
    switch (p) {
        case Pattern::Random:
            return "random";
        case Pattern::Ties:
            return "ties";
        case Pattern::NaNInf:
            return "nan-inf";
        case Pattern::NaNMost:
            return "nan-most";
        case Pattern::SignedZero:
            return "signed-zero";
        case Pattern::SortedUp:
            return "sorted-up";
        case Pattern::SortedDown:
            return "sorted-down";
        case Pattern::Overflow:
            return "overflow";
        case Pattern::Shortfall:
            return "shortfall";
    }
    return "?";
}

const Pattern kOrdinary[] = {Pattern::Random,    Pattern::Ties,       Pattern::NaNInf,
                             Pattern::NaNMost,   Pattern::SignedZero, Pattern::SortedUp,
                             Pattern::SortedDown};

/// Fills row `row` (its index in the call that selects it: the sample
/// positions depend on it) of n entries. Overflow and Shortfall are built
/// for the selection of k of the largest (largest) or smallest entries.
void fillRow(float* v, Pattern p, int64_t row, int64_t n, int64_t k, bool largest,
             std::mt19937_64& rng) {
    std::uniform_real_distribution<float> u(-10.f, 10.f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
        float x = u(rng);
        switch (p) {
            case Pattern::Ties:
                x = float(1 + rng() % 3);
                break;
            case Pattern::NaNInf: {
                const uint64_t c = rng() % 100;
                x = c < 5 ? nan : c < 7 ? inf : c < 9 ? -inf : x;
                break;
            }
            case Pattern::NaNMost:
                x = nan;
                break;
            case Pattern::SignedZero: {
                const float choice[] = {-0.f, 0.f, -1.f, 1.f, -inf, inf};
                x = choice[rng() % 6];
                break;
            }
            default:
                break;
        }
        v[j] = x;
    }
    if (p == Pattern::NaNMost) {
        for (int i = 0; i < 16; ++i) v[rng() % uint64_t(n)] = u(rng);
    }
    if (p == Pattern::SortedUp) std::sort(v, v + n);
    if (p == Pattern::SortedDown) std::sort(v, v + n, [](float a, float b) { return a > b; });
    if (p == Pattern::Overflow || p == Pattern::Shortfall) {
        // Unsampled entries in [0, 1); sampled ones far above (Overflow: the
        // rank-r sample exceeds every unsampled key) or far below (Shortfall:
        // exactly rank keys are <= it), in the order the keys see them.
        std::uniform_real_distribution<float> unit(0.f, 1.f);
        for (int64_t j = 0; j < n; ++j) v[j] = unit(rng);
        const SampledThresholdPlan plan = sampledThresholdPlan(n, k);
        const int64_t runs = plan.samples / kSampledThresholdRunLength;
        for (int64_t i = 0; i < runs; ++i) {
            const int64_t s = sampledThresholdRunStart(row, i, n, runs);
            for (int64_t e = 0; e < kSampledThresholdRunLength; ++e) {
                v[s + e] = (p == Pattern::Overflow ? 100.f : -100.f) + unit(rng);
            }
        }
        if (largest) {
            for (int64_t j = 0; j < n; ++j) v[j] = -v[j];
        }
    }
}

uint32_t orderedBits(float f) {
    if (std::isnan(f)) return 0xFFFFFFFFu;
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Per row, the columns of the k smallest keys (value bits ordered as the
/// GPU orders them, negated values when largest; then the column), by
/// std::partial_sort: rows x k.
std::vector<uint32_t> referenceColumns(const std::vector<float>& v, int64_t rows, int64_t n,
                                       int64_t k, bool largest) {
    std::vector<uint32_t> out(size_t(rows) * k);
    parallelFor(rows, [&](int64_t r0, int64_t r1) {
        std::vector<uint64_t> keys(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
            const float* row = v.data() + size_t(r) * n;
            for (int64_t j = 0; j < n; ++j) {
                keys[size_t(j)] =
                    (uint64_t(orderedBits(largest ? -row[j] : row[j])) << 32) | uint64_t(j);
            }
            std::partial_sort(keys.begin(), keys.begin() + k, keys.end());
            for (int64_t j = 0; j < k; ++j) out[size_t(r) * k + j] = uint32_t(keys[size_t(j)]);
        }
    });
    return out;
}

bool sameBits(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::memcmp(&a, &b, sizeof(a)) == 0;
}

/// outV / outI (rows x k) against the reference columns; ids are
/// inIds[r * n + col] when given. Rows with skip[r] are not checked. "" when
/// every value and id agree.
std::string checkRows(const std::vector<float>& v, int64_t rows, int64_t n, int64_t k,
                      const std::vector<uint32_t>& cols, const std::vector<float>& outV,
                      const std::vector<int64_t>& outI, const int64_t* inIds = nullptr,
                      const std::vector<uint8_t>* skip = nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
        if (skip && (*skip)[size_t(r)]) continue;
        for (int64_t j = 0; j < k; ++j) {
            const size_t o = size_t(r) * k + j;
            const int64_t col = cols[o];
            const float wantV = v[size_t(r) * n + col];
            const int64_t wantI = inIds ? inIds[size_t(r) * n + col] : col;
            if (outI[o] != wantI || !sameBits(outV[o], wantV)) {
                std::ostringstream m;
                m << "row " << r << " rank " << j << ": got (" << outV[o] << ", " << outI[o]
                  << ") expected (" << wantV << ", " << wantI << ")";
                return m.str();
            }
        }
    }
    return "";
}

std::string describe(int64_t rows, int64_t n, int64_t k, bool largest, const std::string& more) {
    std::ostringstream s;
    s << "rows=" << rows << " n=" << n << " k=" << k << (largest ? " largest" : " smallest")
      << " seed=" << kSeed << " " << more;
    return s.str();
}

/// rows x n values, row r of pattern pats[r % pats.size()].
std::vector<float> makeMatrix(int64_t rows, int64_t n, int64_t k, bool largest,
                              const std::vector<Pattern>& pats, uint64_t seed) {
    std::vector<float> v(size_t(rows) * n);
    std::mt19937_64 rng(seed);
    for (int64_t r = 0; r < rows; ++r) {
        fillRow(v.data() + size_t(r) * n, pats[size_t(r) % pats.size()], r, n, k, largest, rng);
    }
    return v;
}

}  // namespace

// The plan's constants stay in their documented ranges (no GPU needed).
TEST(GpuSelectSampledThreshold, PlanAndSamplePositions) {
    EXPECT_FALSE(sampledThresholdApplies(16383, 1));
    EXPECT_TRUE(sampledThresholdApplies(16384, 256));
    EXPECT_FALSE(sampledThresholdApplies(16384, 257));
    EXPECT_TRUE(sampledThresholdApplies(int64_t(1) << 20, 2048));
    EXPECT_FALSE(sampledThresholdApplies(int64_t(1) << 20, 2049));
    EXPECT_FALSE(sampledThresholdApplies(int64_t(1) << 32, 1));
    EXPECT_FALSE(sampledThresholdApplies(1 << 20, 0));
    for (int64_t n :
         {int64_t(16384), int64_t(100003), int64_t(131072), int64_t(1) << 20, int64_t(1) << 26}) {
        for (int64_t k : {1, 2, 10, 33, 256, 1024, 2048}) {
            if (!sampledThresholdApplies(n, k)) continue;
            const SampledThresholdPlan p = sampledThresholdPlan(n, k);
            const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k);
            EXPECT_TRUE(p.samples >= 1024 && p.samples <= 4096 &&
                        (p.samples & (p.samples - 1)) == 0)
                << what;
            EXPECT_TRUE(p.samples * 16 <= n) << what;
            const double mu = double(k) * p.samples / n;
            EXPECT_GE(double(p.rank), mu + 4 * std::sqrt(mu) + 4) << what;
            EXPECT_LT(p.rank, p.samples / 4) << what;
            EXPECT_TRUE((p.capacity & (p.capacity - 1)) == 0) << what;
            EXPECT_GE(double(p.capacity), double(2 * p.rank + 12) * n / p.samples) << what;
            EXPECT_GE(p.capacity, k) << what;
            EXPECT_GT(sampledThresholdScratchBytes(3, n, k), size_t(3 * 8) * p.capacity) << what;
            // Runs: one per stratum, inside it up to the alignment, sector
            // aligned, in order and disjoint.
            const int64_t runs = p.samples / kSampledThresholdRunLength;
            const int64_t stratum = n / runs;
            for (int64_t row : {0, 1, 977}) {
                int64_t prevEnd = 0;
                for (int64_t i = 0; i < runs; ++i) {
                    const int64_t s = sampledThresholdRunStart(row, i, n, runs);
                    ASSERT_EQ(s % kSampledThresholdRunLength, 0) << what << " run " << i;
                    ASSERT_GE(s, prevEnd) << what << " run " << i;
                    ASSERT_GT(s + kSampledThresholdRunLength, i * stratum) << what << " run " << i;
                    ASSERT_LE(s + kSampledThresholdRunLength, (i + 1) * stratum)
                        << what << " run " << i;
                    prevEnd = s + kSampledThresholdRunLength;
                }
            }
        }
    }
}

// The keys form's wider range (the flat search's full-row tiles: k up to
// 4096, n >= 16 k) keeps the same plan invariants, and its buffer stays a
// small part of a row (no GPU needed).
TEST(GpuSelectSampledThreshold, KeysRangePlan) {
    EXPECT_TRUE(sampledThresholdKeysApply(100000, 3000));
    EXPECT_TRUE(sampledThresholdKeysApply(65536, 4096));
    EXPECT_FALSE(sampledThresholdKeysApply(65535, 4096));
    EXPECT_FALSE(sampledThresholdKeysApply(int64_t(1) << 20, 4097));
    EXPECT_FALSE(sampledThresholdKeysApply(16383, 1));
    EXPECT_FALSE(sampledThresholdApplies(100000, 3000));  // selectK keeps its own range
    for (int64_t n : {int64_t(16384), int64_t(65536), int64_t(100000), int64_t(100003),
                      int64_t(1) << 20}) {
        for (int64_t k : {1, 42, 2049, 3000, 4096}) {
            if (!sampledThresholdKeysApply(n, k)) continue;
            const SampledThresholdPlan p = sampledThresholdPlan(n, k);
            const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k);
            const double mu = double(k) * p.samples / n;
            EXPECT_TRUE(p.samples >= 1024 && p.samples <= 4096 && p.samples * 16 <= n) << what;
            EXPECT_GE(double(p.rank), mu + 4 * std::sqrt(mu) + 4) << what;
            EXPECT_LT(p.rank, p.samples / 2) << what;
            EXPECT_TRUE((p.capacity & (p.capacity - 1)) == 0) << what;
            EXPECT_GE(double(p.capacity), double(2 * p.rank + 12) * n / p.samples) << what;
            EXPECT_GE(p.capacity, k) << what;
            EXPECT_LE(p.capacity, n / 2 + 1024) << what;
        }
    }
}

// The engine alone: rows built to overflow or fall short are flagged, all
// other rows give exactly the host's answer, flagged rows hold placeholders.
TEST(GpuSelectSampledThreshold, EngineFlagsOverflowAndShortfall) {
    FAISS_EXT_REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    const int64_t n = 131072;
    const std::vector<Pattern> pats = {Pattern::Random,    Pattern::Overflow, Pattern::Ties,
                                       Pattern::Shortfall, Pattern::NaNInf,   Pattern::SortedUp};
    const int64_t rows = sized<int64_t>(12, 6);
    for (int64_t k : {33, 1024}) {
        for (bool largest : {false, true}) {
            const std::string what = describe(rows, n, k, largest, "engine");
            const std::vector<float> v = makeMatrix(rows, n, k, largest, pats, kSeed + k);
            DeviceArray<float> dv(v.size()), outV(size_t(rows) * k);
            DeviceArray<int64_t> outI(size_t(rows) * k);
            DeviceArray<uint8_t> flags(static_cast<size_t>(rows));
            const size_t bytes = sampledThresholdScratchBytes(rows, n, k);
            DeviceArray<char> scratch(bytes);
            ASSERT_TRUE(dv.p && outV.p && outI.p && flags.p && scratch.p) << what;
            dv.upload(v);
            ASSERT_NO_THROW(sampledThresholdSelect(dv.p, rows, n, k, largest, outV.p, outI.p,
                                                   flags.p, scratch.p, bytes, nullptr))
                << what;
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
            const std::vector<uint8_t> f = flags.download();
            const std::vector<float> gotV = outV.download();
            const std::vector<int64_t> gotI = outI.download();
            for (int64_t r = 0; r < rows; ++r) {
                const Pattern p = pats[size_t(r) % pats.size()];
                if (p == Pattern::Overflow || p == Pattern::Shortfall) {
                    EXPECT_EQ(f[size_t(r)], 1) << what << " row " << r << " " << patternName(p);
                    EXPECT_EQ(gotI[size_t(r) * k], int64_t(0xFFFFFFFFu)) << what << " row " << r;
                } else if (p != Pattern::SortedUp) {
                    // (sorted rows may fall short when the rank lands in the
                    // first run; either answer is allowed there)
                    EXPECT_EQ(f[size_t(r)], 0) << what << " row " << r << " " << patternName(p);
                }
            }
            const std::vector<uint32_t> cols = referenceColumns(v, rows, n, k, largest);
            EXPECT_EQ(checkRows(v, rows, n, k, cols, gotV, gotI, nullptr, &f), "") << what;
        }
    }
}

// selectK Auto on device matrices takes the path and equals both the host
// sort and quick multi-select, value and id, for every k and direction.
TEST(GpuSelectSampledThreshold, AutoEqualsHostSortAndQuickMultiSelect) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const std::vector<Pattern> pats(std::begin(kOrdinary), std::end(kOrdinary));
    struct Shape {
        int64_t rows, n;
    };
    const Shape shapes[] = {
        {sized<int64_t>(21, 7), 16384}, {sized<int64_t>(14, 7), 100003}, {7, int64_t(1) << 20}};
    for (const Shape& s : shapes) {
        const std::vector<float> v = makeMatrix(s.rows, s.n, 1, false, pats, kSeed + s.n);
        DeviceArray<float> dv(v.size());
        ASSERT_TRUE(dv.p);
        dv.upload(v);
        for (int64_t k : {1, 2, 10, 33, 256, 1024, 2048}) {
            if (!sampledThresholdApplies(s.n, k)) continue;
            for (bool largest : {false, true}) {
                const std::string what = describe(s.rows, s.n, k, largest, "auto");
                DeviceArray<float> aV(size_t(s.rows) * k), qV(size_t(s.rows) * k);
                DeviceArray<int64_t> aI(size_t(s.rows) * k), qI(size_t(s.rows) * k);
                ASSERT_TRUE(aV.p && qV.p && aI.p && qI.p) << what;
                const SampledThresholdCounters before = sampledThresholdCounters();
                ASSERT_NO_THROW(selectK(&res, dv.p, s.rows, s.n, k, largest, aV.p, aI.p)) << what;
                const SampledThresholdCounters after = sampledThresholdCounters();
                EXPECT_EQ(after.rows - before.rows, s.rows) << what << ": path not taken";
                SelectKOptions qms;
                qms.algo = SelectAlgo::QuickMultiSelect;
                ASSERT_NO_THROW(selectK(&res, dv.p, s.rows, s.n, k, largest, qV.p, qI.p, qms))
                    << what;
                EXPECT_EQ(sampledThresholdCounters().rows, after.rows)
                    << what << ": an explicit algorithm took the path";
                const std::vector<float> gotV = aV.download(), wantV = qV.download();
                const std::vector<int64_t> gotI = aI.download(), wantI = qI.download();
                EXPECT_EQ(std::memcmp(gotV.data(), wantV.data(), sizeof(float) * gotV.size()), 0)
                    << what << ": values differ from quick multi-select";
                EXPECT_EQ(gotI, wantI) << what << ": ids differ from quick multi-select";
                const std::vector<uint32_t> cols = referenceColumns(v, s.rows, s.n, k, largest);
                EXPECT_EQ(checkRows(v, s.rows, s.n, k, cols, gotV, gotI), "") << what;
            }
        }
    }
}

// Rows the sample misjudges are redone by the fallback: counted, and exact.
// Also host outputs (results through buffers) and several row blocks (a
// small temporary memory).
TEST(GpuSelectSampledThreshold, AutoFallbackRowsStayExact) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t n = int64_t(1) << 20;
    const int64_t rows = 8;
    // Overflow and shortfall rows in runs of one and two (runs go to the
    // fallback together).
    const std::vector<Pattern> pats = {Pattern::Overflow,  Pattern::Random,  Pattern::Shortfall,
                                       Pattern::Shortfall, Pattern::Random,  Pattern::Ties,
                                       Pattern::Overflow,  Pattern::Overflow};
    const int64_t adversarial = std::count_if(pats.begin(), pats.end(), [](Pattern p) {
        return p == Pattern::Overflow || p == Pattern::Shortfall;
    });
    for (int64_t k : {33, 1024}) {
        for (bool largest : {false, true}) {
            for (bool hostOut : {false, true}) {
                const std::string what =
                    describe(rows, n, k, largest, hostOut ? "host outputs" : "device outputs");
                // The sample positions depend on the row's index in its
                // launch: one launch here (default temporary memory).
                const std::vector<float> v = makeMatrix(rows, n, k, largest, pats, kSeed + k);
                DeviceArray<float> dv(v.size()), dV(size_t(rows) * k);
                DeviceArray<int64_t> dI(size_t(rows) * k);
                ASSERT_TRUE(dv.p && dV.p && dI.p) << what;
                dv.upload(v);
                std::vector<float> gotV(size_t(rows) * k);
                std::vector<int64_t> gotI(size_t(rows) * k);
                StandardGpuResources res;
                const SampledThresholdCounters before = sampledThresholdCounters();
                ASSERT_NO_THROW(selectK(&res, dv.p, rows, n, k, largest,
                                        hostOut ? gotV.data() : dV.p, hostOut ? gotI.data() : dI.p))
                    << what;
                const SampledThresholdCounters after = sampledThresholdCounters();
                EXPECT_EQ(after.rows - before.rows, rows) << what;
                EXPECT_EQ(after.fallbackRows - before.fallbackRows, adversarial) << what;
                if (!hostOut) {
                    gotV = dV.download();
                    gotI = dI.download();
                }
                const std::vector<uint32_t> cols = referenceColumns(v, rows, n, k, largest);
                EXPECT_EQ(checkRows(v, rows, n, k, cols, gotV, gotI), "") << what;
            }
        }
    }
    // Several row blocks: room for about three rows at a time.
    const int64_t k = 256;
    const std::vector<float> v =
        makeMatrix(rows, n, k, false, {Pattern::Random, Pattern::Ties}, kSeed + 7);
    DeviceArray<float> dv(v.size()), dV(size_t(rows) * k);
    DeviceArray<int64_t> dI(size_t(rows) * k);
    ASSERT_TRUE(dv.p && dV.p && dI.p);
    dv.upload(v);
    StandardGpuResources res;
    // selectK keeps room for one row of the fallback (quick multi-select)
    // and fills 90% of the temporary memory: about 3.5 rows of the path's
    // buffers besides.
    const size_t fallbackRow =
        faiss_ext::gpu::RowSelector::bytesPerRow(SelectAlgo::QuickMultiSelect, n, 1, n, k, 4, 8);
    const size_t pathRow = sampledThresholdScratchBytes(1, n, k) + 1;
    res.setTempMemory((fallbackRow + pathRow * 7 / 2) / 9 * 10 + 4096);
    const SampledThresholdCounters before = sampledThresholdCounters();
    ASSERT_NO_THROW(selectK(&res, dv.p, rows, n, k, false, dV.p, dI.p));
    EXPECT_EQ(sampledThresholdCounters().rows - before.rows, rows);
    const std::vector<uint32_t> cols = referenceColumns(v, rows, n, k, false);
    EXPECT_EQ(checkRows(v, rows, n, k, cols, dV.download(), dI.download()), "")
        << describe(rows, n, k, false, "small temporary memory");
}

// Input ids on the host and on the device map the selected columns, after
// the fallback too; host matrices keep the usual path.
TEST(GpuSelectSampledThreshold, InIndicesAndHostMatrices) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 100003, rows = 6, k = 500;
    const std::vector<Pattern> pats = {Pattern::Random, Pattern::Shortfall, Pattern::NaNInf};
    for (bool largest : {false, true}) {
        const std::vector<float> v = makeMatrix(rows, n, k, largest, pats, kSeed + 3);
        std::vector<int64_t> ids(size_t(rows) * n);
        for (int64_t r = 0; r < rows; ++r) {
            // decreasing with the column: "smaller column" and "smaller id" differ
            for (int64_t j = 0; j < n; ++j)
                ids[size_t(r) * n + j] = (r << 40) + 3 * (n - 1 - j) + 5;
        }
        DeviceArray<float> dv(v.size()), dV(size_t(rows) * k);
        DeviceArray<int64_t> dIds(ids.size()), dI(size_t(rows) * k);
        ASSERT_TRUE(dv.p && dV.p && dIds.p && dI.p);
        dv.upload(v);
        dIds.upload(ids);
        const std::vector<uint32_t> cols = referenceColumns(v, rows, n, k, largest);
        for (bool idsOnDev : {false, true}) {
            for (bool hostOut : {false, true}) {
                const std::string what =
                    describe(rows, n, k, largest,
                             std::string("inIndices on ") + (idsOnDev ? "device" : "host") +
                                 (hostOut ? ", host outputs" : ", device outputs"));
                SelectKOptions opt;
                opt.inIndices = idsOnDev ? dIds.p : ids.data();
                std::vector<float> gotV(size_t(rows) * k);
                std::vector<int64_t> gotI(size_t(rows) * k);
                const SampledThresholdCounters before = sampledThresholdCounters();
                ASSERT_NO_THROW(selectK(&res, dv.p, rows, n, k, largest,
                                        hostOut ? gotV.data() : dV.p, hostOut ? gotI.data() : dI.p,
                                        opt))
                    << what;
                const SampledThresholdCounters after = sampledThresholdCounters();
                EXPECT_EQ(after.rows - before.rows, rows) << what;
                EXPECT_EQ(after.fallbackRows - before.fallbackRows, 2) << what;
                if (!hostOut) {
                    gotV = dV.download();
                    gotI = dI.download();
                }
                EXPECT_EQ(checkRows(v, rows, n, k, cols, gotV, gotI, ids.data()), "") << what;
            }
        }
        // A host matrix: the usual path, the same answer.
        const std::string what = describe(rows, n, k, largest, "host matrix");
        std::vector<float> gotV(size_t(rows) * k);
        std::vector<int64_t> gotI(size_t(rows) * k);
        const SampledThresholdCounters before = sampledThresholdCounters();
        ASSERT_NO_THROW(selectK(&res, v.data(), rows, n, k, largest, gotV.data(), gotI.data()))
            << what;
        EXPECT_EQ(sampledThresholdCounters().rows, before.rows) << what;
        EXPECT_EQ(checkRows(v, rows, n, k, cols, gotV, gotI), "") << what;
    }
}

// The thresholds of the shared sample (the fused candidates' entry point),
// at every sample size the plan can pick: each row's T has exactly the
// plan's rank keys (ordered bits, entry number) of its sample at or below
// it, with and without column terms, on rows of ties, signed zeros and NaN.
TEST(GpuSelectSampledThreshold, SharedSampleThresholdHasRankKeysAtOrBelowIt) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t n = 10000000, rows = 9;
    const Pattern pats[] = {Pattern::Random, Pattern::Ties, Pattern::NaNInf,
                            Pattern::NaNMost, Pattern::SignedZero};
    struct Cap {
        ~Cap() { setSharedSampleSize(0); }
    } restore;
    for (int64_t maxSamples : {int64_t(1024), int64_t(4096), int64_t(8192), int64_t(16384)}) {
        setSharedSampleSize(maxSamples);
        for (int64_t k : {int64_t(42), int64_t(200), int64_t(4096)}) {
            const SampledThresholdPlan plan = sharedSampleThresholdPlan(n, k);
            ASSERT_EQ(plan.samples, maxSamples);
            const int64_t s = plan.samples;
            for (bool withColAdd : {false, true}) {
                const std::string what = "samples " + std::to_string(s) + " k " +
                                         std::to_string(k) + (withColAdd ? " colAdd" : "");
                std::mt19937_64 rng(kSeed + uint64_t(s + k));
                std::vector<float> v(static_cast<size_t>(rows * s));
                for (int64_t r = 0; r < rows; ++r)
                    fillRow(v.data() + size_t(r * s), pats[size_t(r) % 5], r, s, k, false, rng);
                std::vector<float> add(static_cast<size_t>(s), 0.f);
                std::uniform_int_distribution<int> small(-2, 2);
                if (withColAdd)
                    for (float& a : add) a = float(small(rng));  // ties stay ties
                DeviceArray<float> dv(v.size()), dadd(add.size());
                ASSERT_TRUE(dv.p && dadd.p) << what;
                dv.upload(v);
                dadd.upload(add);
                const size_t bytes = sharedSampleThresholdScratchBytes(rows, n, k);
                DeviceArray<char> scratch(bytes);
                ASSERT_TRUE(scratch.p) << what;
                sampledThresholdFromSharedSample(dv.p, withColAdd ? dadd.p : nullptr, rows, n, k,
                                                 scratch.p, bytes, nullptr);
                ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
                const SampledThresholdRowBuffers b =
                    sampledThresholdRowBuffers(scratch.p, bytes, rows, n, k);
                std::vector<uint64_t> t(static_cast<size_t>(rows));
                ASSERT_EQ(cudaMemcpy(t.data(), b.thresholds, 8 * t.size(), cudaMemcpyDeviceToHost),
                          cudaSuccess);
                for (int64_t r = 0; r < rows; ++r) {
                    int64_t atOrBelow = 0;
                    for (int64_t e = 0; e < s; ++e) {
                        float x = v[size_t(r * s + e)];
                        if (withColAdd) x += add[size_t(e)];
                        const uint64_t key = (uint64_t(orderedBits(x)) << 32) | uint64_t(e);
                        atOrBelow += key <= t[size_t(r)];
                    }
                    EXPECT_EQ(atOrBelow, plan.rank) << what << " row " << r;
                }
            }
        }
    }
}
