// The BF16x3 error bound (gpu/impl/flat/Tf32ErrorBound.h, bf16x3BoundTerms)
// against a CPU emulation of the arithmetic it relates (TensorCoreEmulation.h):
// each coordinate split into two BF16 parts by round to nearest
// (SplitBf16.cu), the products hi.lo, lo.hi and hi.hi summed by one
// emulated tensor-core GEMM over split rows (truncating block FMAs) in
// three orders (as laid out, reversed, split-K), against the FP32 path's
// dot products. The bound must hold on every pair, must be far tighter
// than TF32's, and must not be vacuous.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "TensorCoreEmulation.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/FlatOptions.h"
#include "faiss_ext/gpu/impl/flat/SplitBf16.h"
#include "faiss_ext/gpu/impl/flat/Tf32ErrorBound.h"

using faiss_ext::gpu::bf16PaddedDim;
using faiss_ext::gpu::bf16x3BoundTerms;
using faiss_ext::gpu::magnitudeSafe;
using faiss_ext::gpu::normUpperBound;
using faiss_ext::gpu::Tf32BoundTerms;
using faiss_ext::gpu::tf32BoundTerms;
using faiss_ext::gpu::tf32KeyErrorBound;
using namespace faiss_ext::test;

namespace {

/// The split parts of a vector: hi and lo arrays.
struct Split {
    std::vector<float> hi, lo;
};

Split splitOf(const float* v, int d) {
    Split s;
    for (int i = 0; i < d; ++i) {
        const std::pair<float, float> p = splitBf16(v[i]);
        s.hi.push_back(p.first);
        s.lo.push_back(p.second);
    }
    return s;
}

/// Orders of the emulated GEMM's accumulation over the 3d terms: as laid
/// out (small products first), reversed (hi.hi first: every later block
/// loses against the full magnitude), and split-K (two halves summed apart,
/// then added in FP32).
enum class Order { AsLaidOut, Reversed, SplitK };

/// hi.lo + lo.hi + hi.hi as the one emulated GEMM over split rows
/// (SplitBf16.h: query [hi | lo | hi], vector [lo | hi | hi]) in blocks of
/// t terms, accumulated in `order`.
float bf16x3Dot(const Split& q, const Split& x, int d, int t, Order order) {
    std::vector<float> qr, xr;
    for (const std::vector<float>* part : {&q.hi, &q.lo, &q.hi})
        qr.insert(qr.end(), part->begin(), part->end());
    for (const std::vector<float>* part : {&x.lo, &x.hi, &x.hi})
        xr.insert(xr.end(), part->begin(), part->end());
    if (order == Order::Reversed) {
        std::reverse(qr.begin(), qr.end());
        std::reverse(xr.begin(), xr.end());
    }
    const int n = 3 * d;
    if (order != Order::SplitK) return tensorCoreDot(qr.data(), xr.data(), n, t, flushSubnormal);
    const int half = n / 2;
    return tensorCoreDot(qr.data(), xr.data(), half, t, flushSubnormal) +
           tensorCoreDot(qr.data() + half, xr.data() + half, n - half, t, flushSubnormal);
}

/// Checks |key_A - key_F| <= e for every pair, L2 and inner-product keys;
/// returns the largest |key_A - key_F| / e seen.
double checkPairs(const std::vector<float>& xq, const std::vector<float>& xb, int d,
                  const std::string& data) {
    const int64_t nq = int64_t(xq.size()) / d, nb = int64_t(xb.size()) / d;
    double worst = 0.0;
    for (bool l2 : {true, false}) {
        const Tf32BoundTerms t = bf16x3BoundTerms(bf16PaddedDim(d), l2);
        EXPECT_TRUE(t.valid);
        const float alpha = l2 ? -2.f : -1.f;
        for (int64_t i = 0; i < nq; ++i) {
            const float* q = xq.data() + i * d;
            const Split qs = splitOf(q, d);
            const double qNorm = normUpperBound(t, sumOfSquares(q, d));
            for (int64_t j = 0; j < nb; ++j) {
                const float* x = xb.data() + j * d;
                const Split xs = splitOf(x, d);
                const float nx = sumOfSquares(x, d);
                const double e = tf32KeyErrorBound(t, qNorm, normUpperBound(t, nx), nx);
                EXPECT_TRUE(magnitudeSafe(t, qNorm, normUpperBound(t, nx), nx)) << data;
                for (int blockTerms : {4, 8, 16}) {
                    for (Order gemmOrder : {Order::AsLaidOut, Order::Reversed, Order::SplitK}) {
                        const float a = alpha * bf16x3Dot(qs, xs, d, blockTerms, gemmOrder);
                        const float keyA = l2 ? a + nx : a;
                        for (int order = 0; order < 2; ++order) {
                            const float f =
                                alpha * (order ? pairwiseDot(q, x, d) : sequentialDot(q, x, d));
                            const float keyF = l2 ? f + nx : f;
                            const double diff = std::fabs(double(keyA) - double(keyF));
                            if (!(diff <= e)) {
                                ADD_FAILURE() << data << " d=" << d << (l2 ? " L2" : " IP") << " q"
                                              << i << " x" << j << " t=" << blockTerms
                                              << " order " << int(gemmOrder) << ": |" << keyA
                                              << " - " << keyF << "| > " << e;
                                return worst;
                            }
                            if (e > 0) worst = std::max(worst, diff / e);
                        }
                    }
                }
            }
        }
    }
    return worst;
}

}  // namespace

TEST(Bf16x3ErrorBound, HoldsOnEmulatedArithmetic) {
    for (int d : {1, 3, 96, 128, 784}) {
        const uint64_t s = kSeed + uint64_t(d);
        checkPairs(randomVectors(4, d, s, -1.f, 1.f), randomVectors(24, d, s + 1, -1.f, 1.f), d,
                   "centred");
        checkPairs(randomVectors(4, d, s + 2, 1000.f, 1000.5f),
                   randomVectors(24, d, s + 3, 1000.f, 1000.5f), d, "far-from-origin");
        std::vector<float> wide = randomVectors(24, d, s + 4, -1.f, 1.f);
        for (size_t i = 0; i < wide.size(); i += 3) wide[i] *= 1e6f;
        checkPairs(randomVectors(4, d, s + 5, -1.f, 1.f), wide, d, "wide-range");
        checkPairs(randomVectors(4, d, s + 6, -1e-20f, 1e-20f),
                   randomVectors(24, d, s + 7, -1e-20f, 1e-20f), d, "tiny");
    }
}

TEST(Bf16x3ErrorBound, IsReachedOnNonNegativeData) {
    // Truncations in the accumulation all point toward zero on non-negative
    // data, so the observed error is a visible share of the bound: about
    // 0.03 (the split's round-to-nearest errors cancel; the model's
    // accumulation term is the worst case of every block, 2^-22 per term,
    // where truncating blocks of 4-16 products lose about 2^-24 on
    // average). A vacuous bound would give orders of magnitude less.
    const int d = 128;
    const double worst = checkPairs(randomVectors(6, d, kSeed, 0.f, 1.f),
                                    randomVectors(32, d, kSeed + 1, 0.f, 1.f), d, "non-negative");
    EXPECT_GT(worst, 0.01);
}

TEST(Bf16x3ErrorBound, IsFarTighterThanTf32) {
    for (int d : {8, 96, 128, 784}) {
        const Tf32BoundTerms b = bf16x3BoundTerms(d, true), t = tf32BoundTerms(d, true);
        ASSERT_TRUE(b.valid) << d;
        // About 3 2^-16 + 3 d 2^-22 against 2^-9 + d 2^-22: the
        // accumulation term takes over as d grows.
        EXPECT_LT(b.dotCoef, t.dotCoef / 3) << d;
        EXPECT_GT(b.dotCoef, 3 * std::ldexp(1.0, -16) + 3 * d * std::ldexp(1.0, -22)) << d;
        EXPECT_LT(tf32KeyErrorBound(b, 50.0, 50.0, 2500.0),
                  tf32KeyErrorBound(t, 50.0, 50.0, 2500.0) / 3)
            << d;
    }
    EXPECT_LT(bf16x3BoundTerms(96, true).dotCoef, tf32BoundTerms(96, true).dotCoef / 15);
    EXPECT_EQ(bf16PaddedDim(1), 8);
    EXPECT_EQ(bf16PaddedDim(96), 96);
    EXPECT_EQ(bf16PaddedDim(100), 104);
}

TEST(Bf16x3ErrorBound, PrecisionNamesRoundTrip) {
    using faiss_ext::gpu::DistancePrecision;
    for (DistancePrecision p : {DistancePrecision::Auto, DistancePrecision::FP32,
                                DistancePrecision::TF32Bounded, DistancePrecision::BF16x3Bounded}) {
        EXPECT_EQ(
            faiss_ext::gpu::distancePrecisionFromName(faiss_ext::gpu::distancePrecisionName(p)), p);
    }
    EXPECT_EQ(faiss_ext::gpu::distancePrecisionFromName("BF16x3-Bounded"),
              DistancePrecision::BF16x3Bounded);
    EXPECT_TRUE(faiss_ext::gpu::isBoundedPrecision(DistancePrecision::BF16x3Bounded));
    EXPECT_TRUE(faiss_ext::gpu::isBoundedPrecision(DistancePrecision::TF32Bounded));
    EXPECT_FALSE(faiss_ext::gpu::isBoundedPrecision(DistancePrecision::FP32));
    EXPECT_FALSE(faiss_ext::gpu::isBoundedPrecision(DistancePrecision::Auto));
}
