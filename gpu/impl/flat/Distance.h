// Distances as a matrix product (Komarov et al., "Distance calculation"):
// the dot products of a query tile and a corpus tile by cuBLAS SGEMM, scaled
// by alpha (-2 for L2, whose norms are added by the selection, -1 for the
// inner product metrics, so that smaller is always closer).
#pragma once

#include <cublas_v2.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// out[i * ldOut + j] = alpha * <q_i, x_j> for i < nq, j < nx (row major,
/// device pointers; q is nq x d, x is nx x d). Plain FP32 (no TF32).
void gemmDotProducts(cublasHandle_t handle, const float* q, int64_t nq, const float* x,
                     int64_t nx, int d, float alpha, float* out, int64_t ldOut);

/// As gemmDotProducts, on the tensor cores in TF32
/// (CUBLAS_COMPUTE_32F_FAST_TF32): inputs rounded to 10 mantissa bits,
/// products and sums in FP32. Approximate: impl/flat/BoundedFlatSearch.h bounds
/// its error and makes the search exact again.
void gemmDotProductsTf32(cublasHandle_t handle, const float* q, int64_t nq, const float* x,
                         int64_t nx, int d, float alpha, float* out, int64_t ldOut);

/// The bits of one BF16 number (cuda_bf16.h's __nv_bfloat16, kept out of
/// this header).
using Bf16Bits = uint16_t;

/// As gemmDotProducts from split operands (SplitBf16.h): query rows
/// [hi | lo | hi] and vector rows [lo | hi | hi] of 3 dPad BF16 each (dPad a
/// multiple of 8, zero-padded), so that one BF16 tensor-core GEMM over
/// 3 dPad terms, accumulated in FP32, takes <q, x> as
/// qHi.xLo + qLo.xHi + qHi.xHi. Approximate, within bf16x3BoundTerms
/// (Tf32ErrorBound.h, which assumes no order of the accumulation) of the
/// FP32 product.
void gemmDotProductsBf16x3(cublasHandle_t handle, const Bf16Bits* q, int64_t nq,
                           const Bf16Bits* x, int64_t nx, int dPad, float alpha, float* out,
                           int64_t ldOut);

}  // namespace gpu
}  // namespace faiss_ext
