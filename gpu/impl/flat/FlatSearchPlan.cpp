#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"

#include "faiss_ext/gpu/impl/flat/BoundedFlatSearch.h"
#include "faiss_ext/gpu/impl/select/MergeQueue.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>

namespace faiss_ext {
namespace gpu {

SelectAlgo planSelectAlgo(SelectAlgo requested, int64_t nq, int64_t nb, int64_t k, int d) {
    FAISS_THROW_IF_NOT_FMT(int(requested) >= 0 && int(requested) <= 3,
                           "GpuIndexQuickSelectFlat: unknown selectAlgo %d", int(requested));
    const int64_t n = std::max<int64_t>(nb, 1);
    const int64_t kk = std::max<int64_t>(1, std::min<int64_t>(k, n));
    const SelectAlgo algo =
            requested == SelectAlgo::Auto ? chooseSelectAlgo(nq, n, kk, d) : requested;
    FAISS_THROW_IF_NOT_FMT(algo != SelectAlgo::MergeQueue || kk <= select::kMergeQueueMaxK,
                           "GpuIndexQuickSelectFlat: the merge queue selects at most k = %lld "
                           "(asked for %lld); use QuickMultiSelect or Auto",
                           (long long)select::kMergeQueueMaxK, (long long)kk);
    return algo;
}

DistancePrecision planDistancePrecision(DistancePrecision requested, int64_t nq, int64_t nb,
                                        int64_t k, int d, FlatMetric metric,
                                        bool vectorsOnDevice) {
    FAISS_THROW_IF_NOT_FMT(int(requested) >= 0 && int(requested) <= 3,
                           "GpuIndexQuickSelectFlat: unknown distancePrecision %d (Auto 0, "
                           "FP32 1, TF32Bounded 2, BF16x3Bounded 3)", int(requested));
    if (requested != DistancePrecision::Auto) return requested;
    return chooseDistancePrecision(nq, nb, k, d, metric, vectorsOnDevice);
}

FlatSearchOptions planFlatSearch(int64_t nb, bool vectorsOnDevice, FlatMetric metric, int d,
                                 int64_t nq, int64_t k, const FlatSearchRequest& request) {
    FlatSearchOptions o;
    o.algo = planSelectAlgo(request.algo, nq, nb, k, d);
    o.group = request.group;
    o.thFactor = request.thFactor;
    o.precision = planDistancePrecision(request.precision, nq, nb, k, d, metric, vectorsOnDevice);
    // Measured (docs/benchmarks.md, H200): on data TF32 cannot certify,
    // BF16x3 ran at 1.9x the FP32 path (10M x 96 far from the origin).
    o.cascadeToBf16x3 = request.precision == DistancePrecision::Auto &&
                        o.precision == DistancePrecision::TF32Bounded;
    if (isBoundedPrecision(o.precision) && nb > 0) {
        // The candidates are selected at m = boundedCandidateCount(k, nb)
        // per query (the larger BF16x3 count where a pass may use it): the
        // algorithm is planned for m. A merge queue forced by the caller but
        // unable to hold m gives way to quick multi-select for the
        // candidates only (the FP32 fallback keeps it at k).
        const bool bf16x3 =
                o.precision == DistancePrecision::BF16x3Bounded || o.cascadeToBf16x3;
        const int64_t m = boundedCandidateCount(std::min<int64_t>(k, nb), nb, bf16x3);
        if (o.algo == SelectAlgo::MergeQueue && m > select::kMergeQueueMaxK) {
            o.candidateAlgo = SelectAlgo::QuickMultiSelect;
        } else {
            o.candidateAlgo = planSelectAlgo(request.algo, nq, nb, m, d);
            o.sampledCandidates = request.algo == SelectAlgo::Auto;
        }
    }
    return o;
}

}  // namespace gpu
}  // namespace faiss_ext
