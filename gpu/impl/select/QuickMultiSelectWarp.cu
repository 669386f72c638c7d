// One warp per row: the instantiations of quick multi-select for many rows,
// and the dispatch between the warp and block variants.
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.cuh"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>

namespace faiss_ext {
namespace gpu {
namespace select {

namespace {
void checkArgs(const SelectArgs& a) {
    FAISS_THROW_IF_NOT_FMT(a.k >= 1 && a.k <= a.n, "quickMultiSelect: k = %lld not in [1, n = %lld]",
                           (long long)a.k, (long long)a.n);
    FAISS_THROW_IF_NOT_MSG((a.dist != nullptr) != (a.keys != nullptr),
                           "quickMultiSelect: exactly one of dist and keys must be given");
    FAISS_THROW_IF_NOT_MSG(a.out && a.aux1 && a.aux2 && a.auxStride >= a.n,
                           "quickMultiSelect: output or work buffers missing or too small");
}
}  // namespace

void quickMultiSelectWarp(const SelectArgs& a, cudaStream_t stream) {
    checkArgs(a);
    if (a.rows == 0) return;
    int64_t blocks = (a.rows + kWarpsPerBlockW1 - 1) / kWarpsPerBlockW1;
    if (a.dist) {
        quickMultiSelectKernel<1, true><<<unsigned(blocks), 32 * kWarpsPerBlockW1, 0, stream>>>(a);
    } else {
        quickMultiSelectKernel<1, false><<<unsigned(blocks), 32 * kWarpsPerBlockW1, 0, stream>>>(a);
    }
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void filterFloatRows(const SelectArgs& a, uint64_t* pivots, unsigned long long* counts,
                     cudaStream_t stream) {
    checkArgs(a);
    FAISS_THROW_IF_NOT_MSG(a.dist, "filterFloatRows: needs a float source");
    if (a.rows == 0) return;
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(unsigned long long) * a.rows, stream));
    FAISS_THROW_IF_NOT_FMT(a.rows < (int64_t(1) << 31), "filterFloatRows: too many rows (%lld)",
                           (long long)a.rows);
    firstPassPivotKernel<0><<<unsigned(a.rows), 32 * kWarpsPerBlockRow, 0, stream>>>(a, pivots);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    // A persistent grid: every resident warp streams work items.
    int dev = getCurrentDevice();
    int sms = 0, perSm = 0;
    FAISS_EXT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    bool vec = aligned16(a.dist) && aligned16(a.colAdd) &&
               a.ld % 4 == 0;
    if (vec) {
        FAISS_EXT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &perSm, firstPassFilterKernel<true>, 256, 0));
    } else {
        FAISS_EXT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &perSm, firstPassFilterKernel<false>, 256, 0));
    }
    int64_t items = a.rows * ((a.n + kFilterChunk - 1) / kFilterChunk);
    int64_t blocks = std::min<int64_t>(int64_t(sms) * std::max(perSm, 1), (items + 7) / 8);
    if (vec) {
        firstPassFilterKernel<true><<<unsigned(blocks), 256, 0, stream>>>(a, pivots, counts);
    } else {
        firstPassFilterKernel<false><<<unsigned(blocks), 256, 0, stream>>>(a, pivots, counts);
    }
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void quickMultiSelect(const SelectArgs& a, cudaStream_t stream, int warpPerRow) {
    if (warpPerRow < 0) {
        // Enough rows to fill the GPU with warps: one warp per row; otherwise
        // a block per row so that few rows still use every multiprocessor.
        int dev = getCurrentDevice();
        int sms = 0;
        FAISS_EXT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        warpPerRow = a.rows >= int64_t(sms) * 16 ? 1 : 0;
    }
    if (warpPerRow) {
        quickMultiSelectWarp(a, stream);
    } else {
        quickMultiSelectBlock(a, stream);
    }
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
