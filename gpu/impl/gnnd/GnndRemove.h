// Removal from a canonical graph (Gnnd.h): the survivors' lists with the
// removed entries dropped, ids renumbered, the holes moved to the end.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// Row i of outIds / outDists (m x K) = row kept[i] of ids / dists (n x K),
/// its entries whose newId is >= 0 in their order, renumbered by newId
/// (n values: the survivor's new position, -1 for a removed node), then
/// empty entries (id -1, distance +inf). Device pointers.
void compactLists(cudaStream_t stream, const int* ids, const float* dists, int K,
                  const uint32_t* kept, int64_t m, const int* newId, int* outIds,
                  float* outDists);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
