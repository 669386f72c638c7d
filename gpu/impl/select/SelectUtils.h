// Small element-wise kernels of the public selection call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace select {

/// dst[i] = -src[i] for i < count (device pointers; may alias).
void negateCopy(const float* src, float* dst, int64_t count, cudaStream_t stream);

/// labels[r * k + j] = inIndices[r * n + labels[r * k + j]] for labels >= 0
/// (device pointers).
void gatherIndices(const int64_t* inIndices, int64_t n, int64_t* labels, int64_t rows, int64_t k,
                   cudaStream_t stream);

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
