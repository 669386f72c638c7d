// range_search on the GPU indexes against faiss::IndexFlat::range_search:
// results equal as sets (pairs whose distance lies within a rounding step
// of the radius may fall either side), for every metric, with selectors,
// host and device queries, host storage, many results per query (bounded
// memory), empty index, and refusals of bad radii and parameters with the
// result untouched.
#include "DeviceArray.h"
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <map>
#include <string>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::GpuIndexQuickSelectFlatConfig;
using faiss_ext::gpu::GpuIndexSearchGraph;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

/// Query i's results as label -> distance.
std::vector<std::map<int64_t, float>> asSets(const faiss::RangeSearchResult& r) {
    std::vector<std::map<int64_t, float>> out(r.nq);
    for (size_t i = 0; i < r.nq; ++i) {
        for (size_t j = r.lims[i]; j < r.lims[i + 1]; ++j) out[i][r.labels[j]] = r.distances[j];
    }
    return out;
}

/// Our result equals the reference as sets: every pair in one and not the
/// other lies within `slack` of the radius; shared pairs have close
/// distances. Returns the number of results compared (so a test can check
/// it exercised something).
size_t expectSameSets(const faiss::RangeSearchResult& ours, const faiss::RangeSearchResult& ref,
                      float radius, float slack, const std::string& what) {
    const auto a = asSets(ours), b = asSets(ref);
    size_t shared = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        for (const auto& [label, dist] : a[i]) {
            auto it = b[i].find(label);
            if (it == b[i].end()) {
                EXPECT_LE(std::fabs(dist - radius), slack)
                        << what << ": query " << i << " label " << label << " at " << dist
                        << " not in FAISS's result (radius " << radius << ")";
                continue;
            }
            ++shared;
            EXPECT_NEAR(dist, it->second, slack) << what << ": query " << i << " label " << label;
        }
        for (const auto& [label, dist] : b[i]) {
            if (!a[i].count(label)) {
                EXPECT_LE(std::fabs(dist - radius), slack)
                        << what << ": query " << i << " label " << label << " at " << dist
                        << " missing (radius " << radius << ")";
            }
        }
    }
    return shared;
}

/// faiss::IndexFlat's range search over the prepared vectors (the oracle).
std::unique_ptr<faiss::RangeSearchResult> flatReference(FlatMetric metric, int d,
                                                        const std::vector<float>& xb,
                                                        const std::vector<float>& xq, float radius,
                                                        const faiss::IDSelector* sel = nullptr) {
    const int64_t nb = int64_t(xb.size()) / d, nq = int64_t(xq.size()) / d;
    std::vector<float> pb(xb), pq(xq);
    faiss_ext::prepareVectors(metric, nb, d, pb.data());
    faiss_ext::prepareVectors(metric, nq, d, pq.data());
    faiss::IndexFlat flat(d, faiss_ext::toFaissMetric(metric));
    flat.add(nb, pb.data());
    std::unique_ptr<faiss::RangeSearchResult> r(new faiss::RangeSearchResult(nq));
    faiss::SearchParameters p;
    p.sel = const_cast<faiss::IDSelector*>(sel);
    flat.range_search(nq, pq.data(), radius, r.get(), sel ? &p : nullptr);
    return r;
}

/// A radius that gives each query about `perQuery` results: the median
/// over queries of the perQuery-th neighbour's distance.
float radiusFor(FlatMetric metric, int d, const std::vector<float>& xb,
                const std::vector<float>& xq, int64_t perQuery) {
    const int64_t nb = int64_t(xb.size()) / d, nq = int64_t(xq.size()) / d;
    std::vector<float> pb(xb), pq(xq);
    faiss_ext::prepareVectors(metric, nb, d, pb.data());
    faiss_ext::prepareVectors(metric, nq, d, pq.data());
    faiss::IndexFlat flat(d, faiss_ext::toFaissMetric(metric));
    flat.add(nb, pb.data());
    std::vector<float> D(size_t(nq * perQuery));
    std::vector<int64_t> I(D.size());
    flat.search(nq, pq.data(), perQuery, D.data(), I.data());
    std::vector<float> last;
    for (int64_t i = 0; i < nq; ++i) last.push_back(D[size_t((i + 1) * perQuery - 1)]);
    std::nth_element(last.begin(), last.begin() + nq / 2, last.end());
    return last[size_t(nq / 2)];
}

float slackFor(float radius) { return 1e-4f * std::max(1.f, std::fabs(radius)); }

}  // namespace

TEST(GpuRangeSearch, FlatEqualsIndexFlatForEveryMetric) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 40;
    const auto xb = clusteredVectors(20000, d, 25, kSeed);
    const auto xq = clusteredVectors(300, d, 25, kSeed + 1);
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::InnerProduct, FlatMetric::Cosine,
                         FlatMetric::Pearson}) {
        GpuIndexQuickSelectFlat index(&res, d, m);
        index.add(20000, xb.data());
        const float radius = radiusFor(m, d, xb, xq, 50);
        faiss::RangeSearchResult ours(300);
        index.range_search(300, xq.data(), radius, &ours);
        auto ref = flatReference(m, d, xb, xq, radius);
        const std::string what = faiss_ext::flatMetricName(m);
        const size_t n = expectSameSets(ours, *ref, radius, slackFor(radius), what);
        EXPECT_GT(n, size_t(300 * 20)) << what << ": the radius should give many results";
        for (size_t i = 0; i < 300; ++i) {  // in label order, as IndexFlat returns them
            for (size_t j = ours.lims[i] + 1; j < ours.lims[i + 1]; ++j) {
                ASSERT_LT(ours.labels[j - 1], ours.labels[j]) << what << " query " << i;
            }
        }
    }
}

TEST(GpuRangeSearch, SelectorsOfEveryFormAndDeviceQueries) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    const int64_t nb = 12000, nq = 200;
    const auto xb = clusteredVectors(nb, d, 15, kSeed + 2);
    const auto xq = clusteredVectors(nq, d, 15, kSeed + 3);
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
    index.add(nb, xb.data());
    const float radius = radiusFor(FlatMetric::L2, d, xb, xq, 100);
    std::vector<int64_t> some;
    for (int64_t i = 0; i < nb; i += 7) some.push_back(i);
    faiss::IDSelectorRange run(3000, 9000);
    faiss::IDSelectorBatch batch(some.size(), some.data());
    faiss::IDSelectorRange none(nb, nb + 5);
    faiss::IDSelectorNot notRun(&run);
    DeviceArray<float> dq(xq.size());
    ASSERT_NE(dq.p, nullptr);
    dq.upload(xq);
    for (const faiss::IDSelector* sel :
         std::vector<const faiss::IDSelector*>{&run, &batch, &none, &notRun}) {
        faiss::SearchParameters p;
        p.sel = const_cast<faiss::IDSelector*>(sel);
        faiss::RangeSearchResult ours(nq), ourDev(nq);
        index.range_search(nq, xq.data(), radius, &ours, &p);
        index.range_search(nq, dq.p, radius, &ourDev, &p);
        auto ref = flatReference(FlatMetric::L2, d, xb, xq, radius, sel);
        expectSameSets(ours, *ref, radius, slackFor(radius), "host queries");
        expectSameSets(ourDev, *ref, radius, slackFor(radius), "device queries");
        for (size_t j = 0; j < ours.lims[nq]; ++j) ASSERT_TRUE(sel->is_member(ours.labels[j]));
    }
}

TEST(GpuRangeSearch, ManyResultsPerQueryInSmallTemporaryMemory) {
    FAISS_EXT_REQUIRE_GPU();
    // 24 MiB of temporary memory: the hits of one tile do not fit one
    // copy-out, and a radius past every distance returns all of nb.
    StandardGpuResources res;
    res.setTempMemory(size_t(24) << 20);
    const int d = 16;
    const int64_t nb = 60000, nq = 64;
    const auto xb = clusteredVectors(nb, d, 5, kSeed + 4);
    const auto xq = clusteredVectors(nq, d, 5, kSeed + 5);
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
    index.add(nb, xb.data());
    const float radius = 1e30f;
    faiss::RangeSearchResult ours(nq);
    index.range_search(nq, xq.data(), radius, &ours);
    ASSERT_EQ(ours.lims[nq], size_t(nb * nq));
    for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j = 0; j < nb; ++j) ASSERT_EQ(ours.labels[ours.lims[i] + j], j);
    }
    const float mid = radiusFor(FlatMetric::L2, d, xb, xq, 20000);
    faiss::RangeSearchResult half(nq);
    index.range_search(nq, xq.data(), mid, &half);
    expectSameSets(half, *flatReference(FlatMetric::L2, d, xb, xq, mid), mid, slackFor(mid),
                   "a third of the corpus per query");
}

TEST(GpuRangeSearch, HostStorageAndEmptyIndex) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexQuickSelectFlatConfig cfg;
    cfg.storage = faiss_ext::gpu::VectorStorage::Host;
    const int d = 24;
    const auto xb = clusteredVectors(8000, d, 10, kSeed + 6);
    const auto xq = clusteredVectors(50, d, 10, kSeed + 7);
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::InnerProduct, cfg);
    faiss::RangeSearchResult empty(50);
    index.range_search(50, xq.data(), 0.f, &empty);
    EXPECT_EQ(empty.lims[50], 0u);
    index.add(8000, xb.data());
    const float radius = radiusFor(FlatMetric::InnerProduct, d, xb, xq, 30);
    faiss::RangeSearchResult ours(50);
    std::vector<uint8_t> bits(1000, 0x5a);
    faiss::IDSelectorBitmap sel(bits.size(), bits.data());
    faiss::SearchParameters p;
    p.sel = &sel;
    index.range_search(50, xq.data(), radius, &ours, &p);
    expectSameSets(ours, *flatReference(FlatMetric::InnerProduct, d, xb, xq, radius, &sel), radius,
                   slackFor(radius), "host storage, bitmap");
}

TEST(GpuRangeSearch, SearchGraphIsExact) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    const int64_t nb = 6000, nq = 100;
    const auto xb = clusteredVectors(nb, d, 12, kSeed + 8);
    const auto xq = clusteredVectors(nq, d, 12, kSeed + 9);
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::Cosine}) {
        GpuIndexSearchGraph index(&res, d, m);
        index.add(nb, xb.data());
        const float radius = radiusFor(m, d, xb, xq, 40);
        faiss::RangeSearchResult ours(nq);
        index.range_search(nq, xq.data(), radius, &ours);
        auto ref = flatReference(m, d, xb, xq, radius);
        EXPECT_GT(expectSameSets(ours, *ref, radius, slackFor(radius), "search graph"),
                  size_t(nq * 20));
        faiss::IDSelectorRange run(100, 2500);
        faiss::SearchParameters p;
        p.sel = &run;
        faiss::RangeSearchResult filtered(nq);
        index.range_search(nq, xq.data(), radius, &filtered, &p);
        expectSameSets(filtered, *flatReference(m, d, xb, xq, radius, &run), radius,
                       slackFor(radius), "search graph, range selector");
    }
}

TEST(GpuRangeSearch, BadInputIsRefusedWithTheResultUntouched) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    const auto xb = clusteredVectors(500, d, 4, kSeed);
    GpuIndexQuickSelectFlat l2(&res, d, FlatMetric::L2);
    l2.add(500, xb.data());
    std::vector<float> q(size_t(3 * d), 0.f);
    faiss::RangeSearchResult r(3);
    EXPECT_THROW(l2.range_search(3, q.data(), NAN, &r), faiss::FaissException);
    EXPECT_THROW(l2.range_search(3, q.data(), -1.f, &r), faiss::FaissException);
    EXPECT_THROW(l2.range_search(-1, q.data(), 1.f, &r), faiss::FaissException);
    EXPECT_THROW(l2.range_search(3, nullptr, 1.f, &r), faiss::FaissException);
    EXPECT_THROW(l2.range_search(3, q.data(), 1.f, nullptr), faiss::FaissException);
    faiss::RangeSearchResult wrongSize(2);
    EXPECT_THROW(l2.range_search(3, q.data(), 1.f, &wrongSize), faiss::FaissException);
    faiss::SearchParametersIVF ivf;
    EXPECT_THROW(l2.range_search(3, q.data(), 1.f, &r, &ivf), faiss::FaissException);
    faiss_ext::gpu::SearchParametersQuickSelectFlat algo;
    algo.selectAlgo = faiss_ext::gpu::SelectAlgo::THHeap;
    EXPECT_THROW(l2.range_search(3, q.data(), 1.f, &r, &algo), faiss::FaissException);
    std::vector<float> nanQ(q);
    nanQ[5] = NAN;
    EXPECT_THROW(l2.range_search(3, nanQ.data(), 1.f, &r), faiss::FaissException);
    EXPECT_EQ(r.labels, nullptr);  // nothing written by a refused call
    EXPECT_EQ(r.distances, nullptr);
    // a result filled once is not silently overwritten (it would leak)
    l2.range_search(3, q.data(), 1.f, &r);
    EXPECT_THROW(l2.range_search(3, q.data(), 1.f, &r), faiss::FaissException);
    // foreign search parameters are refused by search too
    std::vector<float> D(3), Dk(3);
    std::vector<int64_t> I(3);
    EXPECT_THROW(l2.search(3, q.data(), 1, D.data(), I.data(), &ivf), faiss::FaissException);
    // the search graph's range search is an exact scan: beam-search knobs and
    // other indexes' parameters are refused, FAISS's base class and a default
    // SearchParametersSearchGraph (for its selector) are taken
    GpuIndexSearchGraph graph(&res, d);
    graph.add(500, xb.data());
    faiss_ext::gpu::SearchParametersSearchGraph knobs;
    knobs.itopk = 32;
    faiss::RangeSearchResult g0(3), g1(3), g2(3);
    EXPECT_THROW(graph.range_search(3, q.data(), 1.f, &g0, &knobs), faiss::FaissException);
    EXPECT_THROW(graph.range_search(3, q.data(), 1.f, &g0, &ivf), faiss::FaissException);
    faiss_ext::gpu::SearchParametersSearchGraph unlike;  // nothing to flag in an exact scan
    unlike.unlikeQueryRatio = 3.f;
    EXPECT_THROW(graph.range_search(3, q.data(), 1.f, &g0, &unlike), faiss::FaissException);
    faiss_ext::gpu::SearchParametersSearchGraph probes;  // nor anything to probe
    probes.unlikeQueryProbes = 8;
    EXPECT_THROW(graph.range_search(3, q.data(), 1.f, &g0, &probes), faiss::FaissException);
    EXPECT_EQ(g0.labels, nullptr);
    faiss::IDSelectorRange half(0, 250);
    faiss_ext::gpu::SearchParametersSearchGraph plainGraph;
    plainGraph.sel = &half;
    graph.range_search(3, q.data(), 1e30f, &g1, &plainGraph);
    EXPECT_EQ(g1.lims[3], size_t(3 * 250));
    faiss::SearchParameters base;
    base.sel = &half;
    graph.range_search(3, q.data(), 1e30f, &g2, &base);
    EXPECT_EQ(g2.lims[3], size_t(3 * 250));
    faiss_ext::gpu::GpuKnnGraphGNND gnnd(&res, d, 8);
    faiss::RangeSearchResult g(3);
    EXPECT_THROW(gnnd.range_search(3, q.data(), 1.f, &g), faiss::FaissException);
}
