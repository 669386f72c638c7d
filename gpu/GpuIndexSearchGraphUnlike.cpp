// GpuIndexSearchGraph: queries unlike the data (graph/UnlikeQueryRule.h).
// After a beam search each query's nearest result is compared with that
// result's neighbour radius in the k-NN lists; the flagged queries are
// answered again, by probing the k-means lists nearest to them
// (graph/ProbeSearch.h) or by exact search over a copy of the vectors in
// the flat engine (impl/flat/FlatSearch.h). The lists and the copy are made
// by the first search that needs them and dropped when the vectors change.
#include <faiss/impl/FaissAssert.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"
#include "faiss_ext/gpu/impl/graph/FilteredGraphSearch.h"
#include "faiss_ext/gpu/impl/graph/ProbeLists.h"
#include "faiss_ext/gpu/impl/graph/ProbePlan.h"
#include "faiss_ext/gpu/impl/graph/ProbeSearch.h"
#include "faiss_ext/gpu/impl/graph/RowAnswers.h"
#include "faiss_ext/gpu/impl/graph/UnlikeQueries.h"
#include "faiss_ext/gpu/impl/graph/UnlikeQueryRule.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"
#include "faiss_ext/gpu/utils/IdSelection.h"

namespace faiss_ext {
namespace gpu {

namespace {

/// Whether `bytes` more of resident memory leave at least an eighth of the
/// free memory to the searches' temporaries.
bool leavesAnEighth(size_t bytes, int device) {
    const size_t free = deviceFreeBytes(device);
    return bytes <= free - free / 8;
}

}  // namespace

void GpuIndexSearchGraph::answerUnlikeQueries_(idx_t n, const float* q, int64_t k, float ratio,
                                               int probes, float* distances, idx_t* labels,
                                               const IdSelection* selection) const {
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
    if (flagged == 0) return;
    const bool probing = probes > 0 && graph::probeSearchApplies(k, d, config_.device) &&
                         (!selection || graph::probeServesSelection(selection->count(), ntotal));
    // the exact search scans every (selected) vector however few queries it takes
    if (!probing && !graph::answerUnlikeQueriesExactly(flagged, n, sConfig_.unlikeQueryShare)) {
        return;
    }
    TempBuffer<uint32_t> keepBits(resources_.get(), config_.device,
                                  probing && selection ? selection->words().size() : 0, stream);
    if (probing && selection) selection->copyWordsTo(keepBits.data(), stream);
    const RowSearchFn search = probing ? probeSearch_(probes, selection ? keepBits.data() : nullptr)
                               : selection ? selectionSearch_(*selection)
                                           : exactCopySearch_();
    if (!search) {
        unlikeCounts_.leftForLackOfMemory += flagged;
        return;
    }
    const std::vector<uint32_t> rows = graph::flaggedRows(flags.data(), n, stream);
    graph::answerRowsAgain(resources_.get(), config_.device, d, rows, q, k, search, distances,
                           labels);
    (probing ? unlikeCounts_.answeredByProbe : unlikeCounts_.answeredExactly) +=
        int64_t(rows.size());
}

GpuIndexSearchGraph::RowSearchFn GpuIndexSearchGraph::probeSearch_(int probes,
                                                                   const uint32_t* keepBits) const {
    if (!probeLists_) {
        // the lists, and the k-means build's temporaries (assignments, sort)
        const size_t bytes =
            graph::probeListsBytes(ntotal, d) + size_t(ntotal) * 4 * sizeof(uint32_t);
        if (!leavesAnEighth(bytes, config_.device)) return nullptr;
        const auto t0 = std::chrono::steady_clock::now();
        probeLists_.reset(new graph::ProbeLists(resources_.get(), config_.device,
                                                resources_->getDefaultStream(config_.device),
                                                knn_->getVectorsDevice(), ntotal, d));
        if (verbose) {
            // (made by the first flagged search: a pause worth naming at 100M)
            std::printf(
                "GpuIndexSearchGraph: probe lists for queries unlike the data: %lld "
                "k-means lists of %lld vectors in %.2f s\n",
                (long long)probeLists_->lists(), (long long)ntotal,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    }
    const graph::ProbeLists* lists = probeLists_.get();
    const bool similarity = flatMetric_ != FlatMetric::L2;
    return [this, lists, probes, similarity, keepBits](int64_t m, const float* mq, int64_t mk,
                                                       float* D, int64_t* I) {
        graph::ProbeRequest r;
        r.queries = mq;
        r.m = m;
        r.k = mk;
        r.probes = probes;
        r.similarity = similarity;
        r.distances = D;
        r.labels = I;
        r.mergeCurrent = true;  // D / I hold the graph's answers: the probe keeps the better
        r.keepBits = keepBits;
        graph::probeSearch(resources_.get(), config_.device, *lists, r);
    };
}

GpuIndexSearchGraph::RowSearchFn GpuIndexSearchGraph::exactCopySearch_() const {
    if (!exactCopyStorage_) {
        const size_t bytes = size_t(ntotal) * (size_t(d) + 1) * sizeof(float);
        if (!leavesAnEighth(bytes, config_.device)) return nullptr;
        std::unique_ptr<FlatStorage> copy(new FlatStorage(
            resources_.get(), config_.device, d, selectionCorpus_().metric, VectorStorage::Device));
        copy->append(knn_->getVectorsDevice(), ntotal, /*prepared=*/true);
        exactCopyStorage_ = std::move(copy);
    }
    const FlatStorage* copy = exactCopyStorage_.get();
    return [this, copy](int64_t m, const float* mq, int64_t mk, float* D, int64_t* I) {
        FlatSearchOptions o = planFlatSearch(copy->size(), true, selectionCorpus_().metric, d, m,
                                             mk, FlatSearchRequest());
        o.queriesPrepared = true;
        copy->search(mq, m, mk, D, I, o);
    };
}

GpuIndexSearchGraph::RowSearchFn GpuIndexSearchGraph::selectionSearch_(
    const IdSelection& selection) const {
    const graph::SelectionCorpus corpus = selectionCorpus_();
    return [corpus, &selection](int64_t m, const float* mq, int64_t mk, float* D, int64_t* I) {
        graph::searchSelectionExactly(corpus, selection, m, mq, mk, D, I);
    };
}

void GpuIndexSearchGraph::dropUnlikeAnswerData_() {
    probeLists_.reset();
    exactCopyStorage_.reset();
}

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
