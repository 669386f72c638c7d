// The search graph's optimisation (impl/graph/GraphOptimize.cu; CAGRA,
// Ootomo et al., ICDE 2024, arXiv 2308.15136, section IV-B) against a CPU
// reading of the same rules, from the index's own k-NN graph: each final
// list starts with the first half of the node's detour-pruned list, in
// order, and holds nothing but pruned edges and reverse edges; a pruned
// edge is left out only when the list is full. The reverse edges of one
// rank arrive in an order the GPU's atomics choose, so the lists are
// checked by these rules, not compared entry by entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <set>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

using namespace faiss_ext;
using namespace faiss_ext::gpu;

namespace {

/// Position of id's first occurrence in list (K entries), or -1.
int positionIn(const int* list, int K, int id) {
    for (int j = 0; j < K; ++j)
        if (list[j] == id) return j;
    return -1;
}

/// The `degree` edges of node x with fewest detours x -> A_i -> A_j
/// (max(i, rank of A_j in A_i's list) < j), ties by position; -1 padded.
std::vector<int> prunedList(const std::vector<int>& knn, int K, int64_t x, int degree) {
    const int* row = knn.data() + x * K;
    std::vector<long long> detours(K, 0);
    for (int i = 0; i + 1 < K; ++i) {
        const int a = row[i];
        if (a < 0 || a == x) continue;
        for (int r = 0; r + 1 < K; ++r) {
            const int b = knn[size_t(a) * K + r];
            if (b < 0) continue;
            const int j = b == x ? -1 : positionIn(row, K, b);
            if (j > std::max(i, r)) ++detours[j];
        }
    }
    std::vector<int> order;
    for (int j = 0; j < K; ++j)
        if (row[j] >= 0 && row[j] != x && positionIn(row, K, row[j]) == j) order.push_back(j);
    std::stable_sort(order.begin(), order.end(),
                     [&](int u, int v) { return detours[u] < detours[v]; });
    std::vector<int> out(degree, -1);
    for (int t = 0; t < degree && t < int(order.size()); ++t) out[t] = row[order[t]];
    return out;
}

}  // namespace

TEST(GpuSearchGraphOptimize, ListsFollowThePruningAndReverseEdgeRules) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    GpuIndexSearchGraphConfig cfg;
    cfg.graphDegree = 24;
    cfg.knnDegree = 48;
    const int64_t n = test::sized<int64_t>(12000, 3000);
    const int d = 24, R = cfg.graphDegree, K = cfg.knnDegree;
    std::vector<float> x = test::clusteredVectors(n, d, 40, 23);
    GpuIndexSearchGraph index(&res, d, FlatMetric::L2, cfg);
    index.add(n, x.data());
    const std::vector<int> knn = index.getKnnGraph(), g = index.getSearchGraph();
    ASSERT_EQ(knn.size(), size_t(n) * K);
    ASSERT_EQ(g.size(), size_t(n) * R);
    std::vector<std::vector<int>> pruned(n);
    std::vector<std::set<int>> pointsTo(n);  // reverse edges: nodes whose pruned list has i
    for (int64_t i = 0; i < n; ++i) {
        pruned[i] = prunedList(knn, K, i, R);
        for (int v : pruned[i])
            if (v >= 0) pointsTo[v].insert(int(i));
    }
    int64_t reverseUsed = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int* row = g.data() + i * R;
        std::set<int> kept(row, row + R);
        kept.erase(-1);
        int filled = 0;
        while (filled < R && row[filled] >= 0) ++filled;
        for (int t = 0; t < R / 2 && pruned[i][t] >= 0; ++t)
            ASSERT_EQ(row[t], pruned[i][t]) << "node " << i << " slot " << t;
        for (int t = 0; t < filled; ++t) {
            const int v = row[t];
            const bool isPruned =
                    std::find(pruned[i].begin(), pruned[i].end(), v) != pruned[i].end();
            ASSERT_TRUE(isPruned || pointsTo[i].count(v))
                    << "node " << i << " slot " << t << ": " << v << " is neither a pruned edge "
                    << "nor a reverse edge";
            reverseUsed += !isPruned;
        }
        for (int v : pruned[i])
            if (v >= 0 && !kept.count(v))
                ASSERT_EQ(filled, R) << "node " << i << " dropped pruned edge " << v
                                     << " with its list not full";
    }
    // the rule must have been exercised: reverse edges took some slots
    EXPECT_GT(reverseUsed, n / 10);
}
