// Moving indexes between the CPU and a GPU, walking FAISS's wrappers, as
// faiss/gpu/GpuCloner.h does for FAISS's own GPU indexes.
#pragma once

#include <faiss/Index.h>

#include <vector>

#include "faiss_ext/gpu/GpuResources.h"

namespace faiss_ext {
namespace gpu {

/// Options of index_cpu_to_gpu.
struct GpuClonerOptions {
    /// Throw when a part of the index has no GPU counterpart (false: keep it
    /// on the CPU, as FAISS's allowCpuCoarseQuantizer-style fallbacks do).
    bool requireGpu = false;
};

/// Options of index_cpu_to_gpu_multiple (FAISS's GpuMultipleClonerOptions).
struct GpuMultipleClonerOptions : public GpuClonerOptions {
    /// false (the default): replicate, a full copy of the index on every
    /// device under a faiss::IndexReplicas, which splits the queries of a
    /// search between the copies. true: shard, the i-th contiguous slice of
    /// the vectors on devices[i] under a faiss::IndexShards, which sends every
    /// query to every shard and merges the results. Slices are contiguous (by
    /// position, FAISS's shard_type 0 for flat indexes); there is no other
    /// shard type.
    bool shard = false;
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
///   - faiss::IndexHNSWFlat over an IndexFlat (L2 / IP), the twin of
///     GpuIndexSearchGraph or any HNSW index FAISS built, becomes
///     GpuIndexSearchGraph: graphDegree = the level-0 degree, knnDegree =
///     twice that (at most 256), itopk = efSearch raised to a power of two in
///     [32, 512]; with vectors, level 0 is kept as the search graph and the
///     k-NN graph is rebuilt by GNND (at least knnDegree + 1 vectors).
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

/// `index` on several GPUs, like faiss::gpu::index_cpu_to_gpu_multiple:
/// providers[i] and devices[i] hold the i-th copy or shard (the same device
/// may be listed more than once, each time with its own provider: the copies
/// and shards run in parallel threads). With a single device this is
/// index_cpu_to_gpu. The caller owns the result; `index` is not modified.
///
/// Replicate (options->shard false, the default): a faiss::IndexReplicas
/// (threaded, owning its members) of index_cpu_to_gpu(providers[i],
/// devices[i], index, options), for every index that index_cpu_to_gpu takes.
/// Adds go to every copy (a GNND copy rebuilds or merges its own graph).
///
/// Shard (options->shard true): a faiss::IndexShards (threaded, owning its
/// shards) whose i-th shard is index_cpu_to_gpu(providers[i], devices[i],
/// slice i) where slice i holds vectors [i * ntotal / n, (i + 1) * ntotal / n)
/// of `index` (n = devices.size()). What can be sliced:
///   - faiss::IndexFlat (L2 / IP): an IndexFlat of the slice's vectors;
///     successive_ids is true, so the ids are the positions in `index`. As
///     FAISS's IndexShards requires with successive_ids, later adds through
///     the IndexShards work only while it is empty (it splits them evenly);
///     shard an IndexIDMap around the flat index to add later.
///   - the cosine / Pearson twins and any IndexPreTransform around a sliceable
///     index: every shard gets a copy of the transforms (applied per shard).
///   - faiss::IndexIDMap / IndexIDMap2 around a sliceable index: each shard is
///     an IndexIDMap(2) of the slice with its ids (successive_ids false), so
///     add_with_ids (and add, which numbers from ntotal) through the
///     IndexShards work at any time, split evenly over the shards.
///   - faiss_ext::IndexBiLevelLSH: each shard has the same configuration and
///     trained model and the slice's vectors, so each vector lands in the same
///     groups and buckets as in `index`; a shard searches its slice and
///     IndexShards keeps the best k of the union (candidate sets are those of
///     `index` restricted to the slice, widened per shard when minCandidates
///     asks for more, so recall is at least that of one copy).
///   - GPU indexes of ours are first copied to their CPU twin.
/// k-NN graphs (faiss::IndexNNDescentFlat, GpuKnnGraphGNND) cannot be
/// sharded: the graph of a slice is not a slice of the graph, and the copy
/// would not give back `index`. They throw; replicate them. Other indexes
/// (FAISS's CPU-only ones, IndexShards / IndexReplicas) throw too.
///
/// Every argument is checked before any GPU memory is used: providers and
/// devices of the same non-zero size, no null provider, no provider listed
/// twice for the same device, a non-null index, valid devices, and with
/// shard an index that can be sliced. When building a copy or shard throws
/// (e.g. out of memory on the second device), those already built are freed
/// and the exception is passed on.
///
/// index_gpu_to_cpu on the result gives back an index equal to `index` (see
/// there: shards are merged, one replica is copied).
faiss::Index* index_cpu_to_gpu_multiple(const std::vector<GpuResourcesProvider*>& providers,
                                        const std::vector<int>& devices,
                                        const faiss::Index* index,
                                        const GpuMultipleClonerOptions* options = nullptr);

/// A CPU copy of `index` with our GPU indexes replaced by their CPU twins
/// (copyToCpuIndex(): GpuIndexQuickSelectFlat -> faiss::IndexFlat or its
/// cosine / Pearson twin, GpuKnnGraphGNND -> faiss::IndexNNDescentFlat with
/// the graph in nndescent.final_graph, GpuIndexBiLevelLSH ->
/// faiss_ext::IndexBiLevelLSH), walking the same wrappers. The caller owns
/// the result.
///
/// Like FAISS's ToCPUCloner, wrappers made by index_cpu_to_gpu_multiple are
/// undone where they hold GPU indexes: a faiss::IndexReplicas becomes the CPU
/// copy of its first member (when all members have the same ntotal); a
/// faiss::IndexShards becomes one index holding the shards' vectors in shard
/// order when the CPU copies of its shards can be merged: IndexFlat (same
/// type and metric, successive_ids true), IndexIDMap / IndexIDMap2 around
/// mergeable indexes (successive_ids false; ids concatenated),
/// IndexPreTransform with equal transforms around mergeable indexes, and
/// IndexBiLevelLSH with the same configuration and model. Any other
/// IndexShards (e.g. of GNND graphs) comes back as an IndexShards of the CPU
/// copies. CPU-only wrappers are copied as they are.
faiss::Index* index_gpu_to_cpu(const faiss::Index* index);

}  // namespace gpu
}  // namespace faiss_ext
