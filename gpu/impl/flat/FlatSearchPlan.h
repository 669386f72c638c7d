// The one place that turns what a caller asks of an exact flat search (an
// algorithm and a precision, possibly Auto) into the options FlatStorage
// runs: Auto resolved by the measured rules (chooseSelectAlgo,
// chooseDistancePrecision), k clamped to the vectors searched, and for the
// bounded TF32 path the algorithm of its candidate selection. The index
// class, the GNND partitioned build and the search graph's entry points all
// plan through it; the path (tiled, fused few-query, radix) is chosen later
// by FlatStorage from the shape (FlatSearchPath.h), where it can see the
// temporary memory.
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/FlatOptions.h"
#include "faiss_ext/gpu/SelectOptions.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// What a caller asks of one flat search.
struct FlatSearchRequest {
    SelectAlgo algo = SelectAlgo::Auto;                   ///< Auto: chooseSelectAlgo
    DistancePrecision precision = DistancePrecision::Auto;  ///< Auto: chooseDistancePrecision
    int group = 4;     ///< merge queue's G
    int thFactor = 8;  ///< TH-heap's n_S / k
};

/// The selection algorithm a search of nq queries at k over nb vectors of
/// dimension d runs: `requested`, or Auto's choice at min(k, nb). Throws for
/// a merge queue asked past its k (kMergeQueueMaxK) and for unknown values.
SelectAlgo planSelectAlgo(SelectAlgo requested, int64_t nq, int64_t nb, int64_t k, int d);

/// The precision such a search runs (FP32 or TF32Bounded). Throws for
/// unknown values.
DistancePrecision planDistancePrecision(DistancePrecision requested, int64_t nq, int64_t nb,
                                        int64_t k, int d, FlatMetric metric,
                                        bool vectorsOnDevice);

/// The options FlatStorage::search runs for nq queries at k over nb
/// vectors (on the device or not) for `request`; the caller adds
/// beforeResults, filter, boundedStats. A filtered search plans for the
/// number of selected vectors: that is the corpus its fast forms search.
FlatSearchOptions planFlatSearch(int64_t nb, bool vectorsOnDevice, FlatMetric metric, int d,
                                 int64_t nq, int64_t k, const FlatSearchRequest& request);

}  // namespace gpu
}  // namespace faiss_ext
