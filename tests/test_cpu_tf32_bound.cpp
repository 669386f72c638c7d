// The TF32 error bound (gpu/impl/flat/Tf32ErrorBound.h) against a CPU emulation
// of the two arithmetics it relates (TensorCoreEmulation.h): the tensor
// cores as modelled in the bound's derivation (inputs truncated to TF32,
// exact products, block FMAs that align their addends to the largest with
// truncation and truncate the result; Fasi et al., PeerJ CS 2021) and the
// FP32 path (FP32 fused multiply-adds, sequential or pairwise). The bound must hold on every pair,
// including data far from the origin, cancellations and tiny numbers, and
// must not be vacuous: on non-negative data, where truncation errors all
// point the same way, the observed error reaches a fair share of it. Also
// the candidate count of the bounded search (impl/flat/BoundedFlatSearch.h).
#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "TensorCoreEmulation.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/impl/flat/BoundedFlatSearch.h"
#include "faiss_ext/gpu/impl/flat/Tf32ErrorBound.h"

using faiss_ext::gpu::magnitudeSafe;
using faiss_ext::gpu::normUpperBound;
using faiss_ext::gpu::Tf32BoundTerms;
using faiss_ext::gpu::tf32BoundTerms;
using faiss_ext::gpu::tf32KeyErrorBound;
using faiss_ext::test::pairwiseDot;
using faiss_ext::test::sequentialDot;
using faiss_ext::test::sumOfSquares;

namespace {

/// The TF32 tensor-core dot product of the bound's model.
float tensorCoreDot(const float* q, const float* x, int d, int t) {
    return faiss_ext::test::tensorCoreDot(q, x, d, t, faiss_ext::test::toTf32Truncated);
}

struct Worst {
    double ratio = 0.0;  // largest |key_A - key_F| / e seen
    std::string where;
};

/// Checks |key_A - key_F| <= e for every (query, vector) pair, for the L2
/// keys (alpha -2, + |x|^2) and the inner-product keys (alpha -1).
void checkPairs(const std::vector<float>& xq, const std::vector<float>& xb, int d,
                const std::string& data, Worst* worst) {
    const int64_t nq = int64_t(xq.size()) / d, nb = int64_t(xb.size()) / d;
    for (bool l2 : {true, false}) {
        const Tf32BoundTerms t = tf32BoundTerms(d, l2);
        ASSERT_TRUE(t.valid);
        const float alpha = l2 ? -2.f : -1.f;
        for (int64_t i = 0; i < nq; ++i) {
            const float* q = xq.data() + i * d;
            const double qNorm = normUpperBound(t, sumOfSquares(q, d));
            for (int64_t j = 0; j < nb; ++j) {
                const float* x = xb.data() + j * d;
                const float nx = sumOfSquares(x, d);
                const double e = tf32KeyErrorBound(t, qNorm, normUpperBound(t, nx), nx);
                ASSERT_TRUE(magnitudeSafe(t, qNorm, normUpperBound(t, nx), nx)) << data;
                for (int blockTerms : {4, 8}) {
                    const float a = alpha * tensorCoreDot(q, x, d, blockTerms);
                    const float keyA = l2 ? a + nx : a;
                    for (int order = 0; order < 2; ++order) {
                        const float f =
                            alpha * (order ? pairwiseDot(q, x, d) : sequentialDot(q, x, d));
                        const float keyF = l2 ? f + nx : f;
                        const double diff = std::fabs(double(keyA) - double(keyF));
                        const std::string where = data + " d=" + std::to_string(d) +
                                                  (l2 ? " L2" : " IP") + " q" + std::to_string(i) +
                                                  " x" + std::to_string(j) +
                                                  " t=" + std::to_string(blockTerms) +
                                                  " seed=" + std::to_string(faiss_ext::test::kSeed);
                        ASSERT_LE(diff, e)
                            << where << ": |" << keyA << " - " << keyF << "| > " << e;
                        if (e > 0 && diff / e > worst->ratio) {
                            worst->ratio = diff / e;
                            worst->where = where;
                        }
                    }
                }
            }
        }
    }
}

std::vector<float> uniform(int64_t n, int d, float lo, float hi, uint64_t seed) {
    return faiss_ext::test::randomVectors(n, d, seed, lo, hi);
}

}  // namespace

TEST(Tf32ErrorBound, HoldsOnEmulatedArithmetic) {
    for (int d : {1, 3, 97, 128, 960}) {
        const uint64_t s = faiss_ext::test::kSeed + uint64_t(d);
        Worst worst;
        // Centred data with cancellations.
        checkPairs(uniform(6, d, -1.f, 1.f, s), uniform(40, d, -1.f, 1.f, s + 1), d, "centred",
                   &worst);
        // Far from the origin: large norms, small differences.
        std::vector<float> farQ = uniform(6, d, 1000.f, 1000.5f, s + 2);
        std::vector<float> farB = uniform(40, d, 1000.f, 1000.5f, s + 3);
        checkPairs(farQ, farB, d, "far-from-origin", &worst);
        // Wide dynamic range in one vector.
        std::vector<float> wide = uniform(40, d, -1.f, 1.f, s + 4);
        for (size_t i = 0; i < wide.size(); i += 3) wide[i] *= 1e6f;
        checkPairs(uniform(6, d, -1.f, 1.f, s + 5), wide, d, "wide-range", &worst);
        // Tiny numbers (subnormal products and inputs).
        checkPairs(uniform(6, d, -1e-20f, 1e-20f, s + 6), uniform(40, d, -1e-20f, 1e-20f, s + 7), d,
                   "tiny", &worst);
        EXPECT_LE(worst.ratio, 1.0) << worst.where;
    }
}

TEST(Tf32ErrorBound, IsReachedOnNonNegativeData) {
    // Truncation errors all point toward zero on non-negative data, so the
    // observed TF32 error is a fair share of the bound: the bound is not
    // vacuous and the emulation does truncate.
    const int d = 128;
    Worst worst;
    checkPairs(uniform(8, d, 0.f, 1.f, faiss_ext::test::kSeed),
               uniform(64, d, 0.f, 1.f, faiss_ext::test::kSeed + 1), d, "non-negative", &worst);
    EXPECT_GT(worst.ratio, 0.1) << "largest observed / bound at " << worst.where;
}

TEST(Tf32ErrorBound, TermsAreSane) {
    // c_dot is dominated by the input rounding 2 * 2^-10 at small d and
    // grows with d through the accumulation terms.
    const Tf32BoundTerms t128 = tf32BoundTerms(128, true), t960 = tf32BoundTerms(960, true);
    EXPECT_GT(t128.dotCoef, 2.0 * std::ldexp(1.0, -10));
    EXPECT_LT(t128.dotCoef, 2.2 * std::ldexp(1.0, -10));
    EXPECT_GT(t960.dotCoef, t128.dotCoef);
    EXPECT_EQ(t128.absAlpha, 2.0);
    EXPECT_EQ(tf32BoundTerms(128, false).absAlpha, 1.0);
    // The bound grows with the vector's norm (what e(q, x_max) relies on).
    EXPECT_LT(tf32KeyErrorBound(t128, 1.0, 1.0, 1.0), tf32KeyErrorBound(t128, 1.0, 2.0, 4.0));
    // A dimension too large for the gammas is refused.
    EXPECT_FALSE(tf32BoundTerms(1 << 22, true).valid);
    // Overflow guard.
    EXPECT_TRUE(magnitudeSafe(t128, 1e3, 1e3, 1e6));
    EXPECT_FALSE(magnitudeSafe(t128, 1e19, 1e19, 1e38));
}

TEST(BoundedCandidates, KeepTwiceKOrKPlus32WithinTheCorpus) {
    using faiss_ext::gpu::boundedCandidateCount;
    EXPECT_EQ(boundedCandidateCount(1, 1000000), 33);
    EXPECT_EQ(boundedCandidateCount(10, 1000000), 42);
    EXPECT_EQ(boundedCandidateCount(32, 1000000), 64);
    EXPECT_EQ(boundedCandidateCount(1024, 1000000), 2048);
    EXPECT_EQ(boundedCandidateCount(4097, 6000), 6000);  // capped at nb: every vector a candidate
    EXPECT_EQ(boundedCandidateCount(5, 5), 5);
    // BF16x3 passes: a slack of 3 k up to k = 128, k beyond; capped at nb
    EXPECT_EQ(boundedCandidateCount(10, 1000000, true), 42);
    EXPECT_EQ(boundedCandidateCount(100, 1000000, true), 400);
    EXPECT_EQ(boundedCandidateCount(128, 1000000, true), 512);
    EXPECT_EQ(boundedCandidateCount(129, 1000000, true), 258);
    EXPECT_EQ(boundedCandidateCount(100, 300, true), 300);
    EXPECT_THROW(boundedCandidateCount(0, 10), faiss::FaissException);
    EXPECT_THROW(boundedCandidateCount(11, 10), faiss::FaissException);
    EXPECT_TRUE(faiss_ext::gpu::boundedSearchSupported(960));
    EXPECT_FALSE(faiss_ext::gpu::boundedSearchSupported(0));
}

namespace {

/// max(h1(t), h2(t)) of leftOutKeyLowerBound's derivation, in long double
/// without its safety margins: what the bound must stay below at every norm.
long double leftOutKeyFloor(const Tf32BoundTerms& t, double qNorm, double lastKey, double norm) {
    const long double u = std::ldexp(1.0L, -24), g = t.fp32Gamma;
    const long double h1 =
        lastKey - (long double)tf32KeyErrorBound(t, qNorm, norm, norm * norm * (1.0 + g));
    if (!t.l2) return h1;
    const long double h2 = (1 - u) * (1 - g) * (long double)norm * norm -
                           2 * (1 + u) * (1 + g) * (long double)qNorm * norm;
    return std::max(h1, h2);
}

}  // namespace

TEST(Tf32ErrorBound, LeftOutLowerBoundHoldsAtEveryNormAndBeatsTheOldOne) {
    std::mt19937_64 rng(faiss_ext::test::kSeed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int trial = 0; trial < 2000; ++trial) {
        const int d = 1 + int(unit(rng) * 1000);
        const bool l2 = trial % 3 != 0;
        const Tf32BoundTerms t = tf32BoundTerms(d, l2);
        const double qNorm = std::exp(unit(rng) * 20 - 10);
        const double xMax = std::exp(unit(rng) * 20 - 10);
        const double lastKey = (unit(rng) * 4 - 2) * (qNorm * xMax + xMax * xMax);
        const double bound = faiss_ext::gpu::leftOutKeyLowerBound(t, qNorm, lastKey, xMax);
        const double old =
            lastKey - tf32KeyErrorBound(t, qNorm, xMax, xMax * xMax * (1 + t.fp32Gamma));
        const std::string where = "trial " + std::to_string(trial) + " d=" + std::to_string(d) +
                                  (l2 ? " L2" : " IP") + " |q|=" + std::to_string(qNorm) +
                                  " x_max=" + std::to_string(xMax) +
                                  " lastKey=" + std::to_string(lastKey);
        ASSERT_TRUE(std::isfinite(bound)) << where;
        // Never below the bound made of e(q, x_max) (up to its 2^-50 margins).
        EXPECT_GE(bound, old - 1e-12 * (std::fabs(lastKey) + std::fabs(old))) << where;
        for (int i = 0; i <= 4000; ++i) {
            const double norm = xMax * i / 4000.0;
            ASSERT_LE((long double)bound, leftOutKeyFloor(t, qNorm, lastKey, norm))
                << where << " at |x| = " << norm;
        }
    }
    EXPECT_TRUE(
        std::isnan(faiss_ext::gpu::leftOutKeyLowerBound(tf32BoundTerms(8, true), 1.0, NAN, 1.0)));
    EXPECT_TRUE(std::isnan(
        faiss_ext::gpu::leftOutKeyLowerBound(tf32BoundTerms(8, true), 1.0, INFINITY, 1.0)));
}

TEST(Tf32ErrorBound, LeftOutLowerBoundHoldsOnEmulatedSearchWithOutliers) {
    // Unit-scale vectors plus a few of norm 1e3 (outliers), L2: the
    // emulated TF32 keys select m candidates; every vector left out must
    // have a re-scored key >= the bound, and the bound, unlike the one made
    // of e(q, x_max), must still certify (exceed the k-th re-scored key).
    const int d = 32, nb = 3000, nq = 20, k = 10, m = k + 32;
    std::vector<float> xb = uniform(nb, d, -1.f, 1.f, faiss_ext::test::kSeed);
    for (int i = 0; i < 5; ++i) {
        for (int c = 0; c < d; ++c) xb[size_t((i * 577) * d + c)] *= 1000.f;
    }
    std::vector<float> xq(xb.begin() + 100 * d, xb.begin() + (100 + nq) * d);
    for (float& v : xq) v += 1e-3f;
    const Tf32BoundTerms t = tf32BoundTerms(d, true);
    std::vector<float> nx(nb);
    double maxSq = 0;
    for (int j = 0; j < nb; ++j) {
        nx[size_t(j)] = sumOfSquares(&xb[size_t(j * d)], d);
        maxSq = std::max(maxSq, double(nx[size_t(j)]));
    }
    const double xMax = normUpperBound(t, maxSq);
    int certified = 0, certifiedOld = 0;
    for (int i = 0; i < nq; ++i) {
        const float* q = &xq[size_t(i * d)];
        const double qNorm = normUpperBound(t, sumOfSquares(q, d));
        std::vector<std::pair<float, int>> approx(nb), exact(nb);
        for (int j = 0; j < nb; ++j) {
            const float* x = &xb[size_t(j * d)];
            approx[size_t(j)] = {-2.f * tensorCoreDot(q, x, d, 8) + nx[size_t(j)], j};
            exact[size_t(j)] = {-2.f * sequentialDot(q, x, d) + nx[size_t(j)], j};
        }
        std::sort(approx.begin(), approx.end());
        std::vector<float> kept;
        for (int j = 0; j < m; ++j) kept.push_back(exact[size_t(approx[size_t(j)].second)].first);
        std::sort(kept.begin(), kept.end());
        const double lastKey = approx[size_t(m - 1)].first;
        const double bound = faiss_ext::gpu::leftOutKeyLowerBound(t, qNorm, lastKey, xMax);
        for (int j = m; j < nb; ++j) {
            ASSERT_GE(double(exact[size_t(approx[size_t(j)].second)].first), bound)
                << "query " << i << " vector " << approx[size_t(j)].second;
        }
        certified += bound > kept[size_t(k - 1)];
        certifiedOld += lastKey - tf32KeyErrorBound(t, qNorm, xMax, maxSq) > kept[size_t(k - 1)];
    }
    EXPECT_EQ(certified, nq);
    EXPECT_EQ(certifiedOld, 0);
}
