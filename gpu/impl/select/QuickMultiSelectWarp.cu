// One warp per row: the instantiations of quick multi-select for many rows,
// and the dispatch between the warp and block variants.
#include "gpu/impl/select/QuickMultiSelect.cuh"
#include "gpu/utils/DeviceUtils.h"

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
