#include "faiss_ext/gpu/GpuIndexSearchGraph.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <typeinfo>

#include "faiss_ext/CpuTwin.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"
#include "faiss_ext/gpu/impl/flat/KernelLaunchCache.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/graph/EntrySample.h"
#include "faiss_ext/gpu/impl/graph/FilteredGraphSearch.h"
#include "faiss_ext/gpu/impl/graph/ProbeLists.h"
#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/impl/graph/TraversalCopy.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"
#include "faiss_ext/gpu/utils/IdSelection.h"
#include "faiss_ext/gpu/utils/RemovalMapping.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

/// The search graph (ntotal x graphDegree ids) on the device.
struct GpuIndexSearchGraph::SearchGraphState {
    DeviceVector<int> ids;
    graph::TraversalCopy traversal;  ///< the copy the beam search traverses (fp16Traversal)
    /// Nodes removed since the graph was last pruned from the k-NN lists
    /// (removals below kPatchedRemovalShare of them patch it instead).
    int64_t removedSincePrune = 0;
};

namespace {

const char* kWho = "GpuIndexSearchGraph";

/// remove_ids patches the search graph (GraphRepair.cu) while the nodes
/// removed since the last pruning stay within this share of the nodes the
/// graph then had; past it the graph is pruned again from the k-NN lists.
/// docs/filters.md gives the recall of both against a fresh build.
constexpr double kPatchedRemovalShare = 0.05;

double secondsSince(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}


/// count values at src (device memory of `device`) on the host.
template <typename T>
std::vector<T> copyToHost(GpuResources* res, int device, const T* src, size_t count) {
    std::vector<T> out(count);
    if (count == 0) return out;
    DeviceScope scope(device);
    cudaStream_t stream = res->getDefaultStream(device);
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(out.data(), src, sizeof(T) * count, cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return out;
}

/// Blocks per query when the user leaves it to us: one for batches that
/// fill the GPU (a block per query, at least one per SM); for smaller ones
/// enough blocks to give every SM about two (at most 16, and as many as the
/// merge can take at k rounded up to `mergeWidth`).
int autoBlocksPerQuery(int device, int64_t nq, int mergeWidth) {
    const int sms = cachedSmCount(device);  // queried once per device
    constexpr int kAutoMaxBlocks = 16;
    int blocks = 1;
    while (blocks < kAutoMaxBlocks && int64_t(2 * blocks) * nq <= 2 * int64_t(sms) &&
           2 * blocks * mergeWidth <= graph::kMaxMergedResults)
        blocks <<= 1;
    return blocks;
}

/// Smallest itopk: below 32 (the smallest buffer) only the first itopk
/// entries of the buffer are expanded.
constexpr int kMinItopk = 16;

/// The stored vectors are prepared (cosine, Pearson): plain L2 or inner
/// product for the exact engine.
FlatMetric storedMetric(faiss::MetricType metric) {
    return metric == faiss::METRIC_L2 ? FlatMetric::L2 : FlatMetric::InnerProduct;
}

/// Out-degree of level 0 of an HNSW graph.
int levelZeroDegree(const faiss::HNSW& h) {
    return h.cum_nneighbor_per_level[1] - h.cum_nneighbor_per_level[0];
}

/// Nodes of the twin's upper level (a complete graph over them, so that
/// FAISS's greedy descent starts level 0 from the one nearest the query).
constexpr int kTwinUpperNodes = 1024;

/// Writes a two-level HNSW: level 0 = our search graph (degree R, -1
/// padded), level 1 = a complete graph over a seeded sample of nodes.
void fillHnswLevels(faiss::HNSW& h, const std::vector<int>& g, int64_t n, int R, uint64_t seed) {
    h.levels.clear();
    h.offsets.assign(1, 0);
    h.neighbors.clear();
    h.entry_point = -1;
    h.max_level = -1;
    if (n == 0) return;
    std::vector<int> upper = graph::sampleEntryPoints(n, kTwinUpperNodes, seed ^ 0x5EEDull);
    int u = int(upper.size()), R1 = std::max(1, u - 1);
    h.cum_nneighbor_per_level = {0, R, R + R1};
    double p1 = double(u) / double(n);
    h.assign_probas = {1.0 - p1, p1};
    h.levels.assign(n, 1);
    for (int v : upper) h.levels[v] = 2;
    h.offsets.resize(n + 1);
    for (int64_t i = 0; i < n; ++i)
        h.offsets[i + 1] = h.offsets[i] + h.cum_nneighbor_per_level[h.levels[i]];
    h.neighbors.assign(h.offsets[n], -1);
    for (int64_t i = 0; i < n; ++i)
        std::copy(g.begin() + i * R, g.begin() + (i + 1) * R, h.neighbors.begin() + h.offsets[i]);
    for (int v : upper) {
        size_t at = h.offsets[v] + R;
        for (int w : upper)
            if (w != v) h.neighbors[at++] = w;
    }
    h.entry_point = upper[0];
    h.max_level = u > 1 ? 1 : 0;
    h.upper_beam = 1;
}

/// Level 0 of an HNSW as an n x R graph (-1 padded); throws on ids out of
/// range or a degree past R.
std::vector<int> levelZeroGraph(const faiss::HNSW& h, int64_t n, int R) {
    FAISS_THROW_IF_NOT_FMT(h.levels.size() == size_t(n) && h.offsets.size() == size_t(n) + 1 &&
                               levelZeroDegree(h) == R && h.offsets[n] <= h.neighbors.size(),
                           "%s::copyFrom: the twin's HNSW graph is not built for its %lld "
                           "vectors at level-0 degree %d",
                           kWho, (long long)n, R);
    std::vector<int> g(size_t(n) * R, -1);
    for (int64_t i = 0; i < n; ++i) {
        FAISS_THROW_IF_NOT_FMT(h.offsets[i] + R <= h.offsets[i + 1],
                               "%s::copyFrom: node %lld has no level-0 list", kWho, (long long)i);
        for (int j = 0; j < R; ++j) {
            int v = h.neighbors[h.offsets[i] + j];
            FAISS_THROW_IF_NOT_FMT(v >= -1 && v < n,
                                   "%s::copyFrom: the twin's graph has node id %d outside [0, "
                                   "%lld)",
                                   kWho, v, (long long)n);
            g[size_t(i) * R + j] = v;
        }
    }
    return g;
}

GpuKnnGraphGNNDConfig knnConfigOf(const GpuIndexSearchGraphConfig& c) {
    GpuKnnGraphGNNDConfig g = c.knnBuild;
    g.device = c.device;
    // 0: by size, set before each build (addImpl_)
    if (g.maxIterations == 0) g.maxIterations = GpuIndexSearchGraphConfig::kKnnBuildIterations;
    // a search graph needs the edges between partitions (GnndOptions.h)
    if (g.addBuild == GnndAddBuild::Auto) g.addBuild = GnndAddBuild::OneShotWhereItFits;
    return g;
}

const faiss::IndexHNSWFlat* checkedTwin(const faiss::IndexHNSWFlat* index) {
    FAISS_THROW_IF_NOT_MSG(index, "GpuIndexSearchGraph: null faiss::IndexHNSWFlat");
    FAISS_THROW_IF_NOT_FMT(index->hnsw.cum_nneighbor_per_level.size() >= 2,
                           "%s: the twin's HNSW has no level 0", kWho);
    return index;
}

GpuIndexSearchGraphConfig withDegree(GpuIndexSearchGraphConfig c, int R) {
    c.graphDegree = R;
    c.knnDegree = std::max(c.knnDegree, R);
    return c;
}

/// The beam search of one call, every knob resolved.
struct ResolvedSearch {
    graph::BeamSearchParams beam;
    int entrySeeds = 0;
    bool half = false;
    float unlikeRatio = 0.f;  ///< queries unlike the data (0: no detection)
    int unlikeProbes = 0;     ///< lists probed for them (0: exact search)
};

/// The index's defaults, as a search without parameters runs them.
ResolvedSearch configDefaults(const GpuIndexSearchGraphConfig& config) {
    ResolvedSearch r;
    graph::BeamSearchParams& p = r.beam;
    r.entrySeeds = config.entrySeeds;
    r.half = config.fp16Traversal;
    r.unlikeRatio = config.unlikeQueryRatio;
    r.unlikeProbes = config.unlikeQueryProbes;
    p.itopk = config.itopk;
    p.searchWidth = config.searchWidth;
    p.maxIterations = config.maxIterations;
    p.seedRounds = config.seedRounds;
    p.seed = config.seed;
    p.blocksPerQuery = config.blocksPerQuery;
    return r;
}

/// Validates the search parameters and overrides r with those that are set
/// (0 or -1: the index's value).
void applySearchParameters(const SearchParametersSearchGraph& sp,
                           const GpuIndexSearchGraphConfig& config, ResolvedSearch& r) {
    graph::BeamSearchParams& p = r.beam;
    FAISS_THROW_IF_NOT_FMT(
        sp.itopk >= 0 && sp.itopk <= graph::kMaxItopk && sp.searchWidth >= 0 &&
            sp.searchWidth <= graph::kMaxSearchWidth &&
            sp.searchWidth * config.graphDegree <= 1024 && sp.maxIterations >= 0 &&
            sp.minIterations >= 0 && sp.seedRounds >= 0,
        "%s::search: itopk %d (<= %d), searchWidth %d (<= %d, x degree "
        "<= 1024), maxIterations %d, minIterations %d, seedRounds %d must "
        "be >= 0",
        kWho, sp.itopk, graph::kMaxItopk, sp.searchWidth, graph::kMaxSearchWidth,
        sp.maxIterations, sp.minIterations, sp.seedRounds);
    if (sp.itopk) p.itopk = sp.itopk;
    if (sp.searchWidth) p.searchWidth = sp.searchWidth;
    if (sp.maxIterations) p.maxIterations = sp.maxIterations;
    if (sp.seedRounds) p.seedRounds = sp.seedRounds;
    FAISS_THROW_IF_NOT_FMT(sp.entrySeeds >= -1 && sp.entrySeeds <= 128,
                           "%s::search: entrySeeds = %d must be in [-1, 128]", kWho,
                           sp.entrySeeds);
    if (sp.entrySeeds >= 0) r.entrySeeds = sp.entrySeeds;
    FAISS_THROW_IF_NOT_FMT(
        sp.fp16 >= -1 && sp.fp16 <= 1 && (sp.fp16 != 1 || config.fp16Traversal),
        "%s::search: fp16 = %d must be -1, 0 or 1 (1 needs an index "
        "built with fp16Traversal)",
        kWho, sp.fp16);
    if (sp.fp16 >= 0) r.half = sp.fp16 == 1;
    FAISS_THROW_IF_NOT_FMT(
        sp.blocksPerQuery >= 0 && sp.blocksPerQuery <= graph::kMaxBlocksPerQuery,
        "%s::search: blocksPerQuery = %d must be in [0, %d]", kWho, sp.blocksPerQuery,
        graph::kMaxBlocksPerQuery);
    if (sp.blocksPerQuery) p.blocksPerQuery = sp.blocksPerQuery;
    FAISS_THROW_IF_NOT_FMT(sp.seed >= -1,
                           "%s::search: seed = %lld must be >= 0 (-1: the index's)", kWho,
                           (long long)sp.seed);
    if (sp.seed >= 0) p.seed = uint64_t(sp.seed);
    p.minIterations = sp.minIterations;
    FAISS_THROW_IF_NOT_FMT(sp.unlikeQueryRatio == -1.f ||
                               (sp.unlikeQueryRatio >= 0.f && std::isfinite(sp.unlikeQueryRatio)),
                           "%s::search: unlikeQueryRatio = %g must be -1 (the index's), 0 (no "
                           "detection) or a finite ratio > 0",
                           kWho, double(sp.unlikeQueryRatio));
    if (sp.unlikeQueryRatio >= 0.f) r.unlikeRatio = sp.unlikeQueryRatio;
    FAISS_THROW_IF_NOT_FMT(sp.unlikeQueryProbes >= -1,
                           "%s::search: unlikeQueryProbes = %d must be -1 (the index's), 0 "
                           "(exact search) or > 0",
                           kWho, sp.unlikeQueryProbes);
    if (sp.unlikeQueryProbes >= 0) r.unlikeProbes = sp.unlikeQueryProbes;
}

/// The index's defaults (config) overridden by params (validated) for
/// n queries at k on `device`, with no zeros left.
ResolvedSearch resolveSearch(const GpuIndexSearchGraphConfig& config, int device, int64_t n,
                             int64_t k, const faiss::SearchParameters* params) {
    ResolvedSearch r = configDefaults(config);
    // FAISS's base class carries only a selector (applied by the caller).
    if (params && typeid(*params) != typeid(faiss::SearchParameters)) {
        auto sp = dynamic_cast<const SearchParametersSearchGraph*>(params);
        FAISS_THROW_IF_NOT_FMT(sp, "%s::search: params must be SearchParametersSearchGraph or "
                               "faiss::SearchParameters", kWho);
        applySearchParameters(*sp, config, r);
    }
    FAISS_THROW_IF_NOT_FMT(k <= graph::kMaxItopk, "%s::search: k = %lld must be <= %d", kWho,
                           (long long)k, graph::kMaxItopk);
    graph::BeamSearchParams& p = r.beam;
    const int beam = std::max<int>(p.itopk, int(k));
    // the bitonic buffer takes a power of two; a beam between two expands
    // only its first entries (before, 192 silently searched as 256)
    p.itopk = nextPow2(std::max(beam, 32));
    p.expandLimit = beam < p.itopk ? beam : 0;
    if (p.maxIterations == 0) p.maxIterations = beam / p.searchWidth + 16;
    const int mergeWidth = nextPow2(std::max<int>(int(k), 32));
    if (p.blocksPerQuery == 0) p.blocksPerQuery = autoBlocksPerQuery(device, n, mergeWidth);
    FAISS_THROW_IF_NOT_FMT(p.blocksPerQuery * mergeWidth <= graph::kMaxMergedResults,
                           "%s::search: blocksPerQuery %d x k (%lld, rounded to %d) must be "
                           "<= %d",
                           kWho, p.blocksPerQuery, (long long)k, mergeWidth,
                           graph::kMaxMergedResults);
    return r;
}

}  // namespace

GpuIndexSearchGraph::GpuIndexSearchGraph(GpuResourcesProvider* provider, int dims,
                                         FlatMetric metric, GpuIndexSearchGraphConfig config)
    : GpuIndex(provider, dims, toFaissMetric(metric), config),
      flatMetric_(metric),
      sConfig_(config),
      graph_(new SearchGraphState()) {
    checkConfig_(config);
    GpuResourcesProviderFromInstance same(resources_);
    knn_.reset(new GpuKnnGraphGNND(&same, dims, config.knnDegree, metric, knnConfigOf(config)));
    is_trained = true;
}

GpuIndexSearchGraph::GpuIndexSearchGraph(GpuResourcesProvider* provider,
                                         const faiss::IndexHNSWFlat* index,
                                         GpuIndexSearchGraphConfig config)
    : GpuIndexSearchGraph(provider, checkedTwin(index)->d, fromFaissMetric(index->metric_type),
                          withDegree(config, levelZeroDegree(index->hnsw))) {
    copyFrom(index);
}

GpuIndexSearchGraph::~GpuIndexSearchGraph() = default;

void GpuIndexSearchGraph::checkConfig_(const GpuIndexSearchGraphConfig& c) const {
    FAISS_THROW_IF_NOT_FMT(c.graphDegree >= 1 && c.graphDegree <= graph::kMaxSearchDegree,
                           "%s: graphDegree = %d must be in [1, %d]", kWho, c.graphDegree,
                           graph::kMaxSearchDegree);
    FAISS_THROW_IF_NOT_FMT(c.knnDegree >= c.graphDegree && c.knnDegree <= graph::kMaxKnnDegree,
                           "%s: knnDegree = %d must be in [graphDegree = %d, %d]", kWho,
                           c.knnDegree, c.graphDegree, graph::kMaxKnnDegree);
    FAISS_THROW_IF_NOT_FMT(c.itopk >= kMinItopk && c.itopk <= graph::kMaxItopk,
                           "%s: itopk = %d must be in [%d, %d]", kWho, c.itopk,
                           kMinItopk, graph::kMaxItopk);
    FAISS_THROW_IF_NOT_FMT(c.searchWidth >= 1 && c.searchWidth <= graph::kMaxSearchWidth &&
                               c.searchWidth * c.graphDegree <= 1024,
                           "%s: searchWidth = %d must be in [1, %d] with searchWidth x "
                           "graphDegree (%d) <= 1024",
                           kWho, c.searchWidth, graph::kMaxSearchWidth, c.graphDegree);
    FAISS_THROW_IF_NOT_FMT(c.entryPoints >= 0 && c.entrySeeds >= 0 && c.entrySeeds <= 128,
                           "%s: entryPoints = %d must be >= 0 and entrySeeds = %d in [0, 128]",
                           kWho, c.entryPoints, c.entrySeeds);
    FAISS_THROW_IF_NOT_FMT(c.blocksPerQuery >= 0 && c.blocksPerQuery <= graph::kMaxBlocksPerQuery,
                           "%s: blocksPerQuery = %d must be in [0, %d]", kWho, c.blocksPerQuery,
                           graph::kMaxBlocksPerQuery);
    FAISS_THROW_IF_NOT_FMT(c.maxIterations >= 0 && c.seedRounds >= 1,
                           "%s: maxIterations = %d must be >= 0 and seedRounds = %d >= 1", kWho,
                           c.maxIterations, c.seedRounds);
    FAISS_THROW_IF_NOT_FMT(std::isfinite(c.unlikeQueryRatio) && c.unlikeQueryRatio >= 0.f &&
                               c.unlikeQueryShare >= 0.f && c.unlikeQueryShare <= 1.f,
                           "%s: unlikeQueryRatio = %g must be finite and >= 0 (0: no detection) "
                           "and unlikeQueryShare = %g in [0, 1]",
                           kWho, double(c.unlikeQueryRatio), double(c.unlikeQueryShare));
    FAISS_THROW_IF_NOT_FMT(c.unlikeQueryProbes >= 0,
                           "%s: unlikeQueryProbes = %d must be >= 0 (0: exact search)", kWho,
                           c.unlikeQueryProbes);
    FAISS_THROW_IF_NOT_FMT(c.unlikeQueryRatio == 0.f || flatMetric_ != FlatMetric::InnerProduct,
                           "%s: unlikeQueryRatio = %g needs a distance to compare (L2, Cosine or "
                           "Pearson); inner products of raw vectors have none",
                           kWho, double(c.unlikeQueryRatio));
}

void GpuIndexSearchGraph::checkAddCount_(idx_t n) const {
    FAISS_THROW_IF_NOT_FMT(ntotal + n > sConfig_.knnDegree,
                           "%s: the k-NN graph of degree knnDegree = %d needs more than %d "
                           "vectors (the index would hold %lld); add more at once or lower "
                           "knnDegree",
                           kWho, sConfig_.knnDegree, sConfig_.knnDegree, (long long)(ntotal + n));
    FAISS_THROW_IF_NOT_FMT(ntotal + n <= int64_t(std::numeric_limits<int>::max()) - 1,
                           "%s: at most 2^31 - 2 vectors (the index would hold %lld)", kWho,
                           (long long)(ntotal + n));
}

int64_t GpuIndexSearchGraph::getRemovedSincePrune() const {
    auto lock = lockOps_();
    return graph_->removedSincePrune;
}

int GpuIndexSearchGraph::getKnnBuildIterations() const {
    auto lock = lockOps_();
    return knn_->getConfig().maxIterations;
}

GnndAddBuild GpuIndexSearchGraph::getLastKnnAddBuild() const {
    auto lock = lockOps_();
    return knn_->getLastAddBuild();
}

namespace {
/// The buffers of the optimisation of a search graph of `total` vectors.
struct OptimizeBuffers {
    DeviceVector<int> next, scratch;
    graph::TraversalCopy traversal;
};

/// Device bytes of the search graph and its optimisation after the k-NN
/// build of a first add: the scratch is freed before the traversal copy is
/// made, so only the larger of the two counts.
size_t firstAddGraphBytes(int64_t total, int degree, int d, bool traversalCopy) {
    const size_t scratch = sizeof(int) * graph::optimizeScratchInts(total, degree);
    const size_t copy = traversalCopy ? graph::TraversalCopy::bytesFor(total, d) : 0;
    return sizeof(int) * size_t(total) * degree + std::max(scratch, copy);
}

/// The new search graph and the optimisation's scratch; the traversal copy
/// too where `traversalCopy` (a later add allocates everything before the
/// k-NN graph changes; a first add makes the copy after freeing the
/// scratch).
void allocateOptimizeBuffers(OptimizeBuffers& b, GpuResources* res, int device, int64_t total,
                             int degree, int d, bool traversalCopy) {
    b.next.allocate(res, device, size_t(total) * degree, kWho, "search graph");
    b.scratch.allocate(res, device, graph::optimizeScratchInts(total, degree), kWho,
                       "optimisation scratch");
    if (traversalCopy)
        b.traversal.allocate(res, device, total, d, kWho);
}
}  // namespace

void GpuIndexSearchGraph::addImpl_(idx_t n, const float* x) {
    dropUnlikeAnswerData_();  // its memory back before anything is checked or allocated
    const int64_t total = ntotal + n;
    const int degree = sConfig_.graphDegree;
    // Running out of memory must leave the index as it was. A later add
    // allocates every buffer of the optimisation before the k-NN graph
    // changes (a merged graph cannot be taken back). A first add allocates
    // them once the k-NN build has freed its temporaries, and empties the
    // k-NN graph again if they do not fit: at 100M x 96 the build's
    // temporaries and these buffers together pass an H200's memory.
    const bool first = ntotal == 0;
    if (first) checkFirstAddFits_(total);
    OptimizeBuffers buffers;
    if (!first)
        allocateOptimizeBuffers(buffers, resources_.get(), config_.device, total, degree, d,
                                sConfig_.fp16Traversal);
    buildKnnLists_(n, x, total);
    std::unique_ptr<graph::EntrySample> entries;
    try {
        if (first)
            allocateOptimizeBuffers(buffers, resources_.get(), config_.device, total, degree, d,
                                    false);
        optimizeInto_(buffers.next.data(), buffers.scratch.data(), total);
        buffers.scratch.release();  // room for a first add's traversal copy
        if (sConfig_.fp16Traversal) makeTraversalCopy_(buffers.traversal, total);
        entries = makeEntryPoints_(total);
    } catch (...) {
        // (a later add has merged its vectors into the k-NN graph already)
        if (first) knn_->reset();
        throw;
    }
    std::swap(graph_->ids, buffers.next);
    graph_->traversal.swap(buffers.traversal);
    graph_->removedSincePrune = 0;
    entries_ = std::move(entries);
    ntotal = total;
}

void GpuIndexSearchGraph::buildKnnLists_(idx_t n, const float* x, int64_t total) {
    if (sConfig_.knnBuild.maxIterations == 0) {
        GpuKnnGraphGNNDConfig g = knn_->getConfig();
        g.maxIterations = GpuIndexSearchGraphConfig::knnBuildIterationsFor(total);
        knn_->setConfig(g);
    }
    knn_->verbose = verbose;  // the build's progress, as faiss indexes print theirs
    const auto t0 = std::chrono::steady_clock::now();
    knn_->add(n, x);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(resources_->getDefaultStream(config_.device)));
    knnSeconds_ = secondsSince(t0);
}

void GpuIndexSearchGraph::optimizeInto_(int* next, int* scratch, int64_t total) {
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    const auto t0 = std::chrono::steady_clock::now();
    graph::optimizeGraph(stream, knn_->getGraphIdsDevice(), total, knn_->getBuildDegree(),
                         sConfig_.knnDegree, sConfig_.graphDegree, next, scratch);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    optimizeSeconds_ = secondsSince(t0);
}

void GpuIndexSearchGraph::checkFirstAddFits_(int64_t total) const {
    const GnndMemoryEstimate knn =
            GpuKnnGraphGNND::estimateMemory(total, d, sConfig_.knnDegree, knn_->getConfig());
    const size_t opt = firstAddGraphBytes(total, sConfig_.graphDegree, d, sConfig_.fp16Traversal);
    const size_t need = knn.vectors + knn.graph + opt, free = deviceFreeBytes(config_.device);
    const double GB = 1e9;
    FAISS_THROW_IF_NOT_FMT(need <= free,
                           "%s: %lld vectors need %.1f GB of device memory after their k-NN "
                           "build (vectors %.1f, k-NN lists %.1f, search graph with its "
                           "optimisation%s %.1f) and %.1f GB are free; nothing was added "
                           "(lower knnDegree or graphDegree, or set fp16Traversal false)",
                           kWho, (long long)total, need / GB, knn.vectors / GB, knn.graph / GB,
                           sConfig_.fp16Traversal ? " and traversal copy" : "", opt / GB, free / GB);
}

size_t GpuIndexSearchGraph::remove_ids(const faiss::IDSelector& sel) {
    auto lock = lockOps_();
    checkUsable_();
    const IdSelection removed(&sel, ntotal);
    const int64_t gone = removed.count(), total = ntotal - gone;
    if (gone == 0) return 0;
    if (total == 0) {
        reset();
        return size_t(gone);
    }
    FAISS_THROW_IF_NOT_FMT(total > sConfig_.knnDegree,
                           "%s: remove_ids would leave %lld vectors; the k-NN graph of degree "
                           "knnDegree = %d needs more (nothing was removed)",
                           kWho, (long long)total, sConfig_.knnDegree);
    dropUnlikeAnswerData_();  // its memory back before the new graph's buffers
    const int degree = sConfig_.graphDegree;
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    // As in add(): the new graph's buffers first, so that running out of
    // memory leaves the index as it was.
    // (the traversal copy is made by fillTraversalCopy_ once the survivors are in place)
    OptimizeBuffers buffers;
    allocateOptimizeBuffers(buffers, resources_.get(), config_.device, total, degree, d,
                            sConfig_.fp16Traversal);
    const RemovalMapping mapping(resources_.get(), config_.device, stream, removed);
    TempBuffer<unsigned long long> shortRows(resources_.get(), config_.device, 1, stream);
    // Nodes removed since the last pruning, against the nodes it saw.
    const int64_t sincePrune = graph_->removedSincePrune + gone;
    const bool patch = double(sincePrune) <=
                       kPatchedRemovalShare * double(ntotal + graph_->removedSincePrune);
    auto t0 = std::chrono::steady_clock::now();
    knn_->removeMapped(mapping);
    const bool pruned = !(patch && patchGraph_(mapping, buffers.next.data(), shortRows.data()));
    if (pruned) {
        // The k-NN lists lost the removed nodes; the search graph is pruned
        // again from them (CAGRA's optimisation), so no edge leads to a
        // removed node and the survivors' detours are re-ranked.
        graph::optimizeGraph(stream, knn_->getGraphIdsDevice(), total, knn_->getBuildDegree(),
                             sConfig_.knnDegree, degree, buffers.next.data(),
                             buffers.scratch.data());
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    optimizeSeconds_ = secondsSince(t0);
    std::swap(graph_->ids, buffers.next);
    graph_->traversal.swap(buffers.traversal);
    graph_->removedSincePrune = pruned ? 0 : sincePrune;
    ntotal = total;
    fillTraversalCopy_();
    rebuildEntryPoints_();
    return size_t(gone);
}

bool GpuIndexSearchGraph::patchGraph_(const RemovalMapping& mapping, int* next,
                                      unsigned long long* shortRows) const {
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    graph::repairGraphAfterRemoval(stream, graph_->ids.data(), sConfig_.graphDegree, mapping.kept(),
                                   mapping.survivors(), mapping.newId(), knn_->getGraphIdsDevice(),
                                   knn_->getBuildDegree(), sConfig_.knnDegree, next, shortRows);
    unsigned long long shortCount = 0;
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(&shortCount, shortRows, sizeof(shortCount),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return shortCount == 0;
}

void GpuIndexSearchGraph::makeTraversalCopy_(graph::TraversalCopy& t, int64_t total) const {
    if (t.size() != total) {
        t.release();  // (the old copy's memory first: at 100M it is 19 GB)
        t.allocate(resources_.get(), config_.device, total, d, kWho);
    }
    t.fill(resources_->getDefaultStream(config_.device), knn_->getVectorsDevice());
}

void GpuIndexSearchGraph::fillTraversalCopy_() {
    if (!sConfig_.fp16Traversal || ntotal == 0) return;
    makeTraversalCopy_(graph_->traversal, ntotal);
}

std::unique_ptr<graph::EntrySample> GpuIndexSearchGraph::makeEntryPoints_(int64_t total) const {
    if (sConfig_.entryPoints == 0 || total == 0) return nullptr;
    // the stored vectors are prepared already: plain L2 or inner product
    return std::unique_ptr<graph::EntrySample>(
            new graph::EntrySample(resources_.get(), config_.device, d, storedMetric(metric_type),
                                   knn_->getVectorsDevice(), total, sConfig_.entryPoints,
                                   sConfig_.seed));
}

void GpuIndexSearchGraph::rebuildEntryPoints_() {
    entries_.reset();
    entries_ = makeEntryPoints_(ntotal);
}

void GpuIndexSearchGraph::searchImpl_(idx_t n, const float* x, int64_t k, float* distances,
                                      idx_t* labels, const faiss::SearchParameters* params) const {
    // every argument checked first
    const ResolvedSearch r = resolveSearch(sConfig_, config_.device, n, k, params);
    FAISS_THROW_IF_NOT_FMT(r.unlikeRatio == 0.f || flatMetric_ != FlatMetric::InnerProduct,
                           "%s::search: unlikeQueryRatio = %g needs a distance to compare (L2, "
                           "Cosine or Pearson); inner products of raw vectors have none",
                           kWho, double(r.unlikeRatio));
    if (ntotal == 0) {
        fillEmptyResults_(n, k, distances, labels);
        return;
    }
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    std::unique_ptr<TempBuffer<float>> prepared;
    const float* q =
        preparedQueries(resources_.get(), config_.device, stream, flatMetric_, x, n, d, prepared);
    if (params && params->sel) {
        searchFiltered_(n, q, k, params, r.unlikeRatio, r.unlikeProbes, distances, labels);
    } else {
        beamSearch_(n, q, k, params, distances, labels);
    }
}

void GpuIndexSearchGraph::beamSearch_(idx_t n, const float* q, int64_t k,
                                      const faiss::SearchParameters* params, float* distances,
                                      idx_t* labels) const {
    ResolvedSearch r = resolveSearch(sConfig_, config_.device, n, k, params);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    bool ip = metric_type == faiss::METRIC_INNER_PRODUCT;
    graph::EntrySeeds seeds;
    std::unique_ptr<TempBuffer<int64_t>> seedRanks;
    int perQuery = entries_ ? std::min(r.entrySeeds, entries_->size()) : 0;
    perQuery = std::min(perQuery, std::max(32, r.beam.searchWidth * sConfig_.graphDegree));
    if (perQuery > 0) {
        seedRanks.reset(new TempBuffer<int64_t>(resources_.get(), config_.device,
                                                size_t(n) * perQuery, stream));
        entries_->nearest(q, n, perQuery, seedRanks->data());
        seeds.entryIds = entries_->nodeIds();
        seeds.rank = seedRanks->data();
        seeds.perQuery = perQuery;
    }
    graph::SearchVectors vectors;
    vectors.x = knn_->getVectorsDevice();
    if (r.half) graph_->traversal.view(vectors);
    size_t perBlockResults = size_t(n) * r.beam.blocksPerQuery * k;
    bool several = r.beam.blocksPerQuery > 1;
    TempBuffer<float> blockKeys(resources_.get(), config_.device, several ? perBlockResults : 0,
                                stream);
    TempBuffer<int64_t> blockIds(resources_.get(), config_.device, several ? perBlockResults : 0,
                                 stream);
    graph::BeamScratch scratch{blockKeys.data(), blockIds.data()};
    graph::beamSearch(stream, vectors, ntotal, d, graph_->ids.data(), sConfig_.graphDegree, ip, q,
                      n, int(k), r.beam, seeds, distances, labels, scratch);
    if (r.unlikeRatio > 0.f) {
        answerUnlikeQueries_(n, q, k, r.unlikeRatio, r.unlikeProbes, distances, labels);
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

graph::SelectionCorpus GpuIndexSearchGraph::selectionCorpus_() const {
    graph::SelectionCorpus c;
    c.res = resources_.get();
    c.device = config_.device;
    c.vectors = knn_->getVectorsDevice();
    c.ntotal = ntotal;
    c.d = d;
    c.metric = storedMetric(metric_type);
    return c;
}

void GpuIndexSearchGraph::searchFiltered_(idx_t n, const float* q, int64_t k,
                                          const faiss::SearchParameters* params,
                                          float unlikeRatio, int unlikeProbes, float* distances,
                                          idx_t* labels) const {
    const IdSelection selection(params->sel, ntotal);
    const int64_t kept = selection.count();
    if (kept == 0) {
        fillEmptyResults_(n, k, distances, labels);
        return;
    }
    // The beam search with its own knobs, the selector left out.
    SearchParametersSearchGraph wide;
    if (auto sp = dynamic_cast<const SearchParametersSearchGraph*>(params)) wide = *sp;
    wide.sel = nullptr;
    if (kept == ntotal) {
        beamSearch_(n, q, k, &wide, distances, labels);
        return;
    }
    // candidates of the whole graph: their queries unlike the data are
    // answered below, over the selection (an answer over every vector
    // would hold excluded ones)
    wide.unlikeQueryRatio = 0.f;
    const graph::SelectionCorpus corpus = selectionCorpus_();
    const int64_t kWide = graph::filteredCandidates(k, kept, ntotal, graph::kMaxItopk);
    if (graph::searchSelectionInstead(kept, kWide, graph::kMaxItopk, sConfig_.graphDegree)) {
        graph::searchSelectionExactly(corpus, selection, n, q, k, distances, labels);
        return;
    }
    wide.itopk = std::max<int>(wide.itopk > 0 ? wide.itopk : sConfig_.itopk, int(kWide));
    const int mergeWidth = nextPow2(std::max<int>(int(kWide), 32));
    if (wide.blocksPerQuery * mergeWidth > graph::kMaxMergedResults) wide.blocksPerQuery = 0;
    graph::searchSelectedCandidates(
            corpus, selection, n, q, k, kWide,
            [&](int64_t m, const float* mq, int64_t kw, float* D, int64_t* I) {
                beamSearch_(m, mq, kw, &wide, D, I);
            },
            distances, labels);
    if (unlikeRatio > 0.f) {
        answerUnlikeQueries_(n, q, k, unlikeRatio, unlikeProbes, distances, labels, &selection);
    }
}

std::vector<int> GpuIndexSearchGraph::getSearchGraph() const {
    auto lock = lockOps_();
    return copyToHost(resources_.get(), config_.device, graph_->ids.data(),
                      size_t(ntotal) * sConfig_.graphDegree);
}

std::vector<int> GpuIndexSearchGraph::getEntryPoints() const {
    auto lock = lockOps_();
    return entries_ ? copyToHost(resources_.get(), config_.device, entries_->nodeIds(),
                                 size_t(entries_->size()))
                    : std::vector<int>();
}

std::vector<int> GpuIndexSearchGraph::getKnnGraph() const {
    auto lock = lockOps_();
    return knn_->getGraphInt();
}

void GpuIndexSearchGraph::reset() {
    auto lock = lockOps_();
    knn_->reset();
    graph_->ids.release();
    graph_->traversal.release();
    graph_->removedSincePrune = 0;
    entries_.reset();
    dropUnlikeAnswerData_();
    ntotal = 0;
}

void GpuIndexSearchGraph::reconstruct(idx_t key, float* recons) const {
    auto lock = lockOps_();
    knn_->reconstruct(key, recons);
}

void GpuIndexSearchGraph::copyTo(faiss::IndexHNSWFlat* index) const {
    auto lock = lockOps_();
    FAISS_THROW_IF_NOT_FMT(index, "%s::copyTo: null index", kWho);
    FAISS_THROW_IF_NOT_FMT(index->d == d && index->metric_type == metric_type,
                           "%s::copyTo: the twin has d %d / metric %d, we have d %d / metric %d",
                           kWho, index->d, int(index->metric_type), d, int(metric_type));
    auto flat = dynamic_cast<faiss::IndexFlat*>(index->storage);
    FAISS_THROW_IF_NOT_FMT(flat, "%s::copyTo: the twin's storage must be an IndexFlat", kWho);
    std::vector<float> xs =
        copyToHost(resources_.get(), config_.device, knn_->getVectorsDevice(), size_t(ntotal) * d);
    std::vector<int> g = getSearchGraph();
    index->reset();
    flat->add(ntotal, xs.data());
    fillHnswLevels(index->hnsw, g, ntotal, sConfig_.graphDegree, sConfig_.seed);
    index->hnsw.efSearch = sConfig_.itopk;
    index->ntotal = ntotal;
}

faiss::Index* GpuIndexSearchGraph::copyToCpuIndex() const {
    auto lock = lockOps_();
    auto twin = new faiss::IndexHNSWFlat(d, std::max(1, sConfig_.graphDegree / 2), metric_type);
    try {
        copyTo(twin);
    } catch (...) {
        delete twin;
        throw;
    }
    return twinWithQueryPreparation(twin, flatMetric_);
}

void GpuIndexSearchGraph::copyFrom(const faiss::IndexHNSWFlat* index) {
    auto lock = lockOps_();
    checkedTwin(index);
    FAISS_THROW_IF_NOT_FMT(index->d == d && index->metric_type == metric_type,
                           "%s::copyFrom: the twin has d %d / metric %d, we have d %d / metric %d",
                           kWho, index->d, int(index->metric_type), d, int(metric_type));
    auto flat = dynamic_cast<const faiss::IndexFlat*>(index->storage);
    FAISS_THROW_IF_NOT_FMT(flat, "%s::copyFrom: the twin's storage must be an IndexFlat", kWho);
    int64_t n = flat->ntotal;
    FAISS_THROW_IF_NOT_FMT(index->ntotal == n,
                           "%s::copyFrom: the twin holds %lld vectors but "
                           "its storage %lld",
                           kWho, (long long)index->ntotal, (long long)n);
    if (n == 0) {
        reset();
        return;
    }
    std::vector<int> g = levelZeroGraph(index->hnsw, n, sConfig_.graphDegree);
    // Rebuild the k-NN graph in a fresh index; ours changes only at the end.
    GpuResourcesProviderFromInstance same(resources_);
    std::unique_ptr<GpuKnnGraphGNND> knn(
        new GpuKnnGraphGNND(&same, d, sConfig_.knnDegree, flatMetric_, knnConfigOf(sConfig_)));
    knn->add(n, flat->get_xb());
    DeviceVector<int> ids;
    ids.allocate(resources_.get(), config_.device, g.size(), kWho, "search graph");
    DeviceScope scope(config_.device);
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(ids.data(), g.data(), sizeof(int) * g.size(),
                                         cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::swap(knn_, knn);
    std::swap(graph_->ids, ids);
    graph_->removedSincePrune = 0;
    dropUnlikeAnswerData_();
    ntotal = n;
    fillTraversalCopy_();
    rebuildEntryPoints_();
}

}  // namespace gpu
}  // namespace faiss_ext
