// CPU emulations of the arithmetic the bounded searches' error bounds
// relate (gpu/impl/flat/Tf32ErrorBound.h): the tensor cores as modelled in
// the bounds' derivation (exact products of the converted inputs, block
// FMAs that align their addends to the largest with truncation and
// truncate the result; Fasi et al., PeerJ CS 2021), input conversions to
// TF32 and to BF16 splits, and the FP32 path's dot products. Shared by
// test_cpu_tf32_bound.cpp and test_cpu_bf16x3_bound.cpp.
#pragma once

#include <cstdint>
#include <utility>

namespace faiss_ext {
namespace test {

/// FP32 -> TF32 by truncation (10 mantissa bits kept), subnormals flushed.
float toTf32Truncated(float v);

/// FP32 -> BF16 by round to nearest even (as __float2bfloat16_rn), as a float.
float toBf16Nearest(float v);

/// The two-part BF16 split of SplitBf16.cu: (h, l) with h = bf16_rn(v) and
/// l = bf16_rn(v - h).
std::pair<float, float> splitBf16(float v);

/// Identity on FP32 values, subnormals flushed (tensor-core inputs that are
/// already exact in the product's input format).
float flushSubnormal(float v);

/// Truncates a double toward zero to a multiple of 2^exponent.
double truncateToMultiple(double v, int exponent);

/// The tensor-core dot product of the bounds' model, starting from `acc`
/// (beta = 1 accumulation) or 0: blocks of t exact products of
/// convert(q_i) convert(x_i), each block added to the accumulator by
/// aligning all t + 1 addends to the largest exponent with truncation (24
/// significant bits), summing exactly and truncating the result to FP32.
float tensorCoreDot(const float* q, const float* x, int d, int t, float (*convert)(float),
                    float acc = 0.f);

/// The FP32 path's dot product: sequential fused multiply-adds.
float sequentialDot(const float* q, const float* x, int d);

/// Another FP32 order: products rounded, then a pairwise tree.
float pairwiseDot(const float* q, const float* x, int d);

/// FP32 sum of squares, sequential.
float sumOfSquares(const float* x, int d);

}  // namespace test
}  // namespace faiss_ext
