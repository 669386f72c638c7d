#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"

#include "faiss_ext/RowCenteringTransform.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"
#include "faiss_ext/gpu/impl/flat/RangeSearch.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <typeinfo>

namespace faiss_ext {
namespace gpu {

namespace {

/// Throws unless params is null, a plain faiss::SearchParameters or ours:
/// another index's parameters (IVF's nprobe, HNSW's efSearch, ...) would
/// otherwise be silently ignored.
void checkOwnParams(const faiss::SearchParameters* params, const char* call) {
    FAISS_THROW_IF_NOT_FMT(!params || typeid(*params) == typeid(faiss::SearchParameters) ||
                                   dynamic_cast<const SearchParametersQuickSelectFlat*>(params),
                           "GpuIndexQuickSelectFlat: %s cannot apply search parameters of type "
                           "%s (it takes faiss::SearchParameters or "
                           "SearchParametersQuickSelectFlat)", call, typeid(*params).name());
}

/// Throws unless p is a DistancePrecision member.
void checkDistancePrecision(DistancePrecision p, const char* where) {
    FAISS_THROW_IF_NOT_FMT(int(p) >= 0 && int(p) <= 3,
                           "GpuIndexQuickSelectFlat: unknown distancePrecision %d in %s (Auto 0, "
                           "FP32 1, TF32Bounded 2, BF16x3Bounded 3)", int(p), where);
}

/// The flat metric of a CPU twin, and its IndexFlat; throws for other indexes.
FlatMetric twinMetric(const faiss::Index* index, const faiss::IndexFlat** flat) {
    FAISS_THROW_IF_NOT_MSG(index, "GpuIndexQuickSelectFlat: null CPU index");
    if (auto f = dynamic_cast<const faiss::IndexFlat*>(index)) {
        *flat = f;
        FAISS_THROW_IF_NOT_FMT(f->metric_type == faiss::METRIC_L2 ||
                                       f->metric_type == faiss::METRIC_INNER_PRODUCT,
                               "GpuIndexQuickSelectFlat: IndexFlat metric %d not supported "
                               "(L2 or inner product)", int(f->metric_type));
        return fromFaissMetric(f->metric_type);
    }
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index)) {
        auto f = dynamic_cast<const faiss::IndexFlat*>(pt->index);
        bool flatIP = f && f->metric_type == faiss::METRIC_INNER_PRODUCT;
        auto isNorm = [](const faiss::VectorTransform* vt) {
            auto nt = dynamic_cast<const faiss::NormalizationTransform*>(vt);
            return nt && nt->norm == 2.0f;
        };
        if (flatIP && pt->chain.size() == 1 && isNorm(pt->chain[0])) {
            *flat = f;
            return FlatMetric::Cosine;
        }
        if (flatIP && pt->chain.size() == 2 &&
            dynamic_cast<const RowCenteringTransform*>(pt->chain[0]) && isNorm(pt->chain[1])) {
            *flat = f;
            return FlatMetric::Pearson;
        }
    }
    FAISS_THROW_MSG("GpuIndexQuickSelectFlat: can copy only from faiss::IndexFlat (L2, IP) or "
                    "the cosine / Pearson twin (IndexPreTransform of NormalizationTransform, "
                    "with RowCenteringTransform first for Pearson, over IndexFlatIP)");
}

}  // namespace

GpuIndexQuickSelectFlat::GpuIndexQuickSelectFlat(GpuResourcesProvider* provider, int dims,
                                                 FlatMetric metric,
                                                 GpuIndexQuickSelectFlatConfig config)
        : GpuIndex(provider, dims, toFaissMetric(metric), config),
          flatMetric_(metric),
          qsConfig_(config) {
    init_();
}

GpuIndexQuickSelectFlat::GpuIndexQuickSelectFlat(GpuResourcesProvider* provider, int dims,
                                                 faiss::MetricType metric,
                                                 GpuIndexQuickSelectFlatConfig config)
        : GpuIndexQuickSelectFlat(provider, dims, fromFaissMetric(metric), config) {}

GpuIndexQuickSelectFlat::GpuIndexQuickSelectFlat(GpuResourcesProvider* provider,
                                                 const faiss::Index* index,
                                                 GpuIndexQuickSelectFlatConfig config)
        : GpuIndex(provider, index ? std::max(index->d, 1) : 1,
                   index ? toFaissMetric([&] {
                       const faiss::IndexFlat* f = nullptr;
                       return twinMetric(index, &f);
                   }())
                         : faiss::METRIC_L2,
                   config),
          flatMetric_(FlatMetric::L2),
          qsConfig_(config) {
    FAISS_THROW_IF_NOT_MSG(index, "GpuIndexQuickSelectFlat: null CPU index");
    init_();
    copyFrom(index);
}

GpuIndexQuickSelectFlat::~GpuIndexQuickSelectFlat() = default;

void GpuIndexQuickSelectFlat::init_() {
    FAISS_THROW_IF_NOT_FMT(int(qsConfig_.selectAlgo) >= 0 && int(qsConfig_.selectAlgo) <= 3,
                           "GpuIndexQuickSelectFlat: unknown selectAlgo %d",
                           int(qsConfig_.selectAlgo));
    FAISS_THROW_IF_NOT_FMT(int(qsConfig_.storage) >= 0 && int(qsConfig_.storage) <= 2,
                           "GpuIndexQuickSelectFlat: unknown storage %d", int(qsConfig_.storage));
    const int g = qsConfig_.mergeQueueGroup;
    FAISS_THROW_IF_NOT_FMT(g == 2 || g == 4 || g == 8 || g == 16,
                           "GpuIndexQuickSelectFlat: mergeQueueGroup %d must be 2, 4, 8 or 16", g);
    FAISS_THROW_IF_NOT_FMT(qsConfig_.thheapSampleFactor >= 1 && qsConfig_.thheapSampleFactor <= 1024,
                           "GpuIndexQuickSelectFlat: thheapSampleFactor %d not in [1, 1024]",
                           qsConfig_.thheapSampleFactor);
    checkDistancePrecision(qsConfig_.distancePrecision, "the config");
    storage_.reset(new FlatStorage(resources_.get(), config_.device, d, flatMetric_,
                                   qsConfig_.storage));
    is_trained = true;
}

void GpuIndexQuickSelectFlat::copyFrom(const faiss::Index* index) {
    auto lock = lockOps_();
    const faiss::IndexFlat* flat = nullptr;
    FlatMetric metric = twinMetric(index, &flat);
    FAISS_THROW_IF_NOT_FMT(index->d > 0, "GpuIndexQuickSelectFlat::copyFrom: dimension %d",
                           index->d);
    FAISS_THROW_IF_NOT_FMT(flat->ntotal == index->ntotal,
                           "GpuIndexQuickSelectFlat::copyFrom: inconsistent twin (%lld vs %lld "
                           "vectors)", (long long)flat->ntotal, (long long)index->ntotal);
    const int64_t bad = firstNonFiniteRow(flat->ntotal, index->d, flat->get_xb());
    FAISS_THROW_IF_NOT_FMT(bad < 0,
                           "GpuIndexQuickSelectFlat::copyFrom: vector %lld has a NaN or infinite "
                           "component; nothing was changed (faiss_ext GPU indexes take finite "
                           "vectors only)", (long long)bad);
    DeviceScope scope(config_.device);
    // Build the new storage first: on failure this index is unchanged.
    std::unique_ptr<FlatStorage> fresh(
            new FlatStorage(resources_.get(), config_.device, index->d, metric, qsConfig_.storage));
    if (flat->ntotal > 0) {
        fresh->reserve(flat->ntotal);
        fresh->append(flat->get_xb(), flat->ntotal, /*prepared=*/true);
    }
    storage_ = std::move(fresh);
    d = index->d;
    flatMetric_ = metric;
    metric_type = toFaissMetric(metric);
    ntotal = flat->ntotal;
    is_trained = true;
}

void GpuIndexQuickSelectFlat::copyTo(faiss::IndexFlat* index) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_MSG(index, "GpuIndexQuickSelectFlat::copyTo: null IndexFlat");
    std::vector<uint8_t> codes(sizeof(float) * size_t(ntotal) * d);
    storage_->copyVectors(0, ntotal, reinterpret_cast<float*>(codes.data()));
    index->reset();
    index->d = d;
    index->metric_type = metric_type;
    index->code_size = sizeof(float) * d;
    index->codes = std::move(codes);
    index->ntotal = ntotal;
    index->is_trained = true;
}

faiss::Index* GpuIndexQuickSelectFlat::copyToCpuIndex() const {
    auto lock = lockOps_();
    // the metric's own class (IndexFlatL2 / IndexFlatIP), as the factory's twin
    std::unique_ptr<faiss::IndexFlat> flat;
    if (metric_type == faiss::METRIC_L2) {
        flat.reset(new faiss::IndexFlatL2(d));
    } else {
        flat.reset(new faiss::IndexFlatIP(d));
    }
    copyTo(flat.get());
    if (!isPreparedMetric(flatMetric_)) return flat.release();
    std::unique_ptr<faiss::NormalizationTransform> norm(new faiss::NormalizationTransform(d, 2.0f));
    std::unique_ptr<faiss::IndexPreTransform> pt(
            new faiss::IndexPreTransform(norm.get(), flat.get()));
    norm.release();
    flat.release();
    pt->own_fields = true;
    if (flatMetric_ == FlatMetric::Pearson) {
        std::unique_ptr<RowCenteringTransform> center(new RowCenteringTransform(d));
        pt->prepend_transform(center.get());
        center.release();
    }
    return pt.release();
}

void GpuIndexQuickSelectFlat::reset() {
    auto lock = lockOps_();
    storage_->reset();
    ntotal = 0;
}

size_t GpuIndexQuickSelectFlat::remove_ids(const faiss::IDSelector& sel) {
    auto lock = lockOps_();
    checkUsable_();
    const IdSelection removed(&sel, ntotal);
    DeviceScope scope(config_.device);
    const int64_t gone = storage_->removeSelected(removed);
    ntotal = storage_->size();
    return size_t(gone);
}

void GpuIndexQuickSelectFlat::reconstruct(idx_t key, float* recons) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(key >= 0 && key < ntotal, "reconstruct: key %lld out of bounds "
                           "(ntotal %lld)", (long long)key, (long long)ntotal);
    FAISS_THROW_IF_NOT_MSG(recons, "reconstruct: recons is a null pointer");
    storage_->copyVectors(key, 1, recons);
}

void GpuIndexQuickSelectFlat::reconstruct_n(idx_t i0, idx_t ni, float* recons) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(i0 >= 0 && ni >= 0 && i0 + ni <= ntotal,
                           "reconstruct_n: range [%lld, %lld) out of bounds (ntotal %lld)",
                           (long long)i0, (long long)(i0 + ni), (long long)ntotal);
    if (ni == 0) return;
    FAISS_THROW_IF_NOT_MSG(recons, "reconstruct_n: recons is a null pointer");
    storage_->copyVectors(i0, ni, recons);
}

void GpuIndexQuickSelectFlat::reserveMemory(idx_t n) {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(n >= 0, "reserveMemory: n must be >= 0 (got %lld)", (long long)n);
    storage_->reserve(n);
}

const float* GpuIndexQuickSelectFlat::getVectorsDevice() const { return storage_->vectors(); }

VectorStorage GpuIndexQuickSelectFlat::getStorage() const { return storage_->where(); }

SelectAlgo GpuIndexQuickSelectFlat::requestedSelectAlgo(
        const faiss::SearchParameters* params) const {
    SelectAlgo algo = qsConfig_.selectAlgo;
    if (auto p = dynamic_cast<const SearchParametersQuickSelectFlat*>(params)) {
        FAISS_THROW_IF_NOT_FMT(int(p->selectAlgo) >= 0 && int(p->selectAlgo) <= 3,
                               "GpuIndexQuickSelectFlat: unknown selectAlgo %d", int(p->selectAlgo));
        if (p->selectAlgo != SelectAlgo::Auto) algo = p->selectAlgo;
    }
    return algo;
}

SelectAlgo GpuIndexQuickSelectFlat::resolveSelectAlgo(int64_t nq, int64_t k,
                                                      const faiss::SearchParameters* params) const {
    return planSelectAlgo(requestedSelectAlgo(params), nq, ntotal, k, d);
}

DistancePrecision GpuIndexQuickSelectFlat::requestedDistancePrecision_(
        const faiss::SearchParameters* params) const {
    DistancePrecision p = qsConfig_.distancePrecision;
    checkDistancePrecision(p, "the config");
    if (auto sp = dynamic_cast<const SearchParametersQuickSelectFlat*>(params)) {
        checkDistancePrecision(sp->distancePrecision, "the search parameters");
        if (sp->distancePrecision != DistancePrecision::Auto) p = sp->distancePrecision;
    }
    return p;
}

DistancePrecision GpuIndexQuickSelectFlat::resolveDistancePrecision(
        int64_t nq, int64_t k, const faiss::SearchParameters* params) const {
    const bool onDevice = storage_ && storage_->where() == VectorStorage::Device;
    return planDistancePrecision(requestedDistancePrecision_(params), nq, ntotal, k, d,
                                 flatMetric_, onDevice);
}

BoundedSearchStats GpuIndexQuickSelectFlat::getBoundedStats() const {
    BoundedSearchStats s;
    s.certifiedQueries = boundedCertified_.load();
    s.fallbackQueries = boundedFallback_.load();
    s.residualQueries = boundedResidual_.load();
    return s;
}

void GpuIndexQuickSelectFlat::resetBoundedStats() {
    boundedCertified_.store(0);
    boundedFallback_.store(0);
    boundedResidual_.store(0);
}

void GpuIndexQuickSelectFlat::knnGraph(int64_t k, bool excludeSelf, float* distances,
                                       idx_t* labels,
                                       const SearchParametersQuickSelectFlat* params) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(k >= 1, "knnGraph: k must be >= 1 (got %lld)", (long long)k);
    FAISS_THROW_IF_NOT_FMT(ntotal >= 1, "knnGraph: the index is empty (ntotal %lld)",
                           (long long)ntotal);
    FAISS_THROW_IF_NOT_FMT(excludeSelf ? k <= ntotal - 1 : k <= ntotal,
                           "knnGraph: k = %lld must be <= %lld for %lld vectors%s", (long long)k,
                           (long long)(excludeSelf ? ntotal - 1 : ntotal), (long long)ntotal,
                           excludeSelf ? " (self excluded)" : "");
    FAISS_THROW_IF_NOT_MSG(labels, "knnGraph: labels is a null pointer");
    FAISS_THROW_IF_NOT_MSG(!params || !params->sel,
                           "knnGraph: an IDSelector (params->sel) is not supported: the graph "
                           "covers every stored vector");
    checkUsable_();
    DeviceScope scope(config_.device);
    FlatSearchOptions o;
    o.algo = resolveSelectAlgo(ntotal, k, params);
    o.group = qsConfig_.mergeQueueGroup;
    o.thFactor = qsConfig_.thheapSampleFactor;
    storage_->knnGraph(k, excludeSelf, distances, labels, o);
}

void GpuIndexQuickSelectFlat::addImpl_(idx_t n, const float* x) {
    storage_->append(x, n, /*prepared=*/false);
    ntotal = storage_->size();
}

void GpuIndexQuickSelectFlat::searchImpl_(idx_t n, const float* x, int64_t k, float* distances,
                                          idx_t* labels,
                                          const faiss::SearchParameters* params) const {
    checkOwnParams(params, "search");
    // The selector, evaluated once over the stored positions (host side:
    // FAISS's IDSelector is a virtual class; IdSelection.h gives the cost).
    const std::unique_ptr<IdSelection> selection = IdSelection::fromParams(params, ntotal);
    FlatSearchRequest request;
    request.algo = requestedSelectAlgo(params);
    request.precision = requestedDistancePrecision_(params);
    request.group = qsConfig_.mergeQueueGroup;
    request.thFactor = qsConfig_.thheapSampleFactor;
    // The engine decides the rest (FlatSearchPlan.h); a filtered search is
    // planned for the vectors it selects.
    const int64_t searched = selection ? selection->count() : ntotal;
    FlatSearchOptions o = planFlatSearch(searched, storage_->where() == VectorStorage::Device,
                                         flatMetric_, d, n, k, request);
    o.beforeResults = [this] { finishDeferredFiniteCheck_(); };
    o.filter = selection.get();
    BoundedSearchStats stats;
    if (isBoundedPrecision(o.precision)) o.boundedStats = &stats;
    storage_->search(x, n, k, distances, labels, o);  // counts only once it succeeds
    boundedCertified_ += stats.certifiedQueries;
    boundedFallback_ += stats.fallbackQueries;
    boundedResidual_ += stats.residualQueries;
}

void GpuIndexQuickSelectFlat::checkRangeSearchParams_(const faiss::SearchParameters* params) const {
    checkOwnParams(params, "range_search");
    auto p = dynamic_cast<const SearchParametersQuickSelectFlat*>(params);
    // Range search has no k-selection; its FP32 products are exact, which
    // any precision request allows.
    FAISS_THROW_IF_NOT_MSG(!p || p->selectAlgo == SelectAlgo::Auto,
                           "GpuIndexQuickSelectFlat: range_search selects no k, so a selectAlgo "
                           "other than Auto cannot be applied");
}

void GpuIndexQuickSelectFlat::rangeSearchImpl_(idx_t n, const float* x, float radius,
                                               const faiss::SearchParameters* params,
                                               RangeHits* hits, idx_t row0) const {
    const std::unique_ptr<IdSelection> selection = IdSelection::fromParams(params, ntotal);
    storage_->rangeSearch(x, n, /*prepared=*/false, radius, selection.get(), hits, row0);
}

}  // namespace gpu
}  // namespace faiss_ext
