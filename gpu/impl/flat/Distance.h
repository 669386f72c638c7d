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

/// As gemmDotProducts from split operands (SplitBf16.h): rows of dPad BF16
/// (a multiple of 8, zero-padded), q ~ qHi + qLo and x ~ xHi + xLo, and
/// <q, x> taken as xLo.qHi + xHi.qLo + xHi.qHi (in that order): three BF16
/// tensor-core GEMMs accumulated in FP32. Approximate, within bf16x3BoundTerms
/// (Tf32ErrorBound.h) of the FP32 product.
void gemmDotProductsBf16x3(cublasHandle_t handle, const Bf16Bits* qHi, const Bf16Bits* qLo,
                           int64_t nq, const Bf16Bits* xHi, const Bf16Bits* xLo, int64_t nx,
                           int dPad, float alpha, float* out, int64_t ldOut);

}  // namespace gpu
}  // namespace faiss_ext
