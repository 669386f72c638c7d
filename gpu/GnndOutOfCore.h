// k-NN graphs of vector files larger than GPU memory, and builds on several
// GPUs, by the paper's section 5 (Wang, Zhao & Zeng, GNND, 2021; docs/references.md): the
// file is cut into shards that fit a device; GNND builds each shard's graph;
// GGM merges every pair of shards once, so each list ends with the top-k of
// the whole set. Only the shards being merged are on a device. Between
// merges the shards stay in host memory when they fit the host budget
// (options.hostMemoryBytes); past it, shard graphs live in files under a
// work directory, only the pairs being merged are in host memory, and the
// next pair's data is read (and the last pair's graphs written) by a host
// thread while the GPU merges. With several devices, shard builds and the
// merges of each round (disjoint pairs) run on all devices at once.
// That all-pairs schedule costs shards x (shards - 1) / 2 merges; past a few
// shards the partitioned schedule (GnndFileSchedule::Partitioned,
// impl/gnnd/PartitionedBuild.h: k-means clusters with overlap, one GNND
// build per cluster, lists folded per vector) grows linearly instead.
// The options, steps and report are in GnndOutOfCoreOptions.h; the engine
// in impl/gnnd/ (OutOfCoreBuilder.h: the schedule's choice and the
// all-pairs build; PartitionedBuild.h: the partitioned one).
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOutOfCoreOptions.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"  // (GpuKnnGraphGNND, for code that took it from here)
#include "faiss_ext/gpu/GpuResources.h"

#include <cstdint>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gpu {

/// Builds the k-NN graph (degree k, metric L2 or inner product / cosine /
/// Pearson) of the vectors in `vectorsPath` and writes it to `graphPath` as
/// an ivecs file (per vector: int32 k, then the k neighbour ids, closest
/// first). The graph (and the distances) are written under temporary names
/// beside the outputs and renamed when complete, so a build that fails
/// leaves no partial output (an older file of that name stays as it was). `providers` gives the resources per entry of options.devices (one
/// provider is used for every device when it holds a single entry). For
/// RawFloat32, d is required; for Fvecs it is read from the file (and d, when
/// > 0, must match).
GnndFileBuildReport gnndBuildFromFile(const std::vector<GpuResourcesProvider*>& providers,
                                      const std::string& vectorsPath, VectorFileFormat format,
                                      int d, int k, FlatMetric metric,
                                      const std::string& graphPath,
                                      const GnndFileBuildOptions& options = {});

/// Reads an ivecs graph file written by gnndBuildFromFile (n x k ids).
std::vector<int> readGraphIvecs(const std::string& path, int64_t* n, int* k);

}  // namespace gpu
}  // namespace faiss_ext
