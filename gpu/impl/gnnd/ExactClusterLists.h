// Exact k-NN lists within one cluster of the partitioned file build
// (GnndClusterBuild::Exact, GnndOutOfCore.h): the cluster's vectors are
// searched against themselves by the flat engine of GpuIndexQuickSelectFlat,
// so a vector's list is exact among the vectors it shares a cluster with,
// and the build's recall is the partition's coverage alone. It is the
// inverted-file route to a k-NN graph that cuVS takes for CAGRA's initial
// graph (Ootomo et al., "CAGRA: Highly Parallel Graph Construction and
// Approximate Nearest Neighbor Search for GPUs", ICDE 2024, arXiv
// 2308.15136, builds it by IVF-PQ search of every vector), here with
// exact distances inside small, overlapping clusters.
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuResources.h"

#include <cstdint>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// The k nearest of each of the m host vectors among the others (self
/// excluded by id), in GNND's list convention: ids local to the cluster
/// (int32, -1 past m - 1 neighbours), distances squared L2 or -<x, y> for
/// inner-product metrics (cosine and Pearson prepare the vectors first),
/// sorted ascending; m x k each. Searched on `device` with `res` in FP32
/// (distances as GpuIndexQuickSelectFlat's: |x|^2 + |y|^2 - 2 <x, y>).
void exactClusterLists(GpuResources* res, int device, const float* vectors, int64_t m, int d,
                       FlatMetric metric, int k, std::vector<int>& ids,
                       std::vector<float>& dists);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
