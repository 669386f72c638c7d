// Two-part BF16 splits (see SplitBf16.h).
#include <cuda_bf16.h>

#include <algorithm>

#include "faiss_ext/gpu/impl/flat/SplitBf16.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

/// Thread per (row, padded coordinate): writes the coordinate's parts to
/// the three segments of its row in `side`'s order.
__global__ void splitRowsKernel(const float* x, int64_t n, int d, int dPad, bool corpus,
                                __nv_bfloat16* out) {
    const int64_t total = n * dPad;
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
         t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = t / dPad;
        const int j = int(t % dPad);
        const float v = j < d ? x[r * d + j] : 0.f;
        const __nv_bfloat16 h = __float2bfloat16_rn(v);
        // v - h is exact in FP32 (h keeps v's leading 8 bits).
        const __nv_bfloat16 l = __float2bfloat16_rn(v - __bfloat162float(h));
        __nv_bfloat16* row = out + r * 3 * dPad + j;
        row[0] = corpus ? l : h;
        row[dPad] = corpus ? h : l;
        row[2 * dPad] = h;
    }
}

}  // namespace

void splitRowsBf16(const float* x, int64_t n, int d, SplitSide side, Bf16Bits* out,
                   cudaStream_t stream) {
    const int dPad = bf16PaddedDim(d);
    const int64_t total = n * dPad;
    if (total == 0) return;
    splitRowsKernel<<<gridStrideBlocks(total), 256, 0, stream>>>(
        x, n, d, dPad, side == SplitSide::Corpus, reinterpret_cast<__nv_bfloat16*>(out));
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

bool SplitCorpus::view(GpuResources* res, int device, cudaStream_t stream, const float* vectors,
                       int64_t nb, int d, SplitView* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int dPad = bf16PaddedDim(d);
    if (source_ != vectors || nb_ != nb || dPad_ != dPad || !rows_.data()) {
        rows_.release();
        source_ = nullptr;
        const size_t bytes = 3 * sizeof(Bf16Bits) * size_t(nb) * size_t(dPad);
        size_t freeBytes = 0, totalBytes = 0;
        FAISS_EXT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
        if (nb < 1 || double(bytes) > kCopyMemoryShare * double(freeBytes)) return false;
        DeviceVector<Bf16Bits> rows;
        rows.allocate(res, device, 3 * size_t(nb) * dPad, "BF16x3 bounded search",
                      "the BF16 split rows");
        splitRowsBf16(vectors, nb, d, SplitSide::Corpus, rows.data(), stream);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        rows_ = std::move(rows);
        source_ = vectors;
        nb_ = nb;
        dPad_ = dPad;
    }
    out->rows = rows_.data();
    out->dPad = dPad_;
    return true;
}

void SplitCorpus::invalidate() {
    std::lock_guard<std::mutex> lock(mutex_);
    rows_.release();
    source_ = nullptr;
    nb_ = 0;
    dPad_ = 0;
}

std::unique_ptr<TempBuffer<Bf16Bits>> splitRowsInTemp(GpuResources* res, int device,
                                                      cudaStream_t stream, const float* x,
                                                      int64_t rows, int d) {
    const size_t count = size_t(rows) * 3 * size_t(bf16PaddedDim(d));
    if (sizeof(Bf16Bits) * count > res->getTempMemoryAvailable(device) / 2) return nullptr;
    std::unique_ptr<TempBuffer<Bf16Bits>> split(new TempBuffer<Bf16Bits>(res, device, count, stream));
    splitRowsBf16(x, rows, d, SplitSide::Corpus, split->data(), stream);
    return split;
}

}  // namespace gpu
}  // namespace faiss_ext
