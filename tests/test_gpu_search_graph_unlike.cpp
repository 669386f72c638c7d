// GpuIndexSearchGraph and queries unlike the data (graph/UnlikeQueryRule.h):
// queries drawn around other centres than the vectors are flagged and
// answered by probing the nearest lists (recall against faiss::IndexFlat;
// every list probed: its results) or, with probes 0 or k past the probe's
// limit, by exact search (results equal faiss::IndexFlat's); queries of the
// data's distribution are left to the graph (results identical to a search
// without detection); the batch share gates the exact search; inner
// products are not touched; filtered searches answer over the selection;
// removals and adds renew the probe lists and the exact copy.
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "GnndTestUtils.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/graph/ProbeSearch.h"
#include "faiss_ext/gpu/impl/graph/UnlikeQueryRule.h"

using namespace faiss_ext;
using namespace faiss_ext::gpu;

namespace {

constexpr int kD = 32;
constexpr int kK = 10;

/// Points around `centres` (Gaussian, unit spread), cluster i % centres.
std::vector<float> around(const std::vector<float>& centres, int64_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0.f, 1.f);
    const int64_t c = int64_t(centres.size()) / kD;
    std::vector<float> x(size_t(n) * kD);
    for (int64_t i = 0; i < n; ++i)
        for (int t = 0; t < kD; ++t) x[size_t(i) * kD + t] = centres[(i % c) * kD + t] + g(rng);
    return x;
}

/// `c` centres uniform in [-8, 8]^d.
std::vector<float> centres(int c, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-8.f, 8.f);
    std::vector<float> x(size_t(c) * kD);
    for (float& v : x) v = u(rng);
    return x;
}

/// The data: 40 clusters; queries of the same clusters (seed 2) and queries
/// around 40 other centres (seed 3), unlike the data.
struct UnlikeSet {
    int64_t n = test::sized<int64_t>(20000, 4000), nq = 300;
    std::vector<float> x, inDist, unlike;
    UnlikeSet() {
        const std::vector<float> data = centres(40, 1);
        x = around(data, n, 11);
        inDist = around(data, nq, 12);
        unlike = around(centres(40, 3), nq, 13);
    }
};

const UnlikeSet& unlikeSet() {
    static const UnlikeSet s;
    return s;
}

struct Results {
    std::vector<float> D;
    std::vector<int64_t> I;
};

Results searchOf(const faiss::Index& index, const std::vector<float>& q, int64_t nq,
                 const faiss::SearchParameters* params = nullptr, int64_t k = kK) {
    Results r;
    r.D.resize(size_t(nq) * k);
    r.I.resize(size_t(nq) * k);
    index.search(nq, q.data(), k, r.D.data(), r.I.data(), params);
    return r;
}

/// faiss::IndexFlat's results over x.
Results flatResults(const std::vector<float>& x, const std::vector<float>& q, int64_t nq, bool ip,
                    int64_t k = kK) {
    std::unique_ptr<faiss::IndexFlat> flat(ip ? (faiss::IndexFlat*)new faiss::IndexFlatIP(kD)
                                              : new faiss::IndexFlatL2(kD));
    flat->add(int64_t(x.size()) / kD, x.data());
    return searchOf(*flat, q, nq, nullptr, k);
}

/// "" when r equals faiss::IndexFlat's results over x (ties aside).
std::string checkExact(const Results& r, const std::vector<float>& x, const std::vector<float>& q,
                       int64_t nq, bool ip, int64_t k = kK) {
    const Results ref = flatResults(x, q, nq, ip, k);
    return test::compareKnn(nq, k, r.D.data(), r.I.data(), ref.D.data(), ref.I.data(), ip, 1e-3f,
                            1e-3f);
}

/// Share of faiss::IndexFlat's k nearest that r holds.
double recallOf(const Results& r, const std::vector<float>& x, const std::vector<float>& q,
                int64_t nq) {
    const Results ref = flatResults(x, q, nq, false);
    int64_t found = 0;
    for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j = 0; j < kK; ++j) {
            const auto row = r.I.begin() + i * kK;
            found += std::count(row, row + kK, ref.I[size_t(i * kK + j)]);
        }
    }
    return double(found) / double(nq * kK);
}

/// A small graph with detection at the suggested ratio (off by default),
/// its flagged queries answered by the probe (the default).
GpuIndexSearchGraphConfig smallConfig() {
    GpuIndexSearchGraphConfig c;
    c.graphDegree = 32;
    c.knnDegree = 64;
    c.unlikeQueryRatio = graph::kSuggestedUnlikeQueryRatio;
    return c;
}

/// smallConfig() answering them by exact search.
GpuIndexSearchGraphConfig exactConfig() {
    GpuIndexSearchGraphConfig c = smallConfig();
    c.unlikeQueryProbes = 0;
    return c;
}

/// Search parameters probing every list (an exact answer through the probe).
SearchParametersSearchGraph everyList() {
    SearchParametersSearchGraph sp;
    sp.unlikeQueryProbes = 1 << 30;
    return sp;
}

/// Exact answers either way: every list probed where `config` probes, its
/// own exact search where it does not (parameters would override it).
SearchParametersSearchGraph exactAnswers(const GpuIndexSearchGraphConfig& config) {
    return config.unlikeQueryProbes == 0 ? SearchParametersSearchGraph() : everyList();
}

/// An index of the set's vectors with `config`.
std::unique_ptr<GpuIndexSearchGraph> built(StandardGpuResources& res,
                                           const GpuIndexSearchGraphConfig& config,
                                           FlatMetric metric = FlatMetric::L2) {
    const UnlikeSet& s = unlikeSet();
    std::unique_ptr<GpuIndexSearchGraph> index(new GpuIndexSearchGraph(&res, kD, metric, config));
    index->add(s.n, s.x.data());
    return index;
}

/// A search with detection off (the graph's own answers, not counted).
Results searchWithoutDetection(const GpuIndexSearchGraph& index, const std::vector<float>& q,
                               int64_t nq) {
    SearchParametersSearchGraph off;
    off.unlikeQueryRatio = 0.f;
    return searchOf(index, q, nq, &off);
}

}  // namespace

TEST(GpuSearchGraphUnlike, AnswersQueriesUnlikeTheDataExactly) {
    FAISS_EXT_REQUIRE_GPU();
    const UnlikeSet& s = unlikeSet();
    StandardGpuResources res;
    const std::unique_ptr<GpuIndexSearchGraph> index = built(res, exactConfig());
    const Results r = searchOf(*index, s.unlike, s.nq);
    const UnlikeQueryCounts c = index->getUnlikeQueryCounts();
    EXPECT_EQ(c.searched, s.nq);
    // exact neighbours' ratios on this data: 7.7 to 27 (0.45 to 1.75 for the
    // queries of the data's clusters; numpy, 4,000 and 20,000 vectors)
    EXPECT_EQ(c.flagged, s.nq);
    EXPECT_EQ(c.answeredExactly, s.nq);
    EXPECT_EQ(c.answeredByProbe, 0);
    EXPECT_EQ(c.leftForLackOfMemory, 0);
    EXPECT_EQ(checkExact(r, s.x, s.unlike, s.nq, false), "");
    searchWithoutDetection(*index, s.unlike, s.nq);
    EXPECT_EQ(index->getUnlikeQueryCounts().searched, s.nq);
    index->resetUnlikeQueryCounts();
    EXPECT_EQ(index->getUnlikeQueryCounts().flagged, 0);
}

// The default answer: the 64 lists nearest to each flagged query (of
// round(4 sqrt(n)) = 566 here, 253 at the sanitizer size), whatever share
// of the batch is flagged; every list probed gives faiss::IndexFlat's
// results; k past the probe's limit goes to the exact search.
TEST(GpuSearchGraphUnlike, ProbesAnswerQueriesUnlikeTheData) {
    FAISS_EXT_REQUIRE_GPU();
    const UnlikeSet& s = unlikeSet();
    StandardGpuResources res;
    GpuIndexSearchGraphConfig config = smallConfig();
    config.unlikeQueryShare = 0.5f;  // (the probe does not wait for a share)
    const std::unique_ptr<GpuIndexSearchGraph> index = built(res, config);
    const Results graphOnly = searchWithoutDetection(*index, s.unlike, s.nq);
    const Results r = searchOf(*index, s.unlike, s.nq);
    UnlikeQueryCounts c = index->getUnlikeQueryCounts();
    EXPECT_EQ(c.flagged, s.nq);
    EXPECT_EQ(c.answeredByProbe, s.nq);
    EXPECT_EQ(c.answeredExactly, 0);
    const double probed = recallOf(r, s.x, s.unlike, s.nq);
    EXPECT_GE(probed, 0.95) << "the graph alone: " << recallOf(graphOnly, s.x, s.unlike, s.nq);
    const SearchParametersSearchGraph all = everyList();
    EXPECT_EQ(checkExact(searchOf(*index, s.unlike, s.nq, &all), s.x, s.unlike, s.nq, false), "");
    const int64_t kLarge = graph::kProbeMaxK + 1;
    index->resetUnlikeQueryCounts();
    EXPECT_EQ(checkExact(searchOf(*index, s.unlike, s.nq, nullptr, kLarge), s.x, s.unlike, s.nq,
                         false, kLarge),
              "");
    c = index->getUnlikeQueryCounts();
    EXPECT_GE(c.flagged, s.nq * 9 / 10);
    EXPECT_EQ(c.answeredExactly, c.flagged);
    EXPECT_EQ(c.answeredByProbe, 0);
}

// (Exact neighbours' ratios on these queries are 0.45 to 1.75: none is
// flagged at 3, and with no flag the results are the graph's own.)
TEST(GpuSearchGraphUnlike, LeavesQueriesOfTheDataToTheGraph) {
    FAISS_EXT_REQUIRE_GPU();
    const UnlikeSet& s = unlikeSet();
    StandardGpuResources res;
    for (const GpuIndexSearchGraphConfig& config : {smallConfig(), exactConfig()}) {
        const std::unique_ptr<GpuIndexSearchGraph> index = built(res, config);
        const Results on = searchOf(*index, s.inDist, s.nq);
        const UnlikeQueryCounts c = index->getUnlikeQueryCounts();
        EXPECT_EQ(c.searched, s.nq);
        EXPECT_LE(c.flagged, s.nq / 100);
        if (config.unlikeQueryProbes == 0) {
            EXPECT_EQ(c.answeredExactly, 0);  // under the share
        } else {
            EXPECT_EQ(c.answeredByProbe, c.flagged);
        }
        if (c.flagged > 0) continue;
        const Results without = searchWithoutDetection(*index, s.inDist, s.nq);
        EXPECT_EQ(on.I, without.I);
        EXPECT_EQ(on.D, without.D);
    }
}

// 2 queries unlike the data in a batch of 200: 1% of the batch, under the
// default share (2%), so they keep the graph's answers; with share 0 they
// are answered exactly.
TEST(GpuSearchGraphUnlike, ShareGatesTheExactSearch) {
    FAISS_EXT_REQUIRE_GPU();
    const UnlikeSet& s = unlikeSet();
    const int64_t nq = 200;
    std::vector<float> mixed(s.inDist.begin(), s.inDist.begin() + (nq - 2) * kD);
    mixed.insert(mixed.end(), s.unlike.begin(), s.unlike.begin() + 2 * kD);
    StandardGpuResources res;
    GpuIndexSearchGraphConfig any = exactConfig();
    any.unlikeQueryShare = 0.f;
    for (const GpuIndexSearchGraphConfig& config : {exactConfig(), any}) {
        const std::unique_ptr<GpuIndexSearchGraph> index = built(res, config);
        const Results r = searchOf(*index, mixed, nq);
        const UnlikeQueryCounts c = index->getUnlikeQueryCounts();
        EXPECT_GE(c.flagged, 2);
        EXPECT_LE(c.flagged, 2 + nq / 100);
        if (config.unlikeQueryShare > 0.f) {
            EXPECT_EQ(c.answeredExactly, 0);
            continue;
        }
        EXPECT_EQ(c.answeredExactly, c.flagged);
        const std::vector<float> last(mixed.end() - 2 * kD, mixed.end());
        Results tail;
        tail.D.assign(r.D.end() - 2 * kK, r.D.end());
        tail.I.assign(r.I.end() - 2 * kK, r.I.end());
        EXPECT_EQ(checkExact(tail, s.x, last, 2, false), "");
    }
}

// Cosine: unit vectors compared by inner products, flagged by the squared
// distance 2 - 2 s; inner products of raw vectors have no distance to
// compare, so a ratio is refused there (config and search parameters).
TEST(GpuSearchGraphUnlike, CosineDetectsInnerProductRefuses) {
    FAISS_EXT_REQUIRE_GPU();
    const UnlikeSet& s = unlikeSet();
    StandardGpuResources res;
    const std::vector<float> xn = gnndtest::prepared(FlatMetric::Cosine, s.x, s.n, kD);
    const std::vector<float> qn = gnndtest::prepared(FlatMetric::Cosine, s.unlike, s.nq, kD);
    for (const GpuIndexSearchGraphConfig& config : {exactConfig(), smallConfig()}) {
        const std::unique_ptr<GpuIndexSearchGraph> cosine = built(res, config, FlatMetric::Cosine);
        // the probe through every list is exact too
        const SearchParametersSearchGraph all = exactAnswers(config);
        const Results r = searchOf(*cosine, s.unlike, s.nq, &all);
        const UnlikeQueryCounts c = cosine->getUnlikeQueryCounts();
        EXPECT_GE(c.flagged, s.nq * 9 / 10);
        EXPECT_EQ(config.unlikeQueryProbes == 0 ? c.answeredExactly : c.answeredByProbe, c.flagged);
        if (c.flagged == s.nq) EXPECT_EQ(checkExact(r, xn, qn, s.nq, true), "");
    }
    EXPECT_THROW(GpuIndexSearchGraph(&res, kD, FlatMetric::InnerProduct, smallConfig()),
                 faiss::FaissException);
    GpuIndexSearchGraphConfig off = exactConfig();
    off.unlikeQueryRatio = 0.f;
    const std::unique_ptr<GpuIndexSearchGraph> ip = built(res, off, FlatMetric::InnerProduct);
    SearchParametersSearchGraph sp;
    sp.unlikeQueryRatio = 3.f;
    std::vector<float> D(size_t(s.nq) * kK);
    std::vector<int64_t> I(size_t(s.nq) * kK);
    EXPECT_THROW(ip->search(s.nq, s.unlike.data(), kK, D.data(), I.data(), &sp),
                 faiss::FaissException);
    searchOf(*ip, s.unlike, s.nq);  // no ratio: a plain graph search
    EXPECT_EQ(ip->getUnlikeQueryCounts().searched, 0);
}

// A selector of 90% of the ids on a graph of degree 16 takes the widened
// candidate search at full size (exact search over the selection at the
// sanitizer size): queries unlike the data are answered over the selection,
// never over every vector: exactly (probes 0), or by the probe skipping the
// rows outside the selection, here through every list, so the results
// equal faiss::IndexFlat's over the selected vectors either way.
TEST(GpuSearchGraphUnlike, FilteredSearchesAnswerOverTheSelection) {
    FAISS_EXT_REQUIRE_GPU();
    const UnlikeSet& s = unlikeSet();
    StandardGpuResources res;
    for (GpuIndexSearchGraphConfig config : {exactConfig(), smallConfig()}) {
        config.graphDegree = 16;
        config.knnDegree = 32;
        const std::unique_ptr<GpuIndexSearchGraph> index = built(res, config);
        const int64_t first = s.n / 10;
        faiss::IDSelectorRange kept(first, s.n);
        SearchParametersSearchGraph sp = exactAnswers(config);
        sp.sel = &kept;
        Results r = searchOf(*index, s.unlike, s.nq, &sp);
        for (int64_t& id : r.I) {
            ASSERT_GE(id, first);
            id -= first;  // positions among the selected vectors
        }
        const std::vector<float> selected(s.x.begin() + first * kD, s.x.end());
        EXPECT_EQ(checkExact(r, selected, s.unlike, s.nq, false), "");
        // (0 and 0 where the selection was searched exactly)
        const UnlikeQueryCounts c = index->getUnlikeQueryCounts();
        EXPECT_EQ(config.unlikeQueryProbes == 0 ? c.answeredExactly : c.answeredByProbe, c.flagged);
    }
}

// Both answers are exact here (the probe through every list): stale lists
// or a stale copy would answer with vectors that moved or left.
TEST(GpuSearchGraphUnlike, RemovalsAndAddsRenewTheProbeListsAndTheExactCopy) {
    FAISS_EXT_REQUIRE_GPU();
    const UnlikeSet& s = unlikeSet();
    StandardGpuResources res;
    for (const GpuIndexSearchGraphConfig& config : {exactConfig(), smallConfig()}) {
        const SearchParametersSearchGraph all = exactAnswers(config);
        GpuIndexSearchGraph index(&res, kD, FlatMetric::L2, config);
        const int64_t half = s.n / 2;
        index.add(half, s.x.data());
        EXPECT_EQ(checkExact(searchOf(index, s.unlike, s.nq, &all),
                             {s.x.begin(), s.x.begin() + half * kD}, s.unlike, s.nq, false),
                  "");
        index.add(s.n - half, s.x.data() + half * kD);
        EXPECT_EQ(checkExact(searchOf(index, s.unlike, s.nq, &all), s.x, s.unlike, s.nq, false),
                  "");
        faiss::IDSelectorRange first(0, s.n / 4);
        ASSERT_EQ(index.remove_ids(first), size_t(s.n / 4));
        const std::vector<float> rest(s.x.begin() + (s.n / 4) * kD, s.x.end());
        EXPECT_EQ(checkExact(searchOf(index, s.unlike, s.nq, &all), rest, s.unlike, s.nq, false),
                  "");
        const UnlikeQueryCounts c = index.getUnlikeQueryCounts();
        EXPECT_EQ(config.unlikeQueryProbes == 0 ? c.answeredExactly : c.answeredByProbe, 3 * s.nq);
    }
}

TEST(GpuSearchGraphUnlike, RefusesBadRatios) {
    FAISS_EXT_REQUIRE_GPU();
    const UnlikeSet& s = unlikeSet();
    StandardGpuResources res;
    GpuIndexSearchGraphConfig bad = smallConfig();
    bad.unlikeQueryRatio = -1.f;
    EXPECT_THROW(GpuIndexSearchGraph(&res, kD, FlatMetric::L2, bad), faiss::FaissException);
    bad = smallConfig();
    bad.unlikeQueryShare = 1.5f;
    EXPECT_THROW(GpuIndexSearchGraph(&res, kD, FlatMetric::L2, bad), faiss::FaissException);
    bad = smallConfig();
    bad.unlikeQueryProbes = -1;
    EXPECT_THROW(GpuIndexSearchGraph(&res, kD, FlatMetric::L2, bad), faiss::FaissException);
    const std::unique_ptr<GpuIndexSearchGraph> index = built(res, smallConfig());
    SearchParametersSearchGraph sp;
    for (float r : {-0.5f, NAN, INFINITY}) {
        sp.unlikeQueryRatio = r;
        std::vector<float> D(size_t(s.nq) * kK, 7.f);
        std::vector<int64_t> I(size_t(s.nq) * kK, 7);
        EXPECT_THROW(index->search(s.nq, s.unlike.data(), kK, D.data(), I.data(), &sp),
                     faiss::FaissException);
        EXPECT_EQ(D[0], 7.f);  // refused before anything was written
        EXPECT_EQ(I[0], 7);
    }
    sp.unlikeQueryRatio = -1.f;
    sp.unlikeQueryProbes = -2;
    std::vector<float> D(size_t(s.nq) * kK, 7.f);
    std::vector<int64_t> I(size_t(s.nq) * kK, 7);
    EXPECT_THROW(index->search(s.nq, s.unlike.data(), kK, D.data(), I.data(), &sp),
                 faiss::FaissException);
    EXPECT_EQ(D[0], 7.f);
    EXPECT_EQ(I[0], 7);
    EXPECT_EQ(index->getUnlikeQueryCounts().searched, 0);
}
