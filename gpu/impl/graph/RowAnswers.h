// Rows of a graph search's results answered again by another search: the
// filtered search's queries left with fewer than k selected candidates
// (FilteredGraphSearch.h: exact search) and the queries unlike the data
// (UnlikeQueryRule.h: the probe of ProbeSearch.h or exact search). The
// flagged queries are gathered, searched in one batch and their rows
// scattered back.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace faiss_ext {
namespace gpu {

class GpuResources;

namespace graph {

/// k-NN of n device queries (prepared) into device D / I (n x k), in the
/// index's conventions (labels: stored positions). On entry D / I hold the
/// rows' current answers: the probe merges them, the exact search writes
/// over them.
using RowSearch = std::function<void(int64_t n, const float* q, int64_t k, float* D, int64_t* I)>;

/// The rows whose flag is set (flags: n device bytes), on the host, in order.
std::vector<uint32_t> flaggedRows(const uint8_t* flags, int64_t n, cudaStream_t stream);

/// Rows `rows` of distances / labels (device, k a row) replaced by
/// `search`'s answers for those rows of the queries q (device, d a row),
/// given those rows' current answers.
void answerRowsAgain(GpuResources* res, int device, int d, const std::vector<uint32_t>& rows,
                     const float* q, int64_t k, const RowSearch& search, float* distances,
                     int64_t* labels);

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
