// The queries of a bounded search over a residual corpus
// (ResidualCorpus.h), prepared for the fused kernels and the certificate
// (ResidualBound.h).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <vector_types.h>

#include <cstdint>

#include "faiss_ext/gpu/impl/flat/ResidualBound.h"
#include "faiss_ext/gpu/impl/flat/ResidualCorpus.h"

namespace faiss_ext {
namespace gpu {

/// What prepareResidualQueries writes for a block of rows (device buffers).
struct ResidualQueryBlock {
    float* tf32Rows = nullptr;    ///< rows x d: q_t, TF32-exact (the kernels' queries)
    float* centreDots = nullptr;  ///< rows x partitions: fl(q~ . c_p), FP32
    float4* coefs = nullptr;      ///< rows: {a1, a2, b, 0}
    double2* certify = nullptr;   ///< rows: {residualKeyShift, residualMagnitude}
};

/// Prepares `rows` queries (device, rows x d, as the FP32 path takes them):
/// q~ = fl(q - m), its products with the centres (one FP32 cuBLAS GEMM on
/// `blas`, which runs on `stream`), then per row the norms of
/// ResidualQueryNorms, the kernel's coefficients, the certificate's terms,
/// and q~ rounded to TF32 in place. Ordered on `stream`.
void prepareResidualQueries(cublasHandle_t blas, const float* queries, int64_t rows,
                            const ResidualView& view, const ResidualCorpusBounds& bounds,
                            const ResidualQueryBlock& out, cudaStream_t stream);

}  // namespace gpu
}  // namespace faiss_ext
