// GpuKnnGraphGNND::add's partitioned build (GnndAddBuild::Partitioned,
// GnndOptions.h): the partitioned schedule of gnndBuildFromFile
// (PartitionedBuild.h) with exact clusters, reading the added vectors in
// place from host or device memory and handing the lists back in memory
// instead of writing a graph file. One GNND build of a large set of high
// intrinsic dimension converges poorly (docs/gnnd.md); exact lists inside
// small, overlapping k-means clusters (SPANN's closure assignment, Chen et
// al., NeurIPS 2021, arXiv 2111.08566) keep recall near 1 at a cost linear
// in the number of vectors.
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOptions.h"
#include "faiss_ext/gpu/GnndOutOfCoreOptions.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/gnnd/PartitionedBuild.h"

#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// What the partitioned add needs from GpuKnnGraphGNND.
struct PartitionedAddInput {
    const float* x = nullptr;  ///< n x d, host or device, as given to add
    int64_t n = 0;
    int d = 0;
    FlatMetric metric = FlatMetric::L2;
    int K = 0;  ///< list length (the index's build degree)
    GpuKnnGraphGNNDConfig config;
    bool verbose = false;
    std::vector<int> devices;                        ///< the index's device first
    std::vector<std::shared_ptr<GpuResources>> res;  ///< per entry of devices
};

/// Host bytes the partitioned add of n vectors holds at most (global lists,
/// memberships, download buffers and one cluster's vectors).
size_t partitionedAddHostBytes(int64_t n, int d, int K, int workers);

/// The K-wide lists of the n vectors (ids 0..n-1, GNND's distance
/// convention) into *out; the report of the partitioned schedule. Throws
/// (out untouched) when the host budget (half the free host memory) or a
/// device cannot hold what it needs.
GnndFileBuildReport buildListsPartitioned(const PartitionedAddInput& in,
                                          PartitionedLists* out);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
