// The copy of the vectors a search graph's beam search traverses
// (SearchGraph.h, SearchVectors): FP16 of x minus the vectors' mean, times a
// power of two, so that any finite data fits FP16's range and data far from
// the origin keeps its digits; made from the index's FP32 vectors, which stay
// for the final re-scoring. Owned by GpuIndexSearchGraph; allocated before
// the state it replaces changes, so that running out of memory changes
// nothing, then filled.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {

class GpuResources;

namespace graph {

class TraversalCopy {
  public:
    /// Device bytes of the copy of n vectors of d (2 bytes a value, and the
    /// mean: a float a dimension).
    static size_t bytesFor(int64_t n, int d);

    /// Allocates the copy of n vectors of d (throws, changing nothing,
    /// where the memory is short); fill() makes it.
    void allocate(GpuResources* res, int device, int64_t n, int d, const char* who);

    /// Makes the allocated copy from x (the allocated n x d, device) on
    /// `stream`, which it synchronises.
    void fill(cudaStream_t stream, const float* x);

    void release();
    bool empty() const { return n_ == 0; }
    int64_t size() const { return n_; }  ///< vectors
    void swap(TraversalCopy& o) noexcept;

    /// Sets the traversal fields of v (none where empty).
    void view(SearchVectors& v) const;

  private:
    GpuResources* res_ = nullptr;  ///< the allocation's, for fill()'s temporaries
    int device_ = 0;
    int64_t n_ = 0;
    int d_ = 0;
    DeviceVector<uint16_t> x16_;
    float scale16_ = 1.f;
    DeviceVector<float> mean16_;
};

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
