// GpuIndexBiLevelLSH and GpuCuckooHashTable (Pan & Manocha 2011, docs/references.md)
// against the CPU twin faiss_ext::IndexBiLevelLSH and the host
// faiss_ext::CuckooHashTable, the oracles:
//   GpuLshCuckoo     GPU cuckoo tables at loads up to 0.9: every key found
//                    at its index, 100k other keys not found, the same
//                    answers as the host table for the same keys
//   GpuLshTwin       trained on the same data with the same configuration,
//                    GPU and CPU build the same model bit for bit (rules,
//                    directions, thresholds, widths, training counts) and
//                    give every query the same candidates (real and
//                    generated data, several settings); search results are
//                    the same distance lists (relative 1e-4, ties aside) for
//                    k in {1, 10, 100, 500} with the heap, the work queue
//                    and Auto; copyFrom / copyTo round trips
//   GpuLshRecall     recall@10 >= 0.9 on siftsmall on the GPU, as on the CPU
//   GpuLshEdge       k > ntotal (-1 / +inf padding), nq = 0, nq = 1, an empty
//                    index, d = 1, 3, 97, device-memory inputs and outputs,
//                    bad input
//   LshSanitize      one small case of every kernel path, for
//                    compute-sanitizer (memcheck, racecheck)
// Skipped without a GPU. Seeds are fixed (test::kSeed) and printed.
#include <cuda_runtime_api.h>
#include <faiss/IndexIVF.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
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
#include "faiss_ext/gpu/GpuCuckooHashTable.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace {

using gpu::GpuCuckooHashTable;
using gpu::GpuIndexBiLevelLSH;
using gpu::GpuIndexBiLevelLSHConfig;
using gpu::StandardGpuResources;
using idx_t = int64_t;
using test::kSeed;

// ---- helpers ----

using lshtest::distinctKeys;

/// (lims, ids) of getCandidates on either index type.
template <class IndexT>
std::pair<std::vector<idx_t>, std::vector<idx_t>> candidates(const IndexT& idx, const float* q,
                                                             idx_t nq, idx_t k,
                                                             const SearchParametersBiLevelLSH* p) {
    std::vector<idx_t> lims, ids;
    idx.getCandidates(nq, q, k, &lims, &ids, p);
    return {lims, ids};
}

/// "" when a and b give every query the same candidates, else the first
/// query that differs and how.
std::string candidateDifference(const std::pair<std::vector<idx_t>, std::vector<idx_t>>& a,
                                const std::pair<std::vector<idx_t>, std::vector<idx_t>>& b) {
    if (a.first.size() != b.first.size()) return "different query counts";
    const size_t nq = a.first.size() - 1;
    for (size_t q = 0; q < nq; ++q) {
        const std::vector<idx_t> ca(a.second.begin() + a.first[q],
                                    a.second.begin() + a.first[q + 1]);
        const std::vector<idx_t> cb(b.second.begin() + b.first[q],
                                    b.second.begin() + b.first[q + 1]);
        if (ca != cb) {
            std::vector<idx_t> onlyA, onlyB;
            std::set_difference(ca.begin(), ca.end(), cb.begin(), cb.end(),
                                std::back_inserter(onlyA));
            std::set_difference(cb.begin(), cb.end(), ca.begin(), ca.end(),
                                std::back_inserter(onlyB));
            return "query " + std::to_string(q) + ": " + std::to_string(ca.size()) + " vs " +
                   std::to_string(cb.size()) + " candidates, " + std::to_string(onlyA.size()) +
                   " only in the first, " + std::to_string(onlyB.size()) + " only in the second";
        }
    }
    return "";
}

/// Search settings compared between the twins.
std::vector<SearchParametersBiLevelLSH> twinSettings(int groups, int M) {
    std::vector<SearchParametersBiLevelLSH> out;
    SearchParametersBiLevelLSH p;
    out.push_back(p);  // defaults: nprobe 1, minCandidates = k
    p.nprobe = std::min(8, 1 + lsh::maxPerturbations(M));
    p.minCandidates = 100;
    out.push_back(p);
    p = SearchParametersBiLevelLSH();
    p.nprobe = std::min(16, 1 + lsh::maxPerturbations(M));
    p.tables = 2;
    p.groupProbes = std::min(groups, 2);
    out.push_back(p);
    p = SearchParametersBiLevelLSH();
    p.nprobe = std::min(32, 1 + lsh::maxPerturbations(M));
    p.minCandidates = 1;
    p.groupProbes = std::min(groups, 4);
    out.push_back(p);
    p = SearchParametersBiLevelLSH();  // crossing splits only near them
    p.groupProbes = std::min(groups, 8);
    p.groupMargin = 0.05f;
    out.push_back(p);
    return out;
}

std::string describe(const SearchParametersBiLevelLSH& p) {
    return "nprobe " + std::to_string(p.nprobe) + ", tables " + std::to_string(p.tables) +
           ", minCandidates " + std::to_string(p.minCandidates) + ", groupProbes " +
           std::to_string(p.groupProbes) + ", groupMargin " + std::to_string(p.groupMargin) +
           ", shortList " + std::to_string(int(p.shortList));
}

/// Trains a twin on the CPU and an index on the GPU with the same
/// configuration and data, adds the data to both.
struct Twins {
    std::unique_ptr<IndexBiLevelLSH> cpu;
    std::unique_ptr<GpuIndexBiLevelLSH> gpu;
};

Twins buildTwins(StandardGpuResources* res, int d, const BiLevelLSHConfig& cfg, int64_t n,
                 const float* x, GpuIndexBiLevelLSHConfig gcfg = {}) {
    Twins t;
    t.cpu = std::make_unique<IndexBiLevelLSH>(d, cfg);
    t.cpu->train(n, x);
    t.cpu->add(n, x);
    t.gpu = std::make_unique<GpuIndexBiLevelLSH>(res, d, cfg, gcfg);
    t.gpu->train(n, x);
    t.gpu->add(n, x);
    return t;
}

/// Expects the same model, groups and candidates of the twins.
void expectSameTwins(const Twins& t, const float* q, idx_t nq, const std::string& what) {
    const std::string diff = lshtest::modelDifference(t.cpu->getModel(), t.gpu->getModel());
    EXPECT_TRUE(diff.empty()) << what << ": GPU and CPU models differ in " << diff << ", seed "
                              << t.cpu->getConfig().seed;
    EXPECT_EQ(t.cpu->groupSizes(), t.gpu->groupSizes()) << what;
    EXPECT_EQ(t.cpu->ntotal, t.gpu->ntotal) << what;
    const BiLevelLSHModel& m = t.cpu->getModel();
    for (const auto& p : twinSettings(m.groups(), m.nProjections)) {
        for (idx_t k : {idx_t(1), idx_t(10)}) {
            const std::string d = candidateDifference(candidates(*t.cpu, q, nq, k, &p),
                                                      candidates(*t.gpu, q, nq, k, &p));
            EXPECT_TRUE(d.empty()) << what << ", " << describe(p) << ", k " << k << ": " << d;
        }
    }
}

/// Expects the GPU's search to give the CPU twin's distance lists.
void expectSameResults(const Twins& t, const float* q, idx_t nq, idx_t k,
                       const SearchParametersBiLevelLSH& p, const std::string& what) {
    std::vector<float> Dc(size_t(nq) * k), Dg(size_t(nq) * k);
    std::vector<idx_t> Ic(size_t(nq) * k), Ig(size_t(nq) * k);
    t.cpu->search(nq, q, k, Dc.data(), Ic.data(), &p);
    t.gpu->search(nq, q, k, Dg.data(), Ig.data(), &p);
    const std::string err =
        test::compareKnn(nq, k, Dg.data(), Ig.data(), Dc.data(), Ic.data(), false, 1e-4f, 1e-3f);
    EXPECT_EQ(err, "") << what << ", k " << k << ", " << describe(p) << " (GPU vs the CPU twin)";
}

std::vector<float> clustered(int64_t n, int d, uint64_t seed) {
    return test::clusteredVectors(n, d, std::max<int>(4, int(n / 400)), seed);
}

// ---- the GPU cuckoo hash table ----

struct CuckooCase {
    int f;
    float load;
};

class GpuLshCuckoo : public ::testing::TestWithParam<CuckooCase> {};

TEST_P(GpuLshCuckoo, FindsEveryKeyAndNoOtherLikeTheHostTable) {
    FAISS_EXT_REQUIRE_GPU();
    const CuckooCase c = GetParam();
    const size_t n = 300000;
    const uint64_t seed = kSeed + 31 * c.f;
    const std::vector<uint64_t> keys = distinctKeys(n, seed);
    StandardGpuResources res;
    cudaStream_t stream = res.getResources()->getDefaultStream(0);
    GpuCuckooHashTable g;
    g.buildFromHost(keys.data(), n, c.f, c.load, seed, stream);
    CuckooHashTable h;
    h.build(keys.data(), n, c.f, c.load, seed);
    std::printf(
        "[gpu cuckoo] f %d, asked load %.2f: %zu keys in %zu slots, load %.5f, %d attempt(s), "
        "%d growth(s) (host: %zu slots, %d attempt(s))\n",
        c.f, double(c.load), g.size(), g.capacity(), g.load(), g.attempts(), g.growths(),
        h.capacity(), h.attempts());
    EXPECT_EQ(g.size(), n);
    EXPECT_EQ(g.growths(), 0) << "seed " << seed;
    EXPECT_EQ(g.capacity(), h.capacity()) << "the same asked load gives the same slots";
    EXPECT_LE(g.load(), double(c.load) + 1e-12);
    EXPECT_GT(g.load(), double(c.load) * (1 - 1e-4));

    // the keys, then 100k others, in one lookup
    const std::unordered_set<uint64_t> in(keys.begin(), keys.end());
    std::vector<uint64_t> ask = keys;
    std::mt19937_64 rng(seed ^ 0x5eedULL);
    while (ask.size() < n + 100000) {
        const uint64_t k = rng();
        if (!in.count(k)) ask.push_back(k);
    }
    const std::vector<int64_t> got = g.findHost(ask, stream);
    ASSERT_EQ(got.size(), ask.size());
    size_t wrongKey = 0, foundOther = 0, unlikeHost = 0;
    for (size_t i = 0; i < ask.size(); ++i) {
        if (i < n)
            wrongKey += got[i] != int64_t(i);
        else
            foundOther += got[i] != -1;
        unlikeHost += got[i] != h.find(ask[i]);
    }
    EXPECT_EQ(wrongKey, 0u) << "inserted keys not found at their index, seed " << seed;
    EXPECT_EQ(foundOther, 0u) << "keys never inserted were found, seed " << seed;
    EXPECT_EQ(unlikeHost, 0u) << "answers unlike the host table's, seed " << seed;

    // built from device keys: the same answers
    uint64_t* dKeys = nullptr;
    ASSERT_EQ(cudaMalloc(&dKeys, n * sizeof(uint64_t)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dKeys, keys.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice),
              cudaSuccess);
    faiss_ext::test::syncAfterHostCopy();
    GpuCuckooHashTable g2;
    g2.build(dKeys, n, c.f, c.load, seed, stream);
    cudaFree(dKeys);
    EXPECT_TRUE(g2.findHost(ask, stream) == got);
}

INSTANTIATE_TEST_SUITE_P(Loads, GpuLshCuckoo,
                         ::testing::Values(CuckooCase{4, 0.5f}, CuckooCase{4, 0.8f},
                                           CuckooCase{4, 0.9f}, CuckooCase{3, 0.85f},
                                           CuckooCase{2, 0.45f}),
                         [](const ::testing::TestParamInfo<CuckooCase>& info) {
                             return "f" + std::to_string(info.param.f) + "_load" +
                                    std::to_string(int(std::lround(info.param.load * 100)));
                         });

TEST(GpuLshCuckooTable, SmallTablesDuplicatesAndEmpty) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    cudaStream_t stream = res.getResources()->getDefaultStream(0);
    for (int f = 2; f <= lsh::kMaxCuckooSubTables; ++f) {
        for (size_t n : {size_t(0), size_t(1), size_t(2), size_t(33), size_t(1000)}) {
            const std::vector<uint64_t> keys = distinctKeys(n, kSeed + n + f);
            GpuCuckooHashTable g;
            g.buildFromHost(keys.data(), n, f, 0.9f, kSeed, stream);
            CuckooHashTable h;
            h.build(keys.data(), n, f, 0.9f, kSeed);
            std::vector<uint64_t> ask = keys;
            for (uint64_t extra : {uint64_t(12345), uint64_t(1) << 40, uint64_t(7)})
                ask.push_back(extra);
            const std::vector<int64_t> got = g.findHost(ask, stream);
            for (size_t i = 0; i < ask.size(); ++i)
                ASSERT_EQ(got[i], h.find(ask[i])) << "f " << f << " n " << n << " key " << i;
        }
    }
    std::vector<uint64_t> dup = distinctKeys(500, kSeed);
    dup[400] = dup[17];
    GpuCuckooHashTable g;
    const std::vector<uint64_t> good = distinctKeys(100, kSeed + 1);
    g.buildFromHost(good.data(), good.size(), 4, 0.8f, kSeed, stream);
    EXPECT_THROW(g.buildFromHost(dup.data(), dup.size(), 4, 0.8f, kSeed, stream),
                 faiss::FaissException);
    EXPECT_THROW(g.buildFromHost(good.data(), good.size(), 1, 0.8f, kSeed, stream),
                 faiss::FaissException);
    EXPECT_THROW(g.buildFromHost(good.data(), good.size(), 4, 1.f, kSeed, stream),
                 faiss::FaissException);
    const std::vector<int64_t> still = g.findHost(good, stream);
    for (size_t i = 0; i < good.size(); ++i)
        EXPECT_EQ(still[i], int64_t(i)) << "after a refused build";
}

// ---- GPU against the CPU twin ----

TEST(GpuLshTwin, SameModelAndCandidatesOnGeneratedData) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    struct Case {
        const char* name;
        int64_t n;
        int d;
        int depth, L, M;
        float W;
        bool outliers;
    };
    for (const Case& c :
         {Case{"clustered 20k x 64, depth 5", 20000, 64, 5, 8, 8, 1.f, false},
          Case{"core + far clusters 12k x 16 (both split rules)", 12001, 16, 4, 6, 6, 0.7f, true},
          Case{"clustered 5k x 32, depth 0", 5000, 32, 0, 4, 10, 2.f, false},
          Case{"clustered 3000 x 200, M 32", 3000, 200, 3, 3, 32, 4.f, false}}) {
        const std::vector<float> x =
            c.outliers ? lshtest::coreAndOutliers(c.n, c.d, kSeed) : clustered(c.n, c.d, kSeed);
        const std::vector<float> q = c.outliers ? lshtest::coreAndOutliers(300, c.d, kSeed + 5)
                                                : clustered(300, c.d, kSeed + 5);
        BiLevelLSHConfig cfg;
        cfg.treeDepth = c.depth;
        cfg.nTables = c.L;
        cfg.nProjections = c.M;
        cfg.bucketWidth = c.W;
        const Twins t = buildTwins(&res, c.d, cfg, c.n, x.data());
        if (c.outliers) {
            const auto& r = t.gpu->getModel().nodeRule;
            EXPECT_GT(std::count(r.begin(), r.end(), lsh::kRuleDistance), 0) << c.name;
            EXPECT_GT(std::count(r.begin(), r.end(), lsh::kRuleProjection), 0) << c.name;
        }
        expectSameTwins(t, q.data(), 300, c.name);
        std::printf("[gpu twin] %s: %zu bucket keys, cuckoo load %.3f (%d attempt(s))\n", c.name,
                    t.gpu->numBucketKeys(), t.gpu->cuckooLoad(), t.gpu->cuckooAttempts());
        EXPECT_EQ(t.gpu->numBucketKeys(), t.cpu->getTables().bucketKeys.size()) << c.name;
    }
}

class GpuLshTwinReal : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuLshTwinReal, SameModelAndCandidatesOnRealData) {
    FAISS_EXT_REQUIRE_GPU();
    const std::string name = GetParam();
    // fashion-mnist: the first 18k rows, 200 more as queries (the GPU
    // machine's copy holds 20k rows); the others: all, 500 queries
    const bool fm = name == "fashion-mnist";
    // small (fashion-mnist): a prefix of 2500 rows keeps the training sort
    // past CUB's single tile (> 2304) and Auto on the work queue (> 256
    // candidates per query: ~800 at nprobe 1)
    const int64_t fmBase = test::sized<int64_t>(18000, 2500);
    const int64_t fmQueries = test::sized<int64_t>(200, 20);
    const lshtest::RealSet& s =
        lshtest::realVectors(name, fm ? fmBase : 0, fm ? fmQueries : 500);
    if (!s.missing.empty()) GTEST_SKIP() << name << ": " << s.missing;
    StandardGpuResources res;
    const lshtest::RecallPlan plan = lshtest::recallPlan(name);
    test::PartUnits units;  // the units: the recall plan's build, the default build
    if (units.next()) {
        const Twins t = buildTwins(&res, s.d, plan.config, s.nb, s.base.data());
        expectSameTwins(t, s.query.data(), s.nq, name + " (the recall plan's build)");
        // the plan's own settings
        for (int np : plan.nprobes) {
            SearchParametersBiLevelLSH p;
            p.nprobe = np;
            p.groupProbes = plan.groupProbes;
            const std::string d = candidateDifference(candidates(*t.cpu, s.query.data(), s.nq, 10, &p),
                                                      candidates(*t.gpu, s.query.data(), s.nq, 10, &p));
            EXPECT_TRUE(d.empty()) << name << ", " << describe(p) << ": " << d;
            expectSameResults(t, s.query.data(), s.nq, 10, p, name);
        }
    }
    if (units.next()) {
        // the default build
        const Twins t2 = buildTwins(&res, s.d, BiLevelLSHConfig(), s.nb, s.base.data());
        expectSameTwins(t2, s.query.data(), s.nq, name + " (default build)");
    }
}

INSTANTIATE_TEST_SUITE_P(RealSets, GpuLshTwinReal, ::testing::ValuesIn(lshtest::realSetNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             std::string n = info.param;
                             for (auto& ch : n)
                                 if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return n;
                         });

TEST(GpuLshTwin, SearchMatchesTheTwinForEveryShortListAndK) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 48;
    const int64_t n = 30000, nq = 400;
    const std::vector<float> x = clustered(n, d, kSeed + 11);
    const std::vector<float> q = clustered(nq, d, kSeed + 12);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 3;
    cfg.nTables = 8;
    cfg.nProjections = 6;
    cfg.bucketWidth = 1.f;
    const Twins t = buildTwins(&res, d, cfg, n, x.data());
    for (BiLevelShortList sl :
         {BiLevelShortList::Heap, BiLevelShortList::WorkQueue, BiLevelShortList::Auto}) {
        for (idx_t k : {idx_t(1), idx_t(10), idx_t(100), idx_t(500)}) {
            SearchParametersBiLevelLSH p;
            p.shortList = sl;
            p.nprobe = 8;
            p.groupProbes = 2;
            expectSameResults(t, q.data(), nq, k, p, "clustered 30k x 48");
            // few candidates: padding where fewer than k were found
            SearchParametersBiLevelLSH few;
            few.shortList = sl;
            few.tables = 1;
            few.minCandidates = 1;
            expectSameResults(t, q.data(), nq, k, few, "clustered 30k x 48, one table");
        }
    }
    // a selector: the same selected candidates ranked the same on both sides
    std::vector<uint8_t> bits(size_t((n + 7) / 8));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint8_t(0x9E3779B9u * (i + 1) >> 24);
    faiss::IDSelectorBitmap some(bits.size(), bits.data());
    faiss::IDSelectorRange run(n / 4, n / 2);
    for (const faiss::IDSelector* sel : {static_cast<const faiss::IDSelector*>(&some),
                                         static_cast<const faiss::IDSelector*>(&run)}) {
        for (BiLevelShortList sl : {BiLevelShortList::Heap, BiLevelShortList::WorkQueue}) {
            for (idx_t k : {idx_t(10), idx_t(100)}) {
                SearchParametersBiLevelLSH p;
                p.shortList = sl;
                p.nprobe = 8;
                p.sel = const_cast<faiss::IDSelector*>(sel);
                expectSameResults(t, q.data(), nq, k, p, "clustered 30k x 48, filtered");
                std::vector<float> D(size_t(nq) * k);
                std::vector<idx_t> I(size_t(nq) * k);
                t.gpu->search(nq, q.data(), k, D.data(), I.data(), &p);
                for (idx_t v : I) if (v >= 0) ASSERT_TRUE(sel->is_member(v)) << "label " << v;
            }
        }
    }
    // getCandidates lists every candidate: a selector there is refused
    {
        SearchParametersBiLevelLSH withSel;
        withSel.sel = &run;
        std::vector<idx_t> lims, cand;
        EXPECT_THROW(t.gpu->getCandidates(nq, q.data(), 10, &lims, &cand, &withSel),
                     faiss::FaissException);
    }
    // reconstruct / reconstruct_n give the stored vectors; bad keys throw
    std::vector<float> r(size_t(3) * d);
    t.gpu->reconstruct_n(n - 3, 3, r.data());
    EXPECT_EQ(r, std::vector<float>(x.end() - 3 * d, x.end()));
    t.gpu->reconstruct(5, r.data());
    EXPECT_EQ(std::vector<float>(r.begin(), r.begin() + d),
              std::vector<float>(x.begin() + 5 * d, x.begin() + 6 * d));
    EXPECT_THROW(t.gpu->reconstruct(n, r.data()), faiss::FaissException);
    EXPECT_THROW(t.gpu->reconstruct_n(n - 2, 3, r.data()), faiss::FaissException);
    // Auto picks the heap only up to heapMaxK, never past the heap's k = 1024
    const int maxK = t.gpu->getGpuConfig().heapMaxK;
    EXPECT_EQ(t.gpu->autoShortList(2000, 1.0), BiLevelShortList::WorkQueue);
    if (maxK < 1024) {
        EXPECT_EQ(t.gpu->autoShortList(maxK + 1, 1.0), BiLevelShortList::WorkQueue);
    }
    if (maxK >= 1) {
        EXPECT_EQ(t.gpu->autoShortList(1, 0.0), BiLevelShortList::Heap);
    }
}

// remove_ids on both twins: the same vectors stay, in the same order, and
// the GPU index keeps matching its twin; removing everything leaves a
// trained, empty index that takes new vectors.
TEST(GpuLshTwin, RemoveIdsKeepsMatchingTheTwin) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 24;
    const int64_t n = 20000, nq = 200;
    const std::vector<float> x = clustered(n, d, kSeed + 31);
    const std::vector<float> q = clustered(nq, d, kSeed + 32);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 3;
    cfg.nTables = 6;
    cfg.nProjections = 6;
    cfg.bucketWidth = 1.f;
    const Twins t = buildTwins(&res, d, cfg, n, x.data());
    faiss::IDSelectorRange run(1000, 6000);
    std::vector<uint8_t> bits(size_t((n + 7) / 8));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint8_t(0x9E3779B9u * (i + 3) >> 24);
    faiss::IDSelectorBitmap some(bits.size(), bits.data());
    for (const faiss::IDSelector* sel : {static_cast<const faiss::IDSelector*>(&run),
                                         static_cast<const faiss::IDSelector*>(&some)}) {
        const size_t cpuGone = t.cpu->remove_ids(*sel);
        EXPECT_EQ(t.gpu->remove_ids(*sel), cpuGone);
        ASSERT_EQ(t.gpu->ntotal, t.cpu->ntotal);
        std::vector<float> back(size_t(t.gpu->ntotal) * d);
        t.gpu->reconstruct_n(0, t.gpu->ntotal, back.data());
        EXPECT_EQ(back, t.cpu->getVectors());
        for (BiLevelShortList sl : {BiLevelShortList::Heap, BiLevelShortList::WorkQueue}) {
            SearchParametersBiLevelLSH p;
            p.shortList = sl;
            p.nprobe = 8;
            expectSameResults(t, q.data(), nq, 10, p, "clustered 20k x 24 after remove_ids");
        }
    }
    faiss::IDSelectorAll all;
    const int64_t left = t.gpu->ntotal;
    EXPECT_EQ(int64_t(t.gpu->remove_ids(all)), left);
    EXPECT_EQ(t.gpu->ntotal, 0);
    EXPECT_TRUE(t.gpu->is_trained);
    t.gpu->add(n, x.data());
    EXPECT_EQ(t.gpu->ntotal, n);
}

TEST(GpuLshTwin, CopyFromAndCopyToRoundTrip) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 40;
    const int64_t n = 8000;
    const std::vector<float> x = clustered(n, d, kSeed + 21);
    const std::vector<float> q = clustered(200, d, kSeed + 22);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 4;
    cfg.nTables = 5;
    cfg.nProjections = 7;
    cfg.seed = 99;
    IndexBiLevelLSH cpu(d, cfg);
    cpu.train(n, x.data());
    cpu.add(n, x.data());

    // CPU -> GPU (constructor and copyFrom), same candidates and results
    GpuIndexBiLevelLSH g1(&res, &cpu);
    GpuIndexBiLevelLSH g2(&res, d);
    g2.copyFrom(&cpu);
    for (GpuIndexBiLevelLSH* g : {&g1, &g2}) {
        EXPECT_EQ(g->ntotal, n);
        EXPECT_TRUE(g->is_trained);
        EXPECT_EQ(g->getBiLevelConfig().seed, 99u);
        EXPECT_EQ(lshtest::modelDifference(cpu.getModel(), g->getModel()), "");
        EXPECT_TRUE(g->getVectorsHost() == cpu.getVectors());
        SearchParametersBiLevelLSH p;
        p.nprobe = 6;
        p.groupProbes = 3;
        EXPECT_EQ(candidateDifference(candidates(cpu, q.data(), 200, 10, &p),
                                      candidates(*g, q.data(), 200, 10, &p)),
                  "");
    }

    // GPU -> CPU: copyTo and copyToCpuIndex give the original twin back
    IndexBiLevelLSH back(d);
    g1.copyTo(&back);
    std::unique_ptr<faiss::Index> back2(g1.copyToCpuIndex());
    const IndexBiLevelLSH* back2Twin = dynamic_cast<const IndexBiLevelLSH*>(back2.get());
    for (const IndexBiLevelLSH* b : {static_cast<const IndexBiLevelLSH*>(&back), back2Twin}) {
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(b->ntotal, n);
        EXPECT_EQ(lshtest::modelDifference(cpu.getModel(), b->getModel()), "");
        EXPECT_TRUE(b->getVectors() == cpu.getVectors());
        EXPECT_EQ(b->getTables().sortedIds, cpu.getTables().sortedIds);
        EXPECT_EQ(b->getConfig().seed, 99u);
    }

    // trained on the GPU, then copied: the CPU twin gives the GPU's candidates
    GpuIndexBiLevelLSH g3(&res, d, cfg);
    g3.train(n, x.data());
    g3.add(n, x.data());
    IndexBiLevelLSH fromGpu(d);
    g3.copyTo(&fromGpu);
    EXPECT_EQ(lshtest::modelDifference(fromGpu.getModel(), g3.getModel()), "");
    EXPECT_EQ(candidateDifference(candidates(fromGpu, q.data(), 200, 10, nullptr),
                                  candidates(g3, q.data(), 200, 10, nullptr)),
              "");

    // untrained and trained-but-empty indexes round trip too
    GpuIndexBiLevelLSH untrained(&res, d, cfg);
    IndexBiLevelLSH u(d);
    untrained.copyTo(&u);
    EXPECT_FALSE(u.is_trained);
    EXPECT_EQ(u.ntotal, 0);
    g3.reset();
    EXPECT_EQ(g3.ntotal, 0);
    IndexBiLevelLSH e(d);
    g3.copyTo(&e);
    EXPECT_TRUE(e.is_trained);
    EXPECT_EQ(e.ntotal, 0);
    GpuIndexBiLevelLSH g4(&res, &e);
    EXPECT_TRUE(g4.is_trained);
    EXPECT_EQ(g4.ntotal, 0);

    // a dimension mismatch is refused and changes nothing
    IndexBiLevelLSH other(d + 1, cfg);
    EXPECT_THROW(g1.copyFrom(&other), faiss::FaissException);
    EXPECT_THROW(g1.copyTo(&other), faiss::FaissException);
    EXPECT_EQ(g1.ntotal, n);
    EXPECT_EQ(lshtest::modelDifference(cpu.getModel(), g1.getModel()), "");
}

// ---- recall ----

TEST(GpuLshRecall, SiftsmallReaches90LikeTheCpuTwin) {
    FAISS_EXT_REQUIRE_GPU();
    const lshtest::RecallPlan plan = lshtest::recallPlan("siftsmall");
    const lshtest::RealSet& s = lshtest::realSet("siftsmall", plan.queries);
    if (!s.missing.empty()) GTEST_SKIP() << s.missing;
    StandardGpuResources res;
    const Twins t = buildTwins(&res, s.d, plan.config, s.nb, s.base.data());
    double best = 0;
    for (int np : plan.nprobes) {
        for (BiLevelShortList sl : {BiLevelShortList::Heap, BiLevelShortList::WorkQueue}) {
            SearchParametersBiLevelLSH p;
            p.nprobe = np;
            p.groupProbes = plan.groupProbes;
            p.shortList = sl;
            std::vector<float> Dg(size_t(s.nq) * 10), Dc(Dg.size());
            std::vector<idx_t> Ig(Dg.size()), Ic(Dg.size());
            t.gpu->search(s.nq, s.query.data(), 10, Dg.data(), Ig.data(), &p);
            t.cpu->search(s.nq, s.query.data(), 10, Dc.data(), Ic.data(), &p);
            const double rg = lshtest::recallAt10(s, s.nq, Ig.data(), 10);
            const double rc = lshtest::recallAt10(s, s.nq, Ic.data(), 10);
            std::printf("[gpu recall] siftsmall, %s: recall@10 GPU %.4f, CPU twin %.4f\n",
                        describe(p).c_str(), rg, rc);
            EXPECT_NEAR(rg, rc, 0.005)
                << describe(p) << ": the same candidates give the same recall (ties aside)";
            best = std::max(best, rg);
        }
    }
    EXPECT_GE(best, 0.9) << "no setting reached recall@10 0.9 on the GPU";
}

// ---- edge cases ----

TEST(GpuLshEdge, KAboveNtotalPadsAndEmptyIndexIsAllPadding) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    const std::vector<float> x = clustered(50, d, kSeed + 31);
    const std::vector<float> q = clustered(9, d, kSeed + 32);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 2;
    cfg.nTables = 3;
    cfg.nProjections = 4;
    const Twins t = buildTwins(&res, d, cfg, 50, x.data());
    for (BiLevelShortList sl :
         {BiLevelShortList::Heap, BiLevelShortList::WorkQueue, BiLevelShortList::Auto}) {
        for (idx_t k : {idx_t(50), idx_t(64), idx_t(700)}) {
            SearchParametersBiLevelLSH p;
            p.shortList = sl;
            p.groupProbes = 4;
            p.minCandidates = 1000;  // widen to whole groups: all 50 found
            std::vector<float> D(size_t(9) * k);
            std::vector<idx_t> I(size_t(9) * k);
            t.gpu->search(9, q.data(), k, D.data(), I.data(), &p);
            for (int i = 0; i < 9; ++i) {
                for (idx_t j = 0; j < k; ++j) {
                    if (j < 50) {
                        EXPECT_GE(I[i * k + j], 0) << "k " << k << " query " << i << " rank " << j;
                    } else {
                        EXPECT_EQ(I[i * k + j], -1) << "k " << k << " query " << i << " rank " << j;
                        EXPECT_TRUE(std::isinf(D[i * k + j]) && D[i * k + j] > 0);
                    }
                }
            }
            expectSameResults(t, q.data(), 9, k, p, "50 vectors");
        }
    }
    // trained, empty: every result is padding
    GpuIndexBiLevelLSH empty(&res, d, cfg);
    empty.train(50, x.data());
    std::vector<float> D(9 * 5, 0.f);
    std::vector<idx_t> I(9 * 5, 0);
    empty.search(9, q.data(), 5, D.data(), I.data());
    for (int i = 0; i < 45; ++i) {
        EXPECT_EQ(I[i], -1);
        EXPECT_TRUE(std::isinf(D[i]));
    }
    std::vector<idx_t> lims, ids;
    empty.getCandidates(9, q.data(), 5, &lims, &ids);
    EXPECT_EQ(lims, std::vector<idx_t>(10, 0));
}

TEST(GpuLshEdge, NqZeroAndOneAndDeviceMemory) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 24;
    const int64_t n = 4000;
    const std::vector<float> x = clustered(n, d, kSeed + 41);
    const std::vector<float> q = clustered(33, d, kSeed + 42);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 3;
    cfg.nTables = 4;
    const Twins t = buildTwins(&res, d, cfg, n, x.data());
    // nq = 0: nothing written
    std::vector<float> D(10, 7.f);
    std::vector<idx_t> I(10, 7);
    t.gpu->search(0, q.data(), 10, D.data(), I.data());
    EXPECT_EQ(D, std::vector<float>(10, 7.f));
    EXPECT_EQ(I, std::vector<idx_t>(10, 7));
    std::vector<idx_t> lims, ids;
    t.gpu->getCandidates(0, q.data(), 10, &lims, &ids);
    EXPECT_EQ(lims, std::vector<idx_t>{0});
    // nq = 1, every short list
    for (BiLevelShortList sl : {BiLevelShortList::Heap, BiLevelShortList::WorkQueue}) {
        SearchParametersBiLevelLSH p;
        p.shortList = sl;
        p.nprobe = 4;
        for (idx_t k : {idx_t(1), idx_t(10), idx_t(100)})
            expectSameResults(t, q.data(), 1, k, p, "nq = 1");
    }
    // queries and results in device memory: the same as from the host
    const idx_t nq = 33, k = 10;
    float* dq = nullptr;
    float* dD = nullptr;
    idx_t* dI = nullptr;
    ASSERT_EQ(cudaMalloc(&dq, q.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dD, nq * k * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dI, nq * k * sizeof(idx_t)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dq, q.data(), q.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    faiss_ext::test::syncAfterHostCopy();
    t.gpu->search(nq, dq, k, dD, dI);
    std::vector<float> Dd(nq * k), Dh(nq * k);
    std::vector<idx_t> Id(nq * k), Ih(nq * k);
    ASSERT_EQ(cudaMemcpy(Dd.data(), dD, Dd.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(Id.data(), dI, Id.size() * sizeof(idx_t), cudaMemcpyDeviceToHost),
              cudaSuccess);
    t.gpu->search(nq, q.data(), k, Dh.data(), Ih.data());
    EXPECT_TRUE(Dd == Dh && Id == Ih) << "device pointers gave other results than host pointers";
    // training and adding from device memory: the same model and candidates
    float* dx = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, x.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    faiss_ext::test::syncAfterHostCopy();
    GpuIndexBiLevelLSH fromDev(&res, d, cfg);
    fromDev.train(n, dx);
    fromDev.add(n, dx);
    EXPECT_EQ(lshtest::modelDifference(t.cpu->getModel(), fromDev.getModel()), "");
    EXPECT_EQ(candidateDifference(candidates(*t.cpu, q.data(), nq, 10, nullptr),
                                  candidates(fromDev, q.data(), nq, 10, nullptr)),
              "");
    cudaFree(dx);
    cudaFree(dq);
    cudaFree(dD);
    cudaFree(dI);
}

TEST(GpuLshEdge, OddDimensions) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (int d : {1, 3, 97}) {
        const int64_t n = 6000;
        const std::vector<float> x = clustered(n, d, kSeed + d);
        const std::vector<float> q = clustered(100, d, kSeed + 100 + d);
        BiLevelLSHConfig cfg;
        cfg.treeDepth = 3;
        cfg.nTables = 4;
        cfg.nProjections = d == 1 ? 2 : 6;
        cfg.bucketWidth = 1.f;
        const Twins t = buildTwins(&res, d, cfg, n, x.data());
        const std::string what = "d = " + std::to_string(d);
        expectSameTwins(t, q.data(), 100, what);
        for (BiLevelShortList sl : {BiLevelShortList::Heap, BiLevelShortList::WorkQueue}) {
            SearchParametersBiLevelLSH p;
            p.shortList = sl;
            p.nprobe = 4;
            p.groupProbes = 2;
            for (idx_t k : {idx_t(1), idx_t(10), idx_t(100)})
                expectSameResults(t, q.data(), 100, k, p, what);
        }
    }
}

TEST(GpuLshEdge, BadInputIsRefusedAndChangesNothing) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    const std::vector<float> x = clustered(1000, d, kSeed + 51);
    std::vector<float> q = clustered(5, d, kSeed + 52);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 2;
    cfg.nTables = 3;
    GpuIndexBiLevelLSH idx(&res, d, cfg);
    std::vector<float> D(50);
    std::vector<idx_t> I(50);
    EXPECT_THROW(idx.add(10, x.data()), faiss::FaissException) << "add before train";
    EXPECT_THROW(idx.search(5, q.data(), 10, D.data(), I.data()), faiss::FaissException)
        << "search before train";
    EXPECT_THROW(idx.train(3, x.data()), faiss::FaissException) << "too few training vectors";
    std::vector<float> bad = x;
    bad[17 * d + 3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THROW(idx.train(1000, bad.data()), faiss::FaissException) << "NaN training vector";
    EXPECT_FALSE(idx.is_trained);
    idx.train(1000, x.data());
    idx.add(1000, x.data());
    const BiLevelLSHModel model = idx.getModel();
    std::vector<float> D0(50);
    std::vector<idx_t> I0(50);
    idx.search(5, q.data(), 10, D0.data(), I0.data());
    EXPECT_THROW(idx.add(10, bad.data() + 10 * d), faiss::FaissException) << "NaN vector added";
    EXPECT_THROW(idx.train(1000, x.data()), faiss::FaissException) << "train on a non-empty index";
    EXPECT_THROW(idx.search(5, q.data(), 0, D.data(), I.data()), faiss::FaissException) << "k = 0";
    std::vector<float> badQ = q;
    badQ[2 * d] = std::numeric_limits<float>::infinity();
    EXPECT_THROW(idx.search(5, badQ.data(), 10, D.data(), I.data()), faiss::FaissException)
        << "Inf query";
    SearchParametersBiLevelLSH p;
    p.nprobe = 0;
    EXPECT_THROW(idx.search(5, q.data(), 10, D.data(), I.data(), &p), faiss::FaissException)
        << "nprobe 0";
    p = SearchParametersBiLevelLSH();
    p.tables = 4;
    EXPECT_THROW(idx.search(5, q.data(), 10, D.data(), I.data(), &p), faiss::FaissException)
        << "tables > L";
    p = SearchParametersBiLevelLSH();
    p.minCandidates = -1;
    EXPECT_THROW(idx.search(5, q.data(), 10, D.data(), I.data(), &p), faiss::FaissException)
        << "minCandidates";
    p = SearchParametersBiLevelLSH();
    p.shortList = BiLevelShortList::Heap;
    std::vector<float> Dk(5 * 1025);
    std::vector<idx_t> Ik(5 * 1025);
    EXPECT_THROW(idx.search(5, q.data(), 1025, Dk.data(), Ik.data(), &p), faiss::FaissException)
        << "the heap past k = 1024";
    faiss::SearchParametersIVF ivf;
    EXPECT_THROW(idx.search(5, q.data(), 10, D.data(), I.data(), &ivf), faiss::FaissException)
        << "params of another type";
    GpuIndexBiLevelLSHConfig badGpu;
    badGpu.heapMaxK = 2000;
    EXPECT_THROW(std::make_unique<GpuIndexBiLevelLSH>(&res, d, BiLevelLSHConfig(), badGpu),
                 faiss::FaissException);
    BiLevelLSHConfig badCfg;
    badCfg.nTables = 0;
    EXPECT_THROW(std::make_unique<GpuIndexBiLevelLSH>(&res, d, badCfg), faiss::FaissException);
    // unchanged
    EXPECT_EQ(idx.ntotal, 1000);
    EXPECT_EQ(lshtest::modelDifference(model, idx.getModel()), "");
    idx.search(5, q.data(), 10, D.data(), I.data());
    EXPECT_TRUE(D == D0 && I == I0);
}

// ---- compute-sanitizer ----

TEST(LshSanitize, SmallBuildSearchAndTables) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    cudaStream_t stream = res.getResources()->getDefaultStream(0);
    const std::vector<uint64_t> keys = distinctKeys(2000, kSeed);
    GpuCuckooHashTable table;
    table.buildFromHost(keys.data(), keys.size(), 4, 0.9f, kSeed, stream);
    std::vector<uint64_t> ask = keys;
    ask.push_back(42);
    const std::vector<int64_t> got = table.findHost(ask, stream);
    for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(got[i], int64_t(i));

    const int d = 12;
    const int64_t n = 1500, nq = 20;
    const std::vector<float> x = lshtest::coreAndOutliers(n, d, kSeed);
    const std::vector<float> q = lshtest::coreAndOutliers(nq, d, kSeed + 1);
    BiLevelLSHConfig cfg;
    cfg.treeDepth = 3;
    cfg.nTables = 2;
    cfg.nProjections = 5;
    GpuIndexBiLevelLSHConfig gcfg;
    gcfg.workQueueBytes = size_t(1) << 20;  // the smallest work queue: several batches
    const Twins t = buildTwins(&res, d, cfg, n, x.data(), gcfg);
    EXPECT_EQ(lshtest::modelDifference(t.cpu->getModel(), t.gpu->getModel()), "");
    for (BiLevelShortList sl :
         {BiLevelShortList::Heap, BiLevelShortList::WorkQueue, BiLevelShortList::Auto}) {
        for (idx_t k : {idx_t(1), idx_t(10), idx_t(100)}) {
            SearchParametersBiLevelLSH p;
            p.shortList = sl;
            p.nprobe = 4;
            p.groupProbes = 2;
            p.minCandidates = 30;
            expectSameResults(t, q.data(), nq, k, p, "sanitizer case");
        }
    }
    SearchParametersBiLevelLSH p;
    p.nprobe = 3;
    p.groupProbes = 8;
    p.groupMargin = 0.05f;
    EXPECT_EQ(candidateDifference(candidates(*t.cpu, q.data(), nq, 10, &p),
                                  candidates(*t.gpu, q.data(), nq, 10, &p)),
              "");
    // the E8 codes (table build and query kernels) and a data-driven width
    // sample gathered from device memory
    BiLevelLSHConfig e8 = cfg;
    e8.nProjections = 8;
    e8.lattice = lsh::kLatticeE8;
    const Twins te = buildTwins(&res, d, e8, n, x.data(), gcfg);
    SearchParametersBiLevelLSH pe;
    pe.minCandidates = 30;
    pe.groupProbes = 4;
    pe.groupMargin = 0.1f;
    expectSameResults(te, q.data(), nq, 10, pe, "sanitizer case, E8");
    float* dx = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), x.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    faiss_ext::test::syncAfterHostCopy();
    GpuIndexBiLevelLSH fromDevice(&res, d, cfg, gcfg);
    fromDevice.train(n, dx);
    cudaFree(dx);
    EXPECT_EQ(lshtest::modelDifference(t.cpu->getModel(), fromDevice.getModel()), "");

    GpuIndexBiLevelLSH copy(&res, t.cpu.get());
    IndexBiLevelLSH back(d);
    copy.copyTo(&back);
    EXPECT_TRUE(back.getVectors() == t.cpu->getVectors());
    copy.reset();
    copy.add(n / 2, x.data());
    std::vector<float> D(nq * 10);
    std::vector<idx_t> I(nq * 10);
    copy.search(nq, q.data(), 10, D.data(), I.data());
}

}  // namespace
}  // namespace faiss_ext
