// The engine behind GpuIndexQuickSelectFlat: device storage of the vectors
// and their norms, and the tiled exact search (GEMM tile, quick multi-select
// per tile, merge of the tiles' candidates, sort, decode).
#pragma once

#include "faiss_ext/Metric.h"
#include "gpu/GpuResources.h"

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// Device-resident vectors of a flat index.
class FlatStorage {
public:
    /// Storage of d-dimensional vectors for `metric` on `device`.
    FlatStorage(GpuResources* res, int device, int d, FlatMetric metric);
    ~FlatStorage();
    FlatStorage(const FlatStorage&) = delete;
    FlatStorage& operator=(const FlatStorage&) = delete;

    /// Number of stored vectors.
    int64_t size() const { return ntotal_; }

    /// Ensures room for n vectors in total.
    void reserve(int64_t n);

    /// Appends n vectors (device pointer); prepares them for the metric
    /// unless `prepared`. On failure nothing changes.
    void append(const float* x, int64_t n, bool prepared);

    /// Appends n vectors from host memory (paged through the device).
    void appendHost(const float* x, int64_t n, bool prepared);

    /// Removes all vectors and frees the memory.
    void reset();

    /// Copies vectors i0 .. i0 + n - 1 to out (host or device pointer).
    void copyVectors(int64_t i0, int64_t n, float* out) const;

    /// Device pointer to the vectors.
    const float* vectors() const { return vectors_; }

    /// Exact k-NN of nq queries (device pointers throughout; k >= 1).
    void search(const float* queries, int64_t nq, int64_t k, float* distances,
                int64_t* labels) const;

private:
    GpuResources* res_;
    int device_;
    int d_;
    FlatMetric metric_;
    int64_t ntotal_ = 0;
    int64_t capacity_ = 0;
    float* vectors_ = nullptr;
    float* norms_ = nullptr;  // |x|^2, L2 only
};

}  // namespace gpu
}  // namespace faiss_ext
