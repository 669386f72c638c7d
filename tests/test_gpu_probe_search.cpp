// The probe search that answers a search graph's queries unlike the data
// (impl/graph/ProbeSearch.h) over its probe lists (impl/graph/ProbeLists.h):
// the lists partition the rows (each once, increasing within a list, each
// in the list of its nearest centre); a probe's results equal an exact
// search, computed here in double, restricted to the lists that the
// centres' own search names for each query (so the scan and the merge are
// checked, not the choice of lists); current answers merged in count each
// row once (the exact answers stay exact; random ones give the k best of
// both); a selection's bitmap keeps the rows outside it out; probing
// every list equals faiss::IndexFlat, for squared L2 and for similarities
// (largest first);
// lists with fewer than k vectors leave -1 labels; bad requests are refused
// before anything is written.
#include <cuda_runtime_api.h>
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "DeviceBuffer.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"
#include "faiss_ext/gpu/impl/graph/ProbeLists.h"
#include "faiss_ext/gpu/impl/graph/ProbeSearch.h"

using namespace faiss_ext;
using namespace faiss_ext::gpu;
using namespace faiss_ext::test;

namespace {

constexpr int kD = 32;

/// Rows scaled to unit length (the vectors of a cosine index).
std::vector<float> unitRows(std::vector<float> x, int d) {
    for (size_t i = 0; i < x.size() / d; ++i) {
        double s = 0;
        for (int t = 0; t < d; ++t) s += double(x[i * d + t]) * x[i * d + t];
        const float inv = float(1.0 / std::sqrt(std::max(s, 1e-30)));
        for (int t = 0; t < d; ++t) x[i * d + t] *= inv;
    }
    return x;
}

struct Results {
    std::vector<float> D;
    std::vector<int64_t> I;
};

/// probeSearch of the host queries q (nq x kD) over lists (merging
/// `current` answers when given).
Results probe(StandardGpuResources& res, const graph::ProbeLists& lists,
              const std::vector<float>& q, int64_t nq, int64_t k, int probes, bool similarity,
              const Results* current = nullptr, const std::vector<uint32_t>* keepWords = nullptr) {
    DeviceBuffer<uint32_t> dKeep(keepWords ? *keepWords : std::vector<uint32_t>());
    DeviceBuffer<float> dq(q);
    DeviceBuffer<float> dD(current ? current->D : std::vector<float>(size_t(nq * k), 7.f));
    DeviceBuffer<int64_t> dI(current ? current->I : std::vector<int64_t>(size_t(nq * k), 7));
    graph::ProbeRequest r;
    r.queries = dq.p;
    r.m = nq;
    r.k = k;
    r.probes = probes;
    r.similarity = similarity;
    r.distances = dD.p;
    r.labels = dI.p;
    r.mergeCurrent = current != nullptr;
    r.keepBits = keepWords ? dKeep.p : nullptr;
    graph::probeSearch(res.getResources().get(), 0, lists, r);
    return Results{dD.toHost(), dI.toHost()};
}

/// The lists each query probes: the centres' exact search, as probeSearch runs it.
std::vector<int64_t> probedLists(StandardGpuResources& res, const graph::ProbeLists& lists,
                                 const std::vector<float>& q, int64_t nq, int probes) {
    DeviceBuffer<float> dq(q), dD(std::vector<float>(size_t(nq * probes)));
    DeviceBuffer<int64_t> dI(std::vector<int64_t>(size_t(nq * probes)));
    FlatSearchOptions o =
        planFlatSearch(lists.lists(), true, FlatMetric::L2, kD, nq, probes, FlatSearchRequest());
    o.queriesPrepared = true;
    lists.centres().search(dq.p, nq, probes, dD.p, dI.p, o);
    return dI.toHost();
}

/// The lists' rows on the host.
std::vector<uint32_t> hostRows(const graph::ProbeLists& lists) {
    std::vector<uint32_t> rows(size_t(lists.size()));
    FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
    FAISS_EXT_CUDA_CHECK(cudaMemcpy(rows.data(), lists.rows(), sizeof(uint32_t) * rows.size(),
                                    cudaMemcpyDeviceToHost));
    return rows;
}

/// The key of row `row` of x for query row i of q, in double.
double keyOf(const std::vector<float>& x, int64_t row, const std::vector<float>& q, int64_t i,
             bool similarity) {
    double key = 0;
    for (int t = 0; t < kD; ++t) {
        const double a = q[size_t(i) * kD + t], b = x[size_t(row) * kD + t];
        key += similarity ? -a * b : (a - b) * (a - b);
    }
    return key;
}

/// The exact k best (double precision; ties by row) of each query among the
/// rows of its probed lists (and the rows of `current`, each row once), in
/// the probe's conventions.
Results restrictedExact(const graph::ProbeLists& lists, const std::vector<float>& x,
                        const std::vector<float>& q, int64_t nq, int64_t k,
                        const std::vector<int64_t>& probed, int probes, bool similarity,
                        const Results* current = nullptr,
                        const std::vector<uint32_t>* keepWords = nullptr) {
    const std::vector<uint32_t> rows = hostRows(lists);
    const std::vector<int64_t>& off = lists.hostOffsets();
    Results ref{std::vector<float>(size_t(nq * k)), std::vector<int64_t>(size_t(nq * k), -1)};
    for (int64_t i = 0; i < nq; ++i) {
        std::set<int64_t> held;
        for (int s = 0; s < probes; ++s) {
            const int64_t l = probed[size_t(i * probes + s)];
            for (int64_t p = off[size_t(l)]; p < off[size_t(l) + 1]; ++p) {
                const uint32_t row = rows[size_t(p)];
                if (!keepWords || (((*keepWords)[row >> 5] >> (row & 31)) & 1u)) held.insert(row);
            }
        }
        for (int64_t j = 0; current && j < k; ++j) {
            if (current->I[size_t(i * k + j)] >= 0) held.insert(current->I[size_t(i * k + j)]);
        }
        std::vector<std::pair<double, int64_t>> cand;
        for (int64_t row : held) cand.emplace_back(keyOf(x, row, q, i, similarity), row);
        std::sort(cand.begin(), cand.end());
        for (int64_t j = 0; j < k; ++j) {
            const bool has = j < int64_t(cand.size());
            const double key =
                has ? cand[size_t(j)].first : std::numeric_limits<double>::infinity();
            ref.D[size_t(i * k + j)] = float(similarity ? -key : key);
            if (has) ref.I[size_t(i * k + j)] = cand[size_t(j)].second;
        }
    }
    return ref;
}

/// Clustered vectors and uniform queries (unit rows for similarities).
struct ProbeData {
    std::vector<float> x, q;
    ProbeData(int64_t nb, int64_t nq, uint64_t seed, bool similarity)
        : x(clusteredVectors(nb, kD, 40, seed)), q(randomVectors(nq, kD, seed + 1, -2.f, 2.f)) {
        if (similarity) {
            x = unitRows(x, kD);
            q = unitRows(q, kD);
        }
    }
};

/// compareKnn at the probe tests' tolerances ("" when r matches ref).
std::string matches(const Results& r, const Results& ref, int64_t nq, int64_t k, bool similarity) {
    return compareKnn(nq, k, r.D.data(), r.I.data(), ref.D.data(), ref.I.data(), similarity, 1e-4f,
                      1e-3f);
}

Results flatSearch(const std::vector<float>& x, const std::vector<float>& q, int64_t nq, int64_t k,
                   bool ip) {
    std::unique_ptr<faiss::IndexFlat> flat(ip ? (faiss::IndexFlat*)new faiss::IndexFlatIP(kD)
                                              : new faiss::IndexFlatL2(kD));
    flat->add(int64_t(x.size()) / kD, x.data());
    Results r{std::vector<float>(size_t(nq * k)), std::vector<int64_t>(size_t(nq * k))};
    flat->search(nq, q.data(), k, r.D.data(), r.I.data());
    return r;
}

}  // namespace

TEST(GpuProbeLists, PartitionEveryRowOnceByNearestCentre) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(5000, 2000);
    const std::vector<float> x = clusteredVectors(nb, kD, 20, kSeed);
    DeviceBuffer<float> dx(x);
    graph::ProbeLists lists(res.getResources().get(), 0, res.getResources()->getDefaultStream(0),
                            dx.p, nb, kD);
    EXPECT_EQ(lists.lists(), graph::probeListCount(nb));
    EXPECT_EQ(lists.lists(), std::llround(4.0 * std::sqrt(double(nb))));
    const std::vector<int64_t>& off = lists.hostOffsets();
    ASSERT_EQ(off.size(), size_t(lists.lists()) + 1);
    EXPECT_EQ(off.front(), 0);
    EXPECT_EQ(off.back(), nb);
    std::vector<float> centres(size_t(lists.lists()) * kD);
    lists.centres().copyVectors(0, lists.lists(), centres.data());
    const std::vector<uint32_t> rows = hostRows(lists);
    std::vector<int> seen(size_t(nb), 0);
    for (int64_t l = 0; l < lists.lists(); ++l) {
        ASSERT_LE(off[size_t(l)], off[size_t(l) + 1]);
        for (int64_t p = off[size_t(l)]; p < off[size_t(l) + 1]; ++p) {
            const uint32_t row = rows[size_t(p)];
            ASSERT_LT(row, uint32_t(nb));
            ++seen[row];
            if (p > off[size_t(l)]) EXPECT_LT(rows[size_t(p) - 1], row) << "list " << l;
            // the row's list is its nearest centre (up to FP32 rounding)
            double own = 0, best = std::numeric_limits<double>::infinity();
            for (int64_t c = 0; c < lists.lists(); ++c) {
                double s = 0;
                for (int t = 0; t < kD; ++t) {
                    const double a = double(x[size_t(row) * kD + t]) - centres[size_t(c) * kD + t];
                    s += a * a;
                }
                best = std::min(best, s);
                if (c == l) own = s;
            }
            EXPECT_LE(own, best * (1 + 1e-4) + 1e-4) << "row " << row;
        }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), nb);
}

TEST(GpuProbeSearch, EqualsExactSearchOverTheProbedLists) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(20000, 4000), nq = 200;
    for (bool similarity : {false, true}) {
        const ProbeData data(nb, nq, kSeed, similarity);
        const std::vector<float>&x = data.x, &q = data.q;
        DeviceBuffer<float> dx(x);
        graph::ProbeLists lists(res.getResources().get(), 0,
                                res.getResources()->getDefaultStream(0), dx.p, nb, kD);
        for (int64_t k : {int64_t(1), int64_t(10), int64_t(33), int64_t(graph::kProbeMaxK)}) {
            for (int probes : {1, 8, 40}) {
                SCOPED_TRACE("similarity " + std::to_string(similarity) + " k " +
                             std::to_string(k) + " probes " + std::to_string(probes));
                const Results r = probe(res, lists, q, nq, k, probes, similarity);
                const Results ref = restrictedExact(
                    lists, x, q, nq, k, probedLists(res, lists, q, nq, probes), probes, similarity);
                EXPECT_EQ(matches(r, ref, nq, k, similarity), "");
            }
        }
    }
}

// A graph search's answers merged in: the exact ones (IndexFlat's) stay
// exact however few lists are probed, each row once though the probe finds
// them again; random rows with their distances (some rows -1 padded) give
// the k best of them and of the probed lists.
TEST(GpuProbeSearch, MergesCurrentAnswersCountingEachRowOnce) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(20000, 4000), nq = 150;
    for (bool similarity : {false, true}) {
        const ProbeData data(nb, nq, kSeed + 11, similarity);
        const std::vector<float>&x = data.x, &q = data.q;
        DeviceBuffer<float> dx(x);
        graph::ProbeLists lists(res.getResources().get(), 0,
                                res.getResources()->getDefaultStream(0), dx.p, nb, kD);
        for (int64_t k : {int64_t(10), int64_t(graph::kProbeMaxK)}) {
            SCOPED_TRACE("similarity " + std::to_string(similarity) + " k " + std::to_string(k));
            const Results truth = flatSearch(x, q, nq, k, similarity);
            for (int probes : {1, 4}) {
                const Results r = probe(res, lists, q, nq, k, probes, similarity, &truth);
                EXPECT_EQ(matches(r, truth, nq, k, similarity), "");
            }
            Results randomRows{std::vector<float>(size_t(nq * k)),
                               std::vector<int64_t>(size_t(nq * k))};
            std::mt19937_64 rng(kSeed + uint64_t(k));
            for (int64_t i = 0; i < nq; ++i) {
                std::vector<std::pair<double, int64_t>> seeds;
                std::set<int64_t> drawn;
                const int64_t valid = i % 3 == 0 ? k / 2 : k;  // some rows -1 padded
                while (int64_t(drawn.size()) < valid) drawn.insert(int64_t(rng() % uint64_t(nb)));
                for (int64_t row : drawn) seeds.emplace_back(keyOf(x, row, q, i, similarity), row);
                std::sort(seeds.begin(), seeds.end());
                for (int64_t j = 0; j < k; ++j) {
                    const bool has = j < valid;
                    const double key = has ? seeds[size_t(j)].first : INFINITY;
                    randomRows.D[size_t(i * k + j)] = float(similarity ? -key : key);
                    randomRows.I[size_t(i * k + j)] = has ? seeds[size_t(j)].second : -1;
                }
            }
            const int probes = 3;
            const Results r = probe(res, lists, q, nq, k, probes, similarity, &randomRows);
            const Results ref =
                restrictedExact(lists, x, q, nq, k, probedLists(res, lists, q, nq, probes), probes,
                                similarity, &randomRows);
            EXPECT_EQ(matches(r, ref, nq, k, similarity), "");
        }
    }
}

// A selection (filtered search): rows outside it are never results, the
// current answers (selected ones) are merged in as before; every list
// probed gives IndexFlat's results over the selected vectors.
TEST(GpuProbeSearch, SkipsRowsOutsideTheSelection) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(20000, 4000), nq = 120, k = 10;
    const ProbeData data(nb, nq, kSeed + 21, false);
    DeviceBuffer<float> dx(data.x);
    graph::ProbeLists lists(res.getResources().get(), 0, res.getResources()->getDefaultStream(0),
                            dx.p, nb, kD);
    std::mt19937_64 rng(kSeed + 22);
    std::vector<uint32_t> words(size_t((nb + 31) / 32), 0);
    std::vector<int64_t> selected;
    for (int64_t r = 0; r < nb; ++r) {
        if (rng() % 10 < 6) {  // about 60%
            words[size_t(r >> 5)] |= 1u << (r & 31);
            selected.push_back(r);
        }
    }
    const int probes = 6;
    const Results r = probe(res, lists, data.q, nq, k, probes, false, nullptr, &words);
    for (int64_t id : r.I) {
        if (id >= 0) ASSERT_TRUE((words[size_t(id >> 5)] >> (id & 31)) & 1u) << id;
    }
    const std::vector<int64_t> probed = probedLists(res, lists, data.q, nq, probes);
    EXPECT_EQ(matches(r,
                      restrictedExact(lists, data.x, data.q, nq, k, probed, probes, false, nullptr,
                                      &words),
                      nq, k, false),
              "");
    // every list: IndexFlat over the selected vectors (labels mapped back)
    std::vector<float> xs;
    for (int64_t row : selected)
        xs.insert(xs.end(), &data.x[size_t(row) * kD], &data.x[size_t(row + 1) * kD]);
    Results all = probe(res, lists, data.q, nq, k, int(lists.lists()), false, nullptr, &words);
    Results ref = flatSearch(xs, data.q, nq, k, false);
    for (int64_t& id : ref.I) {
        if (id >= 0) id = selected[size_t(id)];
    }
    EXPECT_EQ(matches(all, ref, nq, k, false), "");
}

// Probing every list (or more) is an exact search.
TEST(GpuProbeSearch, EveryListEqualsIndexFlat) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = 3000, nq = 100, k = 10;
    const std::vector<float> x = clusteredVectors(nb, kD, 10, kSeed + 5);
    const std::vector<float> q = randomVectors(nq, kD, kSeed + 6, -1.f, 1.f);
    DeviceBuffer<float> dx(x);
    graph::ProbeLists lists(res.getResources().get(), 0, res.getResources()->getDefaultStream(0),
                            dx.p, nb, kD);
    for (int probes : {int(lists.lists()), int(lists.lists()) + 100}) {
        const Results r = probe(res, lists, q, nq, k, probes, false);
        const Results ref = flatSearch(x, q, nq, k, false);
        EXPECT_EQ(matches(r, ref, nq, k, false), "");
    }
}

// 20 vectors in 18 lists: one list holds fewer than k = 10, so a query
// probing one list gets as many results as its list holds, then -1 labels
// at +inf (-inf for similarities).
TEST(GpuProbeSearch, ShortListsLeaveMinusOneLabels) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = 20, nq = 30, k = 10;
    const std::vector<float> x = randomVectors(nb, kD, kSeed + 7);
    const std::vector<float> q = randomVectors(nq, kD, kSeed + 8);
    DeviceBuffer<float> dx(x);
    graph::ProbeLists lists(res.getResources().get(), 0, res.getResources()->getDefaultStream(0),
                            dx.p, nb, kD);
    ASSERT_EQ(lists.lists(), 18);
    for (bool similarity : {false, true}) {
        const Results r = probe(res, lists, q, nq, k, 1, similarity);
        const std::vector<int64_t> probed = probedLists(res, lists, q, nq, 1);
        for (int64_t i = 0; i < nq; ++i) {
            const int64_t l = probed[size_t(i)];
            const int64_t held =
                lists.hostOffsets()[size_t(l) + 1] - lists.hostOffsets()[size_t(l)];
            for (int64_t j = 0; j < k; ++j) {
                const size_t e = size_t(i * k + j);
                if (j < held) {
                    EXPECT_GE(r.I[e], 0);
                    EXPECT_TRUE(std::isfinite(r.D[e]));
                } else {
                    EXPECT_EQ(r.I[e], -1);
                    EXPECT_EQ(r.D[e], similarity ? -INFINITY : INFINITY);
                }
            }
        }
        const Results ref = restrictedExact(lists, x, q, nq, k, probed, 1, similarity);
        EXPECT_EQ(matches(r, ref, nq, k, similarity), "");
    }
}

TEST(GpuProbeSearch, RefusesBadRequestsBeforeWriting) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = 500, nq = 4;
    const std::vector<float> x = randomVectors(nb, kD, kSeed + 9);
    DeviceBuffer<float> dx(x);
    graph::ProbeLists lists(res.getResources().get(), 0, res.getResources()->getDefaultStream(0),
                            dx.p, nb, kD);
    EXPECT_FALSE(graph::probeSearchApplies(0, kD, 0));
    EXPECT_FALSE(graph::probeSearchApplies(graph::kProbeMaxK + 1, kD, 0));
    EXPECT_TRUE(graph::probeSearchApplies(graph::kProbeMaxK, kD, 0));
    EXPECT_FALSE(graph::probeSearchApplies(10, 1 << 16, 0));  // a list tile would not fit
    struct Bad {
        int64_t k;
        int probes;
    };
    for (const Bad b : {Bad{0, 4}, Bad{graph::kProbeMaxK + 1, 4}, Bad{10, 0}, Bad{10, -3}}) {
        const int64_t k = std::max<int64_t>(b.k, 1);
        DeviceBuffer<float> dq(std::vector<float>(size_t(nq) * kD, 0.5f));
        DeviceBuffer<float> dD(std::vector<float>(size_t(nq * k), 7.f));
        DeviceBuffer<int64_t> dI(std::vector<int64_t>(size_t(nq * k), 7));
        graph::ProbeRequest r;
        r.queries = dq.p;
        r.m = nq;
        r.k = b.k;
        r.probes = b.probes;
        r.distances = dD.p;
        r.labels = dI.p;
        EXPECT_THROW(graph::probeSearch(res.getResources().get(), 0, lists, r),
                     faiss::FaissException);
        EXPECT_EQ(dD.toHost()[0], 7.f);
        EXPECT_EQ(dI.toHost()[0], 7);
    }
}
