// Host logic of the neighbour merges of the partitioned file build
// (PartitionedBuild.h, GnndFileBuildOptions::neighbourMerges), kept apart
// from the GPU so the CPU tests cover it: which cluster pairs are merged,
// how a pair too large for one device is cut into pieces, and how the
// global lists of a pair's rows become the pair-local canonical lists that
// GGM (gnnd::merge; Wang, Zhao et al., "Fast k-NN graph construction by GPU
// based NN-Descent", CIKM 2021, Algorithm 3) takes.
//
// Why: a vector's list holds only the neighbours that share one of its
// `overlap` clusters; the rest lie in clusters next to its own. A GGM merge
// of two clusters compares their members across the pair (the all-pairs
// schedule's pair merge); merging only the pairs of adjacent clusters keeps
// the number of merges linear in the number of clusters, where all pairs
// would grow with its square.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// The cluster pairs (a < b, sorted, each once) to merge: for each cluster,
/// the m clusters sharing the most members with it (overlap memberships;
/// ties to the smaller index; only clusters sharing at least one member).
/// Shared members measure adjacency without centroids (which the splits and
/// packs of PartitionPlan.h leave behind): a vector joins its `overlap`
/// nearest centroids, so two clusters share many vectors when their regions
/// touch along a large boundary. At most m x clusters pairs, each cluster in
/// at least min(m, its sharing clusters). With overlap 1 nothing is shared:
/// no pairs. groups: the clusters' sorted member lists; rowGroups: n x
/// overlap cluster ids, -1 where a row is in fewer (rowClusters). m >= 1.
std::vector<std::pair<int, int>> neighbourPairs(const std::vector<std::vector<int>>& groups,
                                                const std::vector<int>& rowGroups, int overlap,
                                                int m);

/// One GGM merge of a pair: rows [a0, a1) of the first cluster's member
/// list and [b0, b1) of the second's rows not in the first.
struct MergePiece {
    int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    int64_t rows() const { return (a1 - a0) + (b1 - b0); }
};

/// The merges that cover every cross pair of two sets of nA and nB rows
/// when at most `capacity` rows fit one merge: one merge when nA + nB <=
/// capacity; else each side cut into equal pieces of at most capacity / 2
/// rows and every piece of one merged with every piece of the other (the
/// all-pairs schedule within the pair: every cross pair is compared once).
/// Empty when nA or nB is 0. capacity >= 2.
std::vector<MergePiece> mergePieces(int64_t nA, int64_t nB, int64_t capacity);

/// The positions in b (sorted ids) of its ids that are not in a (sorted
/// ids), ascending: a pair's second side holds each vector once.
std::vector<int64_t> positionsNotIn(const std::vector<int>& b, const std::vector<int>& a);

/// The pair-local canonical lists of a merge: the rows are the global ids
/// `rows` (local id r is rows[r]); localOf maps a global id to its local id
/// (-1 outside the pair; n entries). Row r's list is the global list of
/// rows[r] (kIn entries, sorted, -1 empty) kept to the ids inside the pair,
/// mapped to local ids, in order, padded to kOut with -1 / +inf. Entries
/// outside the pair are left out: they stay in the global lists, and the
/// fold of the merged lists keeps the best of both. kOut >= kIn.
void pairLocalLists(const int* globalIds, const float* globalDists, int kIn,
                    const std::vector<int>& rows, const std::vector<int>& localOf, int kOut,
                    int* outIds, float* outDists);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
