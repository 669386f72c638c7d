// GpuIndexBiLevelLSH (see GpuIndexBiLevelLSH.h): argument checks, device
// scope and the state swap that leaves the index unchanged when a step
// fails; the work is in gpu/impl/lsh/.
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"

#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/BiLevelLSHWidths.h"
#include "faiss_ext/gpu/GpuBiLevelLSHTuneEvaluator.h"

#include "faiss_ext/gpu/impl/flat/FilterKernels.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/lsh/LshEngine.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/IdSelection.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <memory>

namespace faiss_ext {
namespace gpu {

using lsh_impl::DeviceState;

namespace {

void checkGpuConfig(const GpuIndexBiLevelLSHConfig& c) {
    FAISS_THROW_IF_NOT_FMT(c.heapMaxK >= 0 && c.heapMaxK <= 1024,
                           "GpuIndexBiLevelLSH: heapMaxK must be in [0, 1024], got %d", c.heapMaxK);
    FAISS_THROW_IF_NOT_FMT(c.heapMaxDim >= 0, "GpuIndexBiLevelLSH: heapMaxDim must be >= 0, got %d",
                           c.heapMaxDim);
    FAISS_THROW_IF_NOT_FMT(c.heapMaxCandidates >= 0,
                           "GpuIndexBiLevelLSH: heapMaxCandidates must be >= 0, got %g",
                           c.heapMaxCandidates);
    FAISS_THROW_IF_NOT_FMT(c.workQueueBytes >= (size_t(1) << 20),
                           "GpuIndexBiLevelLSH: workQueueBytes must be >= 1 MiB, got %zu",
                           c.workQueueBytes);
}

int dimsOf(const IndexBiLevelLSH* index) {
    FAISS_THROW_IF_NOT_MSG(index, "GpuIndexBiLevelLSH: null IndexBiLevelLSH");
    return index->d;
}

}  // namespace

GpuIndexBiLevelLSH::GpuIndexBiLevelLSH(GpuResourcesProvider* provider, int dims,
                                       BiLevelLSHConfig config, GpuIndexBiLevelLSHConfig gpuConfig)
        : GpuIndex(provider, dims, faiss::METRIC_L2, gpuConfig),
          lshConfig_(config),
          gpuConfig_(gpuConfig) {
    lshConfig_.check();
    checkGpuConfig(gpuConfig_);
    is_trained = false;
}

GpuIndexBiLevelLSH::GpuIndexBiLevelLSH(GpuResourcesProvider* provider,
                                       const IndexBiLevelLSH* index,
                                       GpuIndexBiLevelLSHConfig gpuConfig)
        : GpuIndex(provider, dimsOf(index), faiss::METRIC_L2, gpuConfig),
          lshConfig_(index->getConfig()),
          gpuConfig_(gpuConfig) {
    checkGpuConfig(gpuConfig_);
    is_trained = false;
    copyFrom(index);
}

GpuIndexBiLevelLSH::~GpuIndexBiLevelLSH() {
    if (state_) {
        DeviceScope scope(config_.device);
        state_.reset();
    }
}

void GpuIndexBiLevelLSH::train(idx_t n, const float* x) {
    auto lock = lockOps_();
    const char* who = "GpuIndexBiLevelLSH::train";
    FAISS_THROW_IF_NOT_FMT(ntotal == 0, "%s: the index holds %lld vectors; reset() first", who,
                           (long long)ntotal);
    const bool tune = lshConfig_.autotuneRecall > 0.f;
    const int64_t groups = int64_t(1) << lshConfig_.treeDepth;
    FAISS_THROW_IF_NOT_FMT(tune || n >= groups,
                           "%s: needs at least 2^treeDepth = %lld training vectors, got %lld", who,
                           (long long)groups, (long long)n);
    FAISS_THROW_IF_NOT_FMT(!tune || n >= kMinAutoTuneTrainingVectors,
                           "%s: autotuning (autotuneRecall %g) needs at least %lld training "
                           "vectors, got %lld",
                           who, double(lshConfig_.autotuneRecall),
                           (long long)kMinAutoTuneTrainingVectors, (long long)n);
    FAISS_THROW_IF_NOT_MSG(x, "GpuIndexBiLevelLSH::train: x is null");
    checkVectorCount(who, n, d);
    checkUsable_();
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    checkFinite_(n, x, "GpuIndexBiLevelLSH::train: vector");
    BiLevelLSHConfig lshConfig = lshConfig_;
    std::string verdict;
    if (tune) {
        // the tuner reads the vectors on the host (held-out queries, widths)
        std::vector<float> hostCopy;
        const float* hostX = x;
        if (onThisDevice_(x, "GpuIndexBiLevelLSH::train: x")) {
            hostCopy.resize(size_t(n) * d);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostCopy.data(), x, hostCopy.size() * sizeof(float),
                                                 cudaMemcpyDeviceToHost, stream));
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
            hostX = hostCopy.data();
        }
        GpuResourcesProviderFromInstance provider(resources_);
        GpuBiLevelLSHTuneEvaluator evaluator(&provider, gpuConfig_);
        const BiLevelAutoTuneResult r =
            autoTuneForTraining(lshConfig_, d, n, hostX, verbose, &evaluator);
        lshConfig = r.config;
        verdict = r.verdict;
    }
    DeviceVector<float> copy;
    const float* dX = x;
    const bool onDevice = onThisDevice_(x, "GpuIndexBiLevelLSH::train: x");
    if (!onDevice) {
        copy.allocate(resources_.get(), config_.device, size_t(n) * d, who, "training vectors");
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(copy.data(), x, size_t(n) * d * sizeof(float),
                                             cudaMemcpyHostToDevice, stream));
        dX = copy.data();
    }
    BiLevelLSHModel model = BiLevelLSHModel::initRandom(d, lshConfig);
    lsh_impl::trainTreeGpu(&model, lshConfig, n, dX, stream, verbose);
    if (lshConfig.widthRule == BiLevelWidthRule::NeighbourDistance) {
        // the same sampled rows through the same host code as the CPU twin
        if (!onDevice) {
            lsh::widthsFromHostData(&model, lshConfig, n, x);
        } else {
            const std::vector<int64_t> rows = lsh::widthSampleRows(n, model.groups(), lshConfig.seed);
            std::vector<float> sample(rows.size() * size_t(d));
            for (size_t i = 0; i < rows.size(); ++i)
                FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(sample.data() + i * size_t(d),
                                                     dX + size_t(rows[i]) * d, sizeof(float) * d,
                                                     cudaMemcpyDeviceToHost, stream));
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
            lsh::neighbourDistanceWidths(&model, lshConfig, int64_t(rows.size()), sample.data());
        }
    }
    auto st = std::make_unique<DeviceState>();
    st->model.upload(model, stream);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    lshConfig_ = lshConfig;
    model_ = std::move(model);
    state_ = std::move(st);
    autoTuneVerdict_ = verdict;
    is_trained = true;
}

void GpuIndexBiLevelLSH::checkAddCount_(idx_t n) const {
    const char* who = "GpuIndexBiLevelLSH::add";
    const int64_t limit = (int64_t(1) << 31) - 1;
    FAISS_THROW_IF_NOT_FMT(n < limit - ntotal,
                           "%s: at most 2^31 - 2 vectors in all, got %lld + %lld", who,
                           (long long)ntotal, (long long)n);
    FAISS_THROW_IF_NOT_FMT(ntotal + n < limit / lshConfig_.nTables,
                           "%s: L x ntotal must stay below 2^31 (L = %d, ntotal %lld + %lld)", who,
                           lshConfig_.nTables, (long long)ntotal, (long long)n);
}

void GpuIndexBiLevelLSH::addImpl_(idx_t n, const float* x) {
    const char* who = "GpuIndexBiLevelLSH::add";
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    // GpuIndex::add has checked that x is finite.
    const bool onDev = onThisDevice_(x, "GpuIndexBiLevelLSH::add: x");
    auto st = std::make_unique<DeviceState>();
    st->n = ntotal + n;
    st->vectors.allocate(resources_.get(), config_.device, size_t(st->n) * d, who, "vectors");
    if (ntotal > 0)
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(st->vectors.data(), state_->vectors.data(),
                                             size_t(ntotal) * d * sizeof(float),
                                             cudaMemcpyDeviceToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(st->vectors.data() + size_t(ntotal) * d, x,
                                         size_t(n) * d * sizeof(float),
                                         onDev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice,
                                         stream));
    st->model.upload(model_, stream);
    lsh_impl::buildTablesGpu(model_, lshConfig_, st.get(), stream, verbose);
    state_ = std::move(st);
    ntotal += n;
}

void GpuIndexBiLevelLSH::reset() {
    auto lock = lockOps_();
    DeviceScope scope(config_.device);
    if (state_) {
        auto st = std::make_unique<DeviceState>();
        cudaStream_t stream = resources_->getDefaultStream(config_.device);
        st->model.upload(model_, stream);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        state_ = std::move(st);
    }
    ntotal = 0;
}

size_t GpuIndexBiLevelLSH::remove_ids(const faiss::IDSelector& sel) {
    auto lock = lockOps_();
    const char* who = "GpuIndexBiLevelLSH::remove_ids";
    checkUsable_();
    const IdSelection removed(&sel, ntotal);
    const int64_t gone = removed.count(), n = ntotal - gone;
    if (gone == 0) return 0;
    if (n == 0) {
        reset();
        return size_t(gone);
    }
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    // the kept rows gathered on the device into a new state built beside
    // the old one (as GpuKnnGraphGNND::remove_ids), then its tables
    const std::vector<uint32_t> kept = removed.unselectedPositions();
    TempBuffer<uint32_t> dKept(resources_.get(), config_.device, kept.size(), stream);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dKept.data(), kept.data(), sizeof(uint32_t) * kept.size(),
                                         cudaMemcpyHostToDevice, stream));
    auto st = std::make_unique<DeviceState>();
    st->n = n;
    st->vectors.allocate(resources_.get(), config_.device, size_t(n) * d, who, "vectors");
    gatherSelectedRows(state_->vectors.data(), nullptr, dKept.data(), n, d, st->vectors.data(),
                       nullptr, stream);
    st->model.upload(model_, stream);
    lsh_impl::buildTablesGpu(model_, lshConfig_, st.get(), stream, verbose);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));  // before `kept` goes
    state_ = std::move(st);
    ntotal = n;
    return size_t(gone);
}

BiLevelShortList GpuIndexBiLevelLSH::autoShortList(int64_t k, double meanCandidates) const {
    return k <= gpuConfig_.heapMaxK &&
                           (d <= gpuConfig_.heapMaxDim || meanCandidates <= gpuConfig_.heapMaxCandidates)
                   ? BiLevelShortList::Heap
                   : BiLevelShortList::WorkQueue;
}

void GpuIndexBiLevelLSH::searchImpl_(idx_t n, const float* x, int64_t k, float* distances,
                                     idx_t* labels, const faiss::SearchParameters* params) const {
    const char* who = "GpuIndexBiLevelLSH::search";
    const BiLevelSearchSettings s = resolveBiLevelSearch(params, k, model_, lshConfig_);
    const BiLevelShortList mode = s.shortList;
    FAISS_THROW_IF_NOT_FMT(mode != BiLevelShortList::Heap || k <= 1024,
                           "%s: the per-query heap handles k <= 1024, got %lld; use the work "
                           "queue",
                           who, (long long)k);
    FAISS_THROW_IF_NOT_FMT(k <= (int64_t(1) << 30), "%s: k too large (%lld)", who, (long long)k);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    // GpuIndex::search has checked that the queries are finite.
    if (ntotal == 0) {
        lsh_impl::fillEmpty(distances, labels, n * k, stream);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }
    auto chooser = [this, k](double meanCandidates) { return autoShortList(k, meanCandidates); };
    // a selector drops candidates before scoring (the CPU twin's rule)
    const std::unique_ptr<IdSelection> selection = IdSelection::fromParams(params, ntotal);
    TempBuffer<uint32_t> keep(resources_.get(), config_.device,
                              selection ? selection->words().size() : 0, stream);
    if (selection) selection->copyWordsTo(keep.data(), stream);
    // queries in batches whose candidate intervals fit in ~256 MiB
    const int64_t perQuery = int64_t(s.groupProbes) * s.tables * (s.nprobe + 1) *
                             int64_t(sizeof(lsh::Interval) + sizeof(int32_t));
    const int64_t batch = std::max<int64_t>(1, (int64_t(256) << 20) / perQuery);
    for (int64_t i = 0; i < n; i += batch) {
        const int64_t m = std::min(batch, n - i);
        lsh_impl::searchGpu(*state_, model_, s, mode, chooser, gpuConfig_.workQueueBytes, m,
                            x + size_t(i) * d, int(k), distances + size_t(i) * k,
                            labels + size_t(i) * k, keep.data(), stream);
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void GpuIndexBiLevelLSH::getCandidates(idx_t n, const float* x, idx_t k, std::vector<idx_t>* lims,
                                       std::vector<idx_t>* ids,
                                       const faiss::SearchParameters* params) const {
    auto lock = lockOps_();
    const char* who = "GpuIndexBiLevelLSH::getCandidates";
    FAISS_THROW_IF_NOT_FMT(n >= 0, "%s: n must be >= 0, got %lld", who, (long long)n);
    FAISS_THROW_IF_NOT_FMT(k > 0, "%s: k must be > 0, got %lld", who, (long long)k);
    FAISS_THROW_IF_NOT_FMT(is_trained, "%s: the index is not trained", who);
    FAISS_THROW_IF_NOT_FMT(n == 0 || x, "%s: x is null", who);
    FAISS_THROW_IF_NOT_MSG(lims && ids, "GpuIndexBiLevelLSH::getCandidates: null output");
    FAISS_THROW_IF_NOT_FMT(!params || !params->sel, "%s: lists every candidate; an IDSelector is "
                           "not applied here (search applies it)", who);
    const BiLevelSearchSettings s = resolveBiLevelSearch(params, k, model_, lshConfig_);
    if (n > 0) checkFiniteVectors(who, n, d, x);
    lims->assign(n + 1, 0);
    ids->clear();
    if (n == 0 || ntotal == 0) return;
    checkUsable_();
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    DeviceVector<float> dq;
    dq.allocate(resources_.get(), config_.device, size_t(n) * d, who, "queries");
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dq.data(), x, size_t(n) * d * sizeof(float),
                                         cudaMemcpyHostToDevice, stream));
    lsh_impl::QueryIntervals qi;
    lsh_impl::queryIntervals(*state_, model_, s, n, dq.data(), &qi, stream);
    std::vector<lsh::Interval> iv(qi.intervals.size());
    std::vector<int32_t> cnt(qi.counts.size());
    std::vector<int32_t> sorted(size_t(lshConfig_.nTables) * ntotal);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(iv.data(), qi.intervals.data(),
                                         iv.size() * sizeof(lsh::Interval), cudaMemcpyDeviceToHost,
                                         stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(cnt.data(), qi.counts.data(), cnt.size() * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(sorted.data(), state_->sortedIds.data(),
                                         sorted.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                         stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<int32_t> c;
    for (idx_t q = 0; q < n; ++q) {
        c.clear();
        for (int r = 0; r < qi.perQuery; ++r) {
            const size_t slot = size_t(q) * qi.perQuery + r;
            for (int i = 0; i < cnt[slot]; ++i) {
                const lsh::Interval& it = iv[slot * qi.slots + i];
                c.insert(c.end(), sorted.begin() + it.start, sorted.begin() + it.start + it.count);
            }
        }
        std::sort(c.begin(), c.end());
        c.erase(std::unique(c.begin(), c.end()), c.end());
        (*lims)[q + 1] = (*lims)[q] + idx_t(c.size());
        ids->insert(ids->end(), c.begin(), c.end());
    }
}

std::vector<int64_t> GpuIndexBiLevelLSH::groupSizes() const {
    auto lock = lockOps_();
    std::vector<int64_t> sizes(is_trained ? model_.groups() : 0, 0);
    if (!state_ || state_->groupStartHost.empty()) return sizes;
    for (size_t g = 0; g < sizes.size(); ++g)
        sizes[g] = state_->groupStartHost[g + 1] - state_->groupStartHost[g];
    return sizes;
}

size_t GpuIndexBiLevelLSH::numBucketKeys() const { return state_ ? state_->numKeys : 0; }
double GpuIndexBiLevelLSH::cuckooLoad() const { return state_ ? state_->cuckoo.load() : 0.0; }
int GpuIndexBiLevelLSH::cuckooAttempts() const { return state_ ? state_->cuckoo.attempts() : 0; }

std::vector<float> GpuIndexBiLevelLSH::getVectorsHost() const {
    auto lock = lockOps_();
    std::vector<float> v(size_t(ntotal) * d);
    if (ntotal == 0) return v;
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(v.data(), state_->vectors.data(), v.size() * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
}

void GpuIndexBiLevelLSH::reconstruct(idx_t key, float* recons) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(key >= 0 && key < ntotal,
                           "GpuIndexBiLevelLSH::reconstruct: key %lld out of [0, %lld)",
                           (long long)key, (long long)ntotal);
    reconstruct_n(key, 1, recons);
}

void GpuIndexBiLevelLSH::reconstruct_n(idx_t i0, idx_t ni, float* recons) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(i0 >= 0 && ni >= 0 && i0 <= ntotal && ni <= ntotal - i0,
                           "GpuIndexBiLevelLSH::reconstruct_n: range [%lld, %lld + %lld) out of "
                           "[0, %lld)", (long long)i0, (long long)i0, (long long)ni,
                           (long long)ntotal);
    if (ni == 0) return;
    FAISS_THROW_IF_NOT_MSG(recons, "GpuIndexBiLevelLSH::reconstruct_n: recons is null");
    checkUsable_();
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(recons, state_->vectors.data() + size_t(i0) * d,
                                         sizeof(float) * size_t(ni) * d, cudaMemcpyDefault,
                                         stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void GpuIndexBiLevelLSH::copyFrom(const IndexBiLevelLSH* index) {
    auto lock = lockOps_();
    const char* who = "GpuIndexBiLevelLSH::copyFrom";
    FAISS_THROW_IF_NOT_MSG(index, "GpuIndexBiLevelLSH::copyFrom: null index");
    FAISS_THROW_IF_NOT_FMT(index->d == d, "%s: dimension %d != this index's %d", who, index->d, d);
    const BiLevelLSHConfig cfg = index->getConfig();
    cfg.check();
    const int64_t n = index->ntotal;
    FAISS_THROW_IF_NOT_FMT(int64_t(cfg.nTables) * n < (int64_t(1) << 31) - 1,
                           "%s: L x ntotal must stay below 2^31", who);
    checkUsable_();
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    std::unique_ptr<DeviceState> st;
    BiLevelLSHModel model;
    if (index->is_trained) {
        model = index->getModel();
        model.checkConsistent();
        st = std::make_unique<DeviceState>();
        st->model.upload(model, stream);
        if (n > 0) {
            st->n = n;
            lsh_impl::upload(&st->vectors, index->getVectors(), stream, "vectors");
            lsh_impl::buildTablesGpu(model, cfg, st.get(), stream, verbose);
        }
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    lshConfig_ = cfg;
    model_ = std::move(model);
    state_ = std::move(st);
    ntotal = index->is_trained ? n : 0;
    is_trained = index->is_trained;
}

void GpuIndexBiLevelLSH::copyTo(IndexBiLevelLSH* index) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_MSG(index, "GpuIndexBiLevelLSH::copyTo: null index");
    FAISS_THROW_IF_NOT_FMT(index->d == d, "GpuIndexBiLevelLSH::copyTo: dimension %d != %d",
                           index->d, d);
    index->setContents(lshConfig_, is_trained ? model_ : BiLevelLSHModel(), getVectorsHost());
}

faiss::Index* GpuIndexBiLevelLSH::copyToCpuIndex() const {
    auto lock = lockOps_();
    auto idx = std::make_unique<IndexBiLevelLSH>(d, lshConfig_);
    copyTo(idx.get());
    return idx.release();
}

}  // namespace gpu
}  // namespace faiss_ext
