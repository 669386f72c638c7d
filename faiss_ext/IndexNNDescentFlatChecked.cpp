// The checked CPU twin of GpuKnnGraphGNND (see IndexNNDescentFlatChecked.h).
#include "faiss_ext/IndexNNDescentFlatChecked.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>

namespace faiss_ext {

IndexNNDescentFlatChecked::IndexNNDescentFlatChecked() = default;

IndexNNDescentFlatChecked::IndexNNDescentFlatChecked(int d, int K, faiss::MetricType metric)
        : faiss::IndexNNDescentFlat(d, K, metric) {}

bool IndexNNDescentFlatChecked::graphHasInvalidEntry_() const {
    const std::vector<int>& g = nndescent.final_graph;
    std::lock_guard<std::mutex> lock(cache_.m);
    if (cache_.data != g.data() || cache_.size != g.size() || cache_.ntotal != ntotal) {
        const int64_t n = ntotal;
        cache_.invalid = std::any_of(g.begin(), g.end(), [n](int id) { return id < 0 || id >= n; });
        cache_.data = g.data();
        cache_.size = g.size();
        cache_.ntotal = ntotal;
    }
    return cache_.invalid;
}

void IndexNNDescentFlatChecked::checkSearchable(int64_t k, const char* who) const {
    FAISS_THROW_IF_NOT_FMT(k > 0, "%s: k must be > 0, got %lld", who, (long long)k);
    FAISS_THROW_IF_NOT_FMT(storage, "%s: the index has no storage", who);
    FAISS_THROW_IF_NOT_FMT(ntotal > 0, "%s: the index is empty (add more than 100 vectors first: "
                                       "FAISS's NN-Descent builds the graph when they are added)",
                           who);
    FAISS_THROW_IF_NOT_FMT(nndescent.has_built && nndescent.ntotal == ntotal,
                           "%s: the graph of the %lld vectors is not built (FAISS's NN-Descent "
                           "builds graphs of more than 100 vectors)",
                           who, (long long)ntotal);
    const int64_t pool = std::max<int64_t>(nndescent.search_L, k);
    FAISS_THROW_IF_NOT_FMT(pool < ntotal,
                           "%s: the candidate pool max(search_L = %d, k = %lld) must be smaller "
                           "than ntotal = %lld (FAISS 1.7.3's NN-Descent search cannot draw it; "
                           "for an exact search of all vectors use the storage index)",
                           who, nndescent.search_L, (long long)k, (long long)ntotal);
    FAISS_THROW_IF_NOT_FMT(
        nndescent.K > 0 && nndescent.final_graph.size() == size_t(ntotal) * size_t(nndescent.K),
        "%s: the graph has %zu entries for ntotal %lld x K %d", who,
        nndescent.final_graph.size(), (long long)ntotal, nndescent.K);
    FAISS_THROW_IF_NOT_FMT(!graphHasInvalidEntry_(),
                           "%s: the graph holds entries outside [0, ntotal = %lld) (-1 pads the "
                           "lists of a graph with fewer than K + 1 = %d nodes), which FAISS's "
                           "NN-Descent search follows unchecked",
                           who, (long long)ntotal, nndescent.K + 1);
}

void IndexNNDescentFlatChecked::add(int64_t n, const float* x) {
    FAISS_THROW_IF_NOT_FMT(n >= 0, "IndexNNDescentFlat::add: n must be >= 0, got %lld",
                           (long long)n);
    if (n == 0) return;
    FAISS_THROW_IF_NOT_MSG(x, "IndexNNDescentFlat::add: x is null");
    FAISS_THROW_IF_NOT_FMT(n > kMinBuildVectors - ntotal,
                           "IndexNNDescentFlat::add: FAISS's NN-Descent builds graphs of more "
                           "than %d vectors (it divides by zero at %d); %lld + %lld is too few "
                           "(nothing was added)",
                           int(kMinBuildVectors), int(kMinBuildVectors), (long long)ntotal,
                           (long long)n);
    faiss::IndexNNDescentFlat::add(n, x);
}

void IndexNNDescentFlatChecked::search(int64_t n, const float* x, int64_t k, float* distances,
                                       int64_t* labels,
                                       const faiss::SearchParameters* params) const {
    FAISS_THROW_IF_NOT_FMT(n >= 0, "IndexNNDescentFlat::search: n must be >= 0, got %lld",
                           (long long)n);
    if (n == 0) return;
    checkSearchable(k, "IndexNNDescentFlat::search");
    FAISS_THROW_IF_NOT_MSG(x && distances && labels,
                           "IndexNNDescentFlat::search: null queries or outputs");
    faiss::IndexNNDescentFlat::search(n, x, k, distances, labels, params);
}

void IndexNNDescentFlatChecked::reconstruct(int64_t key, float* recons) const {
    FAISS_THROW_IF_NOT_FMT(key >= 0 && key < ntotal,
                           "IndexNNDescentFlat::reconstruct: key %lld out of [0, %lld)",
                           (long long)key, (long long)ntotal);
    faiss::IndexNNDescentFlat::reconstruct(key, recons);
}

void IndexNNDescentFlatChecked::reconstruct_n(int64_t i0, int64_t ni, float* recons) const {
    FAISS_THROW_IF_NOT_FMT(i0 >= 0 && ni >= 0 && ni <= ntotal - i0,
                           "IndexNNDescentFlat::reconstruct_n: range [%lld, %lld + %lld) out of "
                           "[0, %lld)",
                           (long long)i0, (long long)i0, (long long)ni, (long long)ntotal);
    FAISS_THROW_IF_NOT_MSG(storage, "IndexNNDescentFlat::reconstruct_n: no storage");
    if (ni > 0) storage->reconstruct_n(i0, ni, recons);
}

}  // namespace faiss_ext
