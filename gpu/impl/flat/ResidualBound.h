// The bound of the bounded TF32 search over a residual corpus
// (ResidualCorpus.h): per query, the coefficients the fused kernels lower
// each key by, and the lower bound of the keys left out that certifies it.
// Plain C++ for the host (tests check it against an emulation), inlined
// device code in .cu files.
//
// Notation: m the corpus mean, c_p (FP32) the centre of x's partition
// minus m, r_t (FP32, exactly TF32) the stored residual and e = x - m - c_p
// - r_t its part left out, all exact reals: x = m + c_p + r_t + e. For a
// query q, q' = q - m (real), q~ = fl(q - m) (|q~_i - q'_i| <= u |q'_i|,
// u = 2^-24), q_t = q~ rounded to TF32 (exactly TF32) and q_lo = q~ - q_t
// (exact in FP32). The key ranked is
//   S(x) = |x - m|^2 - 2 q'.(x - m) = |q - x|^2 - |q'|^2.
// The kernel computes from FP32 numbers
//   v = fl(n - 2 acc),  n <= |x - m|^2 (stored rounded down),
//   acc = the tensor cores' q_t.r_t (products exact: two TF32 numbers;
//         FP32 accumulation in any order, |acc - q_t.r_t| <=
//         gamma(d + 2, 2^-22) |q_t| |r_t|, item 3 of Tf32ErrorBound.h),
//   s = fl(q~.c_p), cuBLAS FP32 (|s - q~.c_p| <= gamma(d + 1, u) |q~| |c_p|),
// and q'.(x - m) - (s + acc) = (q'.c_p - s) + (q'.r_t - acc) + q'.e with
//   |q'.c_p - s|   <= (gamma(d + 1, u) |q~| + u |q'|) |c_p|,
//   |q'.r_t - acc| <= (|q_lo| + u |q'| + gamma(d + 2, 2^-22) |q_t|) |r_t|,
//   |q'.e|         <= |q'| |e|.
// With rho >= |r_t|, lambda >= |e| over a tile and C >= every |c_p|, the
// key lowered by
//   off = 2 s + a1 rho + a2 lambda + b,
//   a1 = 2 (|q_lo| + u |q'| + gamma(d + 2, 2^-22) |q_t|),  a2 = 2 |q'|,
//   b = 2 (gamma(d + 1, u) |q~| + u |q'|) C (+ a subnormal term)
// is a lower bound of S(x) up to the FP32 roundings of the kernel's own
// few operations: lk = fl(v - off) (off in FP32 by three FMAs) is within
// 6 u M of that ideal value, M bounding every magnitude involved
// (residualMagnitude). A vector the kernel leaves out either failed
// v <= fl(thr + off), so that its ideal lowered key is >= thr - u |thr| -
// 5 u M, or had lk > thr, or was kept past rank m: every one has
// S(x) >= L - u |L| - 6 u M with L the m-th kept key (<= thr; t - u |t| is
// increasing). The FP32 path's key of x, K_F(x) = fl(n_x - 2 fl(q.x)),
// is within E_F = (g + u (1 + g)) (|x|^2 + 2 |q| |x|) of |x|^2 - 2 q.x =
// S(x) + |q'|^2 - |q|^2 (g = gamma(d + 1, u); Tf32ErrorBound.h, item 1).
// So every vector left out has an FP32 key of at least
//   L - u |L| - 6 u M + (|q'|^2 - |q|^2) - E_F(|q|, x_max),
// which residualLeftOutLowerBound returns (with 8 u (M + |L|) for the
// roundings and a margin for the double evaluation); the certificate of
// BoundedFlatSearch.h compares it with the kk-th re-scored key.
//
// Why it certifies where the TF32 bound of Tf32ErrorBound.h cannot: its
// error grows with |q| |x|, here with |q'| (|q_lo| / |q'| + 2^-12 or so)
// times the spread within a partition, rho, measured per tile rather than
// assumed (2^-10 per input under truncation).
#pragma once

#include <cmath>

#include "faiss_ext/gpu/impl/flat/Tf32ErrorBound.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

/// A query's norms (upper bounds of the true ones, from double sums).
struct ResidualQueryNorms {
    double shifted = 0.0;  ///< |q'| = |q - m| (real)
    double rounded = 0.0;  ///< |q~| = |fl(q - m)|
    double tf32 = 0.0;     ///< |q_t|
    double low = 0.0;      ///< |q_lo| = |q~ - q_t|
    double query = 0.0;    ///< |q|
    double sqShift = 0.0;  ///< |q'|^2 - |q|^2 (double; within residualShiftError)
};

/// The corpus's maxima (ResidualView).
struct ResidualCorpusBounds {
    int d = 0;
    double maxCentreNorm = 0.0;     ///< C
    double maxResidualNorm = 0.0;   ///< the largest rho
    double maxCentredSqNorm = 0.0;  ///< the largest stored |x - m|^2
    double xMaxNorm = 0.0;          ///< >= every true |x| (the stored vectors')
    double xMaxSqNorm = 0.0;        ///< the largest stored |x|^2
};

/// The smallest float >= v (v finite, >= 0 in every use here).
FAISS_EXT_HOST_DEVICE float roundUpToFloat(double v) {
#ifdef __CUDA_ARCH__
    return __double2float_ru(v);
#else
    float f = static_cast<float>(v);
    if (static_cast<double>(f) < v) f = std::nextafter(f, INFINITY);
    return f;
#endif
}

/// {a1, a2, b}: the coefficients of the kernel's per (query, tile) term
/// (see the header), rounded up to FP32.
struct ResidualCoefs {
    float a1 = 0.f, a2 = 0.f, b = 0.f;
};

FAISS_EXT_HOST_DEVICE ResidualCoefs residualCoefs(const ResidualQueryNorms& q,
                                                  const ResidualCorpusBounds& c) {
    const double u = 5.9604644775390625e-08;  // 2^-24
    const double gFp32 = errorGamma(double(c.d) + 1.0, u);
    const double gAcc = errorGamma(double(c.d) + 2.0, 2.384185791015625e-07);  // 2^-22
    const double tiny =
        2.350988701644575e-38 * (double(c.d) * (q.tf32 + c.maxResidualNorm + 2.0) + 2.0);
    ResidualCoefs k;
    k.a1 = roundUpToFloat(2.0 * (q.low + u * q.shifted + gAcc * q.tf32) * kBoundInflation);
    k.a2 = roundUpToFloat(2.0 * q.shifted * kBoundInflation);
    // (the stored lambda comes from a double evaluation of e: within 2^-48
    // |x - m| of it, times 2 |q'|)
    const double eDouble = 3.552713678800501e-15 * sqrt(c.maxCentredSqNorm) * q.shifted;
    k.b = roundUpToFloat(
        (2.0 * (gFp32 * q.rounded + u * q.shifted) * c.maxCentreNorm + 2.0 * (tiny + eDouble)) *
        kBoundInflation);
    return k;
}

/// M: a bound of every magnitude the kernel's FP32 operations meet for this
/// query (the stored norm, 2 acc, 2 s, the term and the key).
FAISS_EXT_HOST_DEVICE double residualMagnitude(const ResidualQueryNorms& q,
                                               const ResidualCorpusBounds& c,
                                               const ResidualCoefs& k) {
    const double rho = c.maxResidualNorm;
    const double term = 4.001 * q.rounded * c.maxCentreNorm + double(k.a1) * rho +
                        double(k.a2) * (rho + 1e-30) + double(k.b);
    return (c.maxCentredSqNorm + 2.001 * q.tf32 * rho + term) * kBoundInflation;
}

/// The part of the lower bound that does not depend on the m-th key:
/// |q'|^2 - |q|^2 - E_F(|q|, x_max), less the error of its double sum.
FAISS_EXT_HOST_DEVICE double residualKeyShift(const ResidualQueryNorms& q,
                                              const ResidualCorpusBounds& c) {
    const double u = 5.9604644775390625e-08;
    const double g = errorGamma(double(c.d) + 1.0, u);
    const double spanSq = fmax(c.xMaxSqNorm, c.xMaxNorm * c.xMaxNorm) + 2.0 * q.query * c.xMaxNorm;
    const double fp32Path = (g + u * (1.0 + g)) * spanSq * kBoundInflation + 1e-30;
    // The double sum of d terms (m_i (m_i - 2 q_i)): far below 2^-40 of the norms.
    const double shiftError = 9.094947017729282e-13 *  // 2^-40
                              (q.shifted * q.shifted + q.query * q.query + 1e-30);
    return q.sqShift - fp32Path - shiftError;
}

/// A lower bound of the FP32 key of every vector the residual pass left
/// out, from lastKey (L, the m-th kept key), the query's shift and M; NaN
/// (never certified) when anything is not finite or M nears FP32's range.
FAISS_EXT_HOST_DEVICE double residualLeftOutLowerBound(double lastKey, double shift,
                                                       double magnitude) {
    if (!(fabs(lastKey) < INFINITY) || !(fabs(shift) < INFINITY) ||
        !(magnitude < 1.2676506002282294e+30)) {  // 2^100
        return NAN;
    }
    const double u = 5.9604644775390625e-08;
    const double roundings = 8.0 * u * (magnitude + fabs(lastKey));
    const double bound = lastKey - roundings + shift;
    const double margin = 8.881784197001252e-16 * (fabs(lastKey) + roundings + fabs(shift));
    return bound - margin;
}

}  // namespace gpu
}  // namespace faiss_ext
