// The residual corpus's bound (gpu/impl/flat/ResidualBound.h) against a CPU
// emulation of the arithmetic it relates: vectors of far-apart clusters far
// from the origin stored as x = m + c_p + r_t + e (r_t rounded to TF32),
// queries rounded as prepareResidualQueries rounds them, the kernel's key
// lk = fl(fl(n - 2 acc) - off) with acc from an emulated tensor-core
// accumulation (TensorCoreEmulation.h) and the centre products in two FP32
// orders, against the FP32 path's keys in two orders. The lower bound of
// every vector whose key is at least lk must hold, must not be vacuous, and
// must be far tighter than the TF32 bound on the centred vectors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "TensorCoreEmulation.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/impl/flat/ResidualBound.h"

using namespace faiss_ext::gpu;
using namespace faiss_ext::test;

namespace {

/// Nearest TF32 number, ties away from zero (ResidualQueries.cu's rounding).
float roundToTf32(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    b = (b + 0x1000u) & ~0x1FFFu;
    std::memcpy(&v, &b, 4);
    return v;
}

double norm(const std::vector<double>& v) {
    double s = 0.0;
    for (double x : v) s += x * x;
    return std::sqrt(s) * kBoundInflation;
}

/// A mixture of far-apart anisotropic clusters (centres of norm about
/// 50, spreads 0.1-1 per axis): the shape of issue 39's hard set.
struct FarClusters {
    int d;
    std::vector<std::vector<float>> centres, rows;
    std::vector<int> cluster;
};

FarClusters makeFarClusters(int d, int clusters, int n, uint32_t seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> z(0.f, 1.f);
    std::uniform_real_distribution<float> scale(0.1f, 1.f);
    FarClusters f;
    f.d = d;
    for (int c = 0; c < clusters; ++c) {
        std::vector<float> centre(d);
        for (float& v : centre) v = 5.f + 4.f * z(g);
        f.centres.push_back(centre);
    }
    for (int i = 0; i < n; ++i) {
        const int c = int(g() % uint32_t(clusters));
        std::vector<float> x(d);
        for (int j = 0; j < d; ++j) x[j] = f.centres[c][j] + scale(g) * z(g);
        f.rows.push_back(x);
        f.cluster.push_back(c);
    }
    return f;
}

/// One stored vector as the residual corpus holds it.
struct StoredResidual {
    std::vector<float> residual;  // r_t
    float centredSqNorm;          // |x - m|^2 rounded down
    double rho, lambda;           // |r_t|, |e| (upper bounds)
    int partition;
};

struct Emulation {
    int d;
    std::vector<float> mean;
    std::vector<std::vector<float>> centres;  // c_p (minus the mean)
    std::vector<StoredResidual> stored;
    ResidualCorpusBounds bounds;
};

/// The corpus stored against the given mean and centres (minus the mean),
/// row i in partition f.cluster[i].
Emulation storeAsResiduals(const FarClusters& f, const std::vector<float>& mean,
                           const std::vector<std::vector<float>>& centres) {
    Emulation e;
    e.d = f.d;
    const int d = f.d;
    e.mean = mean;
    e.centres = centres;
    e.bounds.d = d;
    for (const auto& cp : e.centres) {
        e.bounds.maxCentreNorm =
            std::max(e.bounds.maxCentreNorm, norm(std::vector<double>(cp.begin(), cp.end())));
    }
    double maxSq = 0.0, maxCentred = 0.0;
    for (size_t i = 0; i < f.rows.size(); ++i) {
        const auto& x = f.rows[i];
        StoredResidual s;
        s.partition = f.cluster[i];
        std::vector<double> rt(d), ex(d), xm(d);
        long double sq = 0.0L, xsq = 0.0L;
        for (int j = 0; j < d; ++j) {
            const long double exact = (long double)x[j] - e.mean[j] - e.centres[s.partition][j];
            const float r = roundToTf32(float(exact));
            s.residual.push_back(r);
            rt[j] = r;
            ex[j] = double(exact - r);
            sq += ((long double)x[j] - e.mean[j]) * ((long double)x[j] - e.mean[j]);
            xsq += (long double)x[j] * x[j];
        }
        s.rho = norm(rt);
        s.lambda = norm(ex) * (1.0 + 1e-9) + 1e-30;
        s.centredSqNorm = std::nextafter(float(sq), 0.f);
        maxCentred = std::max(maxCentred, double(s.centredSqNorm));
        maxSq = std::max(maxSq, double(sumOfSquares(x.data(), d)));
        e.bounds.maxResidualNorm = std::max(e.bounds.maxResidualNorm, s.rho);
        e.stored.push_back(s);
    }
    e.bounds.maxCentredSqNorm = maxCentred;
    e.bounds.xMaxSqNorm = maxSq;
    e.bounds.xMaxNorm =
        std::sqrt(maxSq / (1.0 - errorGamma(d + 1.0, std::ldexp(1.0, -24)))) * kBoundInflation;
    return e;
}

/// The corpus stored against its mean, the generating centres standing in
/// for k-means (any partition keeps the bound; k-means only tightens it).
Emulation storeAsResiduals(const FarClusters& f) {
    const int d = f.d;
    std::vector<double> sum(d, 0.0);
    for (const auto& x : f.rows)
        for (int j = 0; j < d; ++j) sum[j] += x[j];
    std::vector<float> mean;
    for (int j = 0; j < d; ++j) mean.push_back(float(sum[j] / double(f.rows.size())));
    std::vector<std::vector<float>> centres;
    for (const auto& c : f.centres) {
        std::vector<float> cp(d);
        for (int j = 0; j < d; ++j) cp[j] = c[j] - mean[j];
        centres.push_back(cp);
    }
    return storeAsResiduals(f, mean, centres);
}

/// Rows whose every coordinate lies just below the midpoint between two
/// TF32 numbers in [1, 2) (ulp 2^-10): rounding to TF32 loses almost 2^-11
/// of each, all with the same sign, so that |q'.e| and |q_lo.r_t| reach the Cauchy-
/// Schwarz terms of the bound (queries and vectors alike, all positive).
FarClusters alignedRoundings(int d, int n, uint32_t seed) {
    std::mt19937 g(seed);
    FarClusters f;
    f.d = d;
    f.centres.push_back(std::vector<float>(d, 0.f));
    for (int i = 0; i < n; ++i) {
        std::vector<float> x(d);
        for (int j = 0; j < d; ++j) {
            const float t = 1.f + float(g() % 1024u) / 1024.f;       // a TF32 number in [1, 2)
            x[j] = t + std::ldexp(1.f, -11) - std::ldexp(1.f, -20);  // below t + ulp / 2
        }
        f.rows.push_back(x);
        f.cluster.push_back(0);
    }
    return f;
}

/// A query as prepareResidualQueries prepares it.
struct PreparedQuery {
    std::vector<float> tilde, tf32;
    ResidualQueryNorms norms;
    ResidualCoefs coefs;
    double shift, magnitude;
};

PreparedQuery prepareQuery(const std::vector<float>& q, const Emulation& e) {
    PreparedQuery p;
    std::vector<double> shifted, tilde, tf32, low, query;
    double sqShift = 0.0;
    for (int j = 0; j < e.d; ++j) {
        const float t = q[j] - e.mean[j];
        const float r = roundToTf32(t);
        p.tilde.push_back(t);
        p.tf32.push_back(r);
        shifted.push_back(double(q[j]) - double(e.mean[j]));
        tilde.push_back(t);
        tf32.push_back(r);
        low.push_back(double(t - r));
        query.push_back(q[j]);
        sqShift += double(e.mean[j]) * (double(e.mean[j]) - 2.0 * double(q[j]));
    }
    p.norms.shifted = norm(shifted);
    p.norms.rounded = norm(tilde);
    p.norms.tf32 = norm(tf32);
    p.norms.low = norm(low);
    p.norms.query = norm(query);
    p.norms.sqShift = sqShift;
    p.coefs = residualCoefs(p.norms, e.bounds);
    p.shift = residualKeyShift(p.norms, e.bounds);
    p.magnitude = residualMagnitude(p.norms, e.bounds, p.coefs);
    return p;
}

/// The kernel's lowered key of one (query, vector) pair; `order` picks the
/// emulated accumulations (0: tensor-core blocks of 4 and a sequential
/// centre product; 1: blocks of 8 and a pairwise one).
float loweredKey(const PreparedQuery& p, const Emulation& e, const StoredResidual& s, int order) {
    const std::vector<float>& c = e.centres[s.partition];
    const float dotC = order == 0 ? sequentialDot(p.tilde.data(), c.data(), e.d)
                                  : pairwiseDot(p.tilde.data(), c.data(), e.d);
    const float acc =
        tensorCoreDot(p.tf32.data(), s.residual.data(), e.d, order == 0 ? 4 : 8, toTf32Truncated);
    const float v = std::fma(-2.f, acc, s.centredSqNorm);
    const float off = std::fma(2.f, dotC,
                               std::fma(p.coefs.a1, roundUpToFloat(s.rho),
                                        std::fma(p.coefs.a2, roundUpToFloat(s.lambda), p.coefs.b)));
    return v - off;
}

struct Checked {
    int pairs = 0, violations = 0;
    double worstSlack = 0.0;            // largest K_F - lower bound
    double leastSlackShare = INFINITY;  // smallest (K_F - lower bound) / the residual term
    double sumResidualTerm = 0.0, sumTf32Term = 0.0;
};

Checked checkBound(const FarClusters& f, const Emulation& e, const FarClusters& queries) {
    Checked out;
    for (const auto& q : queries.rows) {
        const PreparedQuery p = prepareQuery(q, e);
        for (size_t i = 0; i < f.rows.size(); ++i) {
            const StoredResidual& s = e.stored[i];
            const float* x = f.rows[i].data();
            const float nx = sumOfSquares(x, e.d);
            for (int order = 0; order < 2; ++order) {
                const float lk = loweredKey(p, e, s, order);
                const double lower = residualLeftOutLowerBound(lk, p.shift, p.magnitude);
                const float dot =
                    order == 0 ? sequentialDot(q.data(), x, e.d) : pairwiseDot(q.data(), x, e.d);
                const double fp32Key = double(nx + -2.f * dot);
                ++out.pairs;
                if (!(lower <= fp32Key)) ++out.violations;
                out.worstSlack = std::max(out.worstSlack, fp32Key - lower);
                const double term = double(p.coefs.a1) * s.rho + double(p.coefs.a2) * s.lambda;
                out.leastSlackShare = std::min(out.leastSlackShare, (fp32Key - lower) / term);
            }
            out.sumResidualTerm += double(p.coefs.a1) * s.rho + double(p.coefs.a2) * s.lambda;
            const Tf32BoundTerms t = tf32BoundTerms(e.d, true);
            out.sumTf32Term += tf32KeyErrorBound(
                t, p.norms.shifted, std::sqrt(double(s.centredSqNorm)), double(s.centredSqNorm));
        }
    }
    return out;
}

}  // namespace

TEST(ResidualBound, HoldsOnEmulatedArithmetic) {
    for (int d : {32, 96}) {
        const FarClusters data = makeFarClusters(d, 40, 2000, 39u + uint32_t(d));
        const FarClusters queries = makeFarClusters(d, 40, 30, 39u + uint32_t(d));
        const Emulation e = storeAsResiduals(data);
        const Checked c = checkBound(data, e, queries);
        ASSERT_EQ(c.pairs, 2 * 2000 * 30);
        EXPECT_EQ(c.violations, 0) << "d " << d;
    }
}

TEST(ResidualBound, IsTightAndFarBelowTheTf32Bound) {
    const int d = 96;
    const FarClusters data = makeFarClusters(d, 40, 2000, 7u);
    const FarClusters queries = makeFarClusters(d, 40, 30, 7u);
    const Emulation e = storeAsResiduals(data);
    const Checked c = checkBound(data, e, queries);
    // Not vacuous: no key is bounded from further below than a few units
    // (neighbour distances here are tens of units, the norms about 50).
    EXPECT_LT(c.worstSlack, 3.0);
    EXPECT_GT(c.worstSlack, 0.0);
    // The residual term (spread within a cluster, measured rounding) is a
    // small fraction of TF32's (norms of the centred vectors, truncation).
    EXPECT_LT(c.sumResidualTerm, 0.1 * c.sumTf32Term)
        << "residual " << c.sumResidualTerm << " tf32 " << c.sumTf32Term;
}

TEST(ResidualBound, IsReachedOnAlignedRoundings) {
    const int d = 96;
    const FarClusters data = alignedRoundings(d, 300, 11u);
    const FarClusters queries = alignedRoundings(d, 20, 12u);
    const Emulation e = storeAsResiduals(data, std::vector<float>(d, 0.f), data.centres);
    const Checked c = checkBound(data, e, queries);
    EXPECT_EQ(c.violations, 0);
    // The roundings use more than half of the modelled term on some pair:
    // a bound half as large would fail here.
    EXPECT_LT(c.leastSlackShare, 0.5);
}

TEST(ResidualBound, RefusesWhatItCannotBound) {
    EXPECT_TRUE(std::isnan(residualLeftOutLowerBound(INFINITY, 0.0, 1.0)));
    EXPECT_TRUE(std::isnan(residualLeftOutLowerBound(NAN, 0.0, 1.0)));
    EXPECT_TRUE(std::isnan(residualLeftOutLowerBound(1.0, NAN, 1.0)));
    EXPECT_TRUE(std::isnan(residualLeftOutLowerBound(1.0, 0.0, 1e35)));
    EXPECT_LT(residualLeftOutLowerBound(1.0, 0.0, 1.0), 1.0);
}
