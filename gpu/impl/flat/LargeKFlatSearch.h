// The large-k path of the exact flat search for few queries: per block of
// query rows, one FP32 GEMM over the whole corpus (a full-width distance
// tile, so no merge across column tiles), then each row's kk smallest
// keys: by the sampled-threshold filter where it applies (one read of the
// tile, keys sorted as they are kept; select/SampledThresholdSelect.h), else
// (or for a block with a row the filter flags) by radix selection
// (select/RadixSelectRows.h) and a sort of those kk only; then the decode
// the tiled path uses.
#pragma once

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/DeviceCorpus.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace faiss_ext {
namespace gpu {

/// Query rows of a full-width distance tile (nb columns) that `budget`
/// bytes of temporary memory hold for the radix path at kk, at most nq
/// (0: not even one).
int64_t radixRowsFit(size_t budget, int64_t nb, int64_t kk, int64_t nq);

/// Exact k-NN of nq prepared queries (device, nq x d) over `corpus`: kk =
/// min(k, nb) neighbours decoded by `decode` (qNorms: |q|^2 for L2, else
/// null) to distances and labels (nq x k, device, padded past kk), in row
/// blocks that fit `budget` bytes. Ordered on `stream`. beforeResults (may
/// be empty) is called once before the first result is written, after the
/// first block's GEMM and selection are queued, so that what it waits for
/// (the deferred NaN check of the queries) overlaps them.
void radixLargeKSearch(GpuResources* res, int device, cudaStream_t stream,
                       const DeviceCorpus& corpus, const float* queries, int64_t nq, int64_t k,
                       select::KeyDecode decode, const float* qNorms, float* distances,
                       int64_t* labels, size_t budget, std::function<void()> beforeResults);

}  // namespace gpu
}  // namespace faiss_ext
