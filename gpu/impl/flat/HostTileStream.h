// Vectors kept in pinned host memory, streamed through the GPU in tiles: a
// copy stream fills two staging buffers one tile ahead of the compute
// stream (the FP32 tiled search and the bounded host search use it).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/FlatTilePlan.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace host_tiles {

/// Synchronises a stream when leaving scope (also on exceptions), so that
/// buffers it still uses are not released under it.
struct StreamSyncGuard {
    cudaStream_t s;
    ~StreamSyncGuard() {
        if (s) cudaStreamSynchronize(s);
    }
};

/// An event destroyed when leaving scope.
struct Event {
    cudaEvent_t e = nullptr;
    Event() { FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
    ~Event() {
        if (e) cudaEventDestroy(e);
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
};

}  // namespace host_tiles

/// Vectors kept on the host, streamed through the GPU: two staging tiles,
/// filled on a copy stream one tile ahead of the compute stream. Tile t is
/// column tile t % colTiles of the (row block, column tile) sequence, of
/// p.cols rows each, or, after setTileStarts, rows starts[t] .. starts[t + 1]
/// (each at most p.cols).
class HostTileStream {
public:
    /// Creates the copy stream on first use; the staging memory is allocated
    /// in `stream`'s order.
    HostTileStream(GpuResources* res, int device, cudaStream_t stream, cudaStream_t& copyStream,
                   const float* vectors, const float* norms, int64_t nb, int d,
                   const TilePlan& p, bool l2)
            : stream_(stream), vectors_(vectors), norms_(norms), nb_(nb), d_(d), p_(p), l2_(l2) {
        if (!copyStream) {
            FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&copyStream, cudaStreamNonBlocking));
        }
        copy_ = copyStream;
        for (int s = 0; s < 2; ++s) {
            stage_[s].reset(new TempBuffer<float>(res, device, size_t(p.cols) * d, stream));
            stageNorms_[s].reset(new TempBuffer<float>(res, device, l2 ? size_t(p.cols) : 0, stream));
            copied_[s].reset(new host_tiles::Event());
            used_[s].reset(new host_tiles::Event());
        }
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(used_[0]->e, stream));
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(used_[1]->e, stream));
        copyGuard_.s = copy_;
    }

    /// Tiles of their own sizes: starts[t] is tile t's first row, the last
    /// entry nb; no tile longer than the plan's p.cols.
    void setTileStarts(std::vector<int64_t> starts) { starts_ = std::move(starts); }

    /// Starts the copy of tile t once its staging buffer is free.
    void issueCopy(int64_t t) {
        const bool own = !starts_.empty();
        const int64_t c0 = own ? starts_[size_t(t)] : (t % p_.colTiles) * p_.cols;
        const int64_t w = own ? starts_[size_t(t) + 1] - c0 : std::min(p_.cols, nb_ - c0);
        const int s = int(t & 1);
        FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(copy_, used_[s]->e, 0));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(stage_[s]->data(), vectors_ + size_t(c0) * d_,
                                             sizeof(float) * size_t(w) * d_,
                                             cudaMemcpyHostToDevice, copy_));
        if (l2_) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(stageNorms_[s]->data(), norms_ + c0,
                                                 sizeof(float) * w, cudaMemcpyHostToDevice,
                                                 copy_));
        }
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(copied_[s]->e, copy_));
    }

    /// Makes the compute stream wait for tile t; its vectors and norms.
    void await(int64_t t, const float** xb, const float** xn) {
        const int s = int(t & 1);
        FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(stream_, copied_[s]->e, 0));
        *xb = stage_[s]->data();
        *xn = l2_ ? stageNorms_[s]->data() : nullptr;
    }

    /// Tile t's staging buffer is free once the compute stream gets here.
    void release(int64_t t) { FAISS_EXT_CUDA_CHECK(cudaEventRecord(used_[t & 1]->e, stream_)); }

private:
    cudaStream_t stream_;
    cudaStream_t copy_ = nullptr;
    const float* vectors_;
    const float* norms_;
    int64_t nb_;
    int d_;
    TilePlan p_;
    std::vector<int64_t> starts_;  ///< empty: tiles of p_.cols rows
    bool l2_;
    std::unique_ptr<TempBuffer<float>> stage_[2], stageNorms_[2];
    std::unique_ptr<host_tiles::Event> copied_[2], used_[2];
    host_tiles::StreamSyncGuard copyGuard_{nullptr};  ///< last: synchronises before the buffers go
};

}  // namespace gpu
}  // namespace faiss_ext
