// gnndBuildFromFile (GnndOutOfCore.h): the public entry checks its
// arguments and hands the build to the engine (impl/gnnd/OutOfCoreBuilder.h
// for the schedule and the all-pairs build, impl/gnnd/PartitionedBuild.h for
// the partitioned one).
#include "faiss_ext/gpu/GnndOutOfCore.h"

#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"
#include "faiss_ext/gpu/impl/gnnd/OutOfCoreBuilder.h"

#include <faiss/impl/FaissAssert.h>

namespace faiss_ext {
namespace gpu {

GnndFileBuildReport gnndBuildFromFile(const std::vector<GpuResourcesProvider*>& providers,
                                      const std::string& vectorsPath, VectorFileFormat format,
                                      int d, int k, FlatMetric metric,
                                      const std::string& graphPath,
                                      const GnndFileBuildOptions& options) {
    gnnd::checkBuildConfig(options.config, k, "gnndBuildFromFile");
    FAISS_THROW_IF_NOT_MSG(!graphPath.empty(), "gnndBuildFromFile: empty graph path");
    FAISS_THROW_IF_NOT_MSG(format == VectorFileFormat::Fvecs ||
                                   format == VectorFileFormat::RawFloat32,
                           "gnndBuildFromFile: unknown vector file format");
    FAISS_THROW_IF_NOT_FMT(options.shardSize >= 0, "gnndBuildFromFile: shardSize = %lld < 0",
                           (long long)options.shardSize);
    FAISS_THROW_IF_NOT_FMT(options.hostMemoryBytes >= -1,
                           "gnndBuildFromFile: hostMemoryBytes = %lld (give -1 for automatic, 0 "
                           "for shard files, or a byte count)",
                           (long long)options.hostMemoryBytes);
    FAISS_THROW_IF_NOT_FMT(options.schedule == GnndFileSchedule::Auto ||
                                   options.schedule == GnndFileSchedule::AllPairs ||
                                   options.schedule == GnndFileSchedule::Partitioned,
                           "gnndBuildFromFile: unknown schedule %d", int(options.schedule));
    FAISS_THROW_IF_NOT_FMT(options.overlap >= 1 && options.overlap <= kMaxOverlap,
                           "gnndBuildFromFile: overlap = %d (clusters per vector: 1..%d)",
                           options.overlap, kMaxOverlap);
    FAISS_THROW_IF_NOT_FMT(options.sampleRows >= 0,
                           "gnndBuildFromFile: sampleRows = %lld < 0 (0: automatic)",
                           (long long)options.sampleRows);
    FAISS_THROW_IF_NOT_FMT(options.neighbourMerges >= -1 &&
                                   options.neighbourMerges <= kMaxNeighbourMerges,
                           "gnndBuildFromFile: neighbourMerges = %d (merges per cluster: -1 "
                           "automatic, 0 off, 1..%d)",
                           options.neighbourMerges, kMaxNeighbourMerges);
    FAISS_THROW_IF_NOT_FMT(options.clusterBuild == GnndClusterBuild::Auto ||
                                   options.clusterBuild == GnndClusterBuild::NNDescent ||
                                   options.clusterBuild == GnndClusterBuild::Exact,
                           "gnndBuildFromFile: unknown clusterBuild %d", int(options.clusterBuild));
    FAISS_THROW_IF_NOT_FMT(options.exactClusterRows == 0 ||
                                   options.exactClusterRows >= int64_t(k) + 1,
                           "gnndBuildFromFile: exactClusterRows = %lld (0: automatic, else at "
                           "least k + 1 = %d)",
                           (long long)options.exactClusterRows, k + 1);
    gnnd::VectorFile file(vectorsPath, format, d);
    gnnd::OutOfCoreBuilder b(providers, file, k, metric, options, graphPath);
    return b.schedule() == GnndFileSchedule::Partitioned ? b.runPartitioned() : b.run();
}

std::vector<int> readGraphIvecs(const std::string& path, int64_t* n, int* k) {
    return gnnd::readGraphFile(path, n, k);
}

}  // namespace gpu
}  // namespace faiss_ext
