// Neighbour merges of the partitioned file build (PartitionedBuild.h,
// GnndFileBuildOptions::neighbourMerges): after the cluster builds, GGM
// merges (Wang, Zhao et al., "Fast k-NN graph construction by GPU based
// NN-Descent", CIKM 2021, Algorithm 3: the all-pairs schedule's pair merge)
// of adjacent cluster pairs only (ClusterPairs.h). A merge's rows are the
// first cluster's members and the second's members not in the first (each
// vector once); their lists are the CURRENT global lists kept to the pair
// and mapped to pair-local ids; GGM compares the two sides across the pair
// (each side's own entries seed the search); the merged lists (ids mapped
// back to the file's rows) are folded into the global lists: the k best of
// the union, each id once (foldCluster), which also keeps the entries from
// outside the pair that the merge did not see.
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/gnnd/ClusterPairs.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildProgress.h"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// The merges to run: the cluster pairs and, per pair, its pieces
/// (mergePieces at the merge capacity).
struct NeighbourMergePlan {
    std::vector<std::pair<int, int>> pairs;
    std::vector<std::vector<MergePiece>> pieces;  ///< per pair
    int merges = 0;            ///< pieces of all pairs: the GGM merges run
    int64_t largestMerge = 0;  ///< rows of the largest piece
};

/// Pairs of neighbourPairs(m) and their pieces when at most `capacity`
/// rows fit one merge.
NeighbourMergePlan planNeighbourMerges(const std::vector<std::vector<int>>& groups,
                                       const std::vector<int>& rowGroups, int overlap, int m,
                                       int64_t capacity);

/// Host bytes the merges hold per worker besides the gathered clusters: the
/// piece's vectors, its lists (rows x K ids and distances), its row ids and
/// the global-to-local map (n int32).
size_t neighbourMergeHostBytes(int64_t n, int64_t rows, int d, int K);

/// What runNeighbourMerges works on: the partitioned build's state.
struct NeighbourMergeInput {
    const VectorFile* file = nullptr;
    const std::vector<std::vector<int>>* groups = nullptr;  ///< sorted member lists
    const std::vector<int>* rowGroups = nullptr;            ///< n x overlap
    int overlap = 1;
    int* globalIds = nullptr;      ///< n x k, updated
    float* globalDists = nullptr;  ///< n x k, updated
    int k = 0;
    std::mutex* foldMutex = nullptr;  ///< held while global lists are read or folded
    FlatMetric metric = FlatMetric::L2;
    Params params;                   ///< K: the merge's list length
    std::vector<int> devices;        ///< one worker each
    std::vector<std::shared_ptr<GpuResources>> res;
    size_t gatherBudget = 0;  ///< host bytes for the clusters gathered at once
    FileBuildProgress* progress = nullptr;
    std::atomic<bool>* failed = nullptr;
};

/// Runs the plan's merges in batches of pairs whose clusters fit the gather
/// budget (one pass over the file per batch), the pieces of a batch shared
/// by the workers. Returns the merges run.
int runNeighbourMerges(const NeighbourMergeInput& in, const NeighbourMergePlan& plan);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
