// One block per row: the instantiations of quick multi-select for few rows.
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace select {

void quickMultiSelectBlock(const SelectArgs& a, cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(a.k >= 1 && a.k <= a.n, "quickMultiSelect: k = %lld not in [1, n = %lld]",
                           (long long)a.k, (long long)a.n);
    if (a.rows == 0) return;
    FAISS_THROW_IF_NOT_FMT(a.rows < (int64_t(1) << 31), "quickMultiSelect: too many rows (%lld)",
                           (long long)a.rows);
    if (a.dist) {
        quickMultiSelectKernel<kWarpsPerBlockRow, true>
                <<<unsigned(a.rows), 32 * kWarpsPerBlockRow, 0, stream>>>(a);
    } else {
        quickMultiSelectKernel<kWarpsPerBlockRow, false>
                <<<unsigned(a.rows), 32 * kWarpsPerBlockRow, 0, stream>>>(a);
    }
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
