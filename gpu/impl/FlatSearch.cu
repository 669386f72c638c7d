#include "faiss_ext/gpu/impl/FlatSearch.h"

#include "faiss_ext/gpu/impl/Distance.h"
#include "faiss_ext/gpu/impl/RowSelector.h"
#include "faiss_ext/gpu/impl/VectorPrep.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace {

/// Keys carry 32-bit ids.
constexpr int64_t kMaxVectors = (int64_t(1) << 32) - 1;

/// The smallest corpus tile worth a GEMM launch.
constexpr int64_t kMinTileCols = 8192;

/// Rows a tile aims for: enough for one warp per row to fill the GPU. With
/// the vectors on the host every row block streams the whole corpus over
/// PCIe, so row blocks are then made as tall as memory allows.
constexpr int64_t kTargetTileRows = 4096;
constexpr int64_t kTargetTileRowsHost = 65536;

struct TilePlan {
    int64_t rows = 0;      // queries per row block
    int64_t cols = 0;      // corpus vectors per tile
    int64_t colTiles = 0;  // tiles over the corpus
    size_t bytesPerRow = 0;
    size_t fixedBytes = 0;
};

TilePlan planFor(int64_t nb, int64_t kk, int64_t cols, int d, bool onHost, bool l2,
                 const FlatSearchOptions& opt) {
    TilePlan p;
    cols = std::min(nb, (cols + 3) / 4 * 4);  // rows of a tile start 16-byte aligned
    p.cols = cols;
    p.colTiles = (nb + cols - 1) / cols;
    p.bytesPerRow = sizeof(float) * ((cols + 3) / 4 * 4) +
                    RowSelector::bytesPerRow(opt.algo, cols, p.colTiles, nb, kk, opt.group,
                                             opt.thFactor);
    // Two staging tiles of vectors (and norms) when they come from the host.
    p.fixedBytes = onHost ? 2 * (sizeof(float) * size_t(cols) * d + (l2 ? sizeof(float) * cols : 0)) +
                                    4096
                          : 0;
    return p;
}

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

size_t bytesOf(int64_t n, int d, bool l2) {
    return sizeof(float) * size_t(n) * d + (l2 ? sizeof(float) * size_t(n) : 0);
}

}  // namespace

FlatStorage::FlatStorage(GpuResources* res, int device, int d, FlatMetric metric,
                         VectorStorage where)
        : res_(res), device_(device), d_(d), metric_(metric), request_(where) {
    onHost_ = where == VectorStorage::Host;
}

FlatStorage::~FlatStorage() {
    DeviceScope scope(device_);
    free_(vectors_, norms_, onHost_);
    if (copyStream_) cudaStreamDestroy(copyStream_);
}

void FlatStorage::free_(float* v, float* nn, bool onHost) const {
    if (onHost) {
        if (v) cudaFreeHost(v);
        if (nn) cudaFreeHost(nn);
    } else {
        if (v) deviceFree(v);
        if (nn) deviceFree(nn);
    }
}

bool FlatStorage::wantHost_(int64_t n) const {
    switch (request_) {
        case VectorStorage::Host: return true;
        case VectorStorage::Device: return false;
        default:
            return onHost_ ||
                   bytesOf(n, d_, metric_ == FlatMetric::L2) > res_->getDeviceMemoryLimit(device_);
    }
}

void FlatStorage::allocate_(int64_t n, bool onHost, float** nv, float** nn) const {
    const bool l2 = metric_ == FlatMetric::L2;
    *nv = nullptr;
    *nn = nullptr;
    cudaError_t err;
    if (onHost) {
        err = cudaHostAlloc(reinterpret_cast<void**>(nv), sizeof(float) * size_t(n) * d_,
                            cudaHostAllocDefault);
        if (err == cudaSuccess && l2) {
            err = cudaHostAlloc(reinterpret_cast<void**>(nn), sizeof(float) * n, cudaHostAllocDefault);
        }
    } else {
        err = deviceMalloc(nv, sizeof(float) * size_t(n) * d_);
        if (err == cudaSuccess && l2) err = deviceMalloc(nn, sizeof(float) * n);
    }
    if (err != cudaSuccess) {
        cudaGetLastError();
        free_(*nv, *nn, onHost);
        *nv = *nn = nullptr;
        FAISS_THROW_FMT("out of %s memory on device %d: cannot hold %lld vectors of dimension %d "
                        "(%zu bytes)", onHost ? "pinned host" : "GPU", device_, (long long)n, d_,
                        bytesOf(n, d_, l2));
    }
}

void FlatStorage::reserve(int64_t n) {
    if (n <= capacity_) return;
    FAISS_THROW_IF_NOT_FMT(n <= kMaxVectors, "GpuIndexQuickSelectFlat holds at most %lld vectors "
                           "(asked for %lld)", (long long)kMaxVectors, (long long)n);
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    bool host = wantHost_(n);
    float* nv = nullptr;
    float* nn = nullptr;
    if (!host && request_ == VectorStorage::Auto) {
        try {
            allocate_(n, false, &nv, &nn);
        } catch (const faiss::FaissException&) {
            host = true;  // does not fit on the GPU: keep the vectors on the host
        }
    }
    if (!nv) allocate_(n, host, &nv, &nn);
    if (ntotal_ > 0) {
        cudaError_t err = cudaMemcpyAsync(nv, vectors_, sizeof(float) * size_t(ntotal_) * d_,
                                          cudaMemcpyDefault, stream);
        if (err == cudaSuccess && nn) {
            err = cudaMemcpyAsync(nn, norms_, sizeof(float) * ntotal_, cudaMemcpyDefault, stream);
        }
        if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess) {
            free_(nv, nn, host);
            FAISS_EXT_CUDA_CHECK(err);
        }
    }
    free_(vectors_, norms_, onHost_);
    vectors_ = nv;
    norms_ = nn;
    onHost_ = host;
    capacity_ = n;
}

void FlatStorage::append(const float* x, int64_t n, bool prepared) {
    if (n == 0) return;
    FAISS_THROW_IF_NOT_FMT(ntotal_ + n <= kMaxVectors, "GpuIndexQuickSelectFlat holds at most "
                           "%lld vectors (has %lld, adding %lld)", (long long)kMaxVectors,
                           (long long)ntotal_, (long long)n);
    DeviceScope scope(device_);
    if (ntotal_ + n > capacity_) reserve(std::max(ntotal_ + n, capacity_ + capacity_ / 2));
    cudaStream_t stream = res_->getDefaultStream(device_);
    if (!onHost_) {
        float* dst = vectors_ + size_t(ntotal_) * d_;
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dst, x, sizeof(float) * size_t(n) * d_,
                                             cudaMemcpyDefault, stream));
        if (!prepared) prepareVectorsDevice(metric_, dst, n, d_, stream);
        if (norms_) rowSquaredNorms(dst, n, d_, norms_ + ntotal_, stream);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    } else {
        // Through the device in chunks: preparation and norms run there.
        // Chunks within a quarter of the temporary memory (at most 64 MiB).
        const size_t room = std::min<size_t>(size_t(64) << 20, res_->getTempMemoryAvailable(device_) / 4);
        const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n, int64_t(room / (4 * (d_ + 1)))));
        TempBuffer<float> buf(res_, device_, size_t(chunk) * d_, stream);
        TempBuffer<float> nbuf(res_, device_, norms_ ? size_t(chunk) : 0, stream);
        for (int64_t i = 0; i < n; i += chunk) {
            const int64_t m = std::min(chunk, n - i);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(buf.data(), x + size_t(i) * d_,
                                                 sizeof(float) * size_t(m) * d_, cudaMemcpyDefault,
                                                 stream));
            if (!prepared) prepareVectorsDevice(metric_, buf.data(), m, d_, stream);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(vectors_ + size_t(ntotal_ + i) * d_, buf.data(),
                                                 sizeof(float) * size_t(m) * d_,
                                                 cudaMemcpyDeviceToHost, stream));
            if (norms_) {
                rowSquaredNorms(buf.data(), m, d_, nbuf.data(), stream);
                FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(norms_ + ntotal_ + i, nbuf.data(),
                                                     sizeof(float) * m, cudaMemcpyDeviceToHost,
                                                     stream));
            }
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        }
    }
    ntotal_ += n;
}

void FlatStorage::reset() {
    DeviceScope scope(device_);
    free_(vectors_, norms_, onHost_);
    vectors_ = nullptr;
    norms_ = nullptr;
    ntotal_ = 0;
    capacity_ = 0;
    onHost_ = request_ == VectorStorage::Host;
}

void FlatStorage::copyVectors(int64_t i0, int64_t n, float* out) const {
    if (n == 0) return;
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(out, vectors_ + size_t(i0) * d_,
                                         sizeof(float) * size_t(n) * d_, cudaMemcpyDefault, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void FlatStorage::search(const float* queries, int64_t nq, int64_t k, float* distances,
                         int64_t* labels, const FlatSearchOptions& opt) const {
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    const bool l2 = metric_ == FlatMetric::L2;
    const select::KeyDecode decode = l2 ? select::KeyDecode::L2 : select::KeyDecode::Negated;
    const int64_t nb = ntotal_;
    const int64_t kk = std::min(k, nb);
    if (nq == 0) return;
    if (nb == 0) {
        select::decodeKeys(nullptr, nq, 0, k, decode, nullptr, distances, labels, stream);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }

    // Queries prepared like the stored vectors, and their norms for L2.
    const float* q = queries;
    std::unique_ptr<TempBuffer<float>> qPrepared;
    if (isPreparedMetric(metric_) && !opt.queriesPrepared) {
        qPrepared.reset(new TempBuffer<float>(res_, device_, size_t(nq) * d_, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(qPrepared->data(), queries,
                                             sizeof(float) * size_t(nq) * d_,
                                             cudaMemcpyDeviceToDevice, stream));
        prepareVectorsDevice(metric_, qPrepared->data(), nq, d_, stream);
        q = qPrepared->data();
    }
    std::unique_ptr<TempBuffer<float>> qNorms;
    if (l2) {
        qNorms.reset(new TempBuffer<float>(res_, device_, size_t(nq), stream));
        rowSquaredNorms(q, nq, d_, qNorms->data(), stream);
    }

    // Tile plan from the temporary memory budget (90% of what is left).
    const size_t budget = res_->getTempMemoryAvailable(device_) / 10 * 9;
    const int64_t wantRows = std::min(nq, onHost_ ? kTargetTileRowsHost : kTargetTileRows);
    TilePlan best;
    int64_t bestRows = 0;
    for (int64_t cols = nb;; cols = (cols + 1) / 2) {
        TilePlan p = planFor(nb, kk, cols, d_, onHost_, l2, opt);
        int64_t rows = budget > p.fixedBytes ? int64_t((budget - p.fixedBytes) / p.bytesPerRow) : 0;
        rows = std::min<int64_t>(rows, nq);
        rows = std::min<int64_t>(rows, (int64_t(1) << 31) / std::max<int64_t>(p.cols, 1));
        if (rows > bestRows) {
            best = p;
            bestRows = rows;
        }
        if (rows >= wantRows || p.cols <= kMinTileCols) break;
    }
    if (bestRows < 1) {
        const TilePlan least = planFor(nb, kk, std::min(nb, kMinTileCols), d_, onHost_, l2, opt);
        FAISS_THROW_FMT("GPU temporary memory too small for a search with k = %lld over %lld "
                        "vectors: %zu bytes available, at least %zu needed for one query tile "
                        "(raise StandardGpuResources::setTempMemory)",
                        (long long)k, (long long)nb, budget, least.bytesPerRow + least.fixedBytes);
    }
    best.rows = bestRows;
    const TilePlan& p = best;

    // One distance tile: GEMM and selection both fill the GPU, so a second
    // tile for overlapping them bought nothing when measured (H100), while
    // its memory buys wider tiles.
    const int64_t ldMax = (p.cols + 3) / 4 * 4;
    TempBuffer<float> dist(res_, device_, size_t(p.rows) * ldMax, stream);
    RowSelector sel(res_, device_, stream, opt.algo, p.rows, p.cols, p.colTiles, nb, kk, opt.group,
                    opt.thFactor);
    const float alpha = l2 ? -2.f : -1.f;
    cublasHandle_t blas = res_->getBlasHandle(device_);

    // Vectors on the host: two staging tiles, filled on a copy stream one
    // tile ahead of the compute stream.
    std::unique_ptr<TempBuffer<float>> stage[2], stageNorms[2];
    std::unique_ptr<Event> copied[2], used[2];
    if (onHost_) {
        if (!copyStream_) {
            FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&copyStream_,
                                                           cudaStreamNonBlocking));
        }
        for (int s = 0; s < 2; ++s) {
            stage[s].reset(new TempBuffer<float>(res_, device_, size_t(p.cols) * d_, stream));
            stageNorms[s].reset(new TempBuffer<float>(res_, device_, l2 ? size_t(p.cols) : 0, stream));
            copied[s].reset(new Event());
            used[s].reset(new Event());
        }
        // The staging memory is allocated in `stream`'s order.
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(used[0]->e, stream));
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(used[1]->e, stream));
    }
    StreamSyncGuard copyGuard{onHost_ ? copyStream_ : nullptr};
    auto issueCopy = [&](int64_t t) {  // tile t of the whole (row block, column tile) sequence
        const int64_t c0 = (t % p.colTiles) * p.cols;
        const int64_t w = std::min(p.cols, nb - c0);
        const int s = int(t & 1);
        FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(copyStream_, used[s]->e, 0));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(stage[s]->data(), vectors_ + size_t(c0) * d_,
                                             sizeof(float) * size_t(w) * d_,
                                             cudaMemcpyHostToDevice, copyStream_));
        if (l2) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(stageNorms[s]->data(), norms_ + c0,
                                                 sizeof(float) * w, cudaMemcpyHostToDevice,
                                                 copyStream_));
        }
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(copied[s]->e, copyStream_));
    };
    const int64_t rowBlocks = (nq + p.rows - 1) / p.rows;
    const int64_t totalTiles = rowBlocks * p.colTiles;
    if (onHost_) issueCopy(0);

    int64_t t = 0;
    for (int64_t q0 = 0; q0 < nq; q0 += p.rows) {
        const int64_t rows = std::min(p.rows, nq - q0);
        sel.begin(rows);
        for (int64_t c0 = 0; c0 < nb; c0 += p.cols, ++t) {
            const int64_t w = std::min(p.cols, nb - c0);
            const int64_t ld = (w + 3) / 4 * 4;
            const float* xb = vectors_ + size_t(c0) * d_;
            const float* xn = l2 ? norms_ + c0 : nullptr;
            if (onHost_) {
                if (t + 1 < totalTiles) issueCopy(t + 1);
                const int s = int(t & 1);
                FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(stream, copied[s]->e, 0));
                xb = stage[s]->data();
                xn = l2 ? stageNorms[s]->data() : nullptr;
            }
            gemmDotProducts(blas, q + size_t(q0) * d_, rows, xb, w, d_, alpha, dist.data(), ld);
            if (opt.selfBase >= 0) {
                maskSelfPairs(dist.data(), ld, rows, w, opt.selfBase + q0, c0, stream);
            }
            sel.addTile(dist.data(), ld, xn, uint32_t(c0), w);
            if (onHost_) FAISS_EXT_CUDA_CHECK(cudaEventRecord(used[t & 1]->e, stream));
        }
        const uint64_t* keys = sel.finish();
        select::decodeKeys(keys, rows, kk, k, decode, l2 ? qNorms->data() + q0 : nullptr,
                           distances + size_t(q0) * k, labels + size_t(q0) * k, stream);
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void FlatStorage::knnGraph(int64_t k, bool excludeSelf, float* distances, int64_t* labels,
                           const FlatSearchOptions& opt) const {
    const int64_t n = ntotal_;
    if (n == 0) return;
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    const bool dDev = distances && isDevicePointer(distances);
    const bool lDev = isDevicePointer(labels);
    // Query blocks: the stored vectors themselves (staged when on the host),
    // results through device buffers when the outputs are on the host.
    int64_t chunk = n;
    if (onHost_ || !dDev || !lDev) {
        const size_t rowBytes = (onHost_ ? sizeof(float) * d_ : 0) +
                                (dDev ? 0 : sizeof(float) * k) + (lDev ? 0 : sizeof(int64_t) * k);
        // Staging within a quarter of the temporary memory: the search needs the rest.
        const size_t room = std::min<size_t>(size_t(256) << 20, res_->getTempMemoryAvailable(device_) / 4);
        chunk = std::max<int64_t>(1, std::min<int64_t>(n, int64_t(room / rowBytes)));
    }
    TempBuffer<float> qBuf(res_, device_, onHost_ ? size_t(chunk) * d_ : 0, stream);
    TempBuffer<float> dBuf(res_, device_, dDev ? 0 : size_t(chunk) * k, stream);
    TempBuffer<int64_t> lBuf(res_, device_, lDev ? 0 : size_t(chunk) * k, stream);
    FlatSearchOptions o = opt;
    o.queriesPrepared = true;
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const int64_t m = std::min(chunk, n - i0);
        const float* q = vectors_ + size_t(i0) * d_;
        if (onHost_) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(qBuf.data(), q, sizeof(float) * size_t(m) * d_,
                                                 cudaMemcpyHostToDevice, stream));
            q = qBuf.data();
        }
        float* dOut = dDev ? distances + size_t(i0) * k : dBuf.data();
        int64_t* lOut = lDev ? labels + size_t(i0) * k : lBuf.data();
        o.selfBase = excludeSelf ? i0 : -1;
        search(q, m, k, dOut, lOut, o);
        if (distances && !dDev) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances + size_t(i0) * k, dOut,
                                                 sizeof(float) * size_t(m) * k,
                                                 cudaMemcpyDeviceToHost, stream));
        }
        if (!lDev) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels + size_t(i0) * k, lOut,
                                                 sizeof(int64_t) * size_t(m) * k,
                                                 cudaMemcpyDeviceToHost, stream));
        }
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
}

}  // namespace gpu
}  // namespace faiss_ext
