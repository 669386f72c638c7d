// Filtered exact search (SearchParameters::sel) on GpuIndexQuickSelectFlat
// against an independent oracle: faiss::IndexFlat over the selected vectors
// alone, labels mapped back. Every selector type, metric and selectivity
// (none, fewer than k, a few, most, all), the search paths the shapes pick
// (tiled, fused few-query, radix large k, bounded TF32; slice, gather and
// mask forms), host storage, threads; refusals by the indexes that cannot
// apply a selector (Bi-level LSH, GNND search).
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::DistancePrecision;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::GpuIndexQuickSelectFlatConfig;
using faiss_ext::gpu::SearchParametersQuickSelectFlat;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

/// Keeps ids in a hash-picked fraction: a subclass only is_member can read.
struct HashSelector : faiss::IDSelector {
    uint64_t keepPer1000;
    explicit HashSelector(uint64_t k) : keepPer1000(k) {}
    bool is_member(idx_t id) const override {
        uint64_t h = uint64_t(id) * 0x9E3779B97F4A7C15ull;
        return (h >> 33) % 1000 < keepPer1000;
    }
};

/// The exact filtered k-NN: IndexFlat over the selected (prepared) vectors,
/// labels mapped back to positions, -1 / +-inf padding past the selection.
void filteredOracle(const faiss::IDSelector& sel, FlatMetric metric, int d,
                    const std::vector<float>& xb, const std::vector<float>& xq, int64_t k,
                    std::vector<float>* D, std::vector<int64_t>* I) {
    const int64_t nb = int64_t(xb.size()) / d, nq = int64_t(xq.size()) / d;
    std::vector<float> pb(xb), pq(xq);
    faiss_ext::prepareVectors(metric, nb, d, pb.data());
    faiss_ext::prepareVectors(metric, nq, d, pq.data());
    std::vector<int64_t> kept;
    std::vector<float> sub;
    for (int64_t i = 0; i < nb; ++i) {
        if (!sel.is_member(i)) continue;
        kept.push_back(i);
        sub.insert(sub.end(), pb.begin() + i * d, pb.begin() + (i + 1) * d);
    }
    faiss::IndexFlat flat(d, faiss_ext::toFaissMetric(metric));
    flat.add(int64_t(kept.size()), sub.data());
    D->assign(size_t(nq * k), 0.f);
    I->assign(size_t(nq * k), -1);
    flat.search(nq, pq.data(), k, D->data(), I->data());
    const bool ip = metric != FlatMetric::L2;
    for (int64_t j = 0; j < nq * k; ++j) {
        if ((*I)[j] >= 0) {
            (*I)[j] = kept[(*I)[j]];
        } else {
            (*D)[j] = ip ? -INFINITY : INFINITY;  // our padding (FAISS writes +-FLT_MAX)
        }
    }
}

/// Our filtered search of xq equals the oracle's (ties aside), and every
/// returned label is selected.
void expectFilteredExact(const GpuIndexQuickSelectFlat& index, const faiss::IDSelector& sel,
                         const std::vector<float>& xb, const std::vector<float>& xq, int64_t k,
                         const std::string& what,
                         DistancePrecision precision = DistancePrecision::Auto) {
    const int d = index.d;
    const int64_t nq = int64_t(xq.size()) / d;
    SearchParametersQuickSelectFlat p;
    p.sel = const_cast<faiss::IDSelector*>(&sel);
    p.distancePrecision = precision;
    std::vector<float> D(size_t(nq * k));
    std::vector<int64_t> I(size_t(nq * k));
    index.search(nq, xq.data(), k, D.data(), I.data(), &p);
    std::vector<float> refD;
    std::vector<int64_t> refI;
    filteredOracle(sel, index.getFlatMetric(), d, xb, xq, k, &refD, &refI);
    for (int64_t j = 0; j < nq * k; ++j) {
        if (I[j] >= 0) {
            ASSERT_TRUE(sel.is_member(I[j])) << what << ": label " << I[j] << " not selected";
        }
        ASSERT_EQ(I[j] < 0, refI[j] < 0) << what << ": padding differs at " << j;
    }
    const bool ip = index.getFlatMetric() != FlatMetric::L2;
    EXPECT_EQ(compareKnn(nq, k, D.data(), I.data(), refD.data(), refI.data(), ip), "")
            << what << " seed=" << kSeed;
}

struct Shape {
    int64_t nb, nq, k;
    int d;
    FlatMetric metric;
};

std::string shapeName(const Shape& s) {
    return "nb" + std::to_string(s.nb) + "_nq" + std::to_string(s.nq) + "_k" +
           std::to_string(s.k) + "_d" + std::to_string(s.d) + "_" +
           faiss_ext::flatMetricName(s.metric);
}

class GpuFilteredSearch : public ::testing::TestWithParam<Shape> {};

}  // namespace

/// Every selector type at selectivities from empty to all, for the shape's
/// path (the shapes below reach the tiled, fused few-query and radix paths).
TEST_P(GpuFilteredSearch, EqualsIndexFlatOverTheSelection) {
    FAISS_EXT_REQUIRE_GPU();
    const Shape s = GetParam();
    StandardGpuResources res;
    const auto xb = clusteredVectors(s.nb, s.d, 20, kSeed);
    const auto xq = clusteredVectors(s.nq, s.d, 20, kSeed + 1);
    GpuIndexQuickSelectFlat index(&res, s.d, s.metric);
    index.add(s.nb, xb.data());

    std::mt19937_64 rng(kSeed);
    std::vector<int64_t> few;  // fewer than k
    for (int64_t j = 0; j < std::max<int64_t>(1, s.k / 2); ++j) few.push_back(int64_t(rng() % s.nb));
    std::vector<int64_t> tenth;
    for (int64_t i = 0; i < s.nb; ++i) if (rng() % 10 == 0) tenth.push_back(i);
    std::vector<uint8_t> half(size_t((s.nb + 7) / 8));
    for (auto& b : half) b = uint8_t(rng());
    faiss::IDSelectorRange none(s.nb, s.nb + 10);
    faiss::IDSelectorArray fewArray(few.size(), few.data());
    faiss::IDSelectorBatch tenthBatch(tenth.size(), tenth.data());
    faiss::IDSelectorBitmap halfBitmap(half.size(), half.data());
    faiss::IDSelectorRange run(s.nb / 3, s.nb / 3 + s.nb / 4);
    faiss::IDSelectorNot notRun(&run);
    HashSelector ninety(900);
    faiss::IDSelectorAll all;
    const std::string name = shapeName(s);
    expectFilteredExact(index, none, xb, xq, s.k, name + " empty selection");
    expectFilteredExact(index, fewArray, xb, xq, s.k, name + " array, fewer than k");
    expectFilteredExact(index, tenthBatch, xb, xq, s.k, name + " batch, 10%");
    expectFilteredExact(index, halfBitmap, xb, xq, s.k, name + " bitmap, 50%");
    expectFilteredExact(index, run, xb, xq, s.k, name + " range (one run)");
    expectFilteredExact(index, notRun, xb, xq, s.k, name + " not(range)");
    expectFilteredExact(index, ninety, xb, xq, s.k, name + " user subclass, 90%");
    expectFilteredExact(index, all, xb, xq, s.k, name + " all");
}

INSTANTIATE_TEST_SUITE_P(
        Shapes, GpuFilteredSearch,
        ::testing::Values(Shape{5000, 300, 10, 32, FlatMetric::L2},            // tiled
                          Shape{5000, 300, 10, 32, FlatMetric::InnerProduct},
                          Shape{5000, 300, 10, 32, FlatMetric::Cosine},
                          Shape{5000, 8, 100, 64, FlatMetric::L2},              // fused few-query
                          Shape{20000, 16, 2500, 64, FlatMetric::L2},           // radix large k
                          Shape{3000, 40, 1, 17, FlatMetric::Pearson},          // k = 1, odd d
                          Shape{2000, 20, 2000, 8, FlatMetric::L2}),            // k = ntotal
        [](const ::testing::TestParamInfo<Shape>& i) { return shapeName(i.param); });

TEST(GpuFilteredSearchPaths, BoundedTf32StaysExactUnderAFilter) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 128;
    const auto xb = clusteredVectors(40000, d, 30, kSeed);
    const auto xq = clusteredVectors(500, d, 30, kSeed + 1);
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        GpuIndexQuickSelectFlat index(&res, d, m);
        index.add(40000, xb.data());
        HashSelector third(333);
        faiss::IDSelectorRange run(1000, 31000);
        expectFilteredExact(index, third, xb, xq, 10, "TF32 bounded, gathered",
                            DistancePrecision::TF32Bounded);
        expectFilteredExact(index, run, xb, xq, 50, "TF32 bounded, slice",
                            DistancePrecision::TF32Bounded);
    }
}

/// Every other position below 2 * count: `count` positions, never one run.
struct EveryOtherSelector : faiss::IDSelector {
    int64_t count;
    explicit EveryOtherSelector(int64_t c) : count(c) {}
    bool is_member(idx_t id) const override { return id % 2 == 0 && id < 2 * count; }
};

// Gathered subsets of every size modulo 4, large enough for the sampled
// candidate selection: their GEMMs run over zero rows up to a multiple of 4
// (CorpusView::gemmRows), which must never come back as results.
TEST(GpuFilteredSearchPaths, GatheredSubsetsOfEverySizeModulo4StayExact) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 96;
    const int64_t nb = 41000;
    const auto xb = clusteredVectors(nb, d, 30, kSeed + 5);
    const auto xq = clusteredVectors(sized<int64_t>(300, 60), d, 30, kSeed + 6);
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        GpuIndexQuickSelectFlat index(&res, d, m);
        index.add(nb, xb.data());
        for (int64_t count : {20000, 20001, 20002, 20003}) {
            EveryOtherSelector sel(count);
            for (DistancePrecision p : {DistancePrecision::TF32Bounded,
                                        DistancePrecision::BF16x3Bounded}) {
                expectFilteredExact(index, sel, xb, xq, 10,
                                    "gathered " + std::to_string(count) + ", precision " +
                                            std::to_string(int(p)) + ", metric " +
                                            std::to_string(int(m)),
                                    p);
            }
        }
    }
}

TEST(GpuFilteredSearchPaths, HostStorageMasksTiles) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexQuickSelectFlatConfig cfg;
    cfg.storage = faiss_ext::gpu::VectorStorage::Host;
    const int d = 24;
    const auto xb = clusteredVectors(6000, d, 10, kSeed);
    const auto xq = clusteredVectors(100, d, 10, kSeed + 1);
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, cfg);
    index.add(6000, xb.data());
    HashSelector some(50), most(700);
    std::vector<int64_t> three{5, 77, 5999};
    faiss::IDSelectorArray fewer(three.size(), three.data());
    expectFilteredExact(index, some, xb, xq, 20, "host storage, 5%");
    expectFilteredExact(index, most, xb, xq, 20, "host storage, 70%");
    expectFilteredExact(index, fewer, xb, xq, 20, "host storage, 3 selected, k 20");
}

TEST(GpuFilteredSearchPaths, SmallTemporaryMemoryMasksTilesWithEachAlgorithm) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    res.setTempMemory(size_t(3) << 20);  // too small to gather 30k x 64 floats
    const int d = 64;
    const auto xb = clusteredVectors(30000, d, 10, kSeed);
    const auto xq = clusteredVectors(64, d, 10, kSeed + 1);
    for (auto algo : {faiss_ext::gpu::SelectAlgo::Auto, faiss_ext::gpu::SelectAlgo::QuickMultiSelect,
                      faiss_ext::gpu::SelectAlgo::MergeQueue, faiss_ext::gpu::SelectAlgo::THHeap}) {
        GpuIndexQuickSelectFlatConfig cfg;
        cfg.selectAlgo = algo;
        GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, cfg);
        index.add(30000, xb.data());
        HashSelector most(800), few(2);
        const std::string a = " algo " + std::to_string(int(algo));
        expectFilteredExact(index, most, xb, xq, 10, "masked, 80%" + a);
        expectFilteredExact(index, few, xb, xq, 100, "masked, 0.2%, k 100 > selected" + a);
    }
}

TEST(GpuFilteredSearchPaths, ThreadsSearchingWithDifferentFiltersMatchSerial) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    const int64_t nb = 8000, nq = 200, k = 10;
    const auto xb = clusteredVectors(nb, d, 10, kSeed);
    const auto xq = clusteredVectors(nq, d, 10, kSeed + 1);
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
    index.add(nb, xb.data());
    std::vector<std::unique_ptr<HashSelector>> sels;
    std::vector<std::vector<int64_t>> serial(8), parallel(8);
    for (int t = 0; t < 8; ++t) {
        sels.emplace_back(new HashSelector(uint64_t(100 * t + 10)));
        SearchParametersQuickSelectFlat p;
        p.sel = sels[t].get();
        std::vector<float> D(nq * k);
        serial[t].resize(nq * k);
        index.search(nq, xq.data(), k, D.data(), serial[t].data(), &p);
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            SearchParametersQuickSelectFlat p;
            p.sel = sels[t].get();
            std::vector<float> D(nq * k);
            parallel[t].resize(nq * k);
            index.search(nq, xq.data(), k, D.data(), parallel[t].data(), &p);
        });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 8; ++t) EXPECT_EQ(parallel[t], serial[t]) << "thread " << t;
}

TEST(GpuFilteredSearchPaths, PlainFaissSearchParametersCarryTheSelector) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    const auto xb = clusteredVectors(3000, d, 10, kSeed);
    const auto xq = clusteredVectors(50, d, 10, kSeed + 1);
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
    index.add(3000, xb.data());
    faiss::IDSelectorRange lower(0, 1500);
    faiss::SearchParameters p;
    p.sel = &lower;
    std::vector<float> D(50 * 5);
    std::vector<int64_t> I(50 * 5);
    index.search(50, xq.data(), 5, D.data(), I.data(), &p);
    for (int64_t id : I) EXPECT_TRUE(id >= 0 && id < 1500) << id;
    // FAISS 1.7.3's IndexFlat applies the selector itself: the same answer.
    faiss::IndexFlat flat(d, faiss::METRIC_L2);
    flat.add(3000, xb.data());
    std::vector<float> refD(50 * 5);
    std::vector<int64_t> refI(50 * 5);
    flat.search(50, xq.data(), 5, refD.data(), refI.data(), &p);
    EXPECT_EQ(compareKnn(50, 5, D.data(), I.data(), refD.data(), refI.data(), false), "");
}

TEST(GpuFilteredSearchPaths, KnnGraphOfAFilterIsRefused) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    const int64_t n = 2000;
    const auto xb = clusteredVectors(n, d, 10, kSeed);
    faiss::IDSelectorRange lower(0, n / 2);
    GpuIndexQuickSelectFlat flat(&res, d, FlatMetric::L2);
    flat.add(n, xb.data());
    SearchParametersQuickSelectFlat fp;
    fp.sel = &lower;
    std::vector<int64_t> graphLabels(n * 3);
    EXPECT_THROW(flat.knnGraph(3, true, nullptr, graphLabels.data(), &fp), faiss::FaissException);
}

TEST(GpuFilteredSearchPaths, BadSelectorIsRefusedWithTheIndexUnchanged) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    const auto xb = clusteredVectors(500, d, 4, kSeed);
    GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
    index.add(500, xb.data());
    faiss::IDSelectorBitmap nullBitmap(10, nullptr);
    SearchParametersQuickSelectFlat p;
    p.sel = &nullBitmap;
    std::vector<float> D(3 * 4);
    std::vector<int64_t> I(3 * 4);
    EXPECT_THROW(index.search(3, xb.data(), 4, D.data(), I.data(), &p), faiss::FaissException);
    EXPECT_EQ(index.ntotal, 500);
    index.search(3, xb.data(), 4, D.data(), I.data());  // still searches
    EXPECT_EQ(I[0], 0);
}

namespace {

/// Recall@k of I against the filtered exact answer (refI), and checks that
/// every returned id is selected and no row repeats an id.
double filteredRecall(const faiss::IDSelector& sel, int64_t nq, int64_t k,
                      const std::vector<int64_t>& I, const std::vector<int64_t>& refI) {
    int64_t hits = 0, total = 0;
    for (int64_t q = 0; q < nq; ++q) {
        const int64_t* row = I.data() + q * k;
        for (int64_t j = 0; j < k; ++j) {
            if (row[j] >= 0) {
                EXPECT_TRUE(sel.is_member(row[j])) << "query " << q << " returned " << row[j];
                for (int64_t i = 0; i < j; ++i) EXPECT_NE(row[i], row[j]) << "query " << q;
            }
            const int64_t r = refI[q * k + j];
            if (r < 0) continue;
            ++total;
            hits += std::find(row, row + k, r) != row + k;
        }
    }
    return total ? double(hits) / double(total) : 1.0;
}

/// Keeps vectors whose first coordinate is at least `threshold`: a filter
/// correlated with the region of space, as an attribute filter is.
struct FirstCoordinateSelector : faiss::IDSelector {
    const std::vector<float>* x;
    int d;
    float threshold;
    bool is_member(idx_t id) const override { return (*x)[size_t(id) * d] >= threshold; }
};

/// Recall@10 >= 0.95 against the filtered exact answer at selectivities from
/// 0.5% to 90%, for a random and an attribute-like filter, through `p`
/// (its selector set here; by default FAISS's base SearchParameters: the
/// index's defaults); every id returned selected.
void expectFilteredRecallAtEverySelectivity(const faiss::Index& index, FlatMetric metric, int d,
                                            const std::vector<float>& xb,
                                            const std::vector<float>& xq, const char* who,
                                            faiss::SearchParameters* p = nullptr,
                                            double minRecall = 0.95) {
    faiss::SearchParameters plain;
    if (!p) p = &plain;
    const int64_t nb = int64_t(xb.size()) / d, nq = int64_t(xq.size()) / d, k = 10;
    std::vector<float> firsts;
    for (int64_t i = 0; i < nb; ++i) firsts.push_back(xb[size_t(i) * d]);
    std::sort(firsts.begin(), firsts.end());
    for (int per1000 : {5, 50, 200, 500, 900}) {
        HashSelector random{static_cast<uint64_t>(per1000)};
        FirstCoordinateSelector attribute;
        attribute.x = &xb;
        attribute.d = d;
        attribute.threshold = firsts[size_t(double(nb) * (1.0 - per1000 / 1000.0))];
        for (const faiss::IDSelector* sel :
             {static_cast<const faiss::IDSelector*>(&random),
              static_cast<const faiss::IDSelector*>(&attribute)}) {
            const std::string what = std::string(who) + ", " +
                                     (sel == &random ? "random" : "attribute") + " filter, " +
                                     std::to_string(per1000 / 10.0) + "%";
            p->sel = const_cast<faiss::IDSelector*>(sel);
            std::vector<float> D(nq * k);
            std::vector<int64_t> I(nq * k);
            index.search(nq, xq.data(), k, D.data(), I.data(), p);
            p->sel = nullptr;
            std::vector<float> refD;
            std::vector<int64_t> refI;
            filteredOracle(*sel, metric, d, xb, xq, k, &refD, &refI);
            const double recall = filteredRecall(*sel, nq, k, I, refI);
            std::printf("[filtered graph] %s: recall@10 %.4f\n", what.c_str(), recall);
            EXPECT_GE(recall, minRecall) << what << " seed=" << kSeed;
        }
    }
}

/// A selection of no stored vector (ids past ntotal) through the index's own
/// parameters `p` pads every row with -1.
void expectEmptySelectionPads(const faiss::Index& index, const std::vector<float>& xq, int d,
                              faiss::SearchParameters* p) {
    const int64_t nq = int64_t(xq.size()) / d, k = 10;
    faiss::IDSelectorRange none(index.ntotal, index.ntotal + 5);
    p->sel = &none;
    std::vector<float> D(nq * k);
    std::vector<int64_t> I(nq * k);
    index.search(nq, xq.data(), k, D.data(), I.data(), p);
    p->sel = nullptr;
    for (int64_t id : I) EXPECT_EQ(id, -1);
}

}  // namespace

TEST(GpuFilteredGraphSearch, RecallAgainstFilteredExactAtEverySelectivity) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    const int64_t nb = 20000, nq = 300, k = 10;
    const auto xb = clusteredVectors(nb, d, 50, kSeed);
    const auto xq = clusteredVectors(nq, d, 50, kSeed + 1);
    faiss_ext::gpu::GpuIndexSearchGraph graph(&res, d);
    graph.add(nb, xb.data());
    expectFilteredRecallAtEverySelectivity(graph, FlatMetric::L2, d, xb, xq, "search graph");
    // ours with our parameters and a selector; an empty selection pads
    faiss_ext::gpu::SearchParametersSearchGraph gp;
    gp.itopk = 128;
    expectEmptySelectionPads(graph, xq, d, &gp);
}

TEST(GpuFilteredGraphSearch, GnndSearchKeepsItsRecallAtEverySelectivity) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    const int64_t nb = 20000, nq = 300, k = 10;
    for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
        auto xb = clusteredVectors(nb, d, 50, kSeed);
        auto xq = clusteredVectors(nq, d, 50, kSeed + 1);
        if (metric == FlatMetric::InnerProduct) {  // inner product of unit vectors, as embeddings
            faiss_ext::prepareVectors(FlatMetric::Cosine, nb, d, xb.data());
            faiss_ext::prepareVectors(FlatMetric::Cosine, nq, d, xq.data());
        }
        faiss_ext::gpu::GpuKnnGraphGNND gnnd(&res, d, 32, metric);
        gnnd.add(nb, xb.data());
        // The greedy search starts from scattered nodes and the k-NN graph
        // links clusters weakly (about 0.9 unfiltered here at a pool of
        // 256): filtered, it must keep its unfiltered recall (within 0.02;
        // selective filters run exactly, recall 1).
        faiss_ext::gpu::SearchParametersGNND wide;
        wide.searchL = 256;
        faiss::IDSelectorAll all;
        std::vector<float> D0(nq * k), refD;
        std::vector<int64_t> I0(nq * k), refI;
        gnnd.search(nq, xq.data(), k, D0.data(), I0.data(), &wide);
        filteredOracle(all, metric, d, xb, xq, k, &refD, &refI);
        const double unfiltered = filteredRecall(all, nq, k, I0, refI);
        std::printf("[filtered graph] GNND unfiltered at searchL 256: recall@10 %.4f\n", unfiltered);
        expectFilteredRecallAtEverySelectivity(gnnd, metric, d, xb, xq,
                                               metric == FlatMetric::L2 ? "GNND L2" : "GNND IP",
                                               &wide, std::min(0.95, unfiltered - 0.02));
        // our parameters carry the selector too, and FAISS's base ones; an
        // empty selection pads
        faiss_ext::gpu::SearchParametersGNND gp;
        gp.searchL = 64;
        expectEmptySelectionPads(gnnd, xq, d, &gp);
        faiss::SearchParameters base;
        expectEmptySelectionPads(gnnd, xq, d, &base);
        // another index's parameters are refused, nothing written
        faiss_ext::gpu::SearchParametersSearchGraph other;
        std::vector<float> D(nq * k);
        std::vector<int64_t> untouched(nq * k, 7);
        EXPECT_THROW(gnnd.search(nq, xq.data(), k, D.data(), untouched.data(), &other),
                     faiss::FaissException);
        for (int64_t v : untouched) EXPECT_EQ(v, 7);
    }
}
