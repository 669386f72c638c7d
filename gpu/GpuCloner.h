// Moving indexes between the CPU and a GPU, walking FAISS's wrappers, as
// faiss/gpu/GpuCloner.h does for FAISS's own GPU indexes.
#pragma once

#include "gpu/GpuResources.h"

#include <faiss/Index.h>

namespace faiss_ext {
namespace gpu {

/// Options of index_cpu_to_gpu.
struct GpuClonerOptions {
    /// Throw when a part of the index has no GPU counterpart (false: keep it
    /// on the CPU, as FAISS's allowCpuCoarseQuantizer-style fallbacks do).
    bool requireGpu = false;
};

/// A copy of `index` with our GPU indexes in place of their CPU twins:
/// faiss::IndexFlat (L2 / IP) and the cosine / Pearson twins become
/// GpuIndexQuickSelectFlat. faiss::IndexIDMap(2) and IndexPreTransform are
/// walked (their transforms stay on the CPU); other indexes are cloned with
/// faiss::clone_index. The caller owns the result.
faiss::Index* index_cpu_to_gpu(GpuResourcesProvider* provider, int device,
                               const faiss::Index* index,
                               const GpuClonerOptions* options = nullptr);

/// A CPU copy of `index` with our GPU indexes replaced by their CPU twins,
/// walking the same wrappers. The caller owns the result.
faiss::Index* index_gpu_to_cpu(const faiss::Index* index);

}  // namespace gpu
}  // namespace faiss_ext
