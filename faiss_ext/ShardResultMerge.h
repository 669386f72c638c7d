// Merging the k-NN results of index shards on the host: the k best of
// nshards sorted lists per query, as a sharded index's driver needs after
// each shard has searched its slice of the data.
//
// Each shard's rows are already sorted best first, so the merge is a k-way
// merge of sorted lists (one read position per shard): O(k * nshards)
// comparisons per query and no data movement besides the k results. Pushing
// every candidate through a heap (FAISS's ResultHeap / HeapArray::addn_with_ids)
// costs O(k * nshards * log k) and re-sorts at the end what was sorted to
// begin with.
#pragma once

#include <cstdint>

namespace faiss_ext {

/// Merges per-shard k-NN results into the k best per query (host memory).
///
/// Inputs: for each shard s in [0, nshards), distances[s] and labels[s] point
/// to nq x k row-major results whose rows are sorted best first (ascending
/// distance; descending similarity when keepMax, FAISS's
/// METRIC_INNER_PRODUCT convention). A label of -1 marks an absent entry
/// (FAISS pads rows past a shard's ntotal with it): it is skipped whatever
/// its distance, wherever it is in the row (normally at the end).
///
/// Output: outDistances / outLabels (nq x k, row-major) get, per query, the
/// k best present entries of all the shards, best first. Ties go to the
/// lower shard index, then to the earlier position in the shard's row, so
/// the result is deterministic and the same for any thread count. A NaN
/// distance ranks after every number (as select_k puts NaN last). Rows with
/// fewer than k present entries are padded with label -1 and distance +inf
/// (-inf when keepMax), the padding of faiss_ext's indexes (FAISS's own
/// IndexFlat and ResultHeap pad with +-FLT_MAX instead).
///
/// Queries are spread over at most maxThreads OpenMP threads, even where
/// OMP_NUM_THREADS is lower (0: OpenMP's default; negative is refused). A
/// caller whose cores are busy elsewhere should pass few: in a Ray driver
/// beside GPU actors, four shards of 10,000 x 10 took 12-17 ms over 16
/// threads, which wait for descheduled team members at the barrier, and
/// 0.9-1.6 ms on one (H200 host; 0.24 ms over 16 threads in an idle process). The outputs must not overlap the
/// inputs. Throws faiss::FaissException, before writing anything, unless
/// nq >= 0, k > 0, nshards > 0, maxThreads >= 0, nq * k fits in int64, distances and labels
/// are non-null and, when nq > 0, every shard's pointers and the outputs are
/// non-null (for nq == 0 nothing is read or written).
void mergeShardResults(int64_t nq, int64_t k, int nshards, const float* const* distances,
                       const int64_t* const* labels, bool keepMax, float* outDistances,
                       int64_t* outLabels, int maxThreads = 0);

}  // namespace faiss_ext
