// Moving indexes between the CPU and a GPU, walking FAISS's wrappers, as
// faiss/gpu/GpuCloner.h does for FAISS's own GPU indexes.
#pragma once

#include <faiss/Index.h>

#include "gpu/GpuResources.h"

namespace faiss_ext {
namespace gpu {

/// Options of index_cpu_to_gpu.
struct GpuClonerOptions {
    /// Throw when a part of the index has no GPU counterpart (false: keep it
    /// on the CPU, as FAISS's allowCpuCoarseQuantizer-style fallbacks do).
    bool requireGpu = false;
};

/// A copy of `index` with our GPU indexes in place of their CPU twins:
///   - faiss::IndexFlat (L2 / IP) and the cosine / Pearson twins become
///     GpuIndexQuickSelectFlat;
///   - faiss::IndexNNDescentFlat over an IndexFlat (L2 / IP) becomes
///     GpuKnnGraphGNND (vectors and, when built, the graph; degree K) with
///     samples = nndescent.S clamped to [1, 32], maxIterations = nndescent.iter
///     (at least 1), seed = nndescent.random_seed, searchL = nndescent.search_L
///     and the other GpuKnnGraphGNNDConfig fields at their defaults. Its
///     cosine / Pearson twin (an IndexPreTransform around an IndexNNDescentFlat
///     with METRIC_INNER_PRODUCT) keeps its transforms on the CPU.
///   - faiss_ext::IndexBiLevelLSH becomes GpuIndexBiLevelLSH (its
///     BiLevelLSHConfig, trained model and vectors; the hash tables are
///     rebuilt on the GPU and give the same candidates) with the
///     GpuIndexBiLevelLSHConfig defaults on `device`.
/// faiss::IndexIDMap(2), IndexPreTransform, IndexShards and IndexReplicas are
/// walked (transforms stay on the CPU); GPU indexes already on a GPU are moved
/// through their CPU twin; other indexes are cloned with faiss::clone_index.
/// The caller owns the result.
faiss::Index* index_cpu_to_gpu(GpuResourcesProvider* provider, int device,
                               const faiss::Index* index,
                               const GpuClonerOptions* options = nullptr);

/// A CPU copy of `index` with our GPU indexes replaced by their CPU twins
/// (copyToCpuIndex(): GpuIndexQuickSelectFlat -> faiss::IndexFlat or its
/// cosine / Pearson twin, GpuKnnGraphGNND -> faiss::IndexNNDescentFlat with
/// the graph in nndescent.final_graph, GpuIndexBiLevelLSH ->
/// faiss_ext::IndexBiLevelLSH), walking the same wrappers. The caller owns
/// the result.
faiss::Index* index_gpu_to_cpu(const faiss::Index* index);

}  // namespace gpu
}  // namespace faiss_ext
