// The fused few-query search of device-resident vectors: one kernel reads
// the vectors once for all queries (up to kFewQueryMaxQueries of them),
// computes the distances of each block's share of the corpus to every query
// and keeps per query and block the kk best keys; a second kernel merges
// the blocks' lists. Keys are those of the tiled FP32 path
// (impl/select/SelectKeys.cuh): alpha <q, x> (+ |x|^2 for L2), alpha = -2 for
// L2 and -1 for the inner-product metrics, so that select::decodeKeys turns
// them into the same distances.
#pragma once

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/DeviceCorpus.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// Events fusedFewQuerySelect records on its stream, for benchmarks that
/// split a search's latency without a profiler (bench/FewQuerySplit.h):
/// before the fused kernel, after it, and after the merge of the chunk
/// lists (right after the kernel when there is one chunk). Null events are
/// not recorded. Internal: not part of the library's API.
struct FusedFewQueryEvents {
    cudaEvent_t kernelStart = nullptr;
    cudaEvent_t kernelEnd = nullptr;
    cudaEvent_t mergeEnd = nullptr;
};

/// The kk smallest keys of each of nq queries (prepared for the metric,
/// device, nq x d), sorted ascending, to out (nq x kk, device). Requires
/// 1 <= nq <= kFewQueryMaxQueries and 1 <= kk <= min(kFewQueryMaxK, nb).
/// Temporary memory from res on `stream`; ordered on `stream`. The chunk
/// lists are merged by warpMergeLists (FewQueryMerge.h) up to
/// kWarpMergeMaxK, by quick multi-select and a sort above.
void fusedFewQuerySelect(GpuResources* res, int device, cudaStream_t stream,
                         const DeviceCorpus& corpus, const float* queries, int64_t nq, int64_t kk,
                         uint64_t* out, const FusedFewQueryEvents* events = nullptr);

}  // namespace gpu
}  // namespace faiss_ext
