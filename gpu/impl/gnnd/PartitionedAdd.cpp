#include "faiss_ext/gpu/impl/gnnd/PartitionedAdd.h"

#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

/// The file build's options for an add: the partitioned schedule with
/// exact clusters of the default size, no neighbour merges (the closure
/// assignment covers the boundaries), the default overlap and host budget.
GnndFileBuildOptions addOptions(const PartitionedAddInput& in) {
    GnndFileBuildOptions o;
    o.config = in.config;
    o.verbose = in.verbose;
    o.schedule = GnndFileSchedule::Partitioned;
    o.clusterBuild = GnndClusterBuild::Exact;
    o.neighbourMerges = 0;
    return o;
}

}  // namespace

size_t partitionedAddHostBytes(int64_t n, int d, int K, int workers) {
    const GnndFileBuildOptions o;
    // a list may reach kExactCutFactor x the target before it is cut
    const int64_t largest = std::min<int64_t>(n, kExactCutFactor * kExactClusterRows);
    return partitionedFixedHostBytes(n, K, o.overlap, largest, K, workers) +
           size_t(largest) * d * sizeof(float);
}

GnndFileBuildReport buildListsPartitioned(const PartitionedAddInput& in,
                                          PartitionedLists* out) {
    FAISS_THROW_IF_NOT_MSG(in.x && out && in.K > 0 && !in.devices.empty() &&
                                   in.res.size() == in.devices.size(),
                           "buildListsPartitioned: incomplete input");
    FAISS_THROW_IF_NOT_FMT(in.n > in.K,
                           "GpuKnnGraphGNND::add (partitioned): %lld vectors are too few for "
                           "lists of %d",
                           (long long)in.n, in.K);
    const VectorFile rows(in.x, in.n, in.d);
    const GnndFileBuildOptions options = addOptions(in);
    PartitionedInput p;
    p.file = &rows;
    p.k = in.K;
    p.metric = in.metric;
    p.options = &options;
    p.listsOut = out;
    p.devices = in.devices;
    p.res = in.res;
    p.params = makeParams(in.config, in.K,
                          toFaissMetric(in.metric) == faiss::METRIC_INNER_PRODUCT, in.verbose);
    p.who = "GpuKnnGraphGNND::add (partitioned)";
    return buildPartitioned(p);
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
