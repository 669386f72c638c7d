#include "gpu/impl/FlatSearch.h"

#include "gpu/impl/Distance.h"
#include "gpu/impl/VectorPrep.h"
#include "gpu/impl/select/QuickMultiSelect.h"
#include "gpu/utils/DeviceUtils.h"

#include <algorithm>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace {

/// Keys carry 32-bit ids.
constexpr int64_t kMaxVectors = (int64_t(1) << 32) - 1;

/// The smallest corpus tile worth a GEMM launch.
constexpr int64_t kMinTileCols = 8192;

/// Rows a tile aims for: enough for one warp per row to fill the GPU.
constexpr int64_t kTargetTileRows = 4096;

struct TilePlan {
    int64_t rows = 0;        // queries per tile
    int64_t cols = 0;        // corpus vectors per tile
    int64_t colTiles = 0;    // tiles over the corpus
    int64_t mergeWidth = 0;  // candidates per query across tiles (0 if one tile)
    int64_t auxCap = 0;      // keys per row of each work buffer
    size_t sortTempPerRow = 0;
    size_t bytesPerRow = 0;
};

TilePlan planFor(int64_t nb, int64_t kk, int64_t cols) {
    TilePlan p;
    cols = std::min(nb, (cols + 3) / 4 * 4);  // rows of a tile start 16-byte aligned
    p.cols = cols;
    p.colTiles = (nb + cols - 1) / cols;
    if (p.colTiles > 1) {
        int64_t last = nb - (p.colTiles - 1) * cols;
        p.mergeWidth = (p.colTiles - 1) * std::min(kk, cols) + std::min(kk, last);
    }
    p.auxCap = std::max(cols, p.mergeWidth);
    p.sortTempPerRow = select::sortKeyRowsTempBytes(1, kk) + 2 * sizeof(uint64_t) * kk;
    p.bytesPerRow = sizeof(float) * ((cols + 3) / 4 * 4) + 2 * sizeof(uint64_t) + 2 * sizeof(uint64_t) * p.auxCap +
                    sizeof(uint64_t) * p.mergeWidth + sizeof(uint64_t) * kk + p.sortTempPerRow;
    return p;
}

}  // namespace

FlatStorage::FlatStorage(GpuResources* res, int device, int d, FlatMetric metric)
        : res_(res), device_(device), d_(d), metric_(metric) {}

FlatStorage::~FlatStorage() {
    DeviceScope scope(device_);
    if (vectors_) cudaFree(vectors_);
    if (norms_) cudaFree(norms_);
}

void FlatStorage::reserve(int64_t n) {
    if (n <= capacity_) return;
    FAISS_THROW_IF_NOT_FMT(n <= kMaxVectors, "GpuIndexQuickSelectFlat holds at most %lld vectors "
                           "(asked for %lld)", (long long)kMaxVectors, (long long)n);
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    float* nv = nullptr;
    float* nn = nullptr;
    cudaError_t err = cudaMalloc(&nv, sizeof(float) * size_t(n) * d_);
    if (err == cudaSuccess && metric_ == FlatMetric::L2) err = cudaMalloc(&nn, sizeof(float) * n);
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (nv) cudaFree(nv);
        FAISS_THROW_FMT("GPU out of memory on device %d: cannot hold %lld vectors of dimension %d "
                        "(%zu bytes)", device_, (long long)n, d_, sizeof(float) * size_t(n) * d_);
    }
    if (ntotal_ > 0) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(nv, vectors_, sizeof(float) * size_t(ntotal_) * d_,
                                             cudaMemcpyDeviceToDevice, stream));
        if (nn) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(nn, norms_, sizeof(float) * ntotal_,
                                                 cudaMemcpyDeviceToDevice, stream));
        }
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    if (vectors_) cudaFree(vectors_);
    if (norms_) cudaFree(norms_);
    vectors_ = nv;
    norms_ = nn;
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
    float* dst = vectors_ + size_t(ntotal_) * d_;
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dst, x, sizeof(float) * size_t(n) * d_,
                                         cudaMemcpyDefault, stream));
    if (!prepared) prepareVectorsDevice(metric_, dst, n, d_, stream);
    if (norms_) rowSquaredNorms(dst, n, d_, norms_ + ntotal_, stream);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    ntotal_ += n;
}

void FlatStorage::appendHost(const float* x, int64_t n, bool prepared) {
    // cudaMemcpyDefault reads host memory directly; append handles both.
    append(x, n, prepared);
}

void FlatStorage::reset() {
    DeviceScope scope(device_);
    if (vectors_) cudaFree(vectors_);
    if (norms_) cudaFree(norms_);
    vectors_ = nullptr;
    norms_ = nullptr;
    ntotal_ = 0;
    capacity_ = 0;
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
                         int64_t* labels) const {
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
    if (isPreparedMetric(metric_)) {
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
    size_t budget = res_->getTempMemoryAvailable(device_) / 10 * 9;
    const int64_t wantRows = std::min(nq, kTargetTileRows);
    TilePlan best;
    int64_t bestRows = 0;
    for (int64_t cols = nb;; cols = (cols + 1) / 2) {
        TilePlan p = planFor(nb, kk, cols);
        int64_t rows = std::min<int64_t>(nq, int64_t(budget / p.bytesPerRow));
        rows = std::min<int64_t>(rows, (int64_t(1) << 31) / std::max<int64_t>(cols, 1));
        if (rows > bestRows) {
            best = p;
            bestRows = rows;
        }
        if (rows >= wantRows || cols <= kMinTileCols) break;
    }
    FAISS_THROW_IF_NOT_FMT(bestRows >= 1,
                           "GPU temporary memory too small for a search with k = %lld over %lld "
                           "vectors: %zu bytes available, at least %zu needed for one query tile "
                           "(raise StandardGpuResources::setTempMemory)",
                           (long long)k, (long long)nb, budget, planFor(nb, kk, nb).bytesPerRow);
    best.rows = bestRows;
    const TilePlan& p = best;

    // One distance tile: GEMM and selection both fill the GPU, so a second
    // tile for overlapping them bought nothing when measured (H100), while
    // its memory buys wider tiles.
    const int64_t ldMax = (p.cols + 3) / 4 * 4;
    TempBuffer<float> dist(res_, device_, size_t(p.rows) * ldMax, stream);
    TempBuffer<uint64_t> aux1(res_, device_, size_t(p.rows) * p.auxCap, stream);
    TempBuffer<uint64_t> aux2(res_, device_, size_t(p.rows) * p.auxCap, stream);
    TempBuffer<uint64_t> merge(res_, device_, size_t(p.rows) * p.mergeWidth, stream);
    TempBuffer<uint64_t> finalKeys(res_, device_, size_t(p.rows) * kk, stream);
    size_t sortBytes = select::sortKeyRowsTempBytes(p.rows, kk);
    TempBuffer<char> sortTemp(res_, device_, sortBytes, stream);
    TempBuffer<uint64_t> pivots(res_, device_, size_t(p.rows), stream);
    TempBuffer<unsigned long long> counts(res_, device_, size_t(p.rows), stream);
    const float alpha = l2 ? -2.f : -1.f;
    cublasHandle_t blas = res_->getBlasHandle(device_);

    for (int64_t q0 = 0; q0 < nq; q0 += p.rows) {
        const int64_t rows = std::min(p.rows, nq - q0);
        int64_t mergeOffset = 0;
        for (int64_t c0 = 0; c0 < nb; c0 += p.cols) {
            const int64_t w = std::min(p.cols, nb - c0);
            const int64_t ld = (w + 3) / 4 * 4;
            gemmDotProducts(blas, q + size_t(q0) * d_, rows, vectors_ + size_t(c0) * d_, w, d_,
                            alpha, dist.data(), ld);
            select::SelectArgs a;
            a.dist = dist.data();
            a.ld = ld;
            a.colAdd = l2 ? norms_ + c0 : nullptr;
            a.colBase = uint32_t(c0);
            a.n = w;
            a.rows = rows;
            a.k = std::min(kk, w);
            if (p.colTiles > 1) {
                a.out = merge.data();
                a.outStride = p.mergeWidth;
                a.outOffset = mergeOffset;
            } else {
                a.out = finalKeys.data();
                a.outStride = kk;
            }
            a.aux1 = aux1.data();
            a.aux2 = aux2.data();
            a.auxStride = p.auxCap;
            select::filterFloatRows(a, pivots.data(), counts.data(), stream);
            a.prefilteredCount = counts.data();
            select::quickMultiSelect(a, stream);
            mergeOffset += a.k;
        }
        if (p.colTiles > 1) {
            select::SelectArgs a;
            a.keys = merge.data();
            a.keyStride = p.mergeWidth;
            a.n = p.mergeWidth;
            a.rows = rows;
            a.k = kk;
            a.out = finalKeys.data();
            a.outStride = kk;
            a.aux1 = aux1.data();
            a.aux2 = aux2.data();
            a.auxStride = p.auxCap;
            select::quickMultiSelect(a, stream);
        }
        select::sortKeyRows(finalKeys.data(), rows, kk, sortTemp.data(), sortBytes, stream);
        select::decodeKeys(finalKeys.data(), rows, kk, k, decode,
                           l2 ? qNorms->data() + q0 : nullptr, distances + size_t(q0) * k,
                           labels + size_t(q0) * k, stream);
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace gpu
}  // namespace faiss_ext
