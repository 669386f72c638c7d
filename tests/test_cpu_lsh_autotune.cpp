// Bi-level LSH parameters from the data (issue 22), on the CPU twin against
// exact brute force:
//   CpuLshWidths       bucket widths from k-th neighbour distances: equal to
//                      bucketWidth x the exact median distance when the whole
//                      group is sampled, close to it when extrapolated from a
//                      sample, proportional to the scale of the data
//   CpuLshMultiProbe   on data of full intrinsic dimension the probed
//                      neighbour buckets are not empty: nprobe adds
//                      candidates and recall
//   CpuLshGroupMargin  groupMargin searches a prefix of the groupProbes
//                      groups: between one group and all of them, a subset
//                      of the larger margin's candidates
//   CpuLshE8           the E8 decoder returns the nearest lattice point (brute
//                      force over the neighbouring points); an E8 index
//                      against the Z^M grid and exact search; its limits
//   CpuLshAutoTune     the tuner's reported recall is within 0.02 of the
//                      recall then measured on other queries of the same
//                      distribution; its verdict when Bi-level LSH cannot
//                      pay; argument checks before any work; "BiLSHauto"
// Seeds are fixed (test::kSeed) and printed.
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "LshTestData.h"
#include "TestUtils.h"
#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/BiLevelLSHWidths.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/index_factory.h"

namespace faiss_ext {
namespace {

using idx_t = int64_t;
using test::kSeed;

/// Exact distance (not squared) of row `self` of x (n x d) to its k-th
/// nearest other row.
double kthNeighbourDistance(const std::vector<float>& x, int64_t n, int d, int64_t self, int k) {
    std::vector<double> dist;
    dist.reserve(n - 1);
    for (int64_t j = 0; j < n; ++j) {
        if (j == self) continue;
        double s = 0;
        for (int c = 0; c < d; ++c) {
            const double t = double(x[size_t(self) * d + c]) - x[size_t(j) * d + c];
            s += t * t;
        }
        dist.push_back(s);
    }
    std::nth_element(dist.begin(), dist.begin() + (k - 1), dist.end());
    return std::sqrt(dist[k - 1]);
}

double medianOf(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// A mixture of `clusters` full-rank anisotropic Gaussians in d dimensions
/// (full intrinsic dimension, like the benchmarks' hard generator).
std::vector<float> fullRankMixture(int64_t n, int d, int clusters, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> centres(size_t(clusters) * d), scales(size_t(clusters) * d);
    std::uniform_real_distribution<float> u(0.1f, 1.f);
    for (auto& c : centres) c = g(rng);
    for (auto& s : scales) s = u(rng);
    std::vector<float> x(size_t(n) * d);
    std::uniform_int_distribution<int> pick(0, clusters - 1);
    for (int64_t i = 0; i < n; ++i) {
        const int c = pick(rng);
        for (int j = 0; j < d; ++j)
            x[size_t(i) * d + j] = centres[size_t(c) * d + j] + scales[size_t(c) * d + j] * g(rng);
    }
    return x;
}

/// Recall@k of an index's search against exact search.
double recallOf(const faiss::Index& index, const std::vector<float>& x, int64_t n,
                const std::vector<float>& q, int64_t nq, int d, int k,
                const faiss::SearchParameters* params) {
    faiss::IndexFlatL2 flat(d);
    flat.add(n, x.data());
    std::vector<float> D(size_t(nq) * k);
    std::vector<idx_t> gt(size_t(nq) * k), I(size_t(nq) * k);
    flat.search(nq, q.data(), k, D.data(), gt.data());
    index.search(nq, q.data(), k, D.data(), I.data(), params);
    return recallAgainstExact(nq, k, I.data(), gt.data());
}

// ---------------------------------------------------------------- widths

TEST(CpuLshWidths, EqualBucketWidthTimesTheExactMedianWhenTheGroupIsSampledWhole) {
    // depth 0 and n <= 8192: every row is sampled, the k-th neighbour rank
    // needs no scaling, and the 64 measured rows are rows i * n / 64
    const int d = 24, k = 10;
    const int64_t n = 3000;
    const auto x = test::clusteredVectors(n, d, 12, kSeed);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 0;
    cfg.bucketWidth = 3.f;
    cfg.widthNeighbours = k;
    IndexBiLevelLSH index(d, cfg);
    index.train(n, x.data());
    std::vector<double> exact;
    for (int i = 0; i < lsh::kWidthQueriesPerGroup; ++i)
        exact.push_back(
            kthNeighbourDistance(x, n, d, int64_t(i) * n / lsh::kWidthQueriesPerGroup, k));
    const double want = 3.0 * medianOf(exact);
    const double got = index.getModel().leafWidth[0];
    EXPECT_NEAR(got, want, 1e-4 * want) << "seed " << kSeed;
}

TEST(CpuLshWidths, ExtrapolatedFromASampleCloseToTheExactMedian) {
    // n = 40,000 > 8192 sampled rows: the 10th neighbour of the whole set
    // sits below the sample's nearest one and is extrapolated with the
    // intrinsic dimension; compare with brute force on 200 random rows
    const int d = 16, k = 10;
    const int64_t n = 40000;
    for (const char* kind : {"clustered", "full-rank mixture"}) {
        SCOPED_TRACE(kind);
        const auto x = std::string(kind) == "clustered"
                           ? test::clusteredVectors(n, d, 20, kSeed + 1)
                           : fullRankMixture(n, d, 30, kSeed + 1);
        BiLevelLSHConfig cfg;
        cfg.treeDepth = 0;
        cfg.bucketWidth = 1.f;
        IndexBiLevelLSH index(d, cfg);
        index.train(n, x.data());
        std::mt19937_64 rng(kSeed + 2);
        std::vector<double> exact;
        for (int i = 0; i < 200; ++i)
            exact.push_back(kthNeighbourDistance(x, n, d, int64_t(rng() % uint64_t(n)), k));
        const double want = medianOf(exact);
        const double got = index.getModel().leafWidth[0];
        std::printf(
            "[lsh widths] %s %lld x %d: estimated 10th-neighbour distance %.4f, exact "
            "median %.4f\n",
            kind, (long long)n, d, got, want);
        EXPECT_GT(got, 0.75 * want) << "seed " << kSeed;
        EXPECT_LT(got, 1.33 * want) << "seed " << kSeed;
    }
}

TEST(CpuLshWidths, ScaleWithTheDataAndOnlyThem) {
    // the same data x 100: every width x 100 (the tree and the rest alike),
    // where the RMS rule would also scale; and the widths differ from the
    // RMS rule's (the two rules measure different things)
    const int d = 20;
    const int64_t n = 5000;
    const auto x = test::clusteredVectors(n, d, 16, kSeed + 3);
    std::vector<float> big(x);
    for (float& v : big) v *= 100.f;
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 2;
    IndexBiLevelLSH a(d, cfg), b(d, cfg);
    a.train(n, x.data());
    b.train(n, big.data());
    const auto& wa = a.getModel().leafWidth;
    const auto& wb = b.getModel().leafWidth;
    ASSERT_EQ(wa.size(), 4u);
    for (size_t g = 0; g < wa.size(); ++g) EXPECT_NEAR(wb[g] / wa[g], 100.0, 1e-2) << "group " << g;
    BiLevelLSHConfig rms = cfg;
    rms.widthRule = BiLevelWidthRule::RmsRadius;
    IndexBiLevelLSH c(d, rms);
    c.train(n, x.data());
    EXPECT_NE(c.getModel().leafWidth, wa);
}

TEST(CpuLshWidths, SampleRowsAreDistinctSortedAndSeeded) {
    const auto all = lsh::widthSampleRows(500, 4, 7);
    ASSERT_EQ(all.size(), 500u);
    for (int64_t i = 0; i < 500; ++i) EXPECT_EQ(all[i], i);
    const auto a = lsh::widthSampleRows(1000000, 16, 7);
    const auto b = lsh::widthSampleRows(1000000, 16, 7);
    const auto c = lsh::widthSampleRows(1000000, 16, 8);
    EXPECT_EQ(a.size(), 8192u);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
    EXPECT_TRUE(std::adjacent_find(a.begin(), a.end()) == a.end());
    EXPECT_GE(a.front(), 0);
    EXPECT_LT(a.back(), 1000000);
    EXPECT_EQ(lsh::widthSampleRows(10000000, 1024, 1).size(), size_t(lsh::kWidthSampleMax));
}

TEST(CpuLshWidths, BadWidthSettingsAreRefused) {
    BiLevelLSHConfig c;
    c.widthNeighbours = 0;
    EXPECT_THROW(c.check(), faiss::FaissException);
    c.widthNeighbours = 1025;
    EXPECT_THROW(c.check(), faiss::FaissException);
    c = BiLevelLSHConfig();
    c.widthRule = BiLevelWidthRule(7);
    EXPECT_THROW(c.check(), faiss::FaissException);
    c = BiLevelLSHConfig();
    c.defaultNprobe = 0;
    EXPECT_THROW(c.check(), faiss::FaissException);
    c = BiLevelLSHConfig();
    c.defaultGroupProbes = 17;
    EXPECT_THROW(c.check(), faiss::FaissException);
    c = BiLevelLSHConfig();
    c.defaultGroupMargin = -0.5f;
    EXPECT_THROW(c.check(), faiss::FaissException);
    c = BiLevelLSHConfig();
    c.autotuneRecall = 1.5f;
    EXPECT_THROW(c.check(), faiss::FaissException);
}

// ---------------------------------------------------------------- multi-probe

TEST(CpuLshMultiProbe, ProbedBucketsAreNotEmptyOnFullIntrinsicDimension) {
    // issue 22 saw nprobe 1, 8 and 32 give the same candidates on a
    // full-rank mixture (W 0.5 x the RMS radius: the neighbour buckets were
    // empty); with widths from neighbour distances the probes find vectors
    const int d = 48, k = 10;
    const int64_t n = 20000, nq = 200;
    const auto all = fullRankMixture(n + nq, d, 40, kSeed + 4);
    const std::vector<float> x(all.begin(), all.begin() + n * d);
    const std::vector<float> q(all.begin() + n * d, all.end());
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 0;
    IndexBiLevelLSH index(d, cfg);
    index.train(n, x.data());
    index.add(n, x.data());
    double prevCand = 0, prevRecall = -1;
    for (int nprobe : {1, 8, 32}) {
        SearchParametersBiLevelLSH p;
        p.nprobe = nprobe;
        std::vector<idx_t> lims, ids;
        index.getCandidates(nq, q.data(), k, &lims, &ids, &p);
        const double cand = double(lims[nq]) / nq;
        const double recall = recallOf(index, x, n, q, nq, d, k, &p);
        std::printf(
            "[lsh multi-probe] full-rank mixture %lld x %d, nprobe %d: %.0f candidates, "
            "recall@10 %.4f\n",
            (long long)n, d, nprobe, cand, recall);
        if (nprobe > 1) {
            EXPECT_GT(cand, 1.2 * prevCand) << "nprobe " << nprobe << ": the probes found little";
            EXPECT_GT(recall, prevRecall) << "nprobe " << nprobe;
        }
        prevCand = cand;
        prevRecall = recall;
    }
}

// ---------------------------------------------------------------- group margin

TEST(CpuLshGroupMargin, SearchesAPrefixOfTheNearestGroups) {
    const int d = 24, k = 10;
    const int64_t n = 12000, nq = 150;
    const auto xq = test::clusteredVectors(n + nq, d, 30, kSeed + 5);
    const std::vector<float> x(xq.begin(), xq.begin() + n * d);
    const std::vector<float> q(xq.begin() + n * d, xq.end());
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 4;
    IndexBiLevelLSH index(d, cfg);
    index.train(n, x.data());
    index.add(n, x.data());
    auto cands = [&](int groups, float margin) {
        SearchParametersBiLevelLSH p;
        p.groupProbes = groups;
        p.groupMargin = margin;
        std::pair<std::vector<idx_t>, std::vector<idx_t>> r;
        index.getCandidates(nq, q.data(), k, &r.first, &r.second, &p);
        return r;
    };
    const auto one = cands(1, 0.f), all = cands(8, 0.f);
    const auto tiny = cands(8, 1e-9f), huge = cands(8, 1e9f);
    EXPECT_EQ(tiny, one) << "a margin of ~0 must keep the query's own group only";
    EXPECT_EQ(huge, all) << "an unbounded margin must search all groupProbes groups";
    const auto small = cands(8, 0.02f), mid = cands(8, 0.05f);
    EXPECT_GT(small.first[nq], one.first[nq]);
    EXPECT_LT(mid.first[nq], all.first[nq]);
    // per query: one's candidates within small's within mid's within all's
    auto subset = [&](const auto& a, const auto& b) {
        for (int64_t i = 0; i < nq; ++i)
            if (!std::includes(b.second.begin() + b.first[i], b.second.begin() + b.first[i + 1],
                               a.second.begin() + a.first[i], a.second.begin() + a.first[i + 1]))
                return false;
        return true;
    };
    EXPECT_TRUE(subset(one, small));
    EXPECT_TRUE(subset(small, mid));
    EXPECT_TRUE(subset(mid, all));
    std::printf(
        "[lsh group margin] clustered %lld x %d, depth 4, 8 group probes: %.0f / %.0f / "
        "%.0f / %.0f candidates per query at margin 0 (one group), 0.02, 0.05, none\n",
        (long long)n, d, double(one.first[nq]) / nq, double(small.first[nq]) / nq,
        double(mid.first[nq]) / nq, double(all.first[nq]) / nq);

    SearchParametersBiLevelLSH bad;
    bad.groupMargin = -1.f;
    std::vector<idx_t> lims, ids;
    EXPECT_THROW(index.getCandidates(nq, q.data(), k, &lims, &ids, &bad), faiss::FaissException);
    bad.groupMargin = std::nanf("");
    EXPECT_THROW(index.getCandidates(nq, q.data(), k, &lims, &ids, &bad), faiss::FaissException);
}

// ---------------------------------------------------------------- E8 lattice

TEST(CpuLshE8, DecoderReturnsTheNearestLatticePoint) {
    // brute force: every point of D8 and of D8 + 1/2 whose coordinates lie
    // within one unit of floor(x_i) (the nearest point of E8 is among them:
    // its covering radius is 1)
    std::mt19937_64 rng(kSeed + 20);
    std::uniform_real_distribution<float> u(-6.f, 6.f);
    for (int trial = 0; trial < 60; ++trial) {
        float x[8];
        for (float& v : x) v = u(rng);
        int32_t c[8];
        lsh::nearestE8(x, c);
        const bool allEven = std::all_of(c, c + 8, [](int32_t v) { return (v & 1) == 0; });
        const bool allOdd = std::all_of(c, c + 8, [](int32_t v) { return (v & 1) == 1; });
        ASSERT_TRUE(allEven || allOdd) << "trial " << trial;
        int64_t sum = 0;
        for (int32_t v : c) sum += v;
        ASSERT_EQ(((sum % 4) + 4) % 4, 0) << "trial " << trial << ": not in E8";
        double got = 0;
        for (int i = 0; i < 8; ++i) got += (x[i] - 0.5 * c[i]) * (x[i] - 0.5 * c[i]);
        double best = 1e30;
        for (int coset = 0; coset < 2; ++coset) {
            int idx[8] = {0};
            for (;;) {  // 3^8 integer points around floor(x), shifted by coset / 2
                double dist = 0;
                int parity = 0;
                for (int i = 0; i < 8; ++i) {
                    const int z = int(std::floor(x[i])) - 1 + idx[i];
                    parity ^= z & 1;
                    const double p = z + 0.5 * coset;
                    dist += (x[i] - p) * (x[i] - p);
                }
                if (parity == 0) best = std::min(best, dist);
                int i = 0;
                while (i < 8 && ++idx[i] == 3) idx[i++] = 0;
                if (i == 8) break;
            }
        }
        EXPECT_NEAR(got, best, 1e-4) << "trial " << trial;
    }
}

TEST(CpuLshE8, AgainstTheGridOnTheSameData) {
    // same data, tables, projections and widths: recall and candidates of
    // the E8 codes beside the Z^M grid's (both at nprobe 1: multi-probe is
    // the grid's), and exact search as the truth
    const int d = 32, k = 10;
    const int64_t n = 20000, nq = 300;
    const auto all = test::clusteredVectors(n + nq, d, 40, kSeed + 21);
    const std::vector<float> x(all.begin(), all.begin() + n * d);
    const std::vector<float> q(all.begin() + n * d, all.end());
    double best[2] = {0, 0};
    for (int lattice : {int(lsh::kLatticeZM), int(lsh::kLatticeE8)}) {
        for (float w : {2.f, 3.f}) {
            BiLevelLSHConfig cfg;
            cfg.treeDepth = 0;
            cfg.nProjections = 8;
            cfg.bucketWidth = w;
            cfg.lattice = lattice;
            IndexBiLevelLSH index(d, cfg);
            index.train(n, x.data());
            index.add(n, x.data());
            SearchParametersBiLevelLSH p;
            std::vector<idx_t> lims, ids;
            index.getCandidates(nq, q.data(), k, &lims, &ids, &p);
            const double r = recallOf(index, x, n, q, nq, d, k, &p);
            std::printf(
                "[lsh e8] clustered %lld x %d, L 10, M 8, W %g, nprobe 1: %s recall@10 "
                "%.4f, %.0f candidates\n",
                (long long)n, d, double(w), lattice == lsh::kLatticeE8 ? "E8 " : "Z^M", r,
                double(lims[nq]) / nq);
            best[lattice] = std::max(best[lattice], r);
        }
    }
    EXPECT_GT(best[lsh::kLatticeE8], 0.5) << "the E8 codes find few neighbours";
    EXPECT_GT(best[lsh::kLatticeZM], 0.5);
}

TEST(CpuLshE8, LimitsAreRefused) {
    BiLevelLSHConfig cfg;
    cfg.lattice = lsh::kLatticeE8;
    cfg.nProjections = 12;
    EXPECT_THROW(cfg.check(), faiss::FaissException);
    cfg.nProjections = 16;
    EXPECT_NO_THROW(cfg.check());
    const int d = 16;
    const auto x = test::clusteredVectors(2000, d, 8, kSeed + 22);
    IndexBiLevelLSH index(d, cfg);
    index.train(2000, x.data());
    index.add(2000, x.data());
    std::vector<float> D(10);
    std::vector<idx_t> I(10);
    SearchParametersBiLevelLSH p;
    p.nprobe = 2;
    EXPECT_THROW(index.search(1, x.data(), 10, D.data(), I.data(), &p), faiss::FaissException);
    index.search(1, x.data(), 10, D.data(), I.data());  // defaults: nprobe 1
    EXPECT_EQ(I[0], 0);
    std::unique_ptr<faiss::Index> f(index_factory(d, "BiLSH10x16_e8"));
    EXPECT_EQ(dynamic_cast<IndexBiLevelLSH*>(f.get())->getConfig().lattice, int(lsh::kLatticeE8));
    EXPECT_THROW(delete index_factory(d, "BiLSH10x12_e8"), faiss::FaissException);
    EXPECT_THROW(delete index_factory(d, "BiLSH10x8_e8_e8"), faiss::FaissException);
}

// ---------------------------------------------------------------- autotuner

TEST(CpuLshAutoTune, ReportedRecallHoldsOnOtherQueriesOfTheSameDistribution) {
    const int d = 32, k = 10;
    const int64_t n = 20000, nHeld = 1000, nOther = 1000;
    // one draw split three ways: the clusters of clusteredVectors depend on
    // its seed, so the queries must come from the same call
    const auto all = test::clusteredVectors(n + nHeld + nOther, d, 40, kSeed + 7);
    const std::vector<float> x(all.begin(), all.begin() + n * d);
    const std::vector<float> held(all.begin() + n * d, all.begin() + (n + nHeld) * d);
    const std::vector<float> other(all.begin() + (n + nHeld) * d, all.end());
    for (double target : {0.9, 0.95}) {
        SCOPED_TRACE("target " + std::to_string(target));
        BiLevelTuneEvaluatorCpu evaluator;
        const BiLevelAutoTuneResult r = autoTuneBiLevelLSH(
            d, n, x.data(), nHeld, held.data(), lshtest::smallTuneOptions(target), &evaluator);
        std::printf(
            "[lsh autotune] clustered %lld x %d, target %.2f: %s (%d builds, %zu "
            "settings)\n",
            (long long)n, d, target, r.verdict.c_str(), r.builds, r.points.size());
        ASSERT_TRUE(r.reachedTarget) << r.verdict;
        EXPECT_GE(r.selectionRecall, target);
        // the chosen setting is the fastest measured that reached the target
        const BiLevelTunePoint* chosen = nullptr;
        for (const BiLevelTunePoint& p : r.points)
            if (lshtest::sameTunedSettings(p.config, r.config)) chosen = &p;
        ASSERT_NE(chosen, nullptr) << "the chosen setting is not among the measured ones";
        for (const BiLevelTunePoint& p : r.points)
            if (p.recall >= target + BiLevelAutoTuneOptions().selectionMargin)
                EXPECT_LE(p.predictedSpeedup, chosen->predictedSpeedup);
        // an index built from the chosen configuration, searched without
        // parameters (its defaults are the chosen search settings)
        IndexBiLevelLSH index(d, r.config);
        index.train(n, x.data());
        index.add(n, x.data());
        const double measured = recallOf(index, x, n, other, nOther, d, k, nullptr);
        std::printf(
            "[lsh autotune]   reported recall %.4f, measured on %lld other queries "
            "%.4f\n",
            r.recall, (long long)nOther, measured);
        EXPECT_NEAR(r.recall, measured, 0.02) << "seed " << kSeed;
    }
}

TEST(CpuLshAutoTune, SaysPlainlyWhenBiLevelLSHCannotPay) {
    // uniform noise of full dimension, 4000 vectors: exact search is cheap
    // and LSH needs nearly every vector as a candidate for recall 0.99
    const int d = 64;
    const int64_t n = 4000, nHeld = 200;
    const auto x = test::randomVectors(n, d, kSeed + 10);
    const auto held = test::randomVectors(nHeld, d, kSeed + 11);
    BiLevelAutoTuneOptions opt = lshtest::smallTuneOptions(0.99);
    opt.treeDepths = {0};
    BiLevelTuneEvaluatorCpu evaluator;
    const BiLevelAutoTuneResult r =
        autoTuneBiLevelLSH(d, n, x.data(), nHeld, held.data(), opt, &evaluator);
    std::printf("[lsh autotune] uniform %lld x %d, target 0.99: %s\n", (long long)n, d,
                r.verdict.c_str());
    EXPECT_FALSE(r.beatsExact);
    EXPECT_NE(r.verdict.find("cannot"), std::string::npos) << r.verdict;
    EXPECT_NE(r.verdict.find("exact search"), std::string::npos) << r.verdict;
}

/// An evaluator that counts its calls (the argument checks come first).
struct CountingEvaluator : BiLevelTuneEvaluator {
    int calls = 0;
    void build(const BiLevelLSHConfig&, int, int64_t, const float*) override { ++calls; }
    void search(int64_t, const float*, int, const SearchParametersBiLevelLSH&, int64_t*,
                double*) override {
        ++calls;
    }
    void exactSearch(int, int64_t, const float*, int64_t, const float*, int, int64_t*) override {
        ++calls;
    }
};

TEST(CpuLshAutoTune, BadArgumentsThrowBeforeAnyWork) {
    const int d = 8;
    const auto x = test::randomVectors(1000, d, kSeed + 12);
    CountingEvaluator ev;
    auto expectRefused = [&](const char* what, auto&& call) {
        EXPECT_THROW(call(), faiss::FaissException) << what;
        EXPECT_EQ(ev.calls, 0) << what;
    };
    const BiLevelAutoTuneOptions good;
    expectRefused("n < 64", [&] { autoTuneBiLevelLSH(d, 63, x.data(), 100, x.data(), good, &ev); });
    expectRefused("nq < 10", [&] { autoTuneBiLevelLSH(d, 500, x.data(), 9, x.data(), good, &ev); });
    expectRefused("d 0", [&] { autoTuneBiLevelLSH(0, 500, x.data(), 100, x.data(), good, &ev); });
    expectRefused("null x", [&] { autoTuneBiLevelLSH(d, 500, nullptr, 100, x.data(), good, &ev); });
    expectRefused("null evaluator",
                  [&] { autoTuneBiLevelLSH(d, 500, x.data(), 100, x.data(), good, nullptr); });
    auto withOpt = [&](const char* what, auto&& change) {
        BiLevelAutoTuneOptions o;
        change(o);
        expectRefused(what, [&] { autoTuneBiLevelLSH(d, 500, x.data(), 100, x.data(), o, &ev); });
    };
    withOpt("target 0", [](auto& o) { o.targetRecall = 0; });
    withOpt("target 1.1", [](auto& o) { o.targetRecall = 1.1; });
    withOpt("k 0", [](auto& o) { o.k = 0; });
    withOpt("validation 1", [](auto& o) { o.validationFraction = 1; });
    withOpt("no depths", [](auto& o) { o.treeDepths.clear(); });
    withOpt("depth 15", [](auto& o) { o.treeDepths = {15}; });
    withOpt("L 65", [](auto& o) { o.tablesProjections = {{65, 8}}; });
    withOpt("width 0", [](auto& o) { o.bucketWidths = {0.f}; });
    withOpt("nprobe 0", [](auto& o) { o.nprobes = {0}; });
    withOpt("group probes 17", [](auto& o) { o.groupSettings = {{17, 0.f}}; });
    withOpt("margin -1", [](auto& o) { o.groupSettings = {{2, -1.f}}; });
    withOpt("min candidates -1", [](auto& o) { o.minCandidates = {-1}; });
    withOpt("cost 0", [](auto& o) { o.cost.lshSecondsPerCandidateFloat = 0; });
    auto nanX = x;
    nanX[5] = std::nanf("");
    expectRefused("NaN vector",
                  [&] { autoTuneBiLevelLSH(d, 500, nanX.data(), 100, x.data(), good, &ev); });
}

TEST(CpuLshAutoTune, FactoryStringTunesAtTrain) {
    std::unique_ptr<faiss::Index> a(index_factory(16, "BiLSHauto"));
    auto* lshA = dynamic_cast<IndexBiLevelLSH*>(a.get());
    ASSERT_NE(lshA, nullptr);
    EXPECT_FLOAT_EQ(lshA->getConfig().autotuneRecall, 0.9f);
    std::unique_ptr<faiss::Index> b(index_factory(16, "BiLSHauto_r0.95_k20"));
    auto* lshB = dynamic_cast<IndexBiLevelLSH*>(b.get());
    ASSERT_NE(lshB, nullptr);
    EXPECT_FLOAT_EQ(lshB->getConfig().autotuneRecall, 0.95f);
    EXPECT_EQ(lshB->getConfig().widthNeighbours, 20);
    for (const char* bad : {"BiLSHauto_r0", "BiLSHauto_r1.5", "BiLSHauto_x", "BiLSHautox",
                            "BiLSHauto_r0.9_r0.8", "BiLSHauto_k0", "BiLSHauto_"}) {
        EXPECT_THROW(delete index_factory(16, bad), faiss::FaissException) << bad;
    }

    // train() tunes on the training vectors and keeps the choice
    const int d = 16;
    const int64_t n = 6000, nq = 300;
    const auto all = test::clusteredVectors(n + nq, d, 20, kSeed + 13);
    const std::vector<float> x(all.begin(), all.begin() + n * d);
    const std::vector<float> q(all.begin() + n * d, all.end());
    std::unique_ptr<faiss::Index> idx(index_factory(d, "BiLSHauto_r0.9"));
    auto* lsh = dynamic_cast<IndexBiLevelLSH*>(idx.get());
    lsh->train(n, x.data());
    std::printf("[lsh autotune] BiLSHauto_r0.9 on clustered %lld x %d: %s\n", (long long)n, d,
                lsh->getAutoTuneVerdict().c_str());
    EXPECT_FALSE(lsh->getAutoTuneVerdict().empty());
    EXPECT_FLOAT_EQ(lsh->getConfig().autotuneRecall, 0.9f);
    EXPECT_EQ(int(lsh->getConfig().widthRule), int(BiLevelWidthRule::NeighbourDistance));
    lsh->add(n, x.data());
    const double recall = recallOf(*lsh, x, n, q, nq, d, 10, nullptr);
    std::printf("[lsh autotune]   recall@10 on 300 other queries %.4f\n", recall);
    EXPECT_GE(recall, 0.85);
    // too few vectors to tune
    std::unique_ptr<faiss::Index> small(index_factory(d, "BiLSHauto"));
    EXPECT_THROW(small->train(100, x.data()), faiss::FaissException);
    EXPECT_FALSE(small->is_trained);
}

}  // namespace
}  // namespace faiss_ext
