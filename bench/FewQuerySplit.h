// Where a one-query search's latency goes, without a profiler: the fused
// few-query kernel alone and the merge of its chunk lists, timed with CUDA
// events that fusedFewQuerySelect records (FusedFewQueryEvents, an internal
// hook), and the whole select call as the host sees it. With the search's
// own latency (bench_flat --single-query) the rest -- query preparation,
// decoding, allocations, launch and synchronisation -- follows by
// difference.
#pragma once

#include <cstdint>

namespace faiss_ext {
namespace bench {

/// Medians over the calls, milliseconds.
struct FewQuerySplit {
    double kernelMs = 0;  ///< the fused kernel (event to event)
    double mergeMs = 0;   ///< the merge of the chunk lists (0 with one chunk)
    double selectMs = 0;  ///< fusedFewQuerySelect, call to stream synchronised (host clock)
};

/// Times `calls` one-query selections of the k (<= 1024, <= nb) nearest by
/// L2 among base (host, nb x d; copied to the current device and freed
/// again, so it needs that much free memory), query i % nq of the device
/// queries dQ at call i.
FewQuerySplit timeFewQuerySplit(const float* base, int64_t nb, int d, const float* dQ, int64_t nq,
                                int64_t k, int calls);

}  // namespace bench
}  // namespace faiss_ext
