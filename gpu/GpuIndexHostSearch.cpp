// GpuIndex::searchPagedHostInput_: the search of queries in host memory (a
// numpy array, a std::vector), pipelined through pinned staging memory by
// the index's HostQueryPipeline (gpu/utils/HostQueryPipeline.h); and the
// pageable fallback where no pinned memory holds a row.
#include "faiss_ext/gpu/GpuIndex.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/HostQueryPipeline.h"
#include "faiss_ext/gpu/utils/HostStaging.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace {
/// The first chunk has at least this many rows (fewer leave SMs idle)...
constexpr int64_t kFirstChunkMinRows = 1024;
/// ... or as many as fill this many bytes of queries.
constexpr size_t kFirstChunkBytes = size_t(512) << 10;
/// Each later chunk at most this many times the one before: large enough
/// that a batch is few chunks (each search has a fixed cost), small enough
/// that staging a chunk takes less time than searching the one before.
constexpr int kChunkGrowth = 4;
}  // namespace

void GpuIndex::searchPagedHostInput_(idx_t n, const float* x, idx_t k, float* distances,
                                     idx_t* labels, const faiss::SearchParameters* params) const {
    HostSearchJob job;
    job.d = d;
    job.k = k;
    job.x = x;
    job.distances = distances;
    job.labels = labels;
    job.distancesOnDevice = onThisDevice_(distances, "search: distances");
    job.labelsOnDevice = onThisDevice_(labels, "search: labels");
    const size_t xRowBytes = sizeof(float) * size_t(d);
    const size_t rowBytes = xRowBytes + (sizeof(float) + sizeof(idx_t)) * size_t(k);
    std::unique_lock<std::mutex> pinnedLock(resources_->getPinnedMemoryMutex());
    const std::pair<void*, size_t> pinned = resources_->getPinnedMemory();
    const int64_t slotRows =
            pinned.first ? stagingSlotRows(pinned.second, HostQueryPipeline::kSlots, d, k) : 0;
    if (slotRows < 1) {  // no pinned memory (or rows too large for it)
        pinnedLock.unlock();
        searchPageableHostInput_(n, x, k, distances, labels, params);
        return;
    }
    const int64_t maxRows =
            std::min(slotRows, std::max<int64_t>(1, int64_t(minPagingSize_ / rowBytes)));
    const int64_t firstRows =
            std::max<int64_t>(kFirstChunkMinRows, int64_t(kFirstChunkBytes / xRowBytes));
    // a batch that fits one slot is one search, its staging overlapped with
    // its upload (each search has a fixed cost and drains the GPU at its
    // end: measured, chunking a 10,000-query batch cost more than it hid);
    // larger batches are pipelined
    job.chunks = n <= maxRows ? std::vector<int64_t>{n}
                              : hostQueryChunks(n, firstRows, maxRows, kChunkGrowth);
    job.searchChunk = [&](idx_t m, const float* devX, float* outD, idx_t* outL) {
        searchImpl_(m, devX, k, outD, outL, params);
    };
    if (!hostQueries_) hostQueries_.reset(new HostQueryPipeline(config_.device));
    job.resultsToPinned =
            writesResultsOnce_(params) && hostQueries_->deviceWritesThrough(pinned.first);
    hostQueries_->run(job, resources_.get(), resources_->getDefaultStream(config_.device),
                      pinned.first, pinned.second);
}

void GpuIndex::searchPageableHostInput_(idx_t n, const float* x, idx_t k, float* distances,
                                        idx_t* labels,
                                        const faiss::SearchParameters* params) const {
    checkFinite_(n, x, "search: query");
    const bool dOnDev = onThisDevice_(distances, "search: distances");
    const bool lOnDev = onThisDevice_(labels, "search: labels");
    cudaStream_t stream = resources_->getDefaultStream(config_.device);
    const size_t rowBytes = sizeof(float) * size_t(d) + (sizeof(float) + sizeof(idx_t)) * size_t(k);
    const idx_t chunk = std::max<idx_t>(1, idx_t(minPagingSize_ / rowBytes));
    const idx_t m0 = std::min(n, chunk);
    TempBuffer<float> xBuf(resources_.get(), config_.device, size_t(m0) * d, stream);
    TempBuffer<float> dBuf(resources_.get(), config_.device, dOnDev ? 0 : size_t(m0) * k, stream);
    TempBuffer<idx_t> lBuf(resources_.get(), config_.device, lOnDev ? 0 : size_t(m0) * k, stream);
    for (idx_t i = 0; i < n; i += chunk) {
        const idx_t m = std::min(chunk, n - i);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(xBuf.data(), x + size_t(i) * d,
                                             sizeof(float) * size_t(m) * d,
                                             cudaMemcpyHostToDevice, stream));
        float* dOut = dOnDev ? distances + size_t(i) * k : dBuf.data();
        idx_t* lOut = lOnDev ? labels + size_t(i) * k : lBuf.data();
        searchImpl_(m, xBuf.data(), k, dOut, lOut, params);
        if (!dOnDev)
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances + size_t(i) * k, dOut,
                                                 sizeof(float) * m * k, cudaMemcpyDeviceToHost,
                                                 stream));
        if (!lOnDev)
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels + size_t(i) * k, lOut,
                                                 sizeof(idx_t) * m * k, cudaMemcpyDeviceToHost,
                                                 stream));
        // xBuf is reused by the next chunk
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
}

}  // namespace gpu
}  // namespace faiss_ext
