// Factory for faiss_ext indexes, composed with FAISS's own strings.
#pragma once

#include <faiss/Index.h>

namespace faiss_ext {

/// Builds an index from a description, like faiss::index_factory, adding our
/// types. Returns CPU twins; move them to a GPU with
/// faiss_ext::gpu::index_cpu_to_gpu.
///
/// Our components (the last component of the string):
///   - "QSFlat": the exact flat index searched by GpuIndexQuickSelectFlat on a
///     GPU. Its CPU twin is faiss::IndexFlat with `metric` (L2 or IP).
///   - "QSFlatCosine": cosine similarity; the twin is
///     IndexPreTransform(NormalizationTransform, IndexFlatIP).
///   - "QSFlatPearson": Pearson correlation; the twin is
///     IndexPreTransform(RowCenteringTransform + NormalizationTransform, IndexFlatIP).
/// FAISS prefixes compose: "IDMap,QSFlat", "PCA64,QSFlat", "IDMap,PCA64,QSFlat".
/// Anything else goes to faiss::index_factory unchanged.
faiss::Index* index_factory(int d, const char* description,
                            faiss::MetricType metric = faiss::METRIC_L2);

}  // namespace faiss_ext
