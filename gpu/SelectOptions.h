// The k-selection algorithms: the choice shared by selectK (GpuSelect.h),
// GpuIndexQuickSelectFlat and the engines behind them (impl/flat/RowSelector.h),
// in a header of its own so that the engines need no public index header.
#pragma once

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

}  // namespace gpu
}  // namespace faiss_ext
