// The FP16 copy of the vectors that the beam search traverses (SearchGraph.h):
// centred on the vectors' mean, so that data far from the origin keeps its
// digits (a scan's coordinates of hundreds of metres with neighbours
// centimetres apart lost them: recall@10 of the copy's own order 0.83
// uncentred, 0.97 centred, bench/traversal_codes_precision.py), then scaled
// by a power of two so that any finite FP32 data fits FP16's range. Neither
// changes an ordering: L2 distances ignore translation, and under inner
// products q.(x - mean) differs from q.x by one number per query.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

/// The largest |x - mean| (mean: per dimension, or null for none).
__global__ void maxAbsKernel(const float* x, size_t count, int d, const float* mean,
                             unsigned int* out) {
    float m = 0.f;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += size_t(gridDim.x) * blockDim.x)
        m = fmaxf(m, fabsf(mean ? x[i] - __ldg(mean + i % d) : x[i]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    // non-negative floats order as their bit patterns
    if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

__global__ void toHalfKernel(const float* x, size_t count, int d, const float* mean, float scale,
                             __half* out) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += size_t(gridDim.x) * blockDim.x)
        out[i] = __float2half_rn((mean ? x[i] - __ldg(mean + i % d) : x[i]) * scale);
}

unsigned gridFor(size_t count) {
    size_t blocks = (count + 255) / 256;
    return unsigned(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

}  // namespace

float halfScaleFor(cudaStream_t stream, const float* x, int64_t n, int d, const float* mean) {
    const size_t count = size_t(n) * size_t(d);
    if (count == 0) return 1.f;
    DeviceVector<unsigned int> dMaxVec;  // no resources here: deviceMalloc
    FAISS_EXT_CUDA_CHECK(dMaxVec.tryAllocate(1));
    unsigned int* dMax = dMaxVec.data();
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(dMax, 0, sizeof(unsigned int), stream));
    maxAbsKernel<<<gridFor(count), 256, 0, stream>>>(x, count, d, mean, dMax);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    unsigned int bits = 0;
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(&bits, dMax, sizeof(bits), cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    dMaxVec.release();
    float m;
    std::memcpy(&m, &bits, sizeof(m));
    if (!(m > 0.f)) return 1.f;
    int e;
    std::frexp(m, &e);  // m = f * 2^e, f in [0.5, 1)
    return std::ldexp(1.f, std::min(14 - e, 100));
}

void toHalf(cudaStream_t stream, const float* x, int64_t n, int d, const float* mean, float scale,
            uint16_t* out) {
    const size_t count = size_t(n) * size_t(d);
    if (count == 0) return;
    toHalfKernel<<<gridFor(count), 256, 0, stream>>>(x, count, d, mean, scale,
                                                     reinterpret_cast<__half*>(out));
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
