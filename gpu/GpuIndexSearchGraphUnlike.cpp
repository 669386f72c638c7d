// GpuIndexSearchGraph: queries unlike the data (graph/UnlikeQueryRule.h).
// After a beam search each query's nearest result is compared with that
// result's neighbour radius in the k-NN lists; when enough of a batch is
// flagged, the flagged queries are answered again by exact search over a
// copy of the vectors in the flat engine (impl/flat/FlatSearch.h), made by
// the first such search and dropped when the vectors change.
#include <faiss/impl/FaissAssert.h>

#include <vector>

#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"
#include "faiss_ext/gpu/impl/graph/ExactRowAnswers.h"
#include "faiss_ext/gpu/impl/graph/FilteredGraphSearch.h"
#include "faiss_ext/gpu/impl/graph/UnlikeQueries.h"
#include "faiss_ext/gpu/impl/graph/UnlikeQueryRule.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {

void GpuIndexSearchGraph::answerUnlikeQueries_(idx_t n, const float* q, int64_t k, float ratio,
                                               float* distances, idx_t* labels,
                                               const ExactSearchFn& exact) const {
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    graph::NeighbourLists lists;
    lists.ids = knn_->getGraphIdsDevice();
    lists.dists = knn_->getGraphDistancesDevice();
    lists.stride = knn_->getBuildDegree();
    lists.K = sConfig_.knnDegree;
    TempBuffer<uint8_t> flags(resources_.get(), config_.device, size_t(n), stream);
    TempBuffer<int> count(resources_.get(), config_.device, 1, stream);
    graph::flagUnlikeQueries(distances, labels, n, int(k), lists, flatMetric_ != FlatMetric::L2,
                             ratio, flags.data(), count.data(), stream);
    int flagged = 0;
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(&flagged, count.data(), sizeof(int), cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    unlikeCounts_.searched += n;
    unlikeCounts_.flagged += flagged;
    if (!graph::answerUnlikeQueriesExactly(flagged, n, sConfig_.unlikeQueryShare)) return;
    ExactSearchFn search = exact;
    if (!search) {
        const FlatStorage* copy = exactCopy_();
        if (!copy) {
            unlikeCounts_.leftForLackOfMemory += flagged;
            return;
        }
        search = [this, copy](int64_t m, const float* mq, int64_t mk, float* D, int64_t* I) {
            FlatSearchOptions o = planFlatSearch(copy->size(), true, selectionCorpus_().metric, d,
                                                 m, mk, FlatSearchRequest());
            o.queriesPrepared = true;
            copy->search(mq, m, mk, D, I, o);
        };
    }
    const std::vector<uint32_t> rows = graph::flaggedRows(flags.data(), n, stream);
    graph::answerRowsExactly(resources_.get(), config_.device, d, rows, q, k, search, distances,
                             labels);
    unlikeCounts_.answeredExactly += int64_t(rows.size());
}

const FlatStorage* GpuIndexSearchGraph::exactCopy_() const {
    if (exactCopyStorage_) return exactCopyStorage_.get();
    const size_t bytes = size_t(ntotal) * (size_t(d) + 1) * sizeof(float);
    // a copy that would leave less than an eighth of the free memory to the
    // searches' temporaries is not made (the graph's answers stay)
    const size_t free = deviceFreeBytes(config_.device);
    if (bytes > free - free / 8) return nullptr;
    std::unique_ptr<FlatStorage> copy(new FlatStorage(
        resources_.get(), config_.device, d, selectionCorpus_().metric, VectorStorage::Device));
    copy->append(knn_->getVectorsDevice(), ntotal, /*prepared=*/true);
    exactCopyStorage_ = std::move(copy);
    return exactCopyStorage_.get();
}

void GpuIndexSearchGraph::dropExactCopy_() { exactCopyStorage_.reset(); }

UnlikeQueryCounts GpuIndexSearchGraph::getUnlikeQueryCounts() const {
    auto lock = lockOps_();
    return unlikeCounts_;
}

void GpuIndexSearchGraph::resetUnlikeQueryCounts() {
    auto lock = lockOps_();
    unlikeCounts_ = UnlikeQueryCounts();
}

}  // namespace gpu
}  // namespace faiss_ext
