// See BoundedTestCompare.h.
#include "BoundedTestCompare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "TestUtils.h"

namespace faiss_ext {
namespace test {

using gpu::BoundedSearchStats;
using gpu::DistancePrecision;
using gpu::GpuIndexQuickSelectFlat;
using gpu::GpuIndexQuickSelectFlatConfig;
using gpu::SearchParametersQuickSelectFlat;
using gpu::StandardGpuResources;

Results searchWith(const GpuIndexQuickSelectFlat& index, const std::vector<float>& xq, int64_t k,
                   DistancePrecision precision, const faiss::IDSelector* sel) {
    const int64_t nq = int64_t(xq.size()) / index.d;
    Results r;
    r.D.resize(size_t(nq * k));
    r.I.resize(size_t(nq * k));
    SearchParametersQuickSelectFlat params;
    params.distancePrecision = precision;
    params.sel = const_cast<faiss::IDSelector*>(sel);  // FAISS's field is non-const
    index.search(nq, xq.data(), k, r.D.data(), r.I.data(), &params);
    return r;
}

namespace {

double dotD(const float* a, const float* b, int d) {
    double s = 0;
    for (int i = 0; i < d; ++i) s += double(a[i]) * double(b[i]);
    return s;
}

}  // namespace

std::string checkSameAsFp32(FlatMetric metric, int d, const std::vector<float>& stored,
                            std::vector<float> queries, int64_t k, const Results& got,
                            const Results& ref) {
    faiss_ext::prepareVectors(metric, int64_t(queries.size()) / d, d, queries.data());
    const bool l2 = metric == FlatMetric::L2;
    const double alpha = l2 ? 2.0 : 1.0;
    const int64_t nb = int64_t(stored.size()) / d, nq = int64_t(queries.size()) / d;
    double maxSq = 0;
    for (int64_t j = 0; j < nb; ++j) {
        maxSq = std::max(maxSq, dotD(&stored[size_t(j * d)], &stored[size_t(j * d)], d));
    }
    auto exact = [&](int64_t qi, int64_t id) {
        const float* q = &queries[size_t(qi * d)];
        const float* x = &stored[size_t(id * d)];
        if (!l2) return -dotD(q, x, d);  // smaller is closer, as keys
        double s = 0;
        for (int i = 0; i < d; ++i) {
            const double t = double(q[i]) - double(x[i]);
            s += t * t;
        }
        return s;
    };
    for (int64_t qi = 0; qi < nq; ++qi) {
        const float* q = &queries[size_t(qi * d)];
        const double qSq = dotD(q, q, d);
        const double tol =
            4.0 * (d + 3) * std::ldexp(1.0, -24) * (alpha * std::sqrt(qSq * maxSq) + maxSq + qSq) +
            1e-30;
        const std::string row = "query " + std::to_string(qi) + " (tolerance " +
                                std::to_string(tol) + ", seed " + std::to_string(kSeed) + ")";
        std::set<int64_t> gotIds, refIds;
        for (int64_t j = 0; j < k; ++j) {
            const size_t at = size_t(qi * k + j);
            const int64_t gi = got.I[at], ri = ref.I[at];
            if ((gi < 0) != (ri < 0)) return row + ": padding differs at rank " + std::to_string(j);
            if (gi < 0) continue;
            if (gi >= nb) return row + ": id " + std::to_string(gi) + " out of range";
            if (!gotIds.insert(gi).second) return row + ": id " + std::to_string(gi) + " repeated";
            refIds.insert(ri);
            const double diff = std::fabs(double(got.D[at]) - double(ref.D[at]));
            if (!(diff <= tol)) {
                return row + ": rank " + std::to_string(j) + " distance " +
                       std::to_string(got.D[at]) + " vs FP32 " + std::to_string(ref.D[at]);
            }
        }
        if (refIds.empty()) continue;
        // The k-th FP32 result as an exact key: the boundary of ties.
        const int64_t last = ref.I[size_t(qi * k + int64_t(refIds.size()) - 1)];
        const double boundary = exact(qi, last);
        for (int64_t id : gotIds) {
            if (refIds.count(id)) continue;
            if (!(std::fabs(exact(qi, id) - boundary) <= 2 * tol)) {
                return row + ": id " + std::to_string(id) +
                       " returned, not by FP32, and not tied "
                       "with the k-th (" +
                       std::to_string(exact(qi, id)) + " vs " + std::to_string(boundary) + ")";
            }
        }
        for (int64_t id : refIds) {
            if (gotIds.count(id)) continue;
            if (!(std::fabs(exact(qi, id) - boundary) <= 2 * tol)) {
                return row + ": FP32's id " + std::to_string(id) +
                       " missing and not tied with "
                       "the k-th (" +
                       std::to_string(exact(qi, id)) + " vs " + std::to_string(boundary) + ")";
            }
        }
    }
    return "";
}

BoundedSearchStats compareOn(StandardGpuResources& res, FlatMetric metric, int d,
                             const std::vector<float>& xb, const std::vector<float>& xq, int64_t k,
                             const std::string& what, GpuIndexQuickSelectFlatConfig config,
                             DistancePrecision bounded) {
    GpuIndexQuickSelectFlat index(&res, d, metric, config);
    index.add(int64_t(xb.size()) / d, xb.data());
    std::vector<float> stored(xb.size());
    index.reconstruct_n(0, index.ntotal, stored.data());
    const Results ref = searchWith(index, xq, k, DistancePrecision::FP32);
    EXPECT_EQ(index.getBoundedStats().certifiedQueries + index.getBoundedStats().fallbackQueries, 0)
        << "an FP32 search counted as bounded: " << what;
    const Results got = searchWith(index, xq, k, bounded);
    const BoundedSearchStats s = index.getBoundedStats();
    EXPECT_EQ(s.certifiedQueries + s.fallbackQueries, int64_t(xq.size()) / d) << what;
    EXPECT_EQ(checkSameAsFp32(metric, d, stored, xq, k, got, ref), "") << what;
    return s;
}

BoundedSearchStats boundedAgainstFp32(GpuIndexQuickSelectFlat& index, FlatMetric metric, int d,
                                      const std::vector<float>& xq, int64_t k,
                                      DistancePrecision bounded, const std::string& what,
                                      const faiss::IDSelector* sel) {
    std::vector<float> stored(size_t(index.ntotal) * d);
    index.reconstruct_n(0, index.ntotal, stored.data());
    const Results ref = searchWith(index, xq, k, DistancePrecision::FP32, sel);
    index.resetBoundedStats();
    const Results got = searchWith(index, xq, k, bounded, sel);
    const BoundedSearchStats s = index.getBoundedStats();
    EXPECT_EQ(s.certifiedQueries + s.fallbackQueries, int64_t(xq.size()) / d) << what;
    EXPECT_EQ(checkSameAsFp32(metric, d, stored, xq, k, got, ref), "") << what;
    if (sel) {
        for (int64_t id : got.I) {
            EXPECT_TRUE(id < 0 || sel->is_member(id)) << what << ": id " << id << " not selected";
        }
    }
    return s;
}

std::string describe(FlatMetric m, int d, int64_t k, const char* data) {
    return std::string(data) + " metric=" + faiss_ext::flatMetricName(m) +
           " d=" + std::to_string(d) + " k=" + std::to_string(k) + " seed=" + std::to_string(kSeed);
}

}  // namespace test
}  // namespace faiss_ext
