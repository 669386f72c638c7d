// The entry-point sample of a search graph: a seeded random sample of its
// nodes, their vectors centred on the sample's mean, and the search of the
// sampled nodes nearest to each query, where its beam search starts (CAGRA,
// Ootomo et al., ICDE 2024, arXiv 2308.15136, seeds from random nodes only;
// on data of many separated clusters, a search started at random stays in
// the wrong one).
#pragma once

#include <cstdint>
#include <memory>

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {

class FlatStorage;

namespace graph {

class EntrySample {
public:
    /// Samples min(count, n) of the n node vectors (device, prepared:
    /// metric L2 or InnerProduct) with `seed` (sampleEntryPoints) and keeps
    /// their rows centred on the sample's mean. count >= 1, n >= 1.
    /// Synchronises the resources' default stream.
    EntrySample(GpuResources* res, int device, int d, FlatMetric metric, const float* vectors,
                int64_t n, int count, uint64_t seed);
    ~EntrySample();
    EntrySample(const EntrySample&) = delete;
    EntrySample& operator=(const EntrySample&) = delete;

    /// Number of sampled nodes.
    int size() const { return int(ids_.size()); }
    /// Their node ids (device, sorted).
    const int* nodeIds() const { return ids_.data(); }

    /// For nq prepared queries q (device), the perQuery (1..size()) sampled
    /// nodes nearest to each, as positions in the sample, nearest first:
    /// out (nq x perQuery, device). Up to kMaxNearestEntrySeeds by TF32
    /// products and a warp per query (nearestEntryPoints); beyond, by the
    /// exact engine. Ordered on the default stream.
    void nearest(const float* q, int64_t nq, int perQuery, int64_t* out) const;

private:
    void nearestByWarps_(const float* q, int64_t nq, int perQuery, int64_t* out) const;

    GpuResources* res_;
    int device_;
    int d_;
    FlatMetric metric_;
    DeviceVector<int> ids_;
    DeviceVector<float> centre_;   ///< the sample's mean c (d floats)
    DeviceVector<float> sqNorms_;  ///< |x - c|^2 of the sampled rows (L2)
    std::unique_ptr<FlatStorage> rows_;  ///< the rows x - c (exact engine)
};

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
