// Host logic of the partitioned file build (PartitionedBuild.h), kept apart
// from the GPU so the CPU tests cover it: how many clusters and how large,
// how cluster member lists are split and packed, and how one cluster's
// k-NN lists are folded into the global per-vector lists.
//
// The partition follows DiskANN (Subramanya et al., "DiskANN: Fast Accurate
// Billion-point Nearest Neighbor Search on a Single Node", NeurIPS 2019):
// k-means clusters, each point in its `overlap` nearest clusters, one graph
// per cluster, the graphs' edges unioned per point; and SPANN (Chen et al.,
// NeurIPS 2021, arXiv 2111.08566) for balanced posting lists (oversized
// clusters split, tiny ones merged).
#pragma once

#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// k-means aims at clusters of this share of the largest build that fits a
/// device: k-means cluster sizes vary (on the bench's clustered data by
/// about +-30%), and a cluster past the capacity must be split.
constexpr double kClusterFill = 0.7;

/// A cluster estimated (from the sample) above this share of the capacity
/// is split by k-means of its sampled members before the file is assigned.
constexpr double kSplitAbove = 0.9;

/// Bytes a GNND build of `rows` vectors keeps resident on the device:
/// vectors, norms and the n x K lists (ids and distances).
size_t clusterResidentBytes(int64_t rows, int d, int K);

/// Bytes of temporary device memory a GNND build of `rows` vectors needs
/// (gnnd::buildTempBytes and a margin).
size_t clusterTempBytes(int64_t rows, const Params& p);

/// The largest number of rows (<= maxRows) whose GNND build fits `resident`
/// and `temp` bytes; 0 when not even minRows fit.
int64_t largestBuildThatFits(int64_t minRows, int64_t maxRows, int d, const Params& p,
                             size_t resident, size_t temp);

/// Bytes of temporary device memory a GGM merge of `rows` vectors (both
/// sets) needs: the raw work lists (rows x K ids and distances),
/// gnnd::mergeTempBytes and a margin, as the all-pairs schedule counts a
/// pair (its resident bytes are clusterResidentBytes: vectors, norms and
/// the canonical lists; the neighbour merges use no separate head lists).
size_t mergeTempBytesOf(int64_t rows, const Params& p);

/// The largest number of rows (<= maxRows) whose GGM merge fits `resident`
/// and `temp` bytes; 0 when not even minRows fit.
int64_t largestMergeThatFits(int64_t minRows, int64_t maxRows, int d, const Params& p,
                             size_t resident, size_t temp);

/// The number of k-means clusters for n vectors each in `overlap` clusters:
/// shards > 0 (the shard count of a given shardSize): that many; else
/// enough that clusters of capacity x kClusterFill hold the n x overlap
/// memberships. At least 1, at most n.
int clusterCount(int64_t n, int overlap, int64_t capacity, int shards);

/// Sorted member lists (ids ascending, no repeats) made fit for builds:
/// lists of more than maxRows are cut into equal contiguous pieces of at
/// most maxRows; lists of fewer than minRows are packed with others (the
/// union of their members, so no neighbour candidate is lost) until each
/// pack holds minRows, a last short pack joining the smallest list that
/// has room. Empty lists are dropped. minRows <= maxRows; with minRows <=
/// maxRows / 2 every list ends with minRows..maxRows rows (else a pack that
/// would pass maxRows is closed short).
std::vector<std::vector<int>> packAndSplit(std::vector<std::vector<int>> lists, int64_t minRows,
                                           int64_t maxRows);

/// Folds one list into a global list: `gIds` / `gDists` (kOut entries,
/// sorted by (distance, id), empty entries id -1 / +inf last) become the
/// kOut best of their union with `ids` / `dists` (kIn entries, sorted, -1
/// for empty), each id once (the smaller distance kept).
void foldRow(int* gIds, float* gDists, int kOut, const int* ids, const float* dists, int kIn);

/// Folds a cluster's lists into the global lists (n x kOut): row r of the
/// cluster is global vector members[r]; its list (localIds / localDists,
/// m x kIn, ids local to the cluster, -1 empty) is mapped to global ids and
/// folded into that vector's global list. Rows in parallel (OpenMP): the
/// members are distinct.
void foldCluster(int* globalIds, float* globalDists, int kOut, const std::vector<int>& members,
                 const int* localIds, const float* localDists, int kIn);

/// For each vector, the clusters it belongs to: n x overlap entries, -1
/// where it is in fewer (lists: the clusters' sorted member lists).
std::vector<int> rowClusters(const std::vector<std::vector<int>>& lists, int64_t n, int overlap);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
