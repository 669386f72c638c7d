// Device step of the detection of queries unlike the data
// (UnlikeQueryRule.h): after a beam search, each query's nearest result is
// compared with that result's neighbour radius in the k-NN lists.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace graph {

/// The k-NN lists the neighbour radii come from (GNND's: `stride` entries
/// a vector, of which the first K are its list, nearest first, -1 padded;
/// distances squared L2 or minus inner products).
struct NeighbourLists {
    const int* ids = nullptr;
    const float* dists = nullptr;
    int stride = 0;
    int K = 0;
};

/// flags[q] = 1 where query q (its results distances / labels, nq x k,
/// nearest first) is unlike the data at `ratio` (isUnlikeQuery), else 0;
/// *count (one device int, zeroed here) receives how many were flagged.
/// similarity: cosine / Pearson results (inner products of unit vectors).
void flagUnlikeQueries(const float* distances, const int64_t* labels, int64_t nq, int k,
                       const NeighbourLists& lists, bool similarity, float ratio, uint8_t* flags,
                       int* count, cudaStream_t stream);

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
