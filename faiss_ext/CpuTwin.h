// Walking FAISS's wrappers to copy an index tree with some nodes replaced,
// and its main use: the CPU copy of an index that may hold our GPU indexes
// (GPU leaves, faiss_ext::CpuConvertible, become their CPU twins). Host code,
// no CUDA: used by faiss_ext::gpu::index_gpu_to_cpu / index_cpu_to_gpu and by
// faiss_ext::write_index.
#pragma once

#include <faiss/Index.h>
#include <faiss/VectorTransform.h>

#include "faiss_ext/Metric.h"

#include <functional>

namespace faiss_ext {

/// Replaces a node of an index tree: returns a new index (the caller of
/// cloneIndexTree takes it over) or nullptr to let the walk handle the node.
using IndexNodeConverter = std::function<faiss::Index*(const faiss::Index*)>;

/// Whether cloneIndexTree walks into `index`: faiss::IndexIDMap, IndexIDMap2,
/// IndexPreTransform, IndexShards, IndexReplicas.
bool isWalkedWrapper(const faiss::Index* index);

/// A copy of the tree under `index` (the caller owns it). Each node is first
/// offered to `convert`; a node it declines is rebuilt with copies of its
/// children when it is a walked wrapper (isWalkedWrapper; transforms are
/// copied with cloneVectorTransform, rebuilt wrappers own their children),
/// and copied with faiss::clone_index otherwise (but for IndexNNDescentFlat,
/// which FAISS 1.7.3's Cloner turns into a plain IndexNNDescent that
/// faiss::write_index refuses: it is copied as an IndexNNDescentFlat here;
/// and for our IndexBiLevelLSH, which FAISS's Cloner does not know: copied
/// by value).
faiss::Index* cloneIndexTree(const faiss::Index* index, const IndexNodeConverter& convert);

/// A CPU copy of `index` (the caller owns it): cloneIndexTree with the
/// faiss_ext::CpuConvertible (GPU) nodes replaced by copyToCpuIndex().
faiss::Index* cloneToCpu(const faiss::Index* index);

/// Whether `index` is, or holds inside the walked wrappers, a
/// faiss_ext::CpuConvertible (GPU) index.
bool containsCpuConvertible(const faiss::Index* index);

/// A copy of a vector transform: ours (RowCenteringTransform),
/// NormalizationTransform and CenteringTransform (which FAISS 1.7.3's Cloner
/// lacks), or any that faiss::Cloner handles. The caller owns it.
faiss::VectorTransform* cloneVectorTransform(const faiss::VectorTransform* vt);

/// `twin` (taken over) as the CPU twin of a GPU index of metric m: itself
/// for L2 / inner product; for Cosine / Pearson inside an IndexPreTransform
/// that prepares the queries as the GPU index prepared its vectors
/// ([RowCenteringTransform,] NormalizationTransform). The caller owns it.
faiss::Index* twinWithQueryPreparation(faiss::Index* twin, FlatMetric m);

}  // namespace faiss_ext
