// Exact range search over flat vectors on the GPU: every stored vector
// within a radius of each query, as faiss::IndexFlat::range_search returns
// them (L2: squared distance < radius; inner product, and cosine / Pearson
// over prepared vectors: similarity > radius).
//
// Distances come from FP32 GEMM tiles (as the exact k-NN search's FP32
// path, impl/flat/Distance.h); per tile one kernel counts each query's hits
// and a second writes them in corpus order, so memory stays bounded however
// many vectors a query matches: a tile's hits are copied out in groups of
// queries that fit a fixed buffer.
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuResources.h"

#include <cstdint>
#include <vector>

namespace faiss_ext {
namespace gpu {

class IdSelection;

/// The vectors one range search scans.
struct RangeCorpus {
    const float* vectors = nullptr;   ///< nb x d, device, or pinned host when onHost
    const float* sqNorms = nullptr;   ///< |x|^2 (L2 only), same memory space
    int64_t nb = 0;
    int d = 0;
    bool onHost = false;
    const uint32_t* keepBits = nullptr;  ///< device bitmap over nb (null: all kept)
    int64_t labelOffset = 0;             ///< label of vector j is labelOffset + j
};

/// Each query's hits, in label order.
struct RangeHits {
    std::vector<std::vector<int64_t>> labels;
    std::vector<std::vector<float>> distances;
    explicit RangeHits(int64_t nq) : labels(size_t(nq)), distances(size_t(nq)) {}
};

/// The hits of nq prepared device queries q (with |q|^2 in qSqNorms for L2)
/// within `radius` of the corpus, appended to hits rows hitRow0 ...
/// Temporary memory: at most about 90% of what the resources have left.
void flatRangeSearch(GpuResources* res, int device, cudaStream_t stream, const RangeCorpus& c,
                     FlatMetric metric, const float* q, const float* qSqNorms, int64_t nq,
                     float radius, RangeHits* hits, int64_t hitRow0);

/// flatRangeSearch of nq device queries as the user gave them, over the
/// vectors of c that `filter` (over c.nb positions; null: all) selects:
/// queries prepared here for the metric (cosine / Pearson) unless
/// `prepared`, |q|^2 computed for L2; a selection of one run scans that
/// run, any other the whole corpus with the rest masked in each tile. On
/// the device's default stream.
void flatRangeSearchQueries(GpuResources* res, int device, RangeCorpus c,
                            const IdSelection* filter, FlatMetric metric, const float* queries,
                            int64_t nq, bool prepared, float radius, RangeHits* hits,
                            int64_t hitRow0);

}  // namespace gpu
}  // namespace faiss_ext
