// GpuKnnGraphGNND::search (greedy graph search on the GPU): recall of
// held-out queries against exact search, -1 / +inf padding past ntotal.
#include "TestUtils.h"
#include "GnndTestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <gtest/gtest.h>
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuKnnGraphGNND;
using faiss_ext::gpu::SearchParametersGNND;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;
using namespace faiss_ext::gnndtest;

// ---- search ----

namespace {

/// Checks search results (empty string when fine): ids valid and distinct
/// per query, distances sorted and equal to the exact ones (relative 1e-4).
std::string checkSearchResults(const float* x, int64_t n, const float* q, int64_t nq, int d, bool ip,
                               const float* D, const int64_t* I, int k) {
    for (int64_t i = 0; i < nq; ++i) {
        std::set<int64_t> seen;
        for (int j = 0; j < k; ++j) {
            const int64_t id = I[size_t(i) * k + j];
            std::ostringstream where;
            where << "query " << i << " rank " << j << " id " << id;
            if (id < 0 || id >= n) return where.str() + ": id out of range";
            if (!seen.insert(id).second) return where.str() + ": id repeated";
            double exact = 0;
            for (int t = 0; t < d; ++t) {
                const double a = q[size_t(i) * d + t], b = x[size_t(id) * d + t];
                exact += ip ? a * b : (a - b) * (a - b);
            }
            const float got = D[size_t(i) * k + j];
            if (!(std::fabs(got - exact) <= 1e-4 * std::fabs(exact) + 1e-4)) {
                where << ": distance " << got << ", exact " << exact;
                return where.str();
            }
            if (j > 0) {
                const float prev = D[size_t(i) * k + j - 1];
                if (ip ? got > prev : got < prev) {
                    where << ": not sorted (" << prev << " then " << got << ")";
                    return where.str();
                }
            }
        }
    }
    return "";
}

}  // namespace

TEST(GpuGnnd, SearchHeldOutQueries) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: n still past the 1024 slots of the search's hash set and L = 256
    const int64_t n = sized<int64_t>(20000, 1500), nq = sized<int64_t>(1000, 100);
    const int d = 32, k = 32, kq = 10;
    auto all = clusteredVectors(n + nq, d, 40, kSeed + 13);  // one mixture: base and held-out queries
    std::vector<float> x(all.begin(), all.begin() + size_t(n) * d);
    std::vector<float> q(all.begin() + size_t(n) * d, all.end());
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::Cosine}) {
        const bool ip = similarity(m);
        auto xp = prepared(m, x, n, d);
        auto qp = prepared(m, q, nq, d);
        auto ref = exactSearch(xp.data(), n, qp.data(), nq, d, kq, ip);
        GpuKnnGraphGNND index(&res, d, k, m);
        index.add(n, x.data());
        for (int L : {0, 256}) {
            const std::string what = describe("clustered", n, d, k, m) + " searchL=" + std::to_string(L);
            std::vector<float> D(size_t(nq) * kq);
            std::vector<int64_t> I(size_t(nq) * kq);
            SearchParametersGNND params;
            params.searchL = L;
            index.search(nq, q.data(), kq, D.data(), I.data(), &params);
            const double recall = searchRecall(xp.data(), n, qp.data(), nq, d, ip, I.data(), kq, ref.data(), kq, kq);
            std::printf("[gnnd] search %s: recall@10 %.4f\n", what.c_str(), recall);
            EXPECT_GE(recall, 0.9) << what;
            EXPECT_EQ("", checkSearchResults(xp.data(), n, qp.data(), nq, d, ip, D.data(), I.data(), kq)) << what;
        }
    }
}

TEST(GpuGnnd, SearchPadsPastNtotal) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 100, nq = 5;
    const int d = 8, k = 32, kq = 150;
    auto x = clusteredVectors(n, d, 4, kSeed);
    auto q = clusteredVectors(nq, d, 4, kSeed + 1);
    GpuKnnGraphGNND index(&res, d, k);
    index.add(n, x.data());
    std::vector<float> D(size_t(nq) * kq);
    std::vector<int64_t> I(size_t(nq) * kq);
    index.search(nq, q.data(), kq, D.data(), I.data());
    // The pool (>= kq > ntotal) holds every vector: the exact result, padded.
    faiss::IndexFlatL2 cpu(d);
    cpu.add(n, x.data());
    std::vector<float> refD(size_t(nq) * kq);
    std::vector<int64_t> refI(size_t(nq) * kq);
    cpu.search(nq, q.data(), kq, refD.data(), refI.data());
    for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = n; j < kq; ++j) EXPECT_EQ(I[size_t(i) * kq + j], -1) << "query " << i << " rank " << j;
    EXPECT_EQ("", compareKnn(nq, kq, D.data(), I.data(), refD.data(), refI.data(), false));

    // searchL below k is refused; an empty index pads everything.
    SearchParametersGNND params;
    params.searchL = 5;
    EXPECT_THROW(index.search(nq, q.data(), 10, D.data(), I.data(), &params), faiss::FaissException);
    GpuKnnGraphGNND empty(&res, d, k);
    std::fill(I.begin(), I.end(), 3);
    empty.search(nq, q.data(), 4, D.data(), I.data());
    for (int j = 0; j < nq * 4; ++j) EXPECT_EQ(I[j], -1);
}
