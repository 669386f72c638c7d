// One worker of the all-pairs file schedule (OutOfCoreBuilder.h): the
// device buffers for two shards (vectors prepared for the metric, norms,
// global lists and the shards' own graphs) and its own stream, so that
// workers sharing a device overlap.
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/gnnd/ShardStore.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// One worker's device buffers for two shards, and its own stream (so that
/// workers sharing a device overlap).
struct ShardWorker {
    int device;
    GpuResources* res;
    cudaStream_t stream = nullptr;
    int d = 0;  ///< dimension
    int K = 0;  ///< list length
    DeviceVector<float> x, norms, dists, headDists;
    DeviceVector<int> ids, headIds;
    ~ShardWorker();

    /// A worker on `device` with room for `rows` vectors and, with `lists`,
    /// for the lists and own graphs of listRows rows.
    static std::unique_ptr<ShardWorker> make(int device, GpuResources* res, int d, int K,
                                             int64_t rows, int64_t listRows, bool lists);

    /// Shard s's vectors (prepared for the metric, with their norms) and,
    /// withGraph, its lists and own graph, to rows row0.. of the buffers.
    void upload(const ShardData& s, int64_t row0, bool withGraph, FlatMetric metric);

    /// The lists of rows row0.. back into shard s (waits for them).
    void download(ShardData& s, int64_t row0);
};

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
