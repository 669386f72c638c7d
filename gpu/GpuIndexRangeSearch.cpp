// GpuIndex::range_search: the checks and the host-query paging every GPU
// index shares; subclasses search device queries in rangeSearchImpl_.
#include "faiss_ext/gpu/GpuIndex.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/impl/flat/RangeSearch.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>
#include <typeinfo>

namespace faiss_ext {
namespace gpu {

namespace {

/// result's lims, labels and distances from the collected hits.
void fillRangeResult(const RangeHits& hits, faiss::RangeSearchResult* result) {
    const size_t nq = hits.labels.size();
    for (size_t i = 0; i < nq; ++i) result->lims[i] = hits.labels[i].size();
    result->do_allocation();
    for (size_t i = 0; i < nq; ++i) {
        std::copy(hits.labels[i].begin(), hits.labels[i].end(), result->labels + result->lims[i]);
        std::copy(hits.distances[i].begin(), hits.distances[i].end(),
                  result->distances + result->lims[i]);
    }
}

}  // namespace

void GpuIndex::checkRangeSearchParams_(const faiss::SearchParameters* params) const {
    FAISS_THROW_IF_NOT_FMT(!params || typeid(*params) == typeid(faiss::SearchParameters),
                           "range_search: this index cannot apply search parameters of type %s "
                           "(a plain faiss::SearchParameters, for its selector, is accepted)",
                           typeid(*params).name());
}

void GpuIndex::rangeSearchImpl_(idx_t, const float*, float, const faiss::SearchParameters*,
                                RangeHits*, idx_t) const {
    FAISS_THROW_MSG("range_search is not implemented for this GPU index");
}

void GpuIndex::range_search(idx_t n, const float* x, float radius,
                            faiss::RangeSearchResult* result,
                            const faiss::SearchParameters* params) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_MSG(supportsRangeSearch_(),
                           "range_search is not implemented for this GPU index "
                           "(GpuIndexQuickSelectFlat and GpuIndexSearchGraph have it: "
                           "docs/filters.md)");
    FAISS_THROW_IF_NOT_FMT(n >= 0, "range_search: n must be >= 0 (got %lld)", (long long)n);
    FAISS_THROW_IF_NOT_MSG(result, "range_search: result is a null pointer");
    FAISS_THROW_IF_NOT_FMT(result->nq == size_t(n),
                           "range_search: the result was made for %zu queries, n is %lld",
                           result->nq, (long long)n);
    FAISS_THROW_IF_NOT_MSG(result->lims, "range_search: result->lims is a null pointer");
    FAISS_THROW_IF_NOT_MSG(!result->labels && !result->distances,
                           "range_search: the result holds results already (pass a fresh one)");
    FAISS_THROW_IF_NOT_MSG(!std::isnan(radius), "range_search: radius is NaN");
    FAISS_THROW_IF_NOT_FMT(metric_type != faiss::METRIC_L2 || radius >= 0.f,
                           "range_search: an L2 radius bounds squared distances and must be "
                           ">= 0 (got %g)", double(radius));
    FAISS_THROW_IF_NOT_MSG(!params || !params->sel || honoursSelector_(),
                           "range_search: this GPU index cannot apply an IDSelector");
    checkRangeSearchParams_(params);
    FAISS_THROW_IF_NOT_MSG(n == 0 || x, "range_search: x is a null pointer");
    checkUsable_();
    checkVectorCount("range_search", n, d);
    RangeHits hits(n);
    if (n > 0) {
        checkFinite_(n, x, "range_search: query");
        DeviceScope scope(config_.device);
        if (onThisDevice_(x, "range_search: x")) {
            rangeSearchImpl_(n, x, radius, params, &hits, 0);
        } else {
            cudaStream_t stream = resources_->getDefaultStream(config_.device);
            const size_t rowBytes = sizeof(float) * size_t(d);
            const idx_t chunk = std::max<idx_t>(1, idx_t(minPagingSize_ / rowBytes));
            TempBuffer<float> xBuf(resources_.get(), config_.device,
                                   size_t(std::min(n, chunk)) * d, stream);
            for (idx_t i = 0; i < n; i += chunk) {
                const idx_t m = std::min(chunk, n - i);
                FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(xBuf.data(), x + size_t(i) * d,
                                                     sizeof(float) * size_t(m) * d,
                                                     cudaMemcpyHostToDevice, stream));
                rangeSearchImpl_(m, xBuf.data(), radius, params, &hits, i);
            }
        }
    }
    fillRangeResult(hits, result);
}

}  // namespace gpu
}  // namespace faiss_ext
