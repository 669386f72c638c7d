// A rigorous bound on how far a key computed from a TF32 tensor-core GEMM
// can be from the key the FP32 path computes for the same (query, vector)
// pair. Plain C++ for the host (tests check it against an emulation of the
// arithmetic), force-inlined device code in .cu files.
//
// Keys (smaller is closer; alpha = -2 for L2, -1 for the inner product
// metrics, whose vectors are prepared first for cosine / Pearson):
//   L2:  key = fl(n_x + alpha * s),  n_x = the stored FP32 |x|^2
//   IP:  key = alpha * s             (no norm added)
// where s is the dot product q.x as each path computes it. alpha is a power
// of two, so alpha * s is exact. Write P = sum_i |q_i x_i| <= |q| |x|
// (Cauchy-Schwarz), u = 2^-24 (FP32 round to nearest), and
// gamma(n, v) = n v / (1 - n v) (Higham, "Accuracy and Stability of
// Numerical Algorithms", 2nd ed., SIAM 2002, sec. 3.1).
//
// 1. The FP32 path (cuBLAS, any order of summation, split-K included) and
//    the FP32 re-scoring (BoundedFlatSearch.cu, warp-strided FMA then a
//    tree) both give |s_F - s| <= gamma(d + 1, u) P (Higham, Lemma 3.4 and
//    eq. 3.5: any summation tree of depth <= d, products rounded or fused).
// 2. The TF32 path rounds each input to 10 mantissa bits. cuBLAS does not
//    document round-to-nearest or truncation, so truncation is assumed:
//    |q~_i - q_i| <= 2^-10 |q_i|, hence |q~_i x~_i - q_i x_i| <= (2 * 2^-10 +
//    2^-20) |q_i x_i|. Products of two 11-bit significands are exact in FP32.
// 3. The tensor cores sum in FP32, but Fasi, Higham, Mikaitis & Pranesh
//    ("Numerical behavior of NVIDIA tensor cores", PeerJ Computer Science
//    7:e330, 2021, doi:10.7717/peerj-cs.330) found that a block FMA aligns
//    its t + 1 addends to the largest exponent with truncation and
//    normalises by truncation. Each addend then loses < 2^-23 of the
//    block's largest magnitude, which over d / t blocks sums to at most
//    (1 + 1/t) d 2^-23 P' <= d 2^-22 P' (P' = sum |q~_i x~_i|): the unit
//    2^-22 over d + 2 terms covers it, and any split-K reduction in FP32
//    on top. So |s_A - s~| <= gamma(d + 2, 2^-22) (1 + 2^-10)^2 P.
// 4. Hence |s_A - s_F| <= c_dot P with
//      c_dot = 2 * 2^-10 + 2^-20 + (1 + 2^-10)^2 gamma(d + 2, 2^-22) + gamma(d + 1, u),
//    and |s_A|, |s_F| <= c_mag P, c_mag = max((1 + 2^-10)^2 (1 + gamma(d + 2, 2^-22)),
//    1 + gamma(d + 1, u)).
// 5. L2 adds n_x with one rounding in each path: |fl(n_x + a) - (n_x + a)|
//    <= u (n_x + |a|), twice, with |a| <= |alpha| c_mag P.
// 6. Tiny numbers: the tensor cores may flush subnormal inputs, products
//    and partial sums to zero (error < 2^-126 each, |q_i| 2^-126 for a
//    flushed x_i); over d terms this is below 2^-125 (d (|q| + |x|) + 2d + 2).
// Together, with |alpha| in front of every dot-product term:
//    e(q, x) = |alpha| c_dot |q| |x| + [L2] 2u (n_x + |alpha| c_mag |q| |x|)
//              + |alpha| 2^-125 (d (|q| + |x|) + 2d + 2),
// a bound on |key_TF32 - key_FP32| and on |key_TF32 - key_rescored|. It
// grows with |x| and n_x, so e(q, x_max), with x_max the corpus's largest
// norm, bounds it for every vector; leftOutKeyLowerBound sharpens this for
// L2, where a large norm also bounds the key from below. The norms it takes are upper bounds of
// the true Euclidean norms: the stored n_x is an FP32 sum of squares, so
// |x|^2 <= n_x / (1 - gamma(d + 1, u)).
//
// The bound is evaluated in double (every term is >= 0; a few dozen
// roundings of 2^-53 each) and inflated by 2^-40 so that it stays an upper
// bound; the comparisons of the certificate use directed rounding.
//
// Overflow: when c_mag |q| |x_max| |alpha| + n_max reaches 2^126 a product
// or partial sum could overflow in one path and not in the other, so such
// queries are never certified (magnitudeSafe).
#pragma once

#include <cmath>
#include <cstdint>

#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

/// The constants of the bound for one dimension and metric (host side):
/// tf32BoundTerms for TF32 products, bf16x3BoundTerms for BF16x3 ones.
struct Tf32BoundTerms {
    double absAlpha = 2.0;    ///< |alpha|: 2 for L2, 1 for the inner product metrics
    bool l2 = true;           ///< whether keys add the stored |x|^2
    double dotCoef = 0.0;     ///< c_dot
    double magCoef = 0.0;     ///< c_mag
    double normGrowth = 1.0;  ///< true |x|^2 <= stored |x|^2 * normGrowth
    double tinyDim = 0.0;     ///< d, for the subnormal term
    double fp32Gamma = 0.0;   ///< gamma(d + 1, u): any FP32 dot product or sum of squares
    bool valid = false;       ///< false when d is too large for the gammas (d u >= 1/2)
};

/// gamma(n, unit) = n unit / (1 - n unit), or +inf when n unit >= 1/2.
FAISS_EXT_HOST_DEVICE double errorGamma(double n, double unit) {
    const double nu = n * unit;
    return nu < 0.5 ? nu / (1.0 - nu) : INFINITY;
}

/// The bound's constants for dimension d (>= 1); l2 selects the L2 keys.
inline Tf32BoundTerms tf32BoundTerms(int d, bool l2) {
    const double u = std::ldexp(1.0, -24);
    const double accUnit = std::ldexp(1.0, -22);
    const double delta = std::ldexp(1.0, -10);
    Tf32BoundTerms t;
    t.absAlpha = l2 ? 2.0 : 1.0;
    t.l2 = l2;
    const double gFp32 = errorGamma(double(d) + 1.0, u);
    const double gTf32 = errorGamma(double(d) + 2.0, accUnit);
    const double inputGrowth = (1.0 + delta) * (1.0 + delta);
    t.dotCoef = 2.0 * delta + delta * delta + inputGrowth * gTf32 + gFp32;
    t.magCoef = std::fmax(inputGrowth * (1.0 + gTf32), 1.0 + gFp32);
    t.normGrowth = 1.0 / (1.0 - gFp32);
    t.tinyDim = double(d);
    t.fp32Gamma = gFp32;
    t.valid = d >= 1 && std::isfinite(gFp32) && std::isfinite(gTf32) && gFp32 < 0.5;
    return t;
}

/// The bound's constants for BF16x3 products (DistancePrecision::
/// BF16x3Bounded), for the padded dimension d (>= 1); l2 selects the L2
/// keys. The same e(q, x) and leftOutKeyLowerBound apply with these
/// constants.
///
/// Each FP32 coordinate v is split by our own kernel (SplitBf16.cu) into
/// h = bf16_rn(v) and l = bf16_rn(v - h) (v - h is exact in FP32; BF16
/// keeps 8 significant bits, unit roundoff b = 2^-8): |v - h| <= b |v|,
/// |h| <= (1 + b) |v|, |l| <= b (1 + b) |v|, and r = v - h - l has
/// |r| <= b^2 |v|. One GEMM over 3d terms takes q.x as hq.lx + lq.hx +
/// hq.hx; per coordinate the part left out, hq rx + lq lx + lq rx + rq x,
/// is at most
///   c_split |q_i x_i|, c_split = b^2 (2 (1 + b)^2 + 1),
/// so the exact sum s~ of the 3d products is within c_split P of q.x, and
/// the products' magnitudes sum to at most g P, g = (1 + b)^2 (1 + 2b).
/// Products of two 8-bit significands are exact in FP32.
/// Accumulation: no order is assumed (cuBLAS may split K, reverse it, or
/// reduce partial sums in FP32), so item 3 of the header applies to all
/// 3d addends at the full magnitude: |s_A - s~| <= gamma(3d + 2, 2^-22) g P.
/// (Three GEMMs chained small products first would bound it by about
/// d 2^-22 g P, but write and re-read the output twice more: at d = 96 they
/// ran at half the speed of the FP32 path.)
/// Hence c_dot = c_split + g gamma(3d + 2, 2^-22) + gamma(d + 1, u) (the
/// last for the FP32 side, as for TF32) and
/// c_mag = max(g (1 + gamma(3d + 2, 2^-22)), 1 + gamma(d + 1, u)).
/// Flushed subnormal parts: three products' worth of the TF32 term
/// (tinyDim 3 d). Against TF32's c_dot of about 2^-9 + d 2^-22 this is
/// about 3 2^-16 + 3 d 2^-22: 16 times smaller at d = 96, 3 times at
/// d = 784 (the accumulation term takes over as d grows).
inline Tf32BoundTerms bf16x3BoundTerms(int d, bool l2) {
    const double u = std::ldexp(1.0, -24);
    const double accUnit = std::ldexp(1.0, -22);
    const double b = std::ldexp(1.0, -8);
    Tf32BoundTerms t;
    t.absAlpha = l2 ? 2.0 : 1.0;
    t.l2 = l2;
    const double gFp32 = errorGamma(double(d) + 1.0, u);
    const double gAcc = errorGamma(3.0 * double(d) + 2.0, accUnit);
    const double split = b * b * (2.0 * (1.0 + b) * (1.0 + b) + 1.0);
    const double growth = (1.0 + b) * (1.0 + b) * (1.0 + 2.0 * b);
    t.dotCoef = split + growth * gAcc + gFp32;
    t.magCoef = std::fmax(growth * (1.0 + gAcc), 1.0 + gFp32);
    t.normGrowth = 1.0 / (1.0 - gFp32);
    t.tinyDim = 3.0 * double(d);
    t.fp32Gamma = gFp32;
    t.valid = d >= 1 && std::isfinite(gFp32) && std::isfinite(gAcc) && gFp32 < 0.5;
    return t;
}

/// Whether the bounded search is defined for dimension d (d 2^-22 well
/// below 1/2); host-only code (Auto's rule) asks it too.
inline bool boundedSearchSupported(int d) { return d >= 1 && tf32BoundTerms(d, true).valid; }

/// Inflation that keeps a double evaluation of the bound an upper bound.
constexpr double kBoundInflation = 1.0 + 1.0 / 1099511627776.0;  // 1 + 2^-40

/// An upper bound of the true Euclidean norm of a vector whose stored FP32
/// squared norm is sqNorm.
FAISS_EXT_HOST_DEVICE double normUpperBound(const Tf32BoundTerms& t, double sqNorm) {
    return sqrt(sqNorm * t.normGrowth) * kBoundInflation;
}

/// e(q, x): bounds |key_TF32 - key_FP32| for a query of true norm at most
/// qNorm and a vector of true norm at most xNorm and stored squared norm
/// xSqNorm (L2; ignored otherwise). See the file's header.
FAISS_EXT_HOST_DEVICE double tf32KeyErrorBound(const Tf32BoundTerms& t, double qNorm, double xNorm,
                                               double xSqNorm) {
    const double p = qNorm * xNorm;
    double e = t.absAlpha * t.dotCoef * p;
    if (t.l2) e += 2.0 * 5.9604644775390625e-08 * (xSqNorm + t.absAlpha * t.magCoef * p);
    e += t.absAlpha * 2.350988701644575e-38 * (t.tinyDim * (qNorm + xNorm) + 2.0 * t.tinyDim + 2.0);
    return e * kBoundInflation;
}

/// A lower bound of the re-scored key of every vector the TF32 selection
/// left out, given lastKey, the m-th (largest kept) approximate key, for a
/// query of norm at most qNorm over a corpus of norms at most xMaxNorm.
///
/// Each vector x left out has an approximate key >= lastKey, so its FP32
/// key is >= h1(|x|) = lastKey - e(q, x), decreasing in |x|. For L2 its
/// FP32 key is also >= h2(|x|) = (1 - u)(1 - g) |x|^2 - 2 (1 + u)(1 + g)
/// |q| |x| (g = gamma(d + 1, u): the stored |x|^2 is at least (1 - g) |x|^2,
/// the dot product at most (1 + g) |q| |x|, one rounding of the sum), a
/// convex quadratic, increasing past its vertex v: a vector of large norm
/// is far from the query whatever its TF32 key. So every key left out is
/// at least min over t in [0, x_max] of max(h1(t), h2(t)). For any
/// v <= a <= b <= x_max that minimum is at least min(h1(a), max(h1(b),
/// h2(a)), h2(b)) (t <= a: h1(t) >= h1(a); a <= t <= b: h1(t) >= h1(b) and
/// h2(t) >= h2(a); t >= b: h2(t) >= h2(b)), and at least h1(x_max); a and b
/// come from bisecting for the crossing of h1 and h2, but the bound holds
/// for whatever a and b the bisection ends with. Without the h2 term (inner
/// products, where a large norm can mean a close vector) this is
/// h1(x_max) = lastKey - e(q, x_max), which one outlier of large norm makes
/// loose for every query; with it, L2 bounds each norm by what it costs.
/// Every evaluation is made a lower bound by a margin of 2^-50 of the
/// magnitudes summed (double rounding is 2^-53 per operation).
FAISS_EXT_HOST_DEVICE double leftOutKeyLowerBound(const Tf32BoundTerms& t, double qNorm,
                                                  double lastKey, double xMaxNorm) {
    if (!(fabs(lastKey) < INFINITY)) return NAN;  // nothing is known (never certifies)
    const double margin = 8.881784197001252e-16;  // 2^-50
    const double u = 5.9604644775390625e-08;      // 2^-24
    const double g = t.fp32Gamma;
    auto h1 = [&](double norm) {
        const double e = tf32KeyErrorBound(t, qNorm, norm, norm * norm * (1.0 + g));
        return lastKey - e - margin * (fabs(lastKey) + e);
    };
    const double h1Max = h1(xMaxNorm);
    if (!t.l2) return h1Max;
    const double quad = (1.0 - u) * (1.0 - g) * (1.0 - margin);
    const double lin = 2.0 * (1.0 + u) * (1.0 + g) * (1.0 + margin) * qNorm;
    auto h2 = [&](double norm) {
        const double tiny = t.absAlpha * 2.350988701644575e-38 *
                            (t.tinyDim * (qNorm + norm) + 2.0 * t.tinyDim + 2.0);
        const double a = quad * norm * norm, b = lin * norm;
        return a - b - tiny - margin * (a + b + tiny);
    };
    double lo = lin / (2.0 * quad) * (1.0 + 1.0 / 1099511627776.0);  // >= the vertex
    double hi = xMaxNorm;
    if (!(lo < hi) || h2(hi) <= h1Max) return h1Max;  // no norm is excluded by h2
    for (int i = 0; i < 64; ++i) {
        const double mid = 0.5 * (lo + hi);
        if (!(mid > lo && mid < hi)) break;
        if (h1(mid) > h2(mid)) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    const double bound = fmin(fmin(h1(lo), fmax(h1(hi), h2(lo))), h2(hi));
    return fmax(bound, h1Max);
}

/// Whether no product or partial sum of either path can overflow for a
/// query of norm at most qNorm against the corpus (largest norm xMaxNorm,
/// largest stored squared norm xMaxSqNorm): every magnitude stays below
/// 2^126. Queries failing this are not certified.
FAISS_EXT_HOST_DEVICE bool magnitudeSafe(const Tf32BoundTerms& t, double qNorm, double xMaxNorm,
                                         double xMaxSqNorm) {
    const double m = t.absAlpha * t.magCoef * qNorm * xMaxNorm + (t.l2 ? xMaxSqNorm : 0.0);
    return m < 8.507059173023462e+37;  // 2^126
}

}  // namespace gpu
}  // namespace faiss_ext
