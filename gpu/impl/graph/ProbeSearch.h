// The search of the probe lists (ProbeLists.h) that answers queries unlike
// the data: each query's `probes` nearest lists (an exact search of the
// centres), then every vector of those lists scored in FP32 and the k best
// kept. The query-list pairs are grouped by list, so that one thread block
// reads a list's vectors once for up to 32 queries that probe it (on a hard
// 1M set's queries from other centres, 10,000 queries at 32 probes touch
// 3,179 of 4,096 lists, p50 22 / p99 1,139 queries a list, where a
// one-query-per-block inverted-file scan reads each list once per query
// that probes it); each block keeps per query and list the k best in
// shared memory, and a last step merges a query's lists.
#pragma once

#include <cstdint>

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/graph/ProbeLists.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

/// The most results a probe returns per query (larger k: exact search).
constexpr int kProbeMaxK = 64;

/// Whether probeSearch serves k results of dim-dimensional vectors on
/// `device` (k <= kProbeMaxK, and one list tile of the vectors beside 8
/// queries fits in a block's shared memory: d up to about 1,400 on an
/// H100 / H200).
bool probeSearchApplies(int64_t k, int dim, int device);

/// What one probe search reads and writes.
struct ProbeRequest {
    const float* queries = nullptr;  ///< m x dim, device, prepared like the vectors
    int64_t m = 0;
    int64_t k = 0;   ///< 1 <= k, probeSearchApplies
    int probes = 0;  ///< lists scanned per query (>= 1; at most lists() are)
    /// The index reports inner products of unit vectors (cosine, Pearson):
    /// the largest first. Otherwise squared L2 distances, the smallest
    /// first.
    bool similarity = false;
    float* distances = nullptr;  ///< m x k, device
    int64_t* labels = nullptr;   ///< m x k, device: storage rows (-1 past the vectors scanned)
    /// distances / labels hold, on entry, answers to merge (a graph search's,
    /// in the same conventions, -1 padded): the results are the k best of
    /// those and the probed vectors, each row once; the k-th of them also
    /// bounds the scan from the start (fewer candidates to sort).
    bool mergeCurrent = false;
    /// A selection (device bitmap over the storage rows, bit r % 32 of word
    /// r / 32; null: every row): rows outside it are never results.
    const uint32_t* keepBits = nullptr;
};

/// The k nearest of the vectors in each query's `probes` nearest lists (and
/// of its current answers with mergeCurrent), in distance order (ties: the
/// lower row first), into r.distances / r.labels on the default stream of
/// `device`.
void probeSearch(GpuResources* res, int device, const ProbeLists& lists, const ProbeRequest& r);

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
