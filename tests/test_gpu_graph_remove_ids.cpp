// remove_ids on the graph indexes: GpuKnnGraphGNND's lists against the old
// lists filtered and renumbered on the host (exact oracle), its vectors as
// faiss::IndexFlat renumbers them; GpuIndexSearchGraph's recall after 10%
// and 50% removed against a fresh build of the survivors, the patch of a
// small removal row by row against a host oracle, adds after
// removals, IndexIDMap2 around it, the CPU twin after removals, and
// removals the index cannot take refused with the index unchanged.
#include "GnndTestUtils.h"
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/IdSelection.h"
#include "faiss_ext/gpu/utils/RemovalMapping.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuIndexSearchGraph;
using faiss_ext::gpu::GpuKnnGraphGNND;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;
namespace gnndtest = faiss_ext::gnndtest;

namespace {

/// Keeps ids in a hash-picked fraction (per 1000).
struct HashSelector : faiss::IDSelector {
    uint64_t per1000;
    explicit HashSelector(uint64_t p) : per1000(p) {}
    bool is_member(idx_t id) const override {
        return ((uint64_t(id) * 0x9E3779B97F4A7C15ull) >> 33) % 1000 < per1000;
    }
};

/// The rows of x that sel does not select, in order.
std::vector<float> survivors(const std::vector<float>& x, int d, const faiss::IDSelector& sel) {
    std::vector<float> out;
    const int64_t n = int64_t(x.size()) / d;
    for (int64_t i = 0; i < n; ++i) {
        if (!sel.is_member(i)) out.insert(out.end(), x.begin() + i * d, x.begin() + (i + 1) * d);
    }
    return out;
}

/// Recall@10 of a search graph over its stored vectors `x` (raw).
double graphRecall(StandardGpuResources& res, const GpuIndexSearchGraph& index,
                   const std::vector<float>& x, const std::vector<float>& q, FlatMetric m) {
    const int d = index.d, k = 10;
    const int64_t nq = int64_t(q.size()) / d;
    std::vector<float> D(size_t(nq * k));
    std::vector<int64_t> I(size_t(nq * k));
    index.search(nq, q.data(), k, D.data(), I.data());
    for (int64_t v : I) EXPECT_LT(v, index.ntotal);
    return gnndtest::recallAgainstExactIndex(res, x, index.ntotal, q, nq, d, k, I, m);
}

}  // namespace

TEST(GpuGraphRemoveIds, KnnListsAreTheOldListsFilteredAndRenumbered) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 24, k = 32;
    const int64_t n = 6000;
    const auto x = clusteredVectors(n, d, 12, kSeed);
    GpuKnnGraphGNND index(&res, d, k);
    index.add(n, x.data());
    const gnndtest::Graph before = gnndtest::fetchGraph(index);
    HashSelector sel(300);
    std::vector<int64_t> newId(size_t(n), -1);
    int64_t m = 0;
    for (int64_t i = 0; i < n; ++i) if (!sel.is_member(i)) newId[size_t(i)] = m++;
    ASSERT_EQ(index.remove_ids(sel), size_t(n - m));
    ASSERT_EQ(index.ntotal, m);
    const gnndtest::Graph after = gnndtest::fetchGraph(index);
    int64_t row = 0, dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (newId[size_t(i)] < 0) continue;
        std::vector<int64_t> want;
        for (int j = 0; j < k; ++j) {
            const int64_t id = before.ids[size_t(i * k + j)];
            if (id >= 0 && newId[size_t(id)] >= 0) want.push_back(newId[size_t(id)]);
        }
        dropped += k - int64_t(want.size());
        want.resize(size_t(k), -1);
        const std::vector<int64_t> got(after.ids.begin() + row * k, after.ids.begin() + (row + 1) * k);
        ASSERT_EQ(got, want) << "row " << row << " (old " << i << ")";
        ++row;
    }
    EXPECT_GT(dropped, 0);
    // the vectors renumbered as faiss::IndexFlat renumbers them
    faiss::IndexFlat flat(d);
    flat.add(n, x.data());
    flat.remove_ids(sel);
    std::vector<float> ours(size_t(m) * d), theirs(size_t(m) * d);
    for (int64_t i = 0; i < m; i += 997) {
        index.reconstruct(i, ours.data());
        flat.reconstruct(i, theirs.data());
        ASSERT_EQ(std::vector<float>(ours.begin(), ours.begin() + d),
                  std::vector<float>(theirs.begin(), theirs.begin() + d)) << "vector " << i;
    }
    // a search over the shortened lists, and an add that merges into them
    const auto more = clusteredVectors(1500, d, 12, kSeed + 1);
    index.add(1500, more.data());
    EXPECT_EQ(index.ntotal, m + 1500);
    const gnndtest::Graph merged = gnndtest::fetchGraph(index);
    for (int64_t id : merged.ids) ASSERT_LT(id, index.ntotal);
}

TEST(GpuGraphRemoveIds, SearchGraphRecallHoldsAgainstAFreshBuild) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    const int64_t n = 30000, nq = 500;
    const auto x = clusteredVectors(n, d, 30, kSeed + 2);
    const auto q = clusteredVectors(nq, d, 30, kSeed + 3);
    for (uint64_t per1000 : {100u, 500u}) {
        GpuIndexSearchGraph index(&res, d);
        index.add(n, x.data());
        HashSelector sel(per1000);
        const size_t gone = index.remove_ids(sel);
        const auto kept = survivors(x, d, sel);
        ASSERT_EQ(int64_t(gone) + int64_t(kept.size()) / d, n);
        ASSERT_EQ(index.ntotal, int64_t(kept.size()) / d);
        const double removed = graphRecall(res, index, kept, q, FlatMetric::L2);
        GpuIndexSearchGraph fresh(&res, d);
        fresh.add(index.ntotal, kept.data());
        const double rebuilt = graphRecall(res, fresh, kept, q, FlatMetric::L2);
        std::printf("[graph remove_ids] %.0f%% removed: recall@10 %.4f, fresh build %.4f\n",
                    per1000 / 10.0, removed, rebuilt);
        EXPECT_GE(removed, rebuilt - 0.02) << per1000 / 10.0 << "% removed";
        std::vector<float> v(static_cast<size_t>(d));
        index.reconstruct(index.ntotal - 1, v.data());
        EXPECT_EQ(v, std::vector<float>(kept.end() - d, kept.end()));
    }
}

TEST(GpuGraphRemoveIds, AddsIdMapAndTwinAfterRemovals) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    const int64_t n = 8000, nq = 200;
    const auto x = clusteredVectors(n, d, 10, kSeed + 4);
    const auto q = clusteredVectors(nq, d, 10, kSeed + 5);
    GpuIndexSearchGraph graph(&res, d);
    faiss::IndexIDMap2 idmap(&graph);
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = 1000000 + 7 * i;
    idmap.add_with_ids(n, x.data(), ids.data());
    faiss::IDSelectorRange band(1000000 + 7 * 2000, 1000000 + 7 * 5000);  // ids, not positions
    EXPECT_EQ(idmap.remove_ids(band), size_t(3000));
    EXPECT_EQ(graph.ntotal, n - 3000);
    std::vector<float> D(size_t(nq * 10));
    std::vector<int64_t> I(size_t(nq * 10));
    idmap.search(nq, q.data(), 10, D.data(), I.data());
    for (int64_t id : I) {
        ASSERT_GE(id, 0);
        EXPECT_FALSE(band.is_member(id)) << "removed id " << id << " returned";
    }
    // adds after removals, then the CPU twin holds the same vectors
    const auto more = clusteredVectors(1000, d, 10, kSeed + 6);
    graph.add(1000, more.data());
    EXPECT_EQ(graph.ntotal, n - 3000 + 1000);
    std::unique_ptr<faiss::Index> twin(graph.copyToCpuIndex());
    ASSERT_EQ(twin->ntotal, graph.ntotal);
    std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
    for (int64_t i : {int64_t(0), int64_t(2500), graph.ntotal - 1}) {
        graph.reconstruct(i, a.data());
        twin->reconstruct(i, b.data());
        EXPECT_EQ(a, b) << "vector " << i;
    }
    // removing everything empties the index; removing all but a few is refused
    GpuIndexSearchGraph small(&res, d);
    small.add(2000, x.data());
    faiss::IDSelectorRange mostOfIt(0, 1990);
    EXPECT_THROW(small.remove_ids(mostOfIt), faiss::FaissException);
    EXPECT_EQ(small.ntotal, 2000);
    faiss::IDSelectorAll all;
    EXPECT_EQ(small.remove_ids(all), size_t(2000));
    EXPECT_EQ(small.ntotal, 0);
    small.search(1, q.data(), 10, D.data(), I.data());
    EXPECT_EQ(I[0], -1);
}

namespace {

/// The rows the patch makes (GraphRepair.cu's contract), on the host: each
/// survivor's old edges to survivors renumbered in order, then its new k-NN
/// list's nodes not yet in the row.
std::vector<int> patchedOnHost(const std::vector<int>& oldGraph, int degree,
                               const std::vector<int64_t>& newId, const std::vector<int>& knn,
                               int K) {
    std::vector<int> out;
    for (size_t o = 0; o < newId.size(); ++o) {
        if (newId[o] < 0) continue;
        const int j = int(newId[o]);
        std::vector<int> row;
        for (int r = 0; r < degree; ++r) {
            const int e = oldGraph[o * degree + r];
            if (e >= 0 && newId[size_t(e)] >= 0) row.push_back(int(newId[size_t(e)]));
        }
        for (int t = 0; t < K && int(row.size()) < degree; ++t) {
            const int c = knn[size_t(j) * K + t];
            if (c >= 0 && c != j && std::find(row.begin(), row.end(), c) == row.end())
                row.push_back(c);
        }
        out.insert(out.end(), row.begin(), row.end());
    }
    return out;
}

}  // namespace

TEST(GpuGraphRemoveIds, SmallRemovalsPatchTheGraphThenPrune) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32;
    const int64_t n = 30000, nq = 500;
    const auto x = clusteredVectors(n, d, 30, kSeed + 7);
    const auto q = clusteredVectors(nq, d, 30, kSeed + 8);
    GpuIndexSearchGraph index(&res, d);
    index.add(n, x.data());
    const int degree = index.getConfig().graphDegree, K = index.getConfig().knnDegree;
    const std::vector<int> before = index.getSearchGraph();
    // 1% removed: patched, row by row as the contract says
    HashSelector onePercent(10);
    std::vector<int64_t> newId(size_t(n), -1);
    int64_t m = 0;
    for (int64_t i = 0; i < n; ++i) if (!onePercent.is_member(i)) newId[size_t(i)] = m++;
    const size_t gone = index.remove_ids(onePercent);
    ASSERT_EQ(int64_t(gone), n - m);
    EXPECT_EQ(index.getRemovedSincePrune(), int64_t(gone));
    const std::vector<int> patched = index.getSearchGraph();
    ASSERT_EQ(patched.size(), size_t(m) * degree);
    EXPECT_EQ(patched, patchedOnHost(before, degree, newId, index.getKnnGraph(), K));
    const auto kept = survivors(x, d, onePercent);
    GpuIndexSearchGraph fresh(&res, d);
    fresh.add(index.ntotal, kept.data());
    const double after = graphRecall(res, index, kept, q, FlatMetric::L2);
    const double rebuilt = graphRecall(res, fresh, kept, q, FlatMetric::L2);
    std::printf("[graph remove_ids] 1%% removed, patched: recall@10 %.4f, fresh build %.4f\n",
                after, rebuilt);
    EXPECT_GE(after, rebuilt - 0.01);
    // 5% more: past the patch share, so pruned again (the counter restarts)
    HashSelector fivePercent(50);
    const auto kept2 = survivors(kept, d, fivePercent);
    const int64_t beforeSecond = index.ntotal;
    const size_t gone2 = index.remove_ids(fivePercent);
    EXPECT_EQ(beforeSecond - int64_t(gone2), int64_t(kept2.size()) / d);
    EXPECT_EQ(index.ntotal, int64_t(kept2.size()) / d);
    EXPECT_EQ(index.getRemovedSincePrune(), 0);
    GpuIndexSearchGraph fresh2(&res, d);
    fresh2.add(index.ntotal, kept2.data());
    EXPECT_GE(graphRecall(res, index, kept2, q, FlatMetric::L2),
              graphRecall(res, fresh2, kept2, q, FlatMetric::L2) - 0.01);
}

TEST(GpuGraphRemoveIds, MappingForAnotherSizeIsRefused) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8, k = 16;
    const auto x = clusteredVectors(600, d, 4, kSeed + 9);
    GpuKnnGraphGNND index(&res, d, k);
    index.add(600, x.data());
    const std::vector<int64_t> before = gnndtest::fetchGraph(index).ids;
    const faiss::IDSelectorRange some(0, 10);
    const faiss_ext::gpu::IdSelection smaller(&some, 500);  // made for 500 positions, not 600
    faiss_ext::gpu::GpuResources* r = res.getResources().get();
    const faiss_ext::gpu::RemovalMapping mapping(r, 0, r->getDefaultStream(0), smaller);
    EXPECT_THROW(index.removeMapped(mapping), faiss::FaissException);
    EXPECT_EQ(index.ntotal, 600);
    EXPECT_EQ(gnndtest::fetchGraph(index).ids, before);
}
