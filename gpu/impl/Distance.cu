#include "gpu/impl/Distance.h"
#include "gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {

void gemmDotProducts(cublasHandle_t handle, const float* q, int64_t nq, const float* x,
                     int64_t nx, int d, float alpha, float* out, int64_t ldOut) {
    if (nq == 0 || nx == 0) return;
    FAISS_THROW_IF_NOT_FMT(nq < (int64_t(1) << 31) && nx < (int64_t(1) << 31) &&
                                   ldOut < (int64_t(1) << 31),
                           "gemmDotProducts: tile too large (%lld x %lld)", (long long)nq,
                           (long long)nx);
    const float beta = 0.f;
    // Column-major view: out^T (nx x nq) = x (nx x d) * q^T (d x nq).
    FAISS_EXT_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(nx), int(nq), d,
                                       &alpha, x, d, q, d, &beta, out, int(ldOut)));
}

}  // namespace gpu
}  // namespace faiss_ext
