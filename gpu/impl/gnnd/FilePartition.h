// Steps 1-3 of the partitioned file build (PartitionedBuild.h): k-means
// centroids of a sample of the vector file, each row assigned to its
// `overlap` nearest centroids in one pass over the file, and member lists
// split and packed to fit a build (PartitionPlan.h). FAISS's k-means, with
// the distances on the GPU (our exact flat index as its assignment index)
// when the spec names a device: on the H200 host the CPU k-means and
// assignment of a 10M x 128 file took 63 s; the pass is then bound by the
// file read, which the search of the previous chunk overlaps.
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// What partitionFile needs.
struct PartitionSpec {
    int clusters = 1;        ///< k-means clusters before splits
    int overlap = 2;         ///< clusters per row (<= clusters)
    int64_t sampleRows = 0;  ///< rows sampled for k-means (0: automatic)
    int64_t capacity = 0;    ///< most rows one cluster build may hold
    int64_t minRows = 1;     ///< fewest rows of a cluster (smaller ones are packed)
    /// Lists past this many rows are cut into contiguous pieces (0:
    /// capacity). A cut splits neighbourhoods at random: exact clusters
    /// allow lists past their target size (k-means was asked for
    /// `capacity`) rather than cut them.
    int64_t cutAbove = 0;
    /// > 0: a row joins its j-th nearest centroid (j > 1) only when the
    /// squared distance is at most closure x the nearest's (SPANN's closure
    /// assignment, Chen et al., NeurIPS 2021): rows deep inside a cluster
    /// stay in one, rows near a boundary join the clusters across it.
    /// 0: every row joins `overlap` clusters.
    double closure = 0;
    FlatMetric metric = FlatMetric::L2;  ///< cosine / Pearson: rows prepared first
    uint64_t seed = 1234;
    bool verbose = false;
    const char* who = "gnndBuildFromFile";  ///< the build, in verbose lines
    /// Resources and device of the k-means and assignment searches (null:
    /// FAISS's CPU IndexFlatL2).
    std::shared_ptr<GpuResources> res;
    int device = 0;
};

/// Rows of the automatic sample: min(n, max(256 x clusters, 262144)).
int64_t defaultSampleRows(int64_t n, int clusters);

/// Rows [0, n) of the file partitioned: sorted member lists, each of
/// minRows..capacity rows (a list may be shorter when n is), every row in at
/// least one and at most `overlap` lists.
std::vector<std::vector<int>> partitionFile(const VectorFile& file, const PartitionSpec& spec);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
