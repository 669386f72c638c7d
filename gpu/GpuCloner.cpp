// Moving indexes between the CPU and a GPU (see GpuCloner.h). The walk
// through FAISS's wrappers is host code shared with write_index:
// faiss_ext/CpuTwin.h.
#include "gpu/GpuCloner.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <typeinfo>

#include "faiss_ext/CpuConvertible.h"
#include "faiss_ext/CpuTwin.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/RowCenteringTransform.h"
#include "faiss_ext/index_factory.h"
#include "gpu/GpuIndexBiLevelLSH.h"
#include "gpu/GpuIndexQuickSelectFlat.h"
#include "gpu/GpuKnnGraphGNND.h"
#include "gpu/utils/DeviceUtils.h"

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

faiss::Index* index_gpu_to_cpu(const faiss::Index* index) {
    FAISS_THROW_IF_NOT_MSG(index, "index_gpu_to_cpu: null index");
    return cloneToCpu(index);
}

}  // namespace gpu
}  // namespace faiss_ext
