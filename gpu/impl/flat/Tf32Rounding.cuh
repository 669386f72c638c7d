// Device helpers the residual copy (ResidualCorpus.cu) and its queries
// (ResidualQueries.cu) share: both round to TF32 themselves, so that the
// tensor cores take their inputs exactly and the rounding error is known.
#pragma once

namespace faiss_ext {
namespace gpu {

/// f rounded to TF32 (10 mantissa bits) to nearest, ties away from zero:
/// adding half a unit to the magnitude bits keeps the sign and carries into
/// the exponent where it must. Infinities and NaN are kept.
__device__ __forceinline__ float roundToTf32(float f) {
    const unsigned b = __float_as_uint(f);
    if ((b & 0x7f800000u) == 0x7f800000u) return f;
    return __uint_as_float((b + 0x1000u) & ~0x1FFFu);
}

/// The sum of v over the warp's 32 lanes, in every lane.
__device__ __forceinline__ double warpSumAll(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

}  // namespace gpu
}  // namespace faiss_ext
