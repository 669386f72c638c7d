#include "faiss_ext/gpu/GpuKnnGraphGNND.h"

#include "faiss_ext/CpuTwin.h"
#include "faiss_ext/IndexNNDescentFlatChecked.h"
#include "faiss_ext/RowCenteringTransform.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"
#include "faiss_ext/gpu/impl/flat/FilterKernels.h"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"
#include "faiss_ext/gpu/impl/gnnd/GnndRemove.h"
#include "faiss_ext/gpu/impl/gnnd/PartitionedAdd.h"
#include "faiss_ext/gpu/impl/graph/FilteredGraphSearch.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/RemovalMapping.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"
#include "faiss_ext/gpu/utils/IdSelection.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <typeinfo>
#include <utility>

namespace faiss_ext {
namespace gpu {

namespace gnnd {

/// Resident vectors (prepared), norms and the canonical graph (K per node).
class GraphState {
public:
    int64_t n = 0;
    DeviceVector<float> x;
    DeviceVector<float> norms;
    DeviceVector<int> ids;
    DeviceVector<float> dists;

    /// Room for `count` vectors of d floats and their lists of K entries.
    void allocate(GpuResources* res, int device, int64_t count, int d, int K) {
        n = count;
        x.allocate(res, device, size_t(count) * d, "GpuKnnGraphGNND", "vectors");
        norms.allocate(res, device, size_t(count), "GpuKnnGraphGNND", "norms");
        ids.allocate(res, device, size_t(count) * K, "GpuKnnGraphGNND", "graph ids");
        dists.allocate(res, device, size_t(count) * K, "GpuKnnGraphGNND", "graph distances");
    }
};

}  // namespace gnnd

namespace {

constexpr int kMaxDegree = gnnd::kMaxBuildDegree;

const faiss::IndexNNDescentFlat* checkedTwin(const faiss::IndexNNDescentFlat* index) {
    FAISS_THROW_IF_NOT_MSG(index, "GpuKnnGraphGNND: null faiss::IndexNNDescentFlat");
    return index;
}

/// The pool of search() when searchL is 0 (at least k at search time).
int defaultSearchL(int degree) { return std::max(128, 2 * degree); }

/// A filtered search widens the greedy search's pool to at most this many
/// candidates (wider costs more than exact search over the selection).
constexpr int64_t kMaxFilteredPool = 1024;

}  // namespace

GpuKnnGraphGNND::GpuKnnGraphGNND(GpuResourcesProvider* provider, int dims, int k,
                                 FlatMetric metric, GpuKnnGraphGNNDConfig config)
        : GpuIndex(provider, dims, toFaissMetric(metric), config),
          k_(k),
          buildK_(0),
          flatMetric_(metric),
          gConfig_(config),
          state_(new gnnd::GraphState()) {
    checkConfig_(config, k);
    buildK_ = gnnd::resolveBuildDegree(k, config.buildDegree);
    is_trained = true;
}

GpuKnnGraphGNND::GpuKnnGraphGNND(GpuResourcesProvider* provider, int dims, int k,
                                 faiss::MetricType metric, GpuKnnGraphGNNDConfig config)
        : GpuKnnGraphGNND(provider, dims, k, fromFaissMetric(metric), config) {}

GpuKnnGraphGNND::GpuKnnGraphGNND(GpuResourcesProvider* provider,
                                 const faiss::IndexNNDescentFlat* index,
                                 GpuKnnGraphGNNDConfig config)
        : GpuKnnGraphGNND(provider, checkedTwin(index)->d, index->nndescent.K,
                          index->metric_type, config) {
    copyFrom(index);
}

GpuKnnGraphGNND::~GpuKnnGraphGNND() = default;

void GpuKnnGraphGNND::checkConfig_(const GpuKnnGraphGNNDConfig& c, int k) const {
    gnnd::checkBuildConfig(c, k, "GpuKnnGraphGNND");
    FAISS_THROW_IF_NOT_FMT(c.searchL >= 0, "GpuKnnGraphGNND: searchL = %d must be >= 0",
                           c.searchL);
    FAISS_THROW_IF_NOT_FMT(c.device == config_.device,
                           "GpuKnnGraphGNND: config.device %d differs from the index's device %d",
                           c.device, config_.device);
}

void GpuKnnGraphGNND::setConfig(const GpuKnnGraphGNNDConfig& config) {
    auto lock = lockOps_();
    checkConfig_(config, k_);
    int newK = gnnd::resolveBuildDegree(k_, config.buildDegree);
    FAISS_THROW_IF_NOT_FMT(newK == buildK_ || ntotal == 0,
                           "GpuKnnGraphGNND: buildDegree can change only while the index is empty "
                           "(it holds %lld vectors)",
                           (long long)ntotal);
    gConfig_ = config;
    buildK_ = newK;
}

void GpuKnnGraphGNND::setBuildDevices(const std::vector<GpuResourcesProvider*>& providers,
                                      const std::vector<int>& devices) {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(providers.size() == devices.size(),
                           "GpuKnnGraphGNND::setBuildDevices: %zu providers for %zu devices",
                           providers.size(), devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
        FAISS_THROW_IF_NOT_FMT(providers[i], "GpuKnnGraphGNND::setBuildDevices: provider %zu is null",
                               i);
        checkDevice(devices[i]);
        FAISS_THROW_IF_NOT_FMT(devices[i] != config_.device,
                               "GpuKnnGraphGNND::setBuildDevices: device %d is this index's own "
                               "device; name only the others",
                               devices[i]);
        for (size_t j = 0; j < i; ++j)
            FAISS_THROW_IF_NOT_FMT(devices[j] != devices[i],
                                   "GpuKnnGraphGNND::setBuildDevices: device %d is listed twice",
                                   devices[i]);
    }
    std::vector<std::shared_ptr<GpuResources>> res;
    for (size_t i = 0; i < devices.size(); ++i) {
        auto r = providers[i]->getResources();
        FAISS_THROW_IF_NOT_FMT(r, "GpuKnnGraphGNND::setBuildDevices: provider %zu returned no "
                               "resources", i);
        r->initializeForDevice(devices[i]);
        res.push_back(std::move(r));
    }
    buildRes_ = std::move(res);
    buildDevices_ = devices;
}

std::vector<int> GpuKnnGraphGNND::getBuildDevices() const {
    auto lock = lockOps_();
    return buildDevices_;
}

GnndMemoryEstimate GpuKnnGraphGNND::estimateMemory(int64_t n, int d, int k,
                                                  const GpuKnnGraphGNNDConfig& config) {
    FAISS_THROW_IF_NOT_FMT(n >= 0 && d >= 1 && k >= 1 && k <= kMaxDegree,
                           "estimateMemory: bad arguments n = %lld, d = %d, k = %d", (long long)n,
                           d, k);
    int K = gnnd::resolveBuildDegree(k, config.buildDegree);
    gnnd::Params p;
    p.K = K;
    p.p = std::max(1, std::min(config.samples, gnnd::kMaxSamples));
    GnndMemoryEstimate e;
    e.vectors = size_t(n) * (size_t(d) + 1) * sizeof(float);
    e.graph = size_t(n) * K * (sizeof(int) + sizeof(float));
    e.buildTemp = gnnd::buildTempBytes(n, p);  // the raw lists live in the graph's rows
    return e;
}

bool GpuKnnGraphGNND::addFits(int64_t n) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(n >= 0, "addFits: n = %lld must be >= 0", (long long)n);
    GnndMemoryEstimate after = estimateMemory(ntotal + n, d, k_, gConfig_);
    GnndMemoryEstimate before = estimateMemory(ntotal, d, k_, gConfig_);
    size_t resident = after.vectors + after.graph + before.vectors + before.graph;
    size_t limit = resources_->getDeviceMemoryLimit(config_.device);
    size_t freeB = deviceFreeBytes(config_.device) + before.vectors + before.graph;
    size_t tempAvail = resources_->getTempMemoryAvailable(config_.device);
    return after.vectors + after.graph <= limit && resident <= freeB &&
           after.buildTemp <= tempAvail;
}

void GpuKnnGraphGNND::checkAddCount_(idx_t n) const {
    FAISS_THROW_IF_NOT_FMT(n < int64_t(0x7FFFFFF0) - ntotal,
                           "GpuKnnGraphGNND: %lld + %lld vectors in total exceed the 32-bit id "
                           "range",
                           (long long)ntotal, (long long)n);
}

GnndAddBuild GpuKnnGraphGNND::resolveAddBuild_(idx_t n) const {
    if (gConfig_.addBuild == GnndAddBuild::OneShotWhereItFits)
        return oneShotFits_(n) ? GnndAddBuild::OneShot : GnndAddBuild::Partitioned;
    if (gConfig_.addBuild != GnndAddBuild::Auto) return gConfig_.addBuild;
    if (n <= kAutoPartitionedAddAbove) return GnndAddBuild::OneShot;
    // the partitioned build keeps its lists on the host: one-shot when they
    // do not fit half of the free host memory
    const size_t host = gnnd::partitionedAddHostBytes(n, d, buildK_, 1 + int(buildDevices_.size()));
    return host <= gnnd::hostBudget(-1) ? GnndAddBuild::Partitioned : GnndAddBuild::OneShot;
}

bool GpuKnnGraphGNND::oneShotFits_(idx_t n) const {
    const GnndMemoryEstimate after = estimateMemory(ntotal + n, d, k_, gConfig_);
    // what the one GNND build of the new vectors (raw lists and iteration
    // buffers) and the GGM with the old graph take from temporary memory,
    // one after the other
    const gnnd::Params p = gnnd::makeParams(gConfig_, buildK_, false, false);
    size_t temp = gnnd::buildTempBytes(n, p);
    if (ntotal > 0) temp = std::max(temp, gnnd::mergeTempBytes(ntotal + n, p));
    // the old state stays allocated until the add succeeds: what is free
    // now must hold the new one and the temporaries
    return temp <= resources_->getTempMemoryAvailable(config_.device) &&
           after.vectors + after.graph + temp <= deviceFreeBytes(config_.device);
}

void GpuKnnGraphGNND::buildListsPartitioned_(idx_t n, const float* x,
                                             gnnd::PartitionedLists* lists) const {
    gnnd::PartitionedAddInput in;
    in.x = x;
    in.n = n;
    in.d = d;
    in.metric = flatMetric_;
    in.K = buildK_;
    in.config = gConfig_;
    in.verbose = verbose;
    in.devices.push_back(config_.device);
    in.res.push_back(resources_);
    for (size_t i = 0; i < buildDevices_.size(); ++i) {
        in.devices.push_back(buildDevices_[i]);
        in.res.push_back(buildRes_[i]);
    }
    gnnd::buildListsPartitioned(in, lists);
}

void GpuKnnGraphGNND::uploadLists_(const gnnd::PartitionedLists& lists, int64_t offset,
                                   int* ids, float* dists, cudaStream_t stream) const {
    std::vector<int> shifted(lists.ids.size());
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < int64_t(shifted.size()); ++i) {
        const int id = lists.ids[i];
        shifted[i] = id < 0 ? id : int(id + offset);
    }
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(ids, shifted.data(), sizeof(int) * shifted.size(),
                                         cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dists, lists.dists.data(),
                                         sizeof(float) * lists.dists.size(),
                                         cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));  // before `shifted` goes
}

void GpuKnnGraphGNND::buildOneShot_(gnnd::GraphState& next, idx_t n, int64_t old,
                                    const gnnd::Params& params,
                                    const std::function<void(const GnndIterationStats&)>& cb) {
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    GpuResources* res = resources_.get();
    float* xNew = next.x.data() + size_t(old) * d;
    int* idsNew = next.ids.data() + size_t(old) * buildK_;
    float* distsNew = next.dists.data() + size_t(old) * buildK_;
    if (buildDevices_.empty() || n <= 2 * int64_t(buildK_)) {
        gnnd::build(res, config_.device, stream, xNew, next.norms.data() + old, n, d, params, old,
                    idsNew, distsNew, cb);
        return;
    }
    // the same build split over this device and the build devices: each
    // gets a copy of the prepared new vectors and their norms
    std::vector<int> devs{config_.device};
    devs.insert(devs.end(), buildDevices_.begin(), buildDevices_.end());
    gnnd::enablePeerAccess(devs);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const size_t G = devs.size();
    std::vector<DeviceVector<float>> xs(G - 1), ns(G - 1);
    std::vector<GpuResources*> rs{res};
    std::vector<cudaStream_t> streams{stream};
    std::vector<const float*> xp{xNew}, np{next.norms.data() + old};
    for (size_t g = 1; g < G; ++g) {
        DeviceScope scope(devs[g]);
        GpuResources* r = buildRes_[g - 1].get();
        cudaStream_t st = r->getDefaultStream(devs[g]);
        xs[g - 1].allocate(r, devs[g], size_t(n) * d, "GpuKnnGraphGNND",
                           "vectors on a build device");
        ns[g - 1].allocate(r, devs[g], size_t(n), "GpuKnnGraphGNND", "norms on a build device");
        FAISS_EXT_CUDA_CHECK(cudaMemcpyPeerAsync(xs[g - 1].data(), devs[g], xNew, config_.device,
                                                 sizeof(float) * size_t(n) * d, st));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyPeerAsync(ns[g - 1].data(), devs[g],
                                                 next.norms.data() + old, config_.device,
                                                 sizeof(float) * size_t(n), st));
        rs.push_back(r);
        streams.push_back(st);
        xp.push_back(xs[g - 1].data());
        np.push_back(ns[g - 1].data());
    }
    gnnd::buildSplit(rs, devs, streams, xp, np, n, d, params, old, idsNew, distsNew, cb);
}

void GpuKnnGraphGNND::addImpl_(idx_t n, const float* x) {
    FAISS_THROW_IF_NOT_FMT(ntotal + n > k_,
                           "GpuKnnGraphGNND: a graph of degree k = %d needs more than k vectors "
                           "(the index would hold %lld); add more at once or use a smaller k",
                           k_, (long long)(ntotal + n));
    {
        GnndMemoryEstimate after = estimateMemory(ntotal + n, d, k_, gConfig_);
        size_t limit = resources_->getDeviceMemoryLimit(config_.device);
        FAISS_THROW_IF_NOT_FMT(after.vectors + after.graph <= limit,
                               "GpuKnnGraphGNND: %zu bytes of vectors and graph pass the device "
                               "memory limit of %zu bytes; build from a file with "
                               "gnndBuildFromFile (gpu/GnndOutOfCore.h) instead",
                               after.vectors + after.graph, limit);
    }
    // the partitioned build needs more than K + 1 new vectors (a list of K
    // others each); smaller adds are one GNND build whatever the setting
    const GnndAddBuild how = n > int64_t(buildK_) ? resolveAddBuild_(n) : GnndAddBuild::OneShot;
    // its lists come first, on the host: the device buffers below are not
    // yet taken from the memory its clusters use
    gnnd::PartitionedLists lists;
    if (how == GnndAddBuild::Partitioned) buildListsPartitioned_(n, x, &lists);

    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    GpuResources* res = resources_.get();
    int64_t old = ntotal, total = ntotal + n;
    bool ip = metric_type == faiss::METRIC_INNER_PRODUCT;

    // everything goes into new buffers; the index changes only at the end
    gnnd::GraphState next;
    next.allocate(res, config_.device, total, d, buildK_);
    if (old > 0) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(next.x.data(), state_->x.data(),
                                             sizeof(float) * size_t(old) * d,
                                             cudaMemcpyDeviceToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(next.norms.data(), state_->norms.data(),
                                             sizeof(float) * size_t(old),
                                             cudaMemcpyDeviceToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(next.ids.data(), state_->ids.data(),
                                             sizeof(int) * size_t(old) * buildK_,
                                             cudaMemcpyDeviceToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(next.dists.data(), state_->dists.data(),
                                             sizeof(float) * size_t(old) * buildK_,
                                             cudaMemcpyDeviceToDevice, stream));
    }
    float* xNew = next.x.data() + size_t(old) * d;
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(xNew, x, sizeof(float) * size_t(n) * d, cudaMemcpyDefault,
                                         stream));
    prepareVectorsDevice(flatMetric_, xNew, n, d, stream);
    rowSquaredNorms(xNew, n, d, next.norms.data() + old, stream);

    gnnd::Params params = gnnd::makeParams(gConfig_, buildK_, ip, verbose);
    std::vector<GnndIterationStats> newLog;
    auto cb = [&newLog](const GnndIterationStats& s) { newLog.push_back(s); };
    if (how == GnndAddBuild::Partitioned) {
        uploadLists_(lists, old, next.ids.data() + size_t(old) * buildK_,
                     next.dists.data() + size_t(old) * buildK_, stream);
    } else {
        // GNND on the new part (Algorithm 1), ids offset by `old`
        buildOneShot_(next, n, old, params, cb);
    }
    if (old > 0) {
        // GGM of the existing graph (A = [0, old)) and the new one (B)
        gnnd::merge(res, config_.device, stream, next.x.data(), next.norms.data(), old, n, d, 0,
                    old, params, next.ids.data(), next.dists.data(), cb);
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::swap(*state_, next);
    ntotal = total;
    lastAddBuild_ = how;
    log_.insert(log_.end(), newLog.begin(), newLog.end());
}

void GpuKnnGraphGNND::getGraph(idx_t* labels, float* distances) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_MSG(labels, "getGraph: labels is a null pointer");
    checkUsable_();
    if (ntotal == 0) return;
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    size_t nK = size_t(ntotal) * buildK_;
    std::vector<int> ids(nK);
    std::vector<float> dists(distances ? nK : 0);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(ids.data(), state_->ids.data(), sizeof(int) * nK,
                                         cudaMemcpyDeviceToHost, stream));
    if (distances) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dists.data(), state_->dists.data(),
                                             sizeof(float) * nK, cudaMemcpyDeviceToHost, stream));
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    bool ip = metric_type == faiss::METRIC_INNER_PRODUCT;
    size_t nk = size_t(ntotal) * k_;
    std::vector<idx_t> outI(nk);
    std::vector<float> outD(distances ? nk : 0);
    for (int64_t i = 0; i < ntotal; ++i) {
        for (int j = 0; j < k_; ++j) {
            int id = ids[size_t(i) * buildK_ + j];
            outI[size_t(i) * k_ + j] = id;
            if (distances) {
                float dv = dists[size_t(i) * buildK_ + j];
                outD[size_t(i) * k_ + j] =
                        id < 0 ? (ip ? -std::numeric_limits<float>::infinity()
                                     : std::numeric_limits<float>::infinity())
                               : (ip ? -dv : dv);
            }
        }
    }
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels, outI.data(), sizeof(idx_t) * nk,
                                         cudaMemcpyDefault, stream));
    if (distances) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances, outD.data(), sizeof(float) * nk,
                                             cudaMemcpyDefault, stream));
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::vector<int> GpuKnnGraphGNND::getGraphInt() const {
    auto lock = lockOps_();
    std::vector<idx_t> I(size_t(ntotal) * k_);
    if (ntotal) getGraph(I.data());
    return std::vector<int>(I.begin(), I.end());
}

int GpuKnnGraphGNND::resolveSearchL_(int64_t k, const faiss::SearchParameters* params) const {
    int L = gConfig_.searchL;
    if (params) {
        auto gp = dynamic_cast<const SearchParametersGNND*>(params);
        // FAISS's own SearchParameters carries a selector only
        FAISS_THROW_IF_NOT_MSG(gp || typeid(*params) == typeid(faiss::SearchParameters),
                               "GpuKnnGraphGNND::search: params must be SearchParametersGNND "
                               "or faiss::SearchParameters");
        if (gp) {
            FAISS_THROW_IF_NOT_FMT(gp->searchL >= 0, "search: searchL = %d must be >= 0",
                                   gp->searchL);
            if (gp->searchL > 0) {
                FAISS_THROW_IF_NOT_FMT(gp->searchL >= k,
                                       "search: searchL = %d must be >= k = %lld", gp->searchL,
                                       (long long)k);
                L = gp->searchL;
            }
        }
    }
    FAISS_THROW_IF_NOT_FMT(k <= 4096, "GpuKnnGraphGNND::search: k = %lld must be <= 4096",
                           (long long)k);
    if (L == 0) L = defaultSearchL(k_);
    return std::max<int>(L, int(k));
}

void GpuKnnGraphGNND::searchImpl_(idx_t n, const float* x, int64_t k, float* distances,
                                  idx_t* labels, const faiss::SearchParameters* params) const {
    const int L = resolveSearchL_(k, params);
    if (ntotal == 0) {
        fillEmptyResults_(n, k, distances, labels);
        return;
    }
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    std::unique_ptr<TempBuffer<float>> prepared;
    const float* q = preparedQueries(resources_.get(), config_.device, stream, flatMetric_, x, n,
                                     d, prepared);
    if (params && params->sel) {
        searchFiltered_(n, q, k, L, *params->sel, distances, labels);
    } else {
        greedySearch_(n, q, k, L, distances, labels);
    }
}

void GpuKnnGraphGNND::greedySearch_(idx_t n, const float* q, int64_t k, int L, float* distances,
                                    idx_t* labels) const {
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    bool ip = metric_type == faiss::METRIC_INNER_PRODUCT;
    gnnd::search(resources_.get(), config_.device, stream, state_->x.data(), state_->norms.data(),
                 ntotal, d, state_->ids.data(), buildK_, k_, ip, q, n, int(k), L,
                 gConfig_.seed, distances, labels);
    if (ip) {
        // stored as negated products: report similarities
        std::vector<float> h(size_t(n) * k);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(h.data(), distances, sizeof(float) * h.size(),
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        for (auto& v : h) v = -v;
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances, h.data(), sizeof(float) * h.size(),
                                             cudaMemcpyHostToDevice, stream));
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void GpuKnnGraphGNND::searchFiltered_(idx_t n, const float* q, int64_t k, int L,
                                      const faiss::IDSelector& sel, float* distances,
                                      idx_t* labels) const {
    const IdSelection selection(&sel, ntotal);
    const int64_t kept = selection.count();
    if (kept == 0) {
        fillEmptyResults_(n, k, distances, labels);
        return;
    }
    if (kept == ntotal) {
        greedySearch_(n, q, k, L, distances, labels);
        return;
    }
    graph::SelectionCorpus corpus;
    corpus.res = resources_.get();
    corpus.device = config_.device;
    corpus.vectors = state_->x.data();
    corpus.ntotal = ntotal;
    corpus.d = d;
    corpus.metric = metric_type == faiss::METRIC_L2 ? FlatMetric::L2 : FlatMetric::InnerProduct;
    const int64_t kWide = graph::filteredCandidates(k, kept, ntotal, kMaxFilteredPool);
    if (graph::searchSelectionInstead(kept, kWide, kMaxFilteredPool, k_)) {
        graph::searchSelectionExactly(corpus, selection, n, q, k, distances, labels);
        return;
    }
    graph::searchSelectedCandidates(
            corpus, selection, n, q, k, kWide,
            [&](int64_t m, const float* mq, int64_t kw, float* D, int64_t* I) {
                greedySearch_(m, mq, kw, std::max<int>(L, int(kw)), D, I);
            },
            distances, labels);
}

void GpuKnnGraphGNND::copyFrom(const faiss::IndexNNDescentFlat* index) {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_MSG(index, "GpuKnnGraphGNND::copyFrom: null index");
    FAISS_THROW_IF_NOT_FMT(index->d == d, "GpuKnnGraphGNND::copyFrom: dimension %d != ours %d",
                           index->d, d);
    FAISS_THROW_IF_NOT_FMT(index->metric_type == metric_type,
                           "GpuKnnGraphGNND::copyFrom: metric %d != ours %d",
                           int(index->metric_type), int(metric_type));
    auto flat = dynamic_cast<const faiss::IndexFlat*>(index->storage);
    FAISS_THROW_IF_NOT_MSG(flat, "GpuKnnGraphGNND::copyFrom: the storage must be a faiss::IndexFlat");
    int K = index->nndescent.K;
    FAISS_THROW_IF_NOT_FMT(K >= 1 && K <= kMaxDegree,
                           "GpuKnnGraphGNND::copyFrom: K = %d must be in [1, %d]", K, kMaxDegree);
    int64_t n = index->ntotal;
    FAISS_THROW_IF_NOT_FMT(flat->ntotal == n, "GpuKnnGraphGNND::copyFrom: storage holds %lld "
                           "vectors, index %lld", (long long)flat->ntotal, (long long)n);
    bool built = index->nndescent.has_built;
    FAISS_THROW_IF_NOT_FMT(!built || index->nndescent.final_graph.size() == size_t(n) * K,
                           "GpuKnnGraphGNND::copyFrom: final_graph holds %zu ids, expected %lld",
                           index->nndescent.final_graph.size(), (long long)n * K);
    FAISS_THROW_IF_NOT_FMT(n == 0 || n > K,
                           "GpuKnnGraphGNND::copyFrom: %lld vectors are too few for K = %d",
                           (long long)n, K);
    const int64_t bad = firstNonFiniteRow(n, d, flat->get_xb());
    FAISS_THROW_IF_NOT_FMT(bad < 0,
                           "GpuKnnGraphGNND::copyFrom: vector %lld has a NaN or infinite "
                           "component; nothing was changed (faiss_ext GPU indexes take finite "
                           "vectors only)", (long long)bad);
    // build a new state, then swap
    GpuKnnGraphGNNDConfig cfg = gConfig_;
    if (cfg.buildDegree != 0 && cfg.buildDegree < K) cfg.buildDegree = 0;
    int newBuildK = gnnd::resolveBuildDegree(K, cfg.buildDegree);
    int oldK = k_, oldBuildK = buildK_;
    auto oldState = std::move(state_);
    int64_t oldN = ntotal;
    auto oldLog = log_;
    state_.reset(new gnnd::GraphState());
    k_ = K;
    buildK_ = newBuildK;
    ntotal = 0;
    log_.clear();
    try {
        if (n > 0 && !built) {
            addImpl_(n, flat->get_xb());
        } else if (n > 0) {
            DeviceScope scope(config_.device);
            cudaStream_t stream = resources_->getDefaultStream(config_.device);
            GpuResources* res = resources_.get();
            const int dev = config_.device;
            gnnd::GraphState next;
            next.allocate(res, dev, n, d, buildK_);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(next.x.data(), flat->get_xb(),
                                                 sizeof(float) * size_t(n) * d,
                                                 cudaMemcpyHostToDevice, stream));
            rowSquaredNorms(next.x.data(), n, d, next.norms.data(), stream);
            std::vector<int> ids(size_t(n) * buildK_, -1);
            const auto& fg = index->nndescent.final_graph;
            for (int64_t i = 0; i < n; ++i) {
                int out = 0;
                for (int j = 0; j < K; ++j) {
                    int id = fg[size_t(i) * K + j];
                    if (id < 0 || id >= n || id == i) continue;
                    bool dup = false;
                    for (int t = 0; t < out && !dup; ++t) dup = ids[size_t(i) * buildK_ + t] == id;
                    if (!dup) ids[size_t(i) * buildK_ + out++] = id;
                }
            }
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(next.ids.data(), ids.data(),
                                                 sizeof(int) * ids.size(), cudaMemcpyHostToDevice,
                                                 stream));
            gnnd::refreshDistances(stream, next.x.data(), next.norms.data(), n, d, buildK_,
                                   metric_type == faiss::METRIC_INNER_PRODUCT, 0, next.ids.data(),
                                   next.dists.data());
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
            std::swap(*state_, next);
            ntotal = n;
        }
    } catch (...) {
        state_ = std::move(oldState);
        k_ = oldK;
        buildK_ = oldBuildK;
        ntotal = oldN;
        log_ = oldLog;
        throw;
    }
    gConfig_ = cfg;
}

void GpuKnnGraphGNND::copyTo(faiss::IndexNNDescentFlat* index) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_MSG(index, "GpuKnnGraphGNND::copyTo: null index");
    FAISS_THROW_IF_NOT_FMT(index->d == d, "GpuKnnGraphGNND::copyTo: dimension %d != ours %d",
                           index->d, d);
    FAISS_THROW_IF_NOT_FMT(index->metric_type == metric_type,
                           "GpuKnnGraphGNND::copyTo: metric %d != ours %d",
                           int(index->metric_type), int(metric_type));
    FAISS_THROW_IF_NOT_MSG(dynamic_cast<faiss::IndexFlat*>(index->storage),
                           "GpuKnnGraphGNND::copyTo: the storage must be a faiss::IndexFlat");
    std::vector<float> xs(size_t(ntotal) * d);
    std::vector<int> graph = getGraphInt();
    if (ntotal) {
        DeviceScope scope(config_.device);
        cudaStream_t stream = resources_->getDefaultStream(config_.device);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(xs.data(), state_->x.data(), sizeof(float) * xs.size(),
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    index->reset();
    index->storage->add(ntotal, xs.data());
    index->ntotal = ntotal;
    auto& nd = index->nndescent;
    nd.K = k_;
    nd.S = gConfig_.samples;
    nd.iter = gConfig_.maxIterations;
    nd.search_L = gConfig_.searchL > 0 ? gConfig_.searchL : defaultSearchL(k_);
    nd.random_seed = int(gConfig_.seed & 0x7fffffff);
    nd.d = d;
    nd.ntotal = int(ntotal);
    nd.final_graph = std::move(graph);
    nd.has_built = ntotal > 0;
}

faiss::Index* GpuKnnGraphGNND::copyToCpuIndex() const {
    auto lock = lockOps_();
    // the checked twin refuses the searches FAISS 1.7.3's NN-Descent crashes on
    auto twin = new IndexNNDescentFlatChecked(d, k_, metric_type);
    try {
        copyTo(twin);
    } catch (...) {
        delete twin;
        throw;
    }
    return twinWithQueryPreparation(twin, flatMetric_);
}

faiss::IndexNSGFlat* GpuKnnGraphGNND::toIndexNSG(int R) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(R >= 1 && R <= 1024, "toIndexNSG: R = %d must be in [1, 1024]", R);
    FAISS_THROW_IF_NOT_MSG(ntotal > 0, "toIndexNSG: the index is empty");
    std::vector<float> xs(size_t(ntotal) * d);
    {
        DeviceScope scope(config_.device);
        cudaStream_t stream = resources_->getDefaultStream(config_.device);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(xs.data(), state_->x.data(), sizeof(float) * xs.size(),
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    std::vector<idx_t> graph(size_t(ntotal) * k_);
    getGraph(graph.data());
    auto nsg = new faiss::IndexNSGFlat(d, R, metric_type);
    try {
        nsg->verbose = verbose;
        nsg->build(ntotal, xs.data(), graph.data(), k_);
    } catch (...) {
        delete nsg;
        throw;
    }
    return nsg;
}

void GpuKnnGraphGNND::reset() {
    auto lock = lockOps_();
    state_.reset(new gnnd::GraphState());
    ntotal = 0;
    log_.clear();
}

size_t GpuKnnGraphGNND::remove_ids(const faiss::IDSelector& sel) {
    auto lock = lockOps_();
    checkUsable_();
    const IdSelection removed(&sel, ntotal);
    if (removed.count() == 0) return 0;
    if (removed.count() == ntotal) {
        reset();
        return size_t(removed.count());
    }
    checkRemovalLeaves_(ntotal - removed.count());
    DeviceScope scope(config_.device);
    const RemovalMapping mapping(resources_.get(), config_.device,
                                 resources_->getDefaultStream(config_.device), removed);
    removeMapped_(mapping);
    return size_t(removed.count());
}

void GpuKnnGraphGNND::checkRemovalLeaves_(int64_t survivors) const {
    FAISS_THROW_IF_NOT_FMT(survivors > k_, "GpuKnnGraphGNND: remove_ids would leave %lld vectors; "
                           "a graph of degree k = %d needs more than k (nothing was removed)",
                           (long long)survivors, k_);
}

size_t GpuKnnGraphGNND::removeMapped(const RemovalMapping& mapping) {
    auto lock = lockOps_();
    checkUsable_();
    const int64_t gone = ntotal - mapping.survivors();
    FAISS_THROW_IF_NOT_FMT(mapping.positions() == ntotal && mapping.survivors() >= 1,
                           "GpuKnnGraphGNND: a removal mapping of %lld positions (%lld survivors) "
                           "for %lld vectors",
                           (long long)mapping.positions(), (long long)mapping.survivors(),
                           (long long)ntotal);
    if (gone == 0) return 0;
    checkRemovalLeaves_(mapping.survivors());
    DeviceScope scope(config_.device);
    removeMapped_(mapping);
    return size_t(gone);
}

void GpuKnnGraphGNND::removeMapped_(const RemovalMapping& mapping) {
    const int64_t m = mapping.survivors();
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    // everything goes into new buffers; the index changes only at the end
    std::unique_ptr<gnnd::GraphState> nextState(new gnnd::GraphState());
    gnnd::GraphState& next = *nextState;
    next.allocate(resources_.get(), config_.device, m, d, buildK_);
    gatherSelectedRows(state_->x.data(), state_->norms.data(), mapping.kept(), m, d, next.x.data(),
                       next.norms.data(), stream);
    gnnd::compactLists(stream, state_->ids.data(), state_->dists.data(), buildK_, mapping.kept(), m,
                       mapping.newId(), next.ids.data(), next.dists.data());
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    state_ = std::move(nextState);
    ntotal = m;
}

void GpuKnnGraphGNND::reconstruct(idx_t key, float* recons) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(key >= 0 && key < ntotal, "reconstruct: key %lld not in [0, %lld)",
                           (long long)key, (long long)ntotal);
    FAISS_THROW_IF_NOT_MSG(recons, "reconstruct: recons is a null pointer");
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(recons, state_->x.data() + size_t(key) * d,
                                         sizeof(float) * d, cudaMemcpyDefault, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

const float* GpuKnnGraphGNND::getVectorsDevice() const { return state_->x.data(); }

const int* GpuKnnGraphGNND::getGraphIdsDevice() const { return state_->ids.data(); }

const float* GpuKnnGraphGNND::getGraphDistancesDevice() const { return state_->dists.data(); }

}  // namespace gpu
}  // namespace faiss_ext
