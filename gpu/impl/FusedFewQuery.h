// The fused few-query search of device-resident vectors: one kernel reads
// the vectors once for all queries (up to kFewQueryMaxQueries of them),
// computes the distances of each block's share of the corpus to every query
// and keeps per query and block the kk best keys; quick multi-select then
// merges the blocks' lists. Keys are those of the tiled FP32 path
// (impl/select/SelectKeys.cuh): alpha <q, x> (+ |x|^2 for L2), alpha = -2 for
// L2 and -1 for the inner-product metrics, so that select::decodeKeys turns
// them into the same distances.
#pragma once

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/DeviceCorpus.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// The kk smallest keys of each of nq queries (prepared for the metric,
/// device, nq x d), sorted ascending, to out (nq x kk, device). Requires
/// 1 <= nq <= kFewQueryMaxQueries and 1 <= kk <= min(kFewQueryMaxK, nb).
/// Temporary memory from res on `stream`; ordered on `stream`.
void fusedFewQuerySelect(GpuResources* res, int device, cudaStream_t stream,
                         const DeviceCorpus& corpus, const float* queries, int64_t nq, int64_t kk,
                         uint64_t* out);

}  // namespace gpu
}  // namespace faiss_ext
