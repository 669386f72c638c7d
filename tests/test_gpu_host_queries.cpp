// Queries in host memory (GpuIndex::searchPagedHostInput_,
// gpu/GpuIndexHostSearch.cpp): staged through pinned memory in chunks that
// are searched while the next is copied. Host queries give the results of
// the same queries in device memory (one block per query, so the chunking
// cannot change a query's search), with results on the host or on the
// device, with chunks that reuse the staging slots, and a NaN in a late
// chunk is refused naming its row.
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "DeviceArray.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

using namespace faiss_ext;
using namespace faiss_ext::gpu;
using namespace faiss_ext::test;

namespace {

constexpr int kD = 32, kK = 10;

struct Results {
    std::vector<float> D;
    std::vector<int64_t> I;
};

/// The index's results for device queries with device results (the
/// reference: no staging at all).
Results deviceSearch(const faiss::Index& index, const std::vector<float>& q, int64_t nq) {
    DeviceArray<float> dq(q.size()), dD(size_t(nq) * kK);
    DeviceArray<int64_t> dI(size_t(nq) * kK);
    if (!dq.p || !dD.p || !dI.p) ADD_FAILURE() << "cudaMalloc failed";
    dq.upload(q);
    index.search(nq, dq.p, kK, dD.p, dI.p);
    return {dD.download(), dI.download()};
}

Results hostSearch(const faiss::Index& index, const std::vector<float>& q, int64_t nq) {
    Results r{std::vector<float>(size_t(nq) * kK), std::vector<int64_t>(size_t(nq) * kK)};
    index.search(nq, q.data(), kK, r.D.data(), r.I.data());
    return r;
}

/// Host queries, results written to device memory.
Results hostQueriesDeviceResults(const faiss::Index& index, const std::vector<float>& q,
                                 int64_t nq) {
    DeviceArray<float> dD(size_t(nq) * kK);
    DeviceArray<int64_t> dI(size_t(nq) * kK);
    if (!dD.p || !dI.p) ADD_FAILURE() << "cudaMalloc failed";
    index.search(nq, q.data(), kK, dD.p, dI.p);
    return {dD.download(), dI.download()};
}

void expectSame(const Results& a, const Results& b, const std::string& what) {
    EXPECT_EQ(a.I, b.I) << what;
    EXPECT_EQ(a.D, b.D) << what;
}

GpuIndexSearchGraphConfig oneBlockPerQuery() {
    GpuIndexSearchGraphConfig c;
    c.graphDegree = 32;
    c.knnDegree = 64;
    c.blocksPerQuery = 1;
    return c;
}

TEST(GpuHostQueries, SearchGraphGivesTheResultsOfDeviceQueriesInEveryChunking) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t nb = sized<int64_t>(20000, 4000), nq = sized<int64_t>(20000, 3000);
    auto xb = clusteredVectors(nb, kD, 40, 3);
    auto xq = clusteredVectors(nq, kD, 40, 4);
    StandardGpuResources res;
    GpuIndexSearchGraph index(&res, kD, FlatMetric::L2, oneBlockPerQuery());
    index.add(nb, xb.data());
    const Results ref = deviceSearch(index, xq, nq);
    // default paging: one search (the batch fits one staging slot)
    expectSame(hostSearch(index, xq, nq), ref, "default chunks");
    expectSame(hostQueriesDeviceResults(index, xq, nq), ref, "results on the device");
    // chunks of about 300 queries: every staging slot used several times
    index.setMinPagingSize(300 * (kD * 4 + kK * 12));
    expectSame(hostSearch(index, xq, nq), ref, "chunks of 300");
    expectSame(hostQueriesDeviceResults(index, xq, nq), ref, "chunks of 300, device results");
    // one query
    const std::vector<float> q0(xq.begin(), xq.begin() + kD);
    Results one = hostSearch(index, q0, 1);
    EXPECT_EQ(one.I, std::vector<int64_t>(ref.I.begin(), ref.I.begin() + kK));
}

TEST(GpuHostQueries, ExactIndexGivesTheResultsOfDeviceQueriesInManyChunks) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t nb = sized<int64_t>(30000, 3000), nq = sized<int64_t>(12000, 2500);
    auto xb = randomVectors(nb, kD, 21);
    auto xq = randomVectors(nq, kD, 22);
    StandardGpuResources res;
    GpuIndexQuickSelectFlat index(&res, kD);
    index.add(nb, xb.data());
    index.setMinPagingSize(1100 * (kD * 4 + kK * 12));
    const Results ref = deviceSearch(index, xq, nq);
    const Results host = hostSearch(index, xq, nq);
    // the chunks of both calls are the same sizes only for the first: other
    // GEMM shapes may round differently, so compare as near-equal
    EXPECT_EQ(compareKnn(nq, kK, host.D.data(), host.I.data(), ref.D.data(), ref.I.data(), false,
                         1e-5f, 1e-5f),
              "");
}

TEST(GpuHostQueries, ANanInALateChunkIsRefusedNamingItsRow) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t nb = 5000, nq = sized<int64_t>(9000, 3000);
    auto xb = clusteredVectors(nb, kD, 10, 5);
    auto xq = clusteredVectors(nq, kD, 10, 6);
    StandardGpuResources res;
    GpuIndexSearchGraph index(&res, kD, FlatMetric::L2, oneBlockPerQuery());
    index.add(nb, xb.data());
    index.setMinPagingSize(500 * (kD * 4 + kK * 12));  // many chunks
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      -std::numeric_limits<float>::infinity()}) {
        for (int64_t row : {int64_t(0), nq / 2 + 3, nq - 1}) {
            std::vector<float> q = xq;
            q[size_t(row) * kD + 7] = bad;
            std::vector<float> D(size_t(nq) * kK);
            std::vector<int64_t> I(size_t(nq) * kK);
            try {
                index.search(nq, q.data(), kK, D.data(), I.data());
                ADD_FAILURE() << "a non-finite query was accepted, row " << row;
            } catch (const faiss::FaissException& e) {
                const std::string want = "query " + std::to_string(row) + " has a NaN";
                EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
            }
        }
    }
    // the index is unchanged and searches as before
    const Results ref = deviceSearch(index, xq, nq);
    expectSame(hostSearch(index, xq, nq), ref, "after the refusals");
}

}  // namespace
