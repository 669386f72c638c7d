// The 8-bit copy of the vectors that the beam search may traverse instead
// of the FP16 one (SearchGraph.h, TraversalCopy.h): per dimension j, the
// code c in 0..255 stands for lo_j + step_j c, lo_j and step_j spanning
// the dimension's range over the vectors, so that every value is within
// step_j / 2 of its code's. A quarter of the FP32 bytes, half of FP16's,
// for the gathers that bound a large graph's search; the final buffer is
// re-scored in FP32, so only the traversal sees the rounding.
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr int kThreads = 256;

/// Float bits ordered as unsigned integers (finite values: the index
/// refuses NaN and infinity), for atomicMin / atomicMax.
__device__ __forceinline__ unsigned orderedKey(float f) {
    const unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Per dimension, the least and greatest ordered key over the rows: block
/// column range blockIdx.y, rows blockIdx.x, blockIdx.x + gridDim.x, ...
/// (each warp reads consecutive floats of a row).
__global__ void rangeKernel(const float* x, int64_t n, int d, unsigned* lo, unsigned* hi) {
    const int j = blockIdx.y * kThreads + threadIdx.x;
    if (j >= d) return;
    unsigned mn = 0xFFFFFFFFu, mx = 0;
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const unsigned k = orderedKey(__ldg(x + r * d + j));
        mn = min(mn, k);
        mx = max(mx, k);
    }
    atomicMin(lo + j, mn);
    atomicMax(hi + j, mx);
}

__global__ void toBytesKernel(const float* x, int64_t count, int d, const float* lo,
                              const float* step, uint8_t* out) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int j = int(i % d);
        const float c = rintf((x[i] - __ldg(lo + j)) / __ldg(step + j));
        out[i] = uint8_t(fminf(fmaxf(c, 0.f), 255.f));
    }
}

float fromOrderedKey(unsigned k) {
    const unsigned u = (k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
}

}  // namespace

void byteCodeRanges(cudaStream_t stream, const float* x, int64_t n, int d, float* lo, float* step) {
    FAISS_THROW_IF_NOT_FMT(n >= 1 && d >= 1, "byteCodeRanges: %lld vectors of d %d", (long long)n,
                           d);
    DeviceVector<unsigned> keys;  // no resources here: deviceMalloc
    FAISS_EXT_CUDA_CHECK(keys.tryAllocate(2 * size_t(d)));
    std::vector<unsigned> host(2 * size_t(d));
    std::fill(host.begin(), host.begin() + d, 0xFFFFFFFFu);
    std::fill(host.begin() + d, host.end(), 0u);
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(keys.data(), host.data(), 4 * host.size(), cudaMemcpyHostToDevice, stream));
    const dim3 grid(unsigned(std::min<int64_t>(n, 1024)), unsigned((d + kThreads - 1) / kThreads));
    rangeKernel<<<grid, kThreads, 0, stream>>>(x, n, d, keys.data(), keys.data() + d);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(host.data(), keys.data(), 4 * host.size(), cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> params(2 * size_t(d));
    for (int j = 0; j < d; ++j) {
        const float mn = fromOrderedKey(host[size_t(j)]), mx = fromOrderedKey(host[size_t(d + j)]);
        params[size_t(j)] = mn;
        // (a constant dimension: every code 0, any step)
        params[size_t(d + j)] = mx > mn ? (mx - mn) / 255.f : 1.f;
    }
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(lo, params.data(), 4 * size_t(d), cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(step, params.data() + d, 4 * size_t(d), cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));  // `params` is a host local
}

void toBytes(cudaStream_t stream, const float* x, int64_t n, int d, const float* lo,
             const float* step, uint8_t* out) {
    const int64_t count = n * d;
    if (count == 0) return;
    const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, 4096);
    toBytesKernel<<<unsigned(blocks), kThreads, 0, stream>>>(x, count, d, lo, step, out);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
