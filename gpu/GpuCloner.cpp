// Moving indexes between the CPU and a GPU (see GpuCloner.h). The walk
// through FAISS's wrappers is host code shared with write_index:
// faiss_ext/CpuTwin.h.
#include "faiss_ext/gpu/GpuCloner.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexReplicas.h>
#include <faiss/IndexShards.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "faiss_ext/CpuConvertible.h"
#include "faiss_ext/CpuTwin.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/RowCenteringTransform.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

/// An IndexFlat (not IndexFlat1D, which searches differently) over L2 or IP.
bool isFlatL2OrIP(const faiss::Index* index) {
    auto flat = dynamic_cast<const faiss::IndexFlat*>(index);
    if (!flat || dynamic_cast<const faiss::IndexFlat1D*>(index)) return false;
    return flat->metric_type == faiss::METRIC_L2 ||
           flat->metric_type == faiss::METRIC_INNER_PRODUCT;
}

bool isL2Normalization(const faiss::VectorTransform* vt) {
    auto nt = dynamic_cast<const faiss::NormalizationTransform*>(vt);
    return nt && nt->norm == 2.0f;
}

/// The cosine twin [Normalization(2)] or the Pearson twin [RowCentering,
/// Normalization(2)] over an IndexFlatIP, as GpuIndexQuickSelectFlat's
/// copyFrom accepts them.
bool isPreparedFlatTwin(const faiss::Index* index) {
    auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index);
    if (!pt || !isFlatL2OrIP(pt->index) || pt->index->metric_type != faiss::METRIC_INNER_PRODUCT) {
        return false;
    }
    if (pt->chain.size() == 1) return isL2Normalization(pt->chain[0]);
    if (pt->chain.size() == 2) {
        return dynamic_cast<const RowCenteringTransform*>(pt->chain[0]) &&
               isL2Normalization(pt->chain[1]);
    }
    return false;
}

/// The GNND twin: a faiss::IndexNNDescentFlat whose storage is an IndexFlat
/// over L2 or IP (what GpuKnnGraphGNND's copyFrom takes), else nullptr.
const faiss::IndexNNDescentFlat* asGnndTwin(const faiss::Index* index) {
    auto nnd = dynamic_cast<const faiss::IndexNNDescentFlat*>(index);
    if (!nnd || !isFlatL2OrIP(nnd->storage)) return nullptr;
    return nnd;
}

/// GpuKnnGraphGNND's build parameters from FAISS's NN-Descent ones.
GpuKnnGraphGNNDConfig gnndConfigFrom(const faiss::IndexNNDescentFlat& twin, int device) {
    const faiss::NNDescent& nn = twin.nndescent;
    GpuKnnGraphGNNDConfig config;
    config.device = device;
    config.samples = std::min(std::max(nn.S, 1), kGnndMaxSamples);
    config.maxIterations = std::max(nn.iter, 1);
    // FAISS's seed is an int: keep its 32 bits, so copyTo gives it back
    config.seed = uint64_t(uint32_t(nn.random_seed));
    config.searchL = std::max(nn.search_L, 0);
    return config;
}

/// The search-graph twin: a faiss::IndexHNSWFlat over an IndexFlat (L2 or
/// IP), ours or FAISS's own, else nullptr.
const faiss::IndexHNSWFlat* asSearchGraphTwin(const faiss::Index* index) {
    auto h = dynamic_cast<const faiss::IndexHNSWFlat*>(index);
    if (!h || !isFlatL2OrIP(h->storage) || h->hnsw.cum_nneighbor_per_level.size() < 2) {
        return nullptr;
    }
    return h;
}

/// GpuIndexSearchGraph for an HNSW twin: its level-0 degree, a k-NN graph of
/// twice that, the candidate buffer from efSearch.
GpuIndexSearchGraph* searchGraphFrom(GpuResourcesProvider* provider, int device,
                                     const faiss::IndexHNSWFlat& twin) {
    const faiss::HNSW& h = twin.hnsw;
    int degree = h.cum_nneighbor_per_level[1] - h.cum_nneighbor_per_level[0];
    FAISS_THROW_IF_NOT_FMT(degree >= 1 && degree <= 128,
                           "index_cpu_to_gpu: IndexHNSWFlat with %d level-0 neighbours: "
                           "GpuIndexSearchGraph supports degrees 1..128",
                           degree);
    GpuIndexSearchGraphConfig config;
    config.device = device;
    config.graphDegree = degree;
    config.knnDegree = std::min(2 * degree, 256);
    int itopk = 32;
    while (itopk < h.efSearch && itopk < 512) itopk <<= 1;
    config.itopk = itopk;
    if (twin.ntotal == 0) {
        return new GpuIndexSearchGraph(provider, twin.d, fromFaissMetric(twin.metric_type), config);
    }
    return new GpuIndexSearchGraph(provider, &twin, config);
}

// ------------------------------------------------ several GPUs: slicing

/// Throws unless sliceIndex can cut `index` (index_cpu_to_gpu_multiple with
/// shard); host only, so that nothing is built before the arguments are known
/// to be good.
void checkShardable(const faiss::Index* index) {
    FAISS_THROW_IF_NOT_MSG(index, "index_cpu_to_gpu_multiple: null index inside a wrapper");
    if (isFlatL2OrIP(index) || dynamic_cast<const IndexBiLevelLSH*>(index)) return;
    if (auto m = dynamic_cast<const faiss::IndexIDMap*>(index)) return checkShardable(m->index);
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index)) {
        return checkShardable(pt->index);
    }
    // GPU indexes of ours: what their CPU twins are
    if (dynamic_cast<const GpuIndexQuickSelectFlat*>(index) ||
        dynamic_cast<const GpuIndexBiLevelLSH*>(index)) {
        return;
    }
    FAISS_THROW_IF_NOT_FMT(!dynamic_cast<const faiss::IndexNNDescent*>(index) &&
                                   !dynamic_cast<const GpuKnnGraphGNND*>(index),
                           "index_cpu_to_gpu_multiple: a k-NN graph (%s) cannot be sharded: the "
                           "graph of a slice is not a slice of the graph; replicate it "
                           "(GpuMultipleClonerOptions::shard = false)",
                           typeid(*index).name());
    FAISS_THROW_FMT("index_cpu_to_gpu_multiple: %s cannot be sharded (IndexFlat L2 / IP, the "
                    "cosine / Pearson twins, IndexBiLevelLSH and IndexIDMap / IndexPreTransform "
                    "around them can); replicate it (GpuMultipleClonerOptions::shard = false)",
                    typeid(*index).name());
}

/// A new CPU index holding vectors [i0, i1) of `index` (checkShardable
/// passed; no GPU nodes): see index_cpu_to_gpu_multiple.
faiss::Index* sliceIndex(const faiss::Index* index, int64_t i0, int64_t i1) {
    if (isFlatL2OrIP(index)) {
        auto flat = static_cast<const faiss::IndexFlat*>(index);
        auto out = std::make_unique<faiss::IndexFlat>(flat->d, flat->metric_type);
        out->metric_arg = flat->metric_arg;
        out->add(i1 - i0, flat->get_xb() + i0 * flat->d);
        return out.release();
    }
    if (auto lsh = dynamic_cast<const IndexBiLevelLSH*>(index)) {
        const std::vector<float>& x = lsh->getVectors();
        auto out = std::make_unique<IndexBiLevelLSH>(lsh->d, lsh->getConfig());
        out->verbose = lsh->verbose;
        out->setContents(lsh->getConfig(), lsh->getModel(),
                         std::vector<float>(x.begin() + i0 * lsh->d, x.begin() + i1 * lsh->d));
        return out.release();
    }
    if (auto m = dynamic_cast<const faiss::IndexIDMap*>(index)) {
        std::unique_ptr<faiss::Index> inner(sliceIndex(m->index, i0, i1));
        // (IndexIDMap's constructor from an index takes only empty ones)
        std::unique_ptr<faiss::IndexIDMap> out;
        if (dynamic_cast<const faiss::IndexIDMap2*>(index)) {
            out.reset(new faiss::IndexIDMap2());
        } else {
            out.reset(new faiss::IndexIDMap());
        }
        out->index = inner.release();
        out->own_fields = true;
        out->d = m->d;
        out->is_trained = m->is_trained;
        out->metric_type = m->metric_type;
        out->metric_arg = m->metric_arg;
        out->verbose = m->verbose;
        out->id_map.assign(m->id_map.begin() + i0, m->id_map.begin() + i1);
        out->ntotal = i1 - i0;
        if (auto m2 = dynamic_cast<faiss::IndexIDMap2*>(out.get())) m2->construct_rev_map();
        return out.release();
    }
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index)) {
        auto out = std::make_unique<faiss::IndexPreTransform>();
        out->own_fields = true;
        for (const faiss::VectorTransform* vt : pt->chain) {
            out->chain.push_back(cloneVectorTransform(vt));
        }
        out->index = sliceIndex(pt->index, i0, i1);
        out->d = pt->d;
        out->ntotal = i1 - i0;
        out->is_trained = pt->is_trained;
        out->metric_type = pt->metric_type;
        out->metric_arg = pt->metric_arg;
        out->verbose = pt->verbose;
        return out.release();
    }
    FAISS_THROW_FMT("index_cpu_to_gpu_multiple: cannot slice %s", typeid(*index).name());
}

/// Whether `index` (a sliceable tree) assigns its own ids: an IndexIDMap in
/// it means the shards' labels must not be shifted.
bool hasIdMap(const faiss::Index* index) {
    if (dynamic_cast<const faiss::IndexIDMap*>(index)) return true;
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index)) return hasIdMap(pt->index);
    return false;
}

// ------------------------------------------------ several GPUs: merging back

bool sameTransform(const faiss::VectorTransform* a, const faiss::VectorTransform* b) {
    if (typeid(*a) != typeid(*b) || a->d_in != b->d_in || a->d_out != b->d_out ||
        a->is_trained != b->is_trained) {
        return false;
    }
    if (dynamic_cast<const RowCenteringTransform*>(a)) return true;  // no state
    if (auto na = dynamic_cast<const faiss::NormalizationTransform*>(a)) {
        return na->norm == static_cast<const faiss::NormalizationTransform*>(b)->norm;
    }
    if (auto ca = dynamic_cast<const faiss::CenteringTransform*>(a)) {
        return ca->mean == static_cast<const faiss::CenteringTransform*>(b)->mean;
    }
    if (auto la = dynamic_cast<const faiss::LinearTransform*>(a)) {
        auto lb = static_cast<const faiss::LinearTransform*>(b);
        return la->have_bias == lb->have_bias && la->A == lb->A && la->b == lb->b;
    }
    return false;  // unknown state: do not merge
}

bool sameLshConfig(const BiLevelLSHConfig& a, const BiLevelLSHConfig& b) {
    return a.treeDepth == b.treeDepth && a.nTables == b.nTables &&
           a.nProjections == b.nProjections && a.bucketWidth == b.bucketWidth &&
           a.meanRuleC == b.meanRuleC && a.diameterIterations == b.diameterIterations &&
           a.cuckooSubTables == b.cuckooSubTables && a.cuckooMaxLoad == b.cuckooMaxLoad &&
           a.seed == b.seed;
}

bool sameLshModel(const BiLevelLSHModel& a, const BiLevelLSHModel& b) {
    return a.d == b.d && a.depth == b.depth && a.nTables == b.nTables &&
           a.nProjections == b.nProjections && a.bits == b.bits && a.nodeRule == b.nodeRule &&
           a.nodeVec == b.nodeVec && a.nodeThreshold == b.nodeThreshold &&
           a.leafMean == b.leafMean && a.leafWidth == b.leafWidth &&
           a.leafOffset == b.leafOffset && a.leafTrainCount == b.leafTrainCount &&
           a.proj == b.proj && a.projBias == b.projBias;
}

/// Whether mergeParts can concatenate these CPU indexes (shards of an
/// IndexShards whose labels are shifted when `successiveIds`).
bool canMerge(const std::vector<const faiss::Index*>& parts, bool successiveIds) {
    const faiss::Index* p0 = parts[0];
    for (const faiss::Index* p : parts) {
        if (!p || typeid(*p) != typeid(*p0) || p->d != p0->d ||
            p->metric_type != p0->metric_type || p->metric_arg != p0->metric_arg) {
            return false;
        }
    }
    if (isFlatL2OrIP(p0)) return successiveIds;
    if (auto l0 = dynamic_cast<const IndexBiLevelLSH*>(p0)) {
        if (!successiveIds) return false;
        for (const faiss::Index* p : parts) {
            auto l = static_cast<const IndexBiLevelLSH*>(p);
            if (!sameLshConfig(l->getConfig(), l0->getConfig()) ||
                !sameLshModel(l->getModel(), l0->getModel())) {
                return false;
            }
        }
        return true;
    }
    std::vector<const faiss::Index*> inner;
    if (dynamic_cast<const faiss::IndexIDMap*>(p0)) {
        if (successiveIds) return false;
        for (const faiss::Index* p : parts) {
            auto m = static_cast<const faiss::IndexIDMap*>(p);
            if (!m->own_fields || int64_t(m->id_map.size()) != m->ntotal) return false;
            inner.push_back(m->index);
        }
        return canMerge(inner, true);
    }
    if (auto pt0 = dynamic_cast<const faiss::IndexPreTransform*>(p0)) {
        for (const faiss::Index* p : parts) {
            auto pt = static_cast<const faiss::IndexPreTransform*>(p);
            if (!pt->own_fields || pt->chain.size() != pt0->chain.size()) return false;
            for (size_t j = 0; j < pt->chain.size(); ++j) {
                if (!sameTransform(pt->chain[j], pt0->chain[j])) return false;
            }
            inner.push_back(pt->index);
        }
        return canMerge(inner, successiveIds);
    }
    return false;
}

/// One index with the vectors of `parts` in order (canMerge passed); takes
/// the parts over.
std::unique_ptr<faiss::Index> mergeParts(std::vector<std::unique_ptr<faiss::Index>> parts) {
    std::unique_ptr<faiss::Index> out = std::move(parts[0]);
    if (isFlatL2OrIP(out.get())) {
        auto flat = static_cast<faiss::IndexFlat*>(out.get());
        for (size_t i = 1; i < parts.size(); ++i) {
            auto p = static_cast<const faiss::IndexFlat*>(parts[i].get());
            flat->add(p->ntotal, p->get_xb());
        }
        return out;
    }
    if (auto l0 = dynamic_cast<IndexBiLevelLSH*>(out.get())) {
        std::vector<float> x = l0->getVectors();
        for (size_t i = 1; i < parts.size(); ++i) {
            const std::vector<float>& xi =
                    static_cast<const IndexBiLevelLSH*>(parts[i].get())->getVectors();
            x.insert(x.end(), xi.begin(), xi.end());
        }
        l0->setContents(l0->getConfig(), l0->getModel(), std::move(x));
        return out;
    }
    // wrappers that own their index: merge the inner indexes, keep parts[0]'s
    // wrapper
    std::vector<std::unique_ptr<faiss::Index>> inner;
    auto detach = [&](faiss::Index*& child) {
        inner.emplace_back(child);
        child = nullptr;
    };
    auto m0 = dynamic_cast<faiss::IndexIDMap*>(out.get());
    auto pt0 = dynamic_cast<faiss::IndexPreTransform*>(out.get());
    FAISS_ASSERT(m0 || pt0);
    for (size_t i = 0; i < parts.size(); ++i) {
        faiss::Index* p = i == 0 ? out.get() : parts[i].get();
        if (m0) {
            auto m = static_cast<faiss::IndexIDMap*>(p);
            if (i > 0) m0->id_map.insert(m0->id_map.end(), m->id_map.begin(), m->id_map.end());
            detach(m->index);
        } else {
            detach(static_cast<faiss::IndexPreTransform*>(p)->index);
        }
    }
    std::unique_ptr<faiss::Index> merged = mergeParts(std::move(inner));
    out->ntotal = merged->ntotal;
    if (m0) {
        m0->index = merged.release();
        if (auto m2 = dynamic_cast<faiss::IndexIDMap2*>(m0)) m2->construct_rev_map();
    } else {
        pt0->index = merged.release();
    }
    return out;
}

/// The CPU copy of an IndexShards / IndexReplicas holding GPU indexes
/// (index_gpu_to_cpu), or nullptr for any other node.
faiss::Index* undoMultiple(const faiss::Index* node) {
    if (!containsCpuConvertible(node)) return nullptr;
    if (auto rep = dynamic_cast<const faiss::IndexReplicas*>(node)) {
        bool same = rep->count() > 0;
        for (int i = 0; same && i < rep->count(); ++i) {
            same = rep->at(i) && rep->at(i)->ntotal == rep->at(0)->ntotal;
        }
        return same ? index_gpu_to_cpu(rep->at(0)) : nullptr;
    }
    auto sh = dynamic_cast<const faiss::IndexShards*>(node);
    if (!sh || sh->count() == 0) return nullptr;
    std::vector<std::unique_ptr<faiss::Index>> parts;
    std::vector<const faiss::Index*> view;
    for (int i = 0; i < sh->count(); ++i) {
        FAISS_THROW_IF_NOT_MSG(sh->at(i), "index_gpu_to_cpu: IndexShards with a null shard");
        parts.emplace_back(index_gpu_to_cpu(sh->at(i)));
        view.push_back(parts.back().get());
    }
    if (canMerge(view, sh->successive_ids)) return mergeParts(std::move(parts)).release();
    // as cloneIndexTree copies it, from the copies at hand
    auto out = std::make_unique<faiss::IndexShards>(sh->d, false, sh->successive_ids);
    out->own_fields = true;
    for (auto& p : parts) {
        out->add_shard(p.get());
        p.release();
    }
    out->metric_type = sh->metric_type;
    out->metric_arg = sh->metric_arg;
    out->is_trained = sh->is_trained;
    return out.release();
}

}  // namespace

faiss::Index* index_cpu_to_gpu(GpuResourcesProvider* provider, int device,
                               const faiss::Index* index, const GpuClonerOptions* options) {
    FAISS_THROW_IF_NOT_MSG(provider, "index_cpu_to_gpu: null resources provider");
    FAISS_THROW_IF_NOT_MSG(index, "index_cpu_to_gpu: null index");
    checkDevice(device);
    const bool requireGpu = options && options->requireGpu;

    GpuIndexQuickSelectFlatConfig config;
    config.device = device;
    return cloneIndexTree(index, [&](const faiss::Index* node) -> faiss::Index* {
        if (isFlatL2OrIP(node) || isPreparedFlatTwin(node)) {
            return new GpuIndexQuickSelectFlat(provider, node, config);
        }
        if (const faiss::IndexNNDescentFlat* nnd = asGnndTwin(node)) {
            FAISS_THROW_IF_NOT_FMT(nnd->nndescent.K >= 1 && nnd->nndescent.K <= kGnndMaxDegree,
                                   "index_cpu_to_gpu: IndexNNDescentFlat with K = %d: "
                                   "GpuKnnGraphGNND supports graph degrees 1..%d",
                                   nnd->nndescent.K, kGnndMaxDegree);
            return new GpuKnnGraphGNND(provider, nnd, gnndConfigFrom(*nnd, device));
        }
        if (const faiss::IndexHNSWFlat* hnsw = asSearchGraphTwin(node)) {
            // level 0 kept as the search graph; the k-NN graph rebuilt by GNND
            return searchGraphFrom(provider, device, *hnsw);
        }
        if (auto lsh = dynamic_cast<const IndexBiLevelLSH*>(node)) {
            // configuration, trained model and vectors; tables rebuilt on the GPU
            GpuIndexBiLevelLSHConfig lshConfig;
            lshConfig.device = device;
            return new GpuIndexBiLevelLSH(provider, lsh, lshConfig);
        }
        if (auto conv = dynamic_cast<const CpuConvertible*>(node)) {
            // already on a GPU: through its CPU twin, onto `device`
            std::unique_ptr<faiss::Index> twin(conv->copyToCpuIndex());
            return index_cpu_to_gpu(provider, device, twin.get(), options);
        }
        FAISS_THROW_IF_NOT_FMT(!requireGpu || isWalkedWrapper(node),
                               "index_cpu_to_gpu: %s has no faiss_ext GPU counterpart "
                               "(GpuClonerOptions::requireGpu is set)",
                               typeid(*node).name());
        return nullptr;  // wrappers are walked, other indexes copied on the CPU
    });
}


faiss::Index* index_cpu_to_gpu_multiple(const std::vector<GpuResourcesProvider*>& providers,
                                        const std::vector<int>& devices,
                                        const faiss::Index* index,
                                        const GpuMultipleClonerOptions* options) {
    FAISS_THROW_IF_NOT_FMT(providers.size() == devices.size(),
                           "index_cpu_to_gpu_multiple: %zu resources providers for %zu devices "
                           "(one per device)",
                           providers.size(), devices.size());
    FAISS_THROW_IF_NOT_MSG(!devices.empty(), "index_cpu_to_gpu_multiple: no devices");
    FAISS_THROW_IF_NOT_MSG(index, "index_cpu_to_gpu_multiple: null index");
    for (size_t i = 0; i < providers.size(); ++i) {
        FAISS_THROW_IF_NOT_FMT(providers[i], "index_cpu_to_gpu_multiple: resources provider %zu "
                               "(device %d) is null", i, devices[i]);
        for (size_t j = 0; j < i; ++j) {
            FAISS_THROW_IF_NOT_FMT(
                    !(providers[j] == providers[i] && devices[j] == devices[i]),
                    "index_cpu_to_gpu_multiple: resources providers %zu and %zu are the same "
                    "object on the same device %d: give each copy or shard on one device its "
                    "own resources (they run in parallel threads)",
                    j, i, devices[i]);
        }
    }
    const bool shard = options && options->shard;
    if (shard) checkShardable(index);
    for (int device : devices) checkDevice(device);
    const GpuClonerOptions* single = options;  // the single-device part

    if (devices.size() == 1) return index_cpu_to_gpu(providers[0], devices[0], index, single);
    const int n = int(devices.size());

    if (!shard) {
        auto out = std::make_unique<faiss::IndexReplicas>(index->d, true);
        out->own_fields = true;  // frees the copies already made if one throws
        for (int i = 0; i < n; ++i) {
            std::unique_ptr<faiss::Index> copy(
                    index_cpu_to_gpu(providers[i], devices[i], index, single));
            out->addIndex(copy.get());
            copy.release();
        }
        return out.release();
    }

    // GPU indexes of ours are sliced through their CPU twin
    std::unique_ptr<faiss::Index> cpuCopy;
    const faiss::Index* source = index;
    if (containsCpuConvertible(index)) {
        cpuCopy.reset(index_gpu_to_cpu(index));
        source = cpuCopy.get();
        checkShardable(source);
    }
    auto out = std::make_unique<faiss::IndexShards>(index->d, true, !hasIdMap(source));
    out->own_fields = true;
    const int64_t ntotal = source->ntotal;
    for (int i = 0; i < n; ++i) {
        int64_t i0 = ntotal * i / n, i1 = ntotal * (i + 1) / n;
        std::unique_ptr<faiss::Index> slice(sliceIndex(source, i0, i1));
        std::unique_ptr<faiss::Index> part(
                index_cpu_to_gpu(providers[i], devices[i], slice.get(), single));
        slice.reset();  // only one slice in host memory at a time
        out->add_shard(part.get());
        part.release();
    }
    FAISS_ASSERT(out->ntotal == ntotal);
    out->metric_type = index->metric_type;
    out->metric_arg = index->metric_arg;
    out->is_trained = index->is_trained;
    return out.release();
}

faiss::Index* index_gpu_to_cpu(const faiss::Index* index) {
    FAISS_THROW_IF_NOT_MSG(index, "index_gpu_to_cpu: null index");
    return cloneIndexTree(index, [](const faiss::Index* node) -> faiss::Index* {
        if (auto conv = dynamic_cast<const CpuConvertible*>(node)) {
            faiss::Index* twin = conv->copyToCpuIndex();
            FAISS_THROW_IF_NOT_MSG(twin, "copyToCpuIndex returned a null index");
            return twin;
        }
        return undoMultiple(node);  // shards merged, one replica; else walked
    });
}

}  // namespace gpu
}  // namespace faiss_ext
