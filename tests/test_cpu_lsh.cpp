// Bi-level LSH on the CPU (Pan & Manocha 2011, docs/references.md; the twin
// faiss_ext::IndexBiLevelLSH and the host faiss_ext::CuckooHashTable):
//   CpuLshCuckoo        every inserted key found with its index and 100k
//                       random other keys not found, at loads 0.5 / 0.8 / 0.9
//                       (f = 4), 0.85 (f = 3), 0.45 (f = 2), the capacity
//                       that load asks for, no growth; duplicates and bad
//                       arguments throw and leave the table as it was
//   CpuLshTree          the RP-tree halves every group exactly (training
//                       counts are the recursive floor / ceil of n / 2^depth),
//                       the same data added falls into the same groups
//                       (traversal by the thresholds), both split rules of
//                       the mean rule appear on clustered data
//   CpuLshDeterminism   same seed: the same model, tables, candidates and
//                       results, whatever the thread count; another seed:
//                       another model
//   CpuLshRecall        recall@10 on the real sets of ../shared/data against
//                       their stored exact ground truth rises with nprobe,
//                       with the tables searched and with groupProbes, and
//                       reaches >= 0.9; a save / load round trip keeps the
//                       candidates
//   CpuLshErrors        bad input throws faiss::FaissException with a clear
//                       message, and the index is unchanged afterwards
// Recall@10 counts a returned id when its distance is at most the true 10th
// distance (LshTestData.h). Seeds are fixed (test::kSeed) and printed.
#include <faiss/IndexIVF.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/utils/distances.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "LshTestData.h"
#include "TestUtils.h"
#include "faiss_ext/CuckooHashTable.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/index_io.h"

namespace faiss_ext {
namespace {

using idx_t = int64_t;
using test::kSeed;

// ---- helpers ----

using lshtest::distinctKeys;

/// Bitwise equality of two float arrays (NaN and -0 included).
bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
    // (memcmp of empty vectors would be handed null pointers)
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool sameModel(const BiLevelLSHModel& a, const BiLevelLSHModel& b) {
    return lshtest::modelDifference(a, b).empty();
}

/// Training counts the RP-tree promises: every group of c splits into
/// floor(c / 2) (left) and c - floor(c / 2) (right), leaves in heap order.
std::vector<int64_t> halvedCounts(int64_t n, int depth) {
    std::vector<int64_t> c = {n};
    for (int l = 0; l < depth; ++l) {
        std::vector<int64_t> next;
        for (int64_t v : c) {
            next.push_back(v / 2);
            next.push_back(v - v / 2);
        }
        c.swap(next);
    }
    return c;
}

/// Candidates and results of an index for queries q under params.
struct Snapshot {
    idx_t ntotal = 0;
    bool trained = false;
    std::vector<idx_t> lims, ids, labels;
    std::vector<float> distances;
    bool operator==(const Snapshot& o) const {
        return ntotal == o.ntotal && trained == o.trained && lims == o.lims && ids == o.ids &&
               labels == o.labels && sameBits(distances, o.distances);
    }
};

Snapshot snapshot(const IndexBiLevelLSH& idx, const std::vector<float>& q, int k,
                  const faiss::SearchParameters* params = nullptr) {
    Snapshot s;
    s.ntotal = idx.ntotal;
    s.trained = idx.is_trained;
    if (!idx.is_trained) return s;
    const idx_t nq = idx_t(q.size() / idx.d);
    s.labels.resize(size_t(nq) * k);
    s.distances.resize(size_t(nq) * k);
    idx.search(nq, q.data(), k, s.distances.data(), s.labels.data(), params);
    idx.getCandidates(nq, q.data(), k, &s.lims, &s.ids, params);
    return s;
}

/// Expects fn to throw faiss::FaissException whose message contains `needle`,
/// and the index (its contents, candidates and results) unchanged.
void expectRefused(IndexBiLevelLSH& idx, const std::vector<float>& q, const std::string& what,
                   const std::string& needle, const std::function<void()>& fn) {
    const Snapshot before = snapshot(idx, q, 5);
    const BiLevelLSHModel model = idx.getModel();
    const std::vector<float> vectors = idx.getVectors();
    bool threw = false;
    std::string msg;
    try {
        fn();
    } catch (const faiss::FaissException& e) {
        threw = true;
        msg = e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": threw something other than faiss::FaissException: " << e.what();
        return;
    }
    EXPECT_TRUE(threw) << what << ": no exception";
    if (threw) {
        EXPECT_NE(msg.find(needle), std::string::npos)
            << what << ": the message does not mention \"" << needle << "\": " << msg;
    }
    EXPECT_TRUE(snapshot(idx, q, 5) == before) << what << ": the index changed";
    EXPECT_TRUE(sameModel(idx.getModel(), model)) << what << ": the model changed";
    EXPECT_TRUE(sameBits(idx.getVectors(), vectors)) << what << ": the vectors changed";
}

// ---- the cuckoo hash table ----

struct CuckooCase {
    int f;
    float load;
};

class CpuLshCuckoo : public ::testing::TestWithParam<CuckooCase> {};

std::string cuckooName(const ::testing::TestParamInfo<CuckooCase>& info) {
    return "f" + std::to_string(info.param.f) + "_load" +
           std::to_string(int(std::lround(info.param.load * 100)));
}

TEST_P(CpuLshCuckoo, FindsEveryKeyAndNoOtherAtTheAskedLoad) {
    const CuckooCase c = GetParam();
    const size_t n = 200000;
    const uint64_t seed = kSeed + 17 * c.f;
    const std::vector<uint64_t> keys = distinctKeys(n, seed);
    CuckooHashTable t;
    t.build(keys.data(), n, c.f, c.load, seed);
    std::printf(
        "[cuckoo] f %d, asked load %.2f: %zu keys in %zu slots, load %.5f, %d attempt(s), "
        "%d growth(s)\n",
        c.f, double(c.load), t.size(), t.capacity(), t.load(), t.attempts(), t.growths());

    // capacity: ceil(n / maxLoad) rounded up to a multiple of f, no growth
    const size_t sub = size_t(std::ceil(double(n) / double(c.load) / c.f));
    EXPECT_EQ(t.growths(), 0) << "the table grew past the asked load, seed " << seed;
    EXPECT_EQ(t.capacity(), sub * size_t(c.f)) << "seed " << seed;
    EXPECT_LE(t.load(), double(c.load) + 1e-12);
    EXPECT_GT(t.load(), double(c.load) * (1 - 1e-4));
    EXPECT_EQ(t.size(), n);
    EXPECT_EQ(t.subTables(), c.f);
    EXPECT_GE(t.attempts(), 1);
    EXPECT_TRUE(t.keys() == keys);

    // every key: its own index, through find() and through the view
    const lsh::CuckooView v = t.view();
    size_t wrong = 0, wrongView = 0;
    for (size_t i = 0; i < n; ++i) {
        wrong += t.find(keys[i]) != int64_t(i);
        wrongView += v.find(keys[i]) != int64_t(i);
    }
    EXPECT_EQ(wrong, 0u) << "inserted keys not found at their index, seed " << seed;
    EXPECT_EQ(wrongView, 0u) << "seed " << seed;

    // 100k random keys that were not inserted: none found
    const std::unordered_set<uint64_t> in(keys.begin(), keys.end());
    std::mt19937_64 rng(seed ^ 0xabcdefULL);
    size_t tried = 0, found = 0;
    while (tried < 100000) {
        const uint64_t k = rng();
        if (in.count(k)) continue;
        ++tried;
        found += t.find(k) >= 0;
    }
    EXPECT_EQ(found, 0u) << "keys that were never inserted were found, seed " << seed;

    // every slot holds 0 or 1 + the index of a key, each key exactly once
    std::vector<int> seen(n, 0);
    size_t bad = 0;
    for (size_t s = 0; s < t.capacity(); ++s) {
        const uint32_t e = v.slots[s];
        if (e == 0) continue;
        if (e > n)
            ++bad;
        else
            ++seen[e - 1];
    }
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(size_t(std::count(seen.begin(), seen.end(), 1)), n)
        << "a key is stored twice or not at all";
}

INSTANTIATE_TEST_SUITE_P(Loads, CpuLshCuckoo,
                         ::testing::Values(CuckooCase{4, 0.5f}, CuckooCase{4, 0.8f},
                                           CuckooCase{4, 0.9f}, CuckooCase{3, 0.85f},
                                           CuckooCase{2, 0.45f}),
                         cuckooName);

TEST(CpuLshCuckooTable, SmallTablesOfEverySizeAndSubTableCount) {
    for (int f = 2; f <= lsh::kMaxCuckooSubTables; ++f) {
        for (size_t n :
             {size_t(0), size_t(1), size_t(2), size_t(3), size_t(7), size_t(64), size_t(1000)}) {
            const std::vector<uint64_t> keys = distinctKeys(n, kSeed + n + 100 * f);
            CuckooHashTable t;
            t.build(keys.data(), n, f, 0.9f, kSeed);
            EXPECT_EQ(t.size(), n);
            for (size_t i = 0; i < n; ++i)
                ASSERT_EQ(t.find(keys[i]), int64_t(i)) << "f " << f << " n " << n;
            const std::unordered_set<uint64_t> in(keys.begin(), keys.end());
            std::mt19937_64 rng(kSeed + 7 * n + f);
            for (int i = 0; i < 1000; ++i) {
                const uint64_t k = rng();
                if (!in.count(k)) {
                    ASSERT_EQ(t.find(k), -1) << "f " << f << " n " << n;
                }
            }
            if (n == 0) {
                EXPECT_EQ(t.find(0), -1);
                EXPECT_EQ(t.load(), 0.0);
            }
        }
    }
}

TEST(CpuLshCuckooTable, SameSeedSameSlots) {
    const std::vector<uint64_t> keys = distinctKeys(50000, kSeed);
    CuckooHashTable a, b;
    a.build(keys.data(), keys.size(), 4, 0.9f, kSeed);
    b.build(keys.data(), keys.size(), 4, 0.9f, kSeed);
    ASSERT_EQ(a.capacity(), b.capacity());
    EXPECT_EQ(std::memcmp(a.view().slots, b.view().slots, a.capacity() * sizeof(uint32_t)), 0);
    EXPECT_EQ(a.attempts(), b.attempts());
}

TEST(CpuLshCuckooTable, DuplicateKeysThrowAndLeaveTheTableAsItWas) {
    const std::vector<uint64_t> keys = distinctKeys(1000, kSeed);
    CuckooHashTable t;
    t.build(keys.data(), keys.size(), 4, 0.8f, kSeed);
    for (size_t dupAt : {size_t(1), size_t(500), size_t(999)}) {
        std::vector<uint64_t> dup = distinctKeys(1000, kSeed + 1);
        dup[dupAt] = dup[dupAt / 2];  // a repeated key
        if (dupAt == 1) dup[1] = dup[0];
        try {
            t.build(dup.data(), dup.size(), 4, 0.8f, kSeed);
            ADD_FAILURE() << "a repeated key at " << dupAt << " did not throw";
        } catch (const faiss::FaissException& e) {
            EXPECT_NE(std::string(e.what()).find("distinct"), std::string::npos) << e.what();
        }
        EXPECT_EQ(t.size(), keys.size());
        for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(t.find(keys[i]), int64_t(i));
    }
}

TEST(CpuLshCuckooTable, BadArgumentsThrow) {
    const std::vector<uint64_t> keys = distinctKeys(100, kSeed);
    CuckooHashTable t;
    t.build(keys.data(), keys.size(), 4, 0.8f, kSeed);
    auto refused = [&](const char* what, const std::function<void()>& fn) {
        EXPECT_THROW(fn(), faiss::FaissException) << what;
        for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(t.find(keys[i]), int64_t(i)) << what;
    };
    refused("f = 1", [&] { t.build(keys.data(), 10, 1, 0.5f, 1); });
    refused("f = 9", [&] { t.build(keys.data(), 10, 9, 0.5f, 1); });
    refused("load 0", [&] { t.build(keys.data(), 10, 4, 0.f, 1); });
    refused("load 1", [&] { t.build(keys.data(), 10, 4, 1.f, 1); });
    refused("load -0.5", [&] { t.build(keys.data(), 10, 4, -0.5f, 1); });
    refused("load NaN", [&] { t.build(keys.data(), 10, 4, std::nanf(""), 1); });
    refused("maxAttempts 0", [&] { t.build(keys.data(), 10, 4, 0.5f, 1, 0); });
    refused("null keys", [&] { t.build(nullptr, 10, 4, 0.5f, 1); });
}

// ---- the RP-tree ----

/// Checks the training counts of idx's model against the exact halving of n
/// and, once the same n vectors are added, the groups the traversal gives.
void expectBalancedTree(IndexBiLevelLSH& idx, int64_t n, const float* x, const std::string& what) {
    const BiLevelLSHModel& m = idx.getModel();
    const int depth = m.depth;
    const std::vector<int64_t> want = halvedCounts(n, depth);
    EXPECT_EQ(m.leafTrainCount, want) << what << ": a split did not halve its group";
    const int64_t lo = n >> depth, hi = (n + (int64_t(1) << depth) - 1) >> depth;
    for (int g = 0; g < m.groups(); ++g)
        EXPECT_TRUE(m.leafTrainCount[g] == lo || m.leafTrainCount[g] == hi)
            << what << ": group " << g << " holds " << m.leafTrainCount[g] << ", not " << lo
            << " or " << hi;

    idx.add(n, x);
    const std::vector<int64_t> sizes = idx.groupSizes();
    ASSERT_EQ(int(sizes.size()), m.groups());
    int64_t total = 0, worst = 0;
    for (int g = 0; g < m.groups(); ++g) {
        total += sizes[g];
        const int64_t diff = std::llabs(sizes[g] - m.leafTrainCount[g]);
        worst = std::max(worst, diff);
        // Only vectors whose key equals a split value (a tie at the median,
        // or the rounding of a/2 + b/2 onto b) may cross: a few at most.
        EXPECT_LE(diff, 2 + m.leafTrainCount[g] / 1000)
            << what << ": group " << g << " holds " << sizes[g]
            << " of the added training data, trained " << m.leafTrainCount[g];
    }
    EXPECT_EQ(total, n);
    std::printf(
        "[rp-tree] %s: depth %d, %d groups of %lld..%lld training vectors; added data differs by "
        "at most %lld per group\n",
        what.c_str(), depth, m.groups(), (long long)lo, (long long)hi, (long long)worst);
}

TEST(CpuLshTree, GaussianDataSplitsExactlyInHalves) {
    const int d = 24;
    for (int64_t n : {int64_t(10007), int64_t(4096), int64_t(64)}) {
        std::mt19937_64 rng(kSeed + n);
        std::normal_distribution<float> g(0.f, 1.f);
        std::vector<float> gx(size_t(n) * d);
        for (auto& v : gx) v = g(rng);
        BiLevelLSHConfig cfg;
        cfg.treeDepth = 6;
        cfg.nTables = 2;
        IndexBiLevelLSH idx(d, cfg);
        idx.train(n, gx.data());
        const auto& rules = idx.getModel().nodeRule;
        EXPECT_EQ(std::count(rules.begin(), rules.end(), lsh::kRuleProjection),
                  idx.getModel().internalNodes())
            << "a Gaussian cloud should split by projections only (mean rule), n " << n;
        expectBalancedTree(idx, n, gx.data(), "Gaussian n " + std::to_string(n));
    }
}

TEST(CpuLshTree, ClusteredDataUsesBothRulesAndSplitsExactlyInHalves) {
    const int d = 16;
    const int64_t n = 20011;
    const std::vector<float> x = lshtest::coreAndOutliers(n, d, kSeed);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 5;
    cfg.nTables = 2;
    IndexBiLevelLSH idx(d, cfg);
    idx.train(n, x.data());
    const auto& rules = idx.getModel().nodeRule;
    const auto nDist = std::count(rules.begin(), rules.end(), lsh::kRuleDistance);
    const auto nProj = std::count(rules.begin(), rules.end(), lsh::kRuleProjection);
    std::printf(
        "[rp-tree] core + far clusters: %lld distance splits, %lld projection splits (root: %s)\n",
        (long long)nDist, (long long)nProj,
        rules[0] == lsh::kRuleDistance ? "distance" : "projection");
    EXPECT_GT(nDist, 0) << "no split by the distance to the mean on data with far clusters, seed "
                        << kSeed;
    EXPECT_GT(nProj, 0) << "no projection split, seed " << kSeed;
    EXPECT_EQ(rules[0], lsh::kRuleDistance) << "the far clusters make the root's diameter large";
    expectBalancedTree(idx, n, x.data(), "core + far clusters");

    // also the clustered mixture of TestUtils
    const std::vector<float> y = test::clusteredVectors(12000, 32, 30, kSeed);
    IndexBiLevelLSH idx2(32, cfg);
    idx2.train(12000, y.data());
    expectBalancedTree(idx2, 12000, y.data(), "30 clusters");
}

TEST(CpuLshTree, MeanRuleConstantPicksTheRule) {
    const int d = 16;
    const int64_t n = 5000;
    const std::vector<float> x = lshtest::coreAndOutliers(n, d, kSeed + 1);
    for (float c : {1e-3f, 1e6f}) {
        BiLevelLSHConfig cfg;
        cfg.treeDepth = 4;
        cfg.nTables = 1;
        cfg.meanRuleC = c;
        IndexBiLevelLSH idx(d, cfg);
        idx.train(n, x.data());
        const auto& rules = idx.getModel().nodeRule;
        const uint8_t expect = c < 1 ? lsh::kRuleDistance : lsh::kRuleProjection;
        EXPECT_EQ(std::count(rules.begin(), rules.end(), expect), idx.getModel().internalNodes())
            << "meanRuleC " << c;
        expectBalancedTree(idx, n, x.data(),
                           c < 1 ? "c = 0.001 (distance splits)" : "c = 1e6 (projection splits)");
    }
}

TEST(CpuLshTree, DepthZeroIsOneGroupAndTooFewVectorsIsRefused) {
    const std::vector<float> x = test::randomVectors(40, 8, kSeed);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 0;
    IndexBiLevelLSH idx(8, cfg);
    idx.train(1, x.data());
    EXPECT_EQ(idx.getModel().groups(), 1);
    EXPECT_EQ(idx.getModel().leafTrainCount, std::vector<int64_t>{1});
    cfg.treeDepth = 5;  // 32 groups from exactly 32 vectors: one each
    IndexBiLevelLSH idx2(8, cfg);
    idx2.train(32, x.data());
    EXPECT_EQ(idx2.getModel().leafTrainCount, std::vector<int64_t>(32, 1));
    idx2.add(32, x.data());
    EXPECT_EQ(idx2.groupSizes(), std::vector<int64_t>(32, 1));
}

// ---- determinism ----

TEST(CpuLshDeterminism, SameSeedSameModelTablesAndResultsWhateverTheThreads) {
    const int d = 32;
    const int64_t n = 6000;
    const std::vector<float> x = test::clusteredVectors(n, d, 25, kSeed);
    const std::vector<float> q = test::clusteredVectors(200, d, 25, kSeed + 9);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 3;
    cfg.nTables = 6;
    cfg.nProjections = 6;
    cfg.bucketWidth = 1.f;
    SearchParametersBiLevelLSH sp;
    sp.nprobe = 8;
    sp.groupProbes = 2;
    const int threads = omp_get_max_threads();
    std::vector<std::unique_ptr<IndexBiLevelLSH>> built;
    for (int t : {threads, 1, threads}) {
        omp_set_num_threads(t);
        auto idx = std::make_unique<IndexBiLevelLSH>(d, cfg);
        idx->train(n, x.data());
        idx->add(n, x.data());
        built.push_back(std::move(idx));
    }
    omp_set_num_threads(threads);
    const IndexBiLevelLSH& a = *built[0];
    for (size_t i = 1; i < built.size(); ++i) {
        const IndexBiLevelLSH& b = *built[i];
        const std::string what =
            "build " + std::to_string(i) + " (seed " + std::to_string(cfg.seed) + ")";
        EXPECT_TRUE(sameModel(a.getModel(), b.getModel())) << what;
        EXPECT_EQ(a.getTables().sortedIds, b.getTables().sortedIds) << what;
        EXPECT_EQ(a.getTables().bucketKeys, b.getTables().bucketKeys) << what;
        EXPECT_TRUE(snapshot(a, q, 10, &sp) == snapshot(b, q, 10, &sp)) << what;
        EXPECT_TRUE(snapshot(a, q, 10) == snapshot(b, q, 10)) << what;
    }
    // searches on one thread give the same as on all
    const Snapshot all = snapshot(a, q, 10, &sp);
    omp_set_num_threads(1);
    const Snapshot one = snapshot(a, q, 10, &sp);
    omp_set_num_threads(threads);
    EXPECT_TRUE(all == one);

    // another seed: another model and other candidates
    BiLevelLSHConfig other = cfg;
    other.seed = cfg.seed + 1;
    IndexBiLevelLSH c(d, other);
    c.train(n, x.data());
    c.add(n, x.data());
    EXPECT_FALSE(sameBits(a.getModel().proj, c.getModel().proj));
    EXPECT_FALSE(sameBits(a.getModel().nodeVec, c.getModel().nodeVec));
    EXPECT_FALSE(snapshot(a, q, 10, &sp).ids == snapshot(c, q, 10, &sp).ids);
}

TEST(CpuLshDeterminism, CandidatesAreDistinctSortedAndSearchRanksThemExactly) {
    const int d = 20;
    const int64_t n = 3000;
    const std::vector<float> x = test::clusteredVectors(n, d, 12, kSeed + 2);
    const std::vector<float> q = test::clusteredVectors(50, d, 12, kSeed + 3);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 2;
    cfg.nTables = 4;
    cfg.nProjections = 4;
    IndexBiLevelLSH idx(d, cfg);
    idx.train(n, x.data());
    idx.add(n, x.data());
    SearchParametersBiLevelLSH sp;
    sp.nprobe = 4;
    sp.minCandidates = 40;
    const int k = 25;
    const Snapshot s = snapshot(idx, q, k, &sp);
    for (int64_t i = 0; i < 50; ++i) {
        const auto b = s.ids.begin() + s.lims[i], e = s.ids.begin() + s.lims[i + 1];
        EXPECT_TRUE(std::is_sorted(b, e) && std::adjacent_find(b, e) == e) << "query " << i;
        EXPECT_GE(e - b, 1) << "query " << i;
        // exact k best of the candidates, by (distance, id)
        std::vector<std::pair<float, idx_t>> all;
        for (auto it = b; it != e; ++it)
            all.push_back(
                {faiss::fvec_L2sqr(q.data() + size_t(i) * d, x.data() + size_t(*it) * d, d), *it});
        std::sort(all.begin(), all.end());
        for (int j = 0; j < k; ++j) {
            if (j < int(all.size())) {
                EXPECT_EQ(s.labels[size_t(i) * k + j], all[j].second)
                    << "query " << i << " rank " << j;
                EXPECT_EQ(s.distances[size_t(i) * k + j], all[j].first)
                    << "query " << i << " rank " << j;
            } else {
                EXPECT_EQ(s.labels[size_t(i) * k + j], -1);
                EXPECT_TRUE(std::isinf(s.distances[size_t(i) * k + j]));
            }
        }
    }
}

// ---- recall on the real sets ----

class CpuLshRecall : public ::testing::TestWithParam<std::string> {};

/// Recall@10 and mean candidates per query of one setting.
struct Point {
    double recall;
    double candidates;
};

Point measure(const IndexBiLevelLSH& idx, const lshtest::RealSet& s,
              const SearchParametersBiLevelLSH& sp) {
    const int k = 10;
    std::vector<float> D(size_t(s.nq) * k);
    std::vector<idx_t> I(size_t(s.nq) * k), lims, ids;
    idx.search(s.nq, s.query.data(), k, D.data(), I.data(), &sp);
    idx.getCandidates(s.nq, s.query.data(), k, &lims, &ids, &sp);
    return {lshtest::recallAt10(s, s.nq, I.data(), k), double(ids.size()) / double(s.nq)};
}

TEST_P(CpuLshRecall, RisesWithProbesTablesAndGroupsAndReaches90) {
    const std::string name = GetParam();
    const lshtest::RecallPlan plan = lshtest::recallPlan(name);
    const lshtest::RealSet& s = lshtest::realSet(name, plan.queries);
    if (!s.missing.empty()) GTEST_SKIP() << name << ": " << s.missing;
    IndexBiLevelLSH idx(s.d, plan.config);
    idx.train(s.nb, s.base.data());
    idx.add(s.nb, s.base.data());
    const BiLevelLSHConfig& c = plan.config;
    char head[200];
    std::snprintf(head, sizeof(head), "%s (%lld x %d, %lld queries), depth %d, L %d, M %d, W %g",
                  name.c_str(), (long long)s.nb, s.d, (long long)s.nq, c.treeDepth, c.nTables,
                  c.nProjections, double(c.bucketWidth));
    double best = 0;
    auto report = [&](const char* what, int nprobe, int tables, int gp, const Point& p) {
        std::printf(
            "[lsh recall] %s, groupProbes %d, nprobe %d, tables %d%s: recall@10 %.4f, %.0f "
            "candidates / query\n",
            head, gp, nprobe, tables, what, p.recall, p.candidates);
        best = std::max(best, p.recall);
    };

    // nprobe, all tables
    std::vector<Point> byProbe;
    for (int np : plan.nprobes) {
        SearchParametersBiLevelLSH sp;
        sp.nprobe = np;
        sp.groupProbes = plan.groupProbes;
        byProbe.push_back(measure(idx, s, sp));
        report("", np, c.nTables, plan.groupProbes, byProbe.back());
    }
    for (size_t i = 1; i < byProbe.size(); ++i)
        EXPECT_GE(byProbe[i].recall, byProbe[i - 1].recall)
            << head << ": recall fell from nprobe " << plan.nprobes[i - 1] << " to "
            << plan.nprobes[i];
    EXPECT_GT(byProbe.back().recall, byProbe.front().recall) << head;

    // tables, at tablesNprobe
    std::vector<Point> byTables;
    for (int t : plan.tables) {
        SearchParametersBiLevelLSH sp;
        sp.nprobe = plan.tablesNprobe;
        sp.tables = t;
        sp.groupProbes = plan.groupProbes;
        byTables.push_back(measure(idx, s, sp));
        report("", plan.tablesNprobe, t, plan.groupProbes, byTables.back());
    }
    for (size_t i = 1; i < byTables.size(); ++i) {
        EXPECT_GE(byTables[i].recall, byTables[i - 1].recall)
            << head << ": recall fell from " << plan.tables[i - 1] << " to " << plan.tables[i]
            << " tables";
        EXPECT_GE(byTables[i].candidates, byTables[i - 1].candidates) << head;
    }
    EXPECT_GT(byTables.back().recall, byTables.front().recall) << head;

    // groupProbes 1 .. plan's, at the largest nprobe: more groups, more found
    Point prev{-1, 0};
    for (int gp = 1; gp <= plan.groupProbes; ++gp) {
        SearchParametersBiLevelLSH sp;
        sp.nprobe = plan.nprobes.back();
        sp.groupProbes = gp;
        const Point p = gp == plan.groupProbes ? byProbe.back() : measure(idx, s, sp);
        if (gp < plan.groupProbes) report(" (group sweep)", sp.nprobe, c.nTables, gp, p);
        EXPECT_GE(p.recall, prev.recall) << head << ": groupProbes " << gp;
        prev = p;
    }

    EXPECT_GE(best, 0.9) << head << ": no setting reached recall@10 0.9";
}

INSTANTIATE_TEST_SUITE_P(RealSets, CpuLshRecall, ::testing::ValuesIn(lshtest::realSetNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             std::string n = info.param;
                             for (auto& ch : n)
                                 if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return n;
                         });

TEST(CpuLshSaveLoad, RoundTripKeepsCandidatesAndResultsOnRealData) {
    const lshtest::RecallPlan plan = lshtest::recallPlan("siftsmall");
    const lshtest::RealSet& s = lshtest::realSet("siftsmall", plan.queries);
    if (!s.missing.empty()) GTEST_SKIP() << s.missing;
    IndexBiLevelLSH idx(s.d, plan.config);
    idx.train(s.nb, s.base.data());
    idx.add(s.nb, s.base.data());
    const std::vector<uint8_t> bytes = serialize_index(&idx);
    std::unique_ptr<faiss::Index> back(deserialize_index(bytes));
    auto* twin = dynamic_cast<IndexBiLevelLSH*>(back.get());
    ASSERT_NE(twin, nullptr);
    EXPECT_TRUE(sameModel(idx.getModel(), twin->getModel()));
    EXPECT_TRUE(sameBits(idx.getVectors(), twin->getVectors()));
    EXPECT_EQ(idx.getTables().sortedIds, twin->getTables().sortedIds);
    SearchParametersBiLevelLSH sp;
    sp.nprobe = plan.tablesNprobe;
    sp.groupProbes = plan.groupProbes;
    EXPECT_TRUE(snapshot(idx, s.query, 10, &sp) == snapshot(*twin, s.query, 10, &sp));
    EXPECT_EQ(serialize_index(twin), bytes);
}

// ---- bad input ----

class CpuLshErrors : public ::testing::Test {
  protected:
    static constexpr int kD = 12;
    void SetUp() override {
        x_ = test::clusteredVectors(800, kD, 8, kSeed);
        q_ = test::clusteredVectors(7, kD, 8, kSeed + 1);
        cfg_.treeDepth = 3;
        cfg_.nTables = 4;
        cfg_.nProjections = 5;
        idx_ = std::make_unique<IndexBiLevelLSH>(kD, cfg_);
        idx_->train(800, x_.data());
        idx_->add(800, x_.data());
    }
    std::vector<float> x_, q_;
    BiLevelLSHConfig cfg_;
    std::unique_ptr<IndexBiLevelLSH> idx_;
};

TEST_F(CpuLshErrors, BadSearchArguments) {
    IndexBiLevelLSH& idx = *idx_;
    std::vector<float> D(7 * 10);
    std::vector<idx_t> I(7 * 10), lims, ids;
    expectRefused(idx, q_, "k = 0", "k must be > 0",
                  [&] { idx.search(7, q_.data(), 0, D.data(), I.data()); });
    expectRefused(idx, q_, "k = -3", "k must be > 0",
                  [&] { idx.search(7, q_.data(), -3, D.data(), I.data()); });
    expectRefused(idx, q_, "n = -1", "n must be >= 0",
                  [&] { idx.search(-1, q_.data(), 5, D.data(), I.data()); });
    expectRefused(idx, q_, "null queries", "x is null",
                  [&] { idx.search(7, nullptr, 5, D.data(), I.data()); });
    expectRefused(idx, q_, "null outputs", "must not be null",
                  [&] { idx.search(7, q_.data(), 5, nullptr, nullptr); });
    std::vector<float> bad = q_;
    bad[3 * kD + 4] = std::numeric_limits<float>::quiet_NaN();
    expectRefused(idx, q_, "NaN query", "NaN",
                  [&] { idx.search(7, bad.data(), 5, D.data(), I.data()); });
    bad[3 * kD + 4] = std::numeric_limits<float>::infinity();
    expectRefused(idx, q_, "Inf query", "vector 3",
                  [&] { idx.search(7, bad.data(), 5, D.data(), I.data()); });
    expectRefused(idx, q_, "getCandidates k = 0", "k must be > 0",
                  [&] { idx.getCandidates(7, q_.data(), 0, &lims, &ids); });
    expectRefused(idx, q_, "getCandidates n = -2", "n must be >= 0",
                  [&] { idx.getCandidates(-2, q_.data(), 5, &lims, &ids); });
    expectRefused(idx, q_, "getCandidates null outputs", "null output",
                  [&] { idx.getCandidates(7, q_.data(), 5, nullptr, nullptr); });
    float r[kD];
    expectRefused(idx, q_, "reconstruct -1", "out of", [&] { idx.reconstruct(-1, r); });
    expectRefused(idx, q_, "reconstruct ntotal", "out of", [&] { idx.reconstruct(800, r); });
    // nq = 0 is fine and writes nothing
    idx.search(0, nullptr, 5, nullptr, nullptr);
    idx.getCandidates(0, nullptr, 5, &lims, &ids);
    EXPECT_EQ(lims, std::vector<idx_t>{0});
}

TEST_F(CpuLshErrors, BadSearchParameters) {
    IndexBiLevelLSH& idx = *idx_;
    std::vector<float> D(7 * 10);
    std::vector<idx_t> I(7 * 10), lims, ids;
    const int M = cfg_.nProjections;
    const int maxProbe = std::min(lsh::kMaxProbes, 1 + lsh::maxPerturbations(M));
    auto refused = [&](const char* what, const char* needle,
                       const std::function<void(SearchParametersBiLevelLSH&)>& set) {
        SearchParametersBiLevelLSH sp;
        set(sp);
        expectRefused(idx, q_, std::string(what) + " (search)", needle,
                      [&] { idx.search(7, q_.data(), 5, D.data(), I.data(), &sp); });
        expectRefused(idx, q_, std::string(what) + " (getCandidates)", needle,
                      [&] { idx.getCandidates(7, q_.data(), 5, &lims, &ids, &sp); });
    };
    refused("nprobe 0", "nprobe", [](auto& p) { p.nprobe = 0; });
    refused("nprobe -1", "nprobe", [](auto& p) { p.nprobe = -1; });
    refused("nprobe too large", "nprobe", [&](auto& p) { p.nprobe = maxProbe + 1; });
    refused("nprobe 129", "nprobe", [](auto& p) { p.nprobe = 129; });
    refused("tables -1", "tables", [](auto& p) { p.tables = -1; });
    refused("tables > L", "tables", [&](auto& p) { p.tables = cfg_.nTables + 1; });
    refused("minCandidates < 0", "minCandidates", [](auto& p) { p.minCandidates = -1; });
    refused("groupProbes 0", "groupProbes", [](auto& p) { p.groupProbes = 0; });
    refused("groupProbes > groups", "groupProbes",
            [&](auto& p) { p.groupProbes = (1 << cfg_.treeDepth) + 1; });
    refused("shortList 7", "shortList",
            [](auto& p) { p.shortList = static_cast<BiLevelShortList>(7); });
    // a selector is applied by search, refused by getCandidates (which lists all)
    faiss::IDSelectorRange sel(0, 10);
    SearchParametersBiLevelLSH withSel;
    withSel.sel = &sel;
    expectRefused(idx, q_, "an IDSelector (getCandidates)", "IDSelector",
                  [&] { idx.getCandidates(7, q_.data(), 5, &lims, &ids, &withSel); });
    // wrong parameter types (FAISS's base class is taken: it carries a selector)
    faiss::SearchParametersIVF ivf;
    for (const faiss::SearchParameters* p : {static_cast<const faiss::SearchParameters*>(&ivf)}) {
        expectRefused(idx, q_, "params of another type", "SearchParametersBiLevelLSH",
                      [&] { idx.search(7, q_.data(), 5, D.data(), I.data(), p); });
        expectRefused(idx, q_, "params of another type (getCandidates)",
                      "SearchParametersBiLevelLSH",
                      [&] { idx.getCandidates(7, q_.data(), 5, &lims, &ids, p); });
    }
    // the limits themselves are accepted
    SearchParametersBiLevelLSH ok;
    ok.nprobe = maxProbe;
    ok.tables = cfg_.nTables;
    ok.groupProbes = 1 << cfg_.treeDepth;
    ok.minCandidates = 1 << 30;
    idx.search(7, q_.data(), 5, D.data(), I.data(), &ok);
}

TEST_F(CpuLshErrors, BadAddAndTrain) {
    IndexBiLevelLSH& idx = *idx_;
    expectRefused(idx, q_, "add n = -1", "n must be >= 0", [&] { idx.add(-1, x_.data()); });
    expectRefused(idx, q_, "add null", "x is null", [&] { idx.add(5, nullptr); });
    std::vector<float> bad(x_.begin(), x_.begin() + 10 * kD);
    bad[7 * kD + 1] = std::numeric_limits<float>::quiet_NaN();
    expectRefused(idx, q_, "add NaN", "NaN", [&] { idx.add(10, bad.data()); });
    bad[7 * kD + 1] = -std::numeric_limits<float>::infinity();
    expectRefused(idx, q_, "add -Inf", "vector 7", [&] { idx.add(10, bad.data()); });
    expectRefused(idx, q_, "train on a non-empty index", "reset() first",
                  [&] { idx.train(800, x_.data()); });
    idx.add(0, nullptr);  // n = 0: nothing to do
    EXPECT_EQ(idx.ntotal, 800);

    // untrained: add and search refused, train checks its input
    IndexBiLevelLSH fresh(kD, cfg_);
    expectRefused(fresh, q_, "add before train", "train", [&] { fresh.add(10, x_.data()); });
    std::vector<float> D(70);
    std::vector<idx_t> I(70);
    expectRefused(fresh, q_, "search before train", "not trained",
                  [&] { fresh.search(7, q_.data(), 10, D.data(), I.data()); });
    expectRefused(fresh, q_, "too few training vectors", "at least 2^treeDepth",
                  [&] { fresh.train(7, x_.data()); });
    expectRefused(fresh, q_, "train null", "x is null", [&] { fresh.train(100, nullptr); });
    std::vector<float> badTrain(x_.begin(), x_.begin() + 100 * kD);
    badTrain[55 * kD] = std::numeric_limits<float>::quiet_NaN();
    expectRefused(fresh, q_, "train NaN", "vector 55", [&] { fresh.train(100, badTrain.data()); });
    EXPECT_FALSE(fresh.is_trained);

    // reset keeps the training: train again is refused only while vectors are held
    const BiLevelLSHModel model = idx.getModel();
    idx.reset();
    EXPECT_EQ(idx.ntotal, 0);
    EXPECT_TRUE(idx.is_trained);
    EXPECT_TRUE(sameModel(idx.getModel(), model));
    idx.train(800, x_.data());
    EXPECT_TRUE(sameModel(idx.getModel(), model)) << "the same data and seed train the same model";
}

TEST_F(CpuLshErrors, BadConfigurationFields) {
    auto refused = [&](const char* what, const char* needle,
                       const std::function<void(BiLevelLSHConfig&)>& set) {
        BiLevelLSHConfig c;
        set(c);
        try {
            IndexBiLevelLSH idx(kD, c);
            ADD_FAILURE() << what << ": accepted";
        } catch (const faiss::FaissException& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
                << what << ": " << e.what();
        }
        EXPECT_THROW(c.check(), faiss::FaissException) << what;
        // setContents refuses it too and keeps the index as it was
        expectRefused(*idx_, q_, std::string(what) + " (setContents)", needle,
                      [&] { idx_->setContents(c, idx_->getModel(), idx_->getVectors()); });
    };
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    refused("treeDepth -1", "treeDepth", [](auto& c) { c.treeDepth = -1; });
    refused("treeDepth 15", "treeDepth", [](auto& c) { c.treeDepth = lsh::kMaxTreeDepth + 1; });
    refused("nTables 0", "nTables", [](auto& c) { c.nTables = 0; });
    refused("nTables 65", "nTables", [](auto& c) { c.nTables = lsh::kMaxTables + 1; });
    refused("nProjections 0", "nProjections", [](auto& c) { c.nProjections = 0; });
    refused("nProjections 33", "nProjections",
            [](auto& c) { c.nProjections = lsh::kMaxProjections + 1; });
    refused("bucketWidth 0", "bucketWidth", [](auto& c) { c.bucketWidth = 0.f; });
    refused("bucketWidth -1", "bucketWidth", [](auto& c) { c.bucketWidth = -1.f; });
    refused("bucketWidth NaN", "bucketWidth", [&](auto& c) { c.bucketWidth = nan; });
    refused("bucketWidth Inf", "bucketWidth", [&](auto& c) { c.bucketWidth = inf; });
    refused("meanRuleC 0", "meanRuleC", [](auto& c) { c.meanRuleC = 0.f; });
    refused("meanRuleC NaN", "meanRuleC", [&](auto& c) { c.meanRuleC = nan; });
    refused("diameterIterations 0", "diameterIterations",
            [](auto& c) { c.diameterIterations = 0; });
    refused("diameterIterations 1001", "diameterIterations",
            [](auto& c) { c.diameterIterations = 1001; });
    refused("cuckooSubTables 1", "cuckooSubTables", [](auto& c) { c.cuckooSubTables = 1; });
    refused("cuckooSubTables 9", "cuckooSubTables", [](auto& c) { c.cuckooSubTables = 9; });
    refused("cuckooMaxLoad 0", "cuckooMaxLoad", [](auto& c) { c.cuckooMaxLoad = 0.f; });
    refused("cuckooMaxLoad 0.96", "cuckooMaxLoad", [](auto& c) { c.cuckooMaxLoad = 0.96f; });
    refused("cuckooMaxLoad NaN", "cuckooMaxLoad", [&](auto& c) { c.cuckooMaxLoad = nan; });

    EXPECT_THROW(IndexBiLevelLSH(kD, BiLevelLSHConfig(), faiss::METRIC_INNER_PRODUCT),
                 faiss::FaissException);
    EXPECT_THROW(IndexBiLevelLSH(-1), faiss::FaissException);
    IndexBiLevelLSH noDim(0);
    EXPECT_THROW(noDim.train(100, x_.data()), faiss::FaissException);
}

TEST_F(CpuLshErrors, SetContentsMismatchesAreRefused) {
    IndexBiLevelLSH& idx = *idx_;
    BiLevelLSHConfig other = cfg_;
    other.nTables = cfg_.nTables + 1;  // the model has nTables tables
    expectRefused(idx, q_, "config and model disagree", "disagree",
                  [&] { idx.setContents(other, idx.getModel(), idx.getVectors()); });
    std::vector<float> ragged(idx.getVectors().begin(), idx.getVectors().begin() + 5 * kD + 3);
    expectRefused(idx, q_, "vectors not a multiple of d", "multiple of d",
                  [&] { idx.setContents(cfg_, idx.getModel(), ragged); });
    std::vector<float> nanVectors = idx.getVectors();
    nanVectors[100] = std::numeric_limits<float>::quiet_NaN();
    expectRefused(idx, q_, "NaN vectors", "NaN",
                  [&] { idx.setContents(cfg_, idx.getModel(), nanVectors); });
    BiLevelLSHModel broken = idx.getModel();
    broken.leafWidth[0] = -1.f;
    expectRefused(idx, q_, "negative bucket width in the model", "bucket width",
                  [&] { idx.setContents(cfg_, broken, idx.getVectors()); });
    broken = idx.getModel();
    broken.proj.pop_back();
    expectRefused(idx, q_, "model arrays of the wrong size", "sizes",
                  [&] { idx.setContents(cfg_, broken, idx.getVectors()); });
    expectRefused(idx, q_, "vectors without a trained model", "trained model",
                  [&] { idx.setContents(cfg_, BiLevelLSHModel(), idx.getVectors()); });
}

// A selector drops candidates before scoring: the filtered search equals the
// exact k best of (the query's candidates that the selector keeps).
TEST(CpuLshFilter, SelectedCandidatesRankedExactly) {
    const int d = 12;
    const int64_t n = 3000, nq = 40, k = 8;
    const auto x = test::clusteredVectors(n, d, 10, kSeed);
    const auto q = test::clusteredVectors(nq, d, 10, kSeed + 1);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 3;
    cfg.nTables = 6;
    cfg.nProjections = 6;
    IndexBiLevelLSH idx(d, cfg);
    idx.train(n, x.data());
    idx.add(n, x.data());
    faiss::IDSelectorRange lower(0, n / 3);
    for (int plain = 0; plain < 2; ++plain) {
        faiss::SearchParameters base;
        SearchParametersBiLevelLSH ours;
        ours.nprobe = 4;
        faiss::SearchParameters* p = plain ? &base : static_cast<faiss::SearchParameters*>(&ours);
        // the candidates of the same settings, unfiltered
        std::vector<idx_t> lims, ids;
        idx.getCandidates(nq, q.data(), k, &lims, &ids, plain ? nullptr : &ours);
        p->sel = &lower;
        std::vector<float> D(nq * k);
        std::vector<idx_t> I(nq * k);
        idx.search(nq, q.data(), k, D.data(), I.data(), p);
        int64_t found = 0;
        for (int64_t i = 0; i < nq; ++i) {
            std::vector<std::pair<float, idx_t>> want;
            for (idx_t j = lims[i]; j < lims[i + 1]; ++j) {
                const idx_t c = ids[j];
                if (!lower.is_member(c)) continue;
                want.push_back({faiss::fvec_L2sqr(q.data() + i * d, x.data() + c * d, d), c});
            }
            std::sort(want.begin(), want.end());
            for (int64_t r = 0; r < k; ++r) {
                const bool has = r < int64_t(want.size());
                ASSERT_EQ(I[i * k + r], has ? want[r].second : -1) << "query " << i << " rank " << r;
                if (has) EXPECT_FLOAT_EQ(D[i * k + r], want[r].first);
                found += has;
            }
        }
        EXPECT_GT(found, nq * k / 2) << "the selection should keep most rows filled";
    }
}

// remove_ids drops the selected vectors, moves the later ids down and
// rebuilds the tables: the index then answers as one built from the kept
// vectors with the same model.
TEST(CpuLshRemove, RemovedIndexAnswersAsOneBuiltFromTheKeptVectors) {
    const int d = 12;
    const int64_t n = 3000, nq = 40, k = 8;
    const auto x = test::clusteredVectors(n, d, 10, kSeed);
    const auto q = test::clusteredVectors(nq, d, 10, kSeed + 1);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 3;
    cfg.nTables = 6;
    cfg.nProjections = 6;
    IndexBiLevelLSH idx(d, cfg);
    idx.train(n, x.data());
    idx.add(n, x.data());
    // a range and a scattered batch, removed one after the other
    std::vector<idx_t> batch;
    for (idx_t i = 1500; i < n - 100; i += 7) batch.push_back(i);
    faiss::IDSelectorRange range(100, 600);
    EXPECT_EQ(idx.remove_ids(range), 500u);
    faiss::IDSelectorBatch scattered(batch.size(), batch.data());
    const int64_t inBatch = int64_t(std::count_if(batch.begin(), batch.end(),
                                                  [&](idx_t i) { return i < n - 500; }));
    EXPECT_EQ(int64_t(idx.remove_ids(scattered)), inBatch);  // ids past ntotal now select nothing
    std::vector<float> kept;
    for (int64_t i = 0; i < n; ++i) {
        if (range.is_member(i)) continue;
        const int64_t after = i < 100 ? i : i - 500;
        if (scattered.is_member(after)) continue;
        kept.insert(kept.end(), x.begin() + i * d, x.begin() + (i + 1) * d);
    }
    const int64_t m = int64_t(kept.size()) / d;
    ASSERT_EQ(idx.ntotal, m);
    EXPECT_EQ(idx.getVectors(), kept);
    IndexBiLevelLSH fresh(d, cfg);
    fresh.setContents(idx.getConfig(), idx.getModel(), kept);
    std::vector<float> D(nq * k), fD(nq * k);
    std::vector<idx_t> I(nq * k), fI(nq * k);
    idx.search(nq, q.data(), k, D.data(), I.data());
    fresh.search(nq, q.data(), k, fD.data(), fI.data());
    EXPECT_EQ(I, fI);
    EXPECT_EQ(D, fD);
    // nothing selected: nothing changes; everything: an empty trained index
    faiss::IDSelectorRange none(m, m + 10);
    EXPECT_EQ(idx.remove_ids(none), 0u);
    EXPECT_EQ(idx.ntotal, m);
    faiss::IDSelectorAll all;
    EXPECT_EQ(int64_t(idx.remove_ids(all)), m);
    EXPECT_EQ(idx.ntotal, 0);
    EXPECT_TRUE(idx.is_trained);
    idx.add(n, x.data());
    EXPECT_EQ(idx.ntotal, n);
}

}  // namespace
}  // namespace faiss_ext
