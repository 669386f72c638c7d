// The k-selection algorithms: the choice shared by selectK (GpuSelect.h),
// GpuIndexQuickSelectFlat and the engines behind them (impl/flat/RowSelector.h),
// in a header of its own so that the engines need no public index header.
#pragma once

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// The k-selection algorithm (GpuIndexQuickSelectFlat, selectK).
enum class SelectAlgo : int {
    Auto = 0,              ///< chosen by (k, n, rows, d) from measured crossovers
    QuickMultiSelect = 1,  ///< Komarov et al.'s quick multi-select
    MergeQueue = 2,        ///< Tang et al.'s merge queue + buffered search + hierarchical
                           ///< partition; k <= 8192 (a clear error beyond)
    THHeap = 3,            ///< Matsumoto & Yiu's TH-heap: GPU threshold pruning, CPU min-max heap
};

/// "auto", "quick-multi-select", "merge-queue", "th-heap".
const char* selectAlgoName(SelectAlgo algo);

/// Parses selectAlgoName's names (also "qms", "mq", "thheap"); throws on others.
SelectAlgo selectAlgoFromName(const char* name);

/// The algorithm Auto runs for a selection of k out of n per row over `rows`
/// rows (d: dimension of the vectors behind the distances, 0 if unknown).
/// The crossovers are the ones measured by bench suite `select` and recorded
/// in bench/results/select.jsonl.
SelectAlgo chooseSelectAlgo(int64_t rows, int64_t n, int64_t k, int64_t d = 0);

}  // namespace gpu
}  // namespace faiss_ext
