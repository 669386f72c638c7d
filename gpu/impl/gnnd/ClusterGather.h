// Gathers of the partitioned file build (PartitionedBuild.h): the vectors
// of a set of clusters read from the vector file in one sequential pass
// (a cluster's rows lie all over the file: one sequential read per batch
// costs far less than a random read per row, and the host memory stays
// bounded by the batch), for the cluster builds and the neighbour merges.
#pragma once

#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"

#include <cstddef>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// The vectors of clusters `which` (sorted, distinct): one buffer per entry
/// of which, rows in the order of the cluster's member list (groups: sorted
/// member lists; rowGroups: n x overlap cluster ids, -1 where a row is in
/// fewer). One sequential pass over the rows they span, read in chunks, the
/// next chunk read while the last is scattered.
std::vector<std::vector<float>> gatherClusters(const VectorFile& file,
                                               const std::vector<std::vector<int>>& groups,
                                               const std::vector<int>& rowGroups, int overlap,
                                               const std::vector<int>& which);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
