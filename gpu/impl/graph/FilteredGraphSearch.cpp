#include "faiss_ext/gpu/impl/graph/FilteredGraphSearch.h"

#include <algorithm>
#include <vector>

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/FilterKernels.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"
#include "faiss_ext/gpu/impl/graph/RowAnswers.h"
#include "faiss_ext/gpu/impl/graph/FilteredResults.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"
#include "faiss_ext/gpu/utils/IdSelection.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

int64_t filteredCandidates(int64_t k, int64_t kept, int64_t total, int64_t cap) {
    const double wanted = double(kFilterOverfetch) * double(k) * double(total) / double(kept);
    int64_t c = 32;
    while (double(c) < wanted && c <= cap) c <<= 1;
    return std::max<int64_t>(c, nextPow2(int(std::max<int64_t>(k, 32))));
}

bool searchSelectionInstead(int64_t kept, int64_t kWide, int64_t cap, int64_t degree) {
    return kWide > cap || kept <= kExactCostRatio * kWide * degree;
}

void searchSelectionExactly(const SelectionCorpus& corpus, const IdSelection& selection, int64_t n,
                            const float* q, int64_t k, float* distances, int64_t* labels) {
    cudaStream_t stream = corpus.res->getDefaultStream(corpus.device);
    const int64_t kept = selection.count();
    const std::vector<uint32_t> ids = selection.positions();
    TempBuffer<uint32_t> dIds(corpus.res, corpus.device, size_t(kept), stream);
    TempBuffer<float> rows(corpus.res, corpus.device, size_t(kept) * corpus.d, stream);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dIds.data(), ids.data(), sizeof(uint32_t) * size_t(kept),
                                         cudaMemcpyHostToDevice, stream));
    gatherSelectedRows(corpus.vectors, nullptr, dIds.data(), kept, corpus.d, rows.data(), nullptr,
                       stream);
    FlatStorage selected(corpus.res, corpus.device, corpus.d, corpus.metric,
                         VectorStorage::Device);
    selected.append(rows.data(), kept, /*prepared=*/true);
    FlatSearchOptions o = planFlatSearch(kept, true, corpus.metric, corpus.d, n, k,
                                         FlatSearchRequest());
    o.queriesPrepared = true;
    selected.search(q, n, k, distances, labels, o);
    mapSelectedLabels(labels, n * k, dIds.data(), stream);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void searchSelectedCandidates(const SelectionCorpus& corpus, const IdSelection& selection,
                              int64_t n, const float* q, int64_t k, int64_t kWide,
                              const CandidateSearch& candidates, float* distances,
                              int64_t* labels) {
    cudaStream_t stream = corpus.res->getDefaultStream(corpus.device);
    TempBuffer<float> candD(corpus.res, corpus.device, size_t(n) * kWide, stream);
    TempBuffer<int64_t> candI(corpus.res, corpus.device, size_t(n) * kWide, stream);
    candidates(n, q, kWide, candD.data(), candI.data());
    TempBuffer<uint32_t> bits(corpus.res, corpus.device, selection.words().size(), stream);
    TempBuffer<uint8_t> shortRows(corpus.res, corpus.device, size_t(n), stream);
    selection.copyWordsTo(bits.data(), stream);
    keepSelectedCandidates(candD.data(), candI.data(), n, int(kWide), bits.data(), int(k),
                           corpus.metric == FlatMetric::InnerProduct, distances, labels,
                           shortRows.data(), stream);
    const std::vector<uint32_t> rows = flaggedRows(shortRows.data(), n, stream);
    answerRowsAgain(corpus.res, corpus.device, corpus.d, rows, q, k,
                    [&](int64_t m, const float* mq, int64_t mk, float* D, int64_t* I) {
                        searchSelectionExactly(corpus, selection, m, mq, mk, D, I);
                    },
                    distances, labels);
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
