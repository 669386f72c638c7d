// Filtered search over a graph index, shared by GpuIndexSearchGraph (beam
// search) and GpuKnnGraphGNND (greedy search): the graph search runs
// unfiltered over a widened candidate list, so that its traversal passes
// through excluded nodes, the selected candidates are kept, and queries left
// with fewer than k selected candidates (a filter correlated with their
// region) are answered again by exact search over the selection. Each index
// picks the width and decides when exact search over the selection costs
// less (docs/filters.md).
#pragma once

#include <cstdint>
#include <functional>

#include "faiss_ext/gpu/impl/flat/FlatSearch.h"

namespace faiss_ext {
namespace gpu {

class GpuResources;
class IdSelection;

namespace graph {

/// The stored vectors a filtered search reads, on the device.
struct SelectionCorpus {
    GpuResources* res = nullptr;
    int device = 0;
    const float* vectors = nullptr;  ///< ntotal x d, prepared (cosine, Pearson)
    int64_t ntotal = 0;
    int d = 0;
    FlatMetric metric = FlatMetric::L2;  ///< L2 or InnerProduct (similarities)
};

/// The unfiltered graph search: for n device queries, kWide candidates each
/// (sorted, distances as the index reports them, -1 ending a short row).
using CandidateSearch =
        std::function<void(int64_t n, const float* q, int64_t kWide, float* D, int64_t* I)>;

/// A filtered graph search asks the graph search for this many candidates
/// per result it needs: k / selectivity of them hold k selected ones on
/// average, twice that leaves room for filters correlated with the query.
constexpr int64_t kFilterOverfetch = 2;

/// Exact search over the selection runs when it holds at most this many
/// vectors per candidate distance a graph search computes (width x degree):
/// the GEMM computes a distance an order of magnitude cheaper than the graph
/// search's scattered reads (bench_filter --graph measures both sides).
constexpr int64_t kExactCostRatio = 16;

/// Candidates for k results when `kept` of `total` vectors are selected: a
/// power of two >= max(k, 32) near kFilterOverfetch x k / selectivity,
/// capped just past `cap` (a width past cap means exact search).
int64_t filteredCandidates(int64_t k, int64_t kept, int64_t total, int64_t cap);

/// Whether `kept` selected vectors are searched exactly rather than through
/// kWide graph candidates of a graph of out-degree `degree` (kWide past the
/// graph search's `cap`, or the selection cheaper by kExactCostRatio).
bool searchSelectionInstead(int64_t kept, int64_t kWide, int64_t cap, int64_t degree);

/// Exact k-NN of n device queries (prepared) among the selected vectors;
/// labels are stored positions.
void searchSelectionExactly(const SelectionCorpus& corpus, const IdSelection& selection, int64_t n,
                            const float* q, int64_t k, float* distances, int64_t* labels);

/// The selected first k of kWide candidates from `candidates`; rows short of
/// k selected ones answered by searchSelectionExactly.
void searchSelectedCandidates(const SelectionCorpus& corpus, const IdSelection& selection,
                              int64_t n, const float* q, int64_t k, int64_t kWide,
                              const CandidateSearch& candidates, float* distances,
                              int64_t* labels);

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
