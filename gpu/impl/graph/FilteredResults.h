// Device steps of a filtered graph search (GpuIndexSearchGraph with
// SearchParameters::sel): the beam search runs unfiltered over a widened
// candidate list, so that traversal passes through excluded nodes, and the
// selected candidates are kept here; queries left with fewer than k are
// answered again by exact search over the selection. The moves of result
// rows also serve the other rows answered again (RowAnswers.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace graph {

/// For each of nq queries, the first k of its kWide sorted candidates
/// (candD / candI, nq x kWide, -1 ending a row) whose id has its bit set in
/// `keepBits` go to distances / labels (nq x k), padded with -1 and +inf
/// (-inf for similarities); shortRows[q] = 1 where fewer than k were kept.
void keepSelectedCandidates(const float* candD, const int64_t* candI, int64_t nq, int kWide,
                            const uint32_t* keepBits, int k, bool similarity, float* distances,
                            int64_t* labels, uint8_t* shortRows, cudaStream_t stream);

/// Row rows[j] of dst (k values each) = row j of src, for j < n.
void scatterResultRows(const float* srcD, const int64_t* srcI, const uint32_t* rows, int64_t n,
                       int k, float* dstD, int64_t* dstI, cudaStream_t stream);

/// Row j of dst (k values each) = row rows[j] of src, for j < n.
void gatherResultRows(const float* srcD, const int64_t* srcI, const uint32_t* rows, int64_t n,
                      int k, float* dstD, int64_t* dstI, cudaStream_t stream);

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
