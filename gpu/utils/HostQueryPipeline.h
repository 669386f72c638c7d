// The search of host queries (GpuIndex::searchPagedHostInput_) through
// pinned staging memory. Rows are copied into pinned memory by several
// threads (checked for NaN and infinity in the same pass) in pieces whose
// uploads start as soon as each is copied, so that the copies overlap the
// DMA. A batch that fits one staging slot is one search; a larger one goes
// in chunks, pipelined: while the GPU searches chunk i, a staging thread
// stages chunk i + 1 on a copy stream of its own, and the results of chunk
// i - 1 are copied out (issue 38: host queries at the q/s of device
// queries). An index whose search writes each result once
// (GpuIndex::writesResultsOnce_: the graph search) has its results written
// by the GPU straight into the pinned slot, with no copy after the search.
// One per index, kept across searches: its stream, events and thread (with
// the thread's OpenMP pool) are made once.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {

class GpuResources;
class StagingThread;

/// One search of host queries: where its queries and results are, the
/// chunks, and how one chunk is searched.
struct HostSearchJob {
    int64_t d = 0, k = 0;
    const float* x = nullptr;  ///< host queries, n x d
    float* distances = nullptr;
    int64_t* labels = nullptr;
    bool distancesOnDevice = false, labelsOnDevice = false;
    /// searchChunk may write host results straight into pinned host memory
    /// (GpuIndex::writesResultsOnce_): no device buffer, no copy to the host.
    bool resultsToPinned = false;
    std::vector<int64_t> chunks;  ///< rows of each chunk, in order (hostQueryChunks)
    /// Searches m device queries into device outD / outL on the compute
    /// stream (it may block until they are done).
    std::function<void(int64_t m, const float* devX, float* outD, int64_t* outL)> searchChunk;
};

class HostQueryPipeline {
public:
    /// Chunks in flight: one staged, one searched, one whose results are
    /// copied out; so the staging runs ahead even of a search that blocks.
    static constexpr int kSlots = 3;

    explicit HostQueryPipeline(int device);
    ~HostQueryPipeline();
    HostQueryPipeline(const HostQueryPipeline&) = delete;
    HostQueryPipeline& operator=(const HostQueryPipeline&) = delete;

    /// Runs job with pinnedBytes of pinned memory at pinned (the caller
    /// holds its mutex) and device buffers from res, searching on
    /// `compute`. Throws for a query holding a NaN or an infinity, naming
    /// it (results of earlier chunks may have been written), or a CUDA
    /// error; nothing is left in flight either way.
    void run(const HostSearchJob& job, GpuResources* res, cudaStream_t compute, void* pinned,
             size_t pinnedBytes);

    /// Whether device code can write the pinned host memory at `pinned`
    /// through its host pointer (page-locked and mapped at the same address,
    /// as cudaHostAlloc's is under unified addressing), as
    /// HostSearchJob::resultsToPinned needs. Checked once per pointer.
    bool deviceWritesThrough(const void* pinned);

private:
    const int device_;
    const void* checkedPinned_ = nullptr;  ///< the pointer deviceWritesThrough last checked
    bool deviceWrites_ = false;            ///< its answer
    cudaStream_t copy_ = nullptr;
    cudaEvent_t uploaded_[kSlots] = {};
    cudaEvent_t downloaded_[kSlots] = {};
    std::unique_ptr<StagingThread> stager_;

    friend class HostQueryRun;
};

}  // namespace gpu
}  // namespace faiss_ext
