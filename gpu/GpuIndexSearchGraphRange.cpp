// GpuIndexSearchGraph::range_search: exact, over the stored vectors (the
// flat engine's range search, impl/flat/RangeSearch.h). A radius bounds no
// beam: a graph search would have to guess how many results to collect, so
// the exact scan answers instead, with recall 1 at the exact index's cost
// (docs/filters.md).
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"

#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/impl/flat/RangeSearch.h"
#include "faiss_ext/gpu/utils/IdSelection.h"

#include <faiss/impl/FaissAssert.h>

#include <memory>
#include <typeinfo>

namespace faiss_ext {
namespace gpu {

void GpuIndexSearchGraph::checkRangeSearchParams_(const faiss::SearchParameters* params) const {
    if (!params || typeid(*params) == typeid(faiss::SearchParameters)) return;
    auto p = dynamic_cast<const SearchParametersSearchGraph*>(params);
    FAISS_THROW_IF_NOT_FMT(p, "GpuIndexSearchGraph: range_search cannot apply search parameters "
                           "of type %s", typeid(*params).name());
    // The scan is exact: the beam search's knobs have nothing to act on.
    const bool defaults = p->itopk == 0 && p->searchWidth == 0 && p->maxIterations == 0 &&
                          p->minIterations == 0 && p->seedRounds == 0 && p->entrySeeds == -1 &&
                          p->fp16 == -1 && p->blocksPerQuery == 0 && p->seed == -1 &&
                          p->unlikeQueryRatio == -1.f && p->unlikeQueryProbes == -1;
    FAISS_THROW_IF_NOT_MSG(defaults, "GpuIndexSearchGraph: range_search is an exact scan; "
                           "the beam-search settings of SearchParametersSearchGraph (itopk, "
                           "searchWidth, ...) cannot be applied to it (only sel is read)");
}

void GpuIndexSearchGraph::rangeSearchImpl_(idx_t n, const float* x, float radius,
                                           const faiss::SearchParameters* params,
                                           RangeHits* hits, idx_t row0) const {
    if (ntotal == 0) return;
    const std::unique_ptr<IdSelection> selection = IdSelection::fromParams(params, ntotal);
    RangeCorpus c;
    c.vectors = knn_->getVectorsDevice();
    c.nb = ntotal;
    c.d = d;
    // Cosine / Pearson vectors are stored prepared: the queries are
    // prepared for flatMetric_, then compared as inner products.
    flatRangeSearchQueries(resources_.get(), config_.device, c, selection.get(), flatMetric_, x, n,
                           /*prepared=*/false, radius, hits, row0);
}

}  // namespace gpu
}  // namespace faiss_ext
