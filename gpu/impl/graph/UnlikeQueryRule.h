// The rule that flags queries unlike the data in a graph search (issue 38).
// A query drawn from the data's distribution lands among vectors as close
// to each other as to it; one drawn elsewhere (cross-modal search, a shifted
// distribution) lands in a gap, where a graph whose edges join near
// neighbours gives a beam search no path to the true neighbours (CAGRA and
// ours reach recall@10 0.72-0.73 on such queries at itopk 512). The
// statistic a graph index has at hand after a search: the squared distance
// of the query to its nearest result v over v's squared distance to its own
// kth k-NN neighbour (kUnlikeQueryNeighbour). Measured on the CPU with exact
// neighbours (bench/ood_probe.py): in-distribution queries stay below 1.7 on
// a hard 200k x 100 set, 99% below 2.8 on Fashion-MNIST and 2.4 on SIFT;
// queries drawn around other centres of the same generator are above 3.3
// for 99%. Plain C++ for the host (tests/test_cpu_unlike_query_rule.cpp),
// inlined device code in .cu files.
//
// Build-side alternatives learn the query distribution from a sample of
// queries (S. Jaiswal, R. Krishnaswamy, A. Garg, H. V. Simhadri, S. Agrawal,
// "OOD-DiskANN: Efficient and Scalable Graph ANNS for Out-of-Distribution
// Queries", arXiv 2211.12850; M. Chen, K. Zhang, Z. He, Y. Jing, X. S. Wang,
// "RoarGraph: A Projected Bipartite Graph for Efficient Cross-Modal
// Approximate Nearest Neighbor Search", VLDB 2024, arXiv 2408.08933); this
// rule needs no sample and costs one read per query.
#pragma once

#include <cstdint>

#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

/// The ratio the CPU measurements above suggest (GpuIndexSearchGraphConfig::
/// unlikeQueryRatio, off by default).
constexpr float kSuggestedUnlikeQueryRatio = 3.0f;

/// The neighbour whose distance scales a query's: the 10th (k-NN lists are
/// at least this long unless knnDegree is smaller; then the last).
constexpr int kUnlikeQueryNeighbour = 10;

/// The squared L2 distance behind a reported distance: L2 indexes report it;
/// cosine and Pearson report the inner product s of unit vectors, whose
/// squared distance is 2 - 2 s (>= 0 despite rounding).
FAISS_EXT_HOST_DEVICE float squaredDistanceOfReported(float reported, bool similarity) {
    if (!similarity) return reported;
    const float sq = 2.f - 2.f * reported;
    return sq > 0.f ? sq : 0.f;
}

/// The squared L2 distance behind a k-NN list entry: GNND keeps squared L2
/// distances, or minus the inner product (so that smaller is nearer).
FAISS_EXT_HOST_DEVICE float squaredDistanceOfListEntry(float listDistance, bool similarity) {
    return squaredDistanceOfReported(similarity ? -listDistance : listDistance, similarity);
}

/// A vector's neighbour radius: the squared distance to the kth entry of its
/// k-NN list (ids / dists: K entries, nearest first, -1 padded after
/// removals), or to the last entry where fewer are left; where that is 0
/// (duplicates), the first nonzero one after it. 0 when there is none.
FAISS_EXT_HOST_DEVICE float neighbourRadius(const int* ids, const float* dists, int K, int kth,
                                            bool similarity) {
    int last = -1;
    for (int j = 0; j < K; ++j) {
        if (ids[j] < 0) break;
        const float r = squaredDistanceOfListEntry(dists[j], similarity);
        last = j;
        if (j + 1 >= kth && r > 0.f) return r;
    }
    return last >= 0 ? squaredDistanceOfListEntry(dists[last], similarity) : 0.f;
}

/// Whether a query at squared distance queryDist of its nearest result, whose
/// neighbour radius is `radius`, is unlike the data at `ratio` (> 0). A
/// radius of 0 (every listed neighbour a duplicate) flags no query.
FAISS_EXT_HOST_DEVICE bool isUnlikeQuery(float queryDist, float radius, float ratio) {
    return radius > 0.f && queryDist > ratio * radius;
}

/// Whether the `flagged` of a batch of n queries are answered again by exact
/// search: at least `share` of the batch (and one). Below that share the
/// exact search's cost, about one scan of the vectors however few queries
/// it takes, would weigh on batches of in-distribution queries with a few
/// outliers, which the graph search answers well enough.
inline bool answerUnlikeQueriesExactly(int64_t flagged, int64_t n, float share) {
    return flagged > 0 && double(flagged) >= double(share) * double(n);
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
