// The partitioned schedule of gnndBuildFromFile (GnndOutOfCore.h,
// GnndFileSchedule::Partitioned), after DiskANN's merged-partition build
// (Subramanya et al., "DiskANN: Fast Accurate Billion-point Nearest Neighbor
// Search on a Single Node", NeurIPS 2019) and SPANN's balanced, overlapping
// posting lists (Chen et al., "SPANN", NeurIPS 2021, arXiv 2111.08566):
//   1. k-means (FAISS, CPU) of rows sampled from the file in evenly spread
//      blocks, into as many clusters as needed for each cluster's build to
//      fit a device; clusters estimated too large from the sample are split
//      by a k-means of their sampled members;
//   2. one pass over the file: each row joins its `overlap` nearest
//      centroids (FAISS's exact CPU search of the few centroids, overlapped
//      with the read of the next chunk); member lists in host memory
//      (int32 ids: n x overlap x 4 bytes);
//   3. lists still too large are cut, tiny ones packed together
//      (PartitionPlan.h);
//   4. clusters in batches whose vectors fit the host budget; per batch one
//      sequential pass over the file scatters each row into its clusters'
//      buffers (the rows of a cluster are spread over the whole file: one
//      sequential read per batch beats a random read per row), then every
//      cluster is built by GNND on a worker (the same engine as the shards),
//      or by exact search of its vectors (GnndClusterBuild::Exact,
//      ExactClusterLists.h; then the clusters are small and each row joins
//      further ones by SPANN's closure rule), and its lists are folded into the global lists (n x k, host), the
//      fold of one cluster overlapping the build of the next;
//   5. optionally (options.neighbourMerges), GGM merges of adjacent cluster
//      pairs, folded the same way (NeighbourMerges.h): the neighbours that
//      lie in clusters other than a vector's `overlap` nearest.
// Global lists keep k entries: the k best of a union are the k best of the
// union of each part's k best.
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOutOfCoreOptions.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"

#include <memory>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// The lists of a partitioned build held in memory: n x k ids and distances
/// in GNND's convention (squared L2 or negated products), nearest first,
/// -1 / +inf padded.
struct PartitionedLists {
    std::vector<int> ids;
    std::vector<float> dists;
};

/// What the partitioned schedule needs from gnndBuildFromFile, checked there.
struct PartitionedInput {
    const VectorFile* file = nullptr;
    int k = 0;
    FlatMetric metric = FlatMetric::L2;
    const GnndFileBuildOptions* options = nullptr;
    std::string graphPath;  ///< where the graph goes, unless listsOut is set
    /// When set, the lists are moved here and no file is written
    /// (GpuKnnGraphGNND::add).
    PartitionedLists* listsOut = nullptr;
    std::vector<int> devices;                          ///< one worker each
    std::vector<std::shared_ptr<GpuResources>> res;    ///< per entry of devices
    Params params;                                     ///< K: the build degree
    const char* who = "gnndBuildFromFile";  ///< the caller, in messages
    int shards = 0;  ///< clusters wanted (the shard count of a given shardSize; 0: automatic)
};

/// Host bytes the partitioned build holds besides its cluster buffers: the
/// global lists (n x k ids and distances), the memberships (twice n x
/// overlap int32) and each worker's two download buffers (capacity x K).
size_t partitionedFixedHostBytes(int64_t n, int k, int overlap, int64_t capacity, int K,
                                 int workers);

/// Runs the partitioned schedule. Throws (writing nothing) when a build of
/// the smallest cluster does not fit the devices, or when the global lists
/// and one cluster do not fit the host budget (options.hostMemoryBytes).
GnndFileBuildReport buildPartitioned(const PartitionedInput& in);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
