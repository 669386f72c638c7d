#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

#include <algorithm>
#include <cstring>

namespace faiss_ext {
namespace gpu {

const float* preparedQueries(GpuResources* res, int device, cudaStream_t stream, FlatMetric metric,
                             const float* x, int64_t n, int d,
                             std::unique_ptr<TempBuffer<float>>& holder) {
    if (!isPreparedMetric(metric)) return x;
    holder.reset(new TempBuffer<float>(res, device, size_t(n) * d, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(holder->data(), x, sizeof(float) * size_t(n) * d,
                                         cudaMemcpyDeviceToDevice, stream));
    prepareVectorsDevice(metric, holder->data(), n, d, stream);
    return holder->data();
}

namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ float warpSum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

// One warp per row.
__global__ void rowSquaredNormsKernel(const float* x, int64_t n, int d, float* norms) {
    int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    if (row >= n) return;
    int lane = threadIdx.x & 31;
    const float* r = x + row * d;
    float s = 0.f;
    for (int j = lane; j < d; j += 32) s += r[j] * r[j];
    s = warpSum(s);
    if (lane == 0) norms[row] = s;
}

/// atomicMax on the bits of non-negative floats (their order as unsigned).
__global__ void maxSquaredNormKernel(const float* x, int64_t n, int d, const float* norms,
                                     unsigned* maxBits) {
    int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    if (row >= n) return;
    int lane = threadIdx.x & 31;
    float s;
    if (norms) {
        s = norms[row];
    } else {
        const float* r = x + row * d;
        s = 0.f;
        for (int j = lane; j < d; j += 32) s += r[j] * r[j];
        s = warpSum(s);
    }
    if (lane == 0) atomicMax(maxBits, __float_as_uint(fmaxf(s, 0.f)));
}

__global__ void prepareKernel(float* x, int64_t n, int d, bool center) {
    int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    if (row >= n) return;
    int lane = threadIdx.x & 31;
    float* r = x + row * d;
    if (center) {
        float s = 0.f;
        for (int j = lane; j < d; j += 32) s += r[j];
        float mean = warpSum(s) / float(d);
        for (int j = lane; j < d; j += 32) r[j] -= mean;
        __syncwarp();
    }
    float s = 0.f;
    for (int j = lane; j < d; j += 32) s += r[j] * r[j];
    s = warpSum(s);
    if (s > 0.f) {
        float inv = 1.f / sqrtf(s);
        for (int j = lane; j < d; j += 32) r[j] *= inv;
    }
}

unsigned blocksFor(int64_t n) { return unsigned((n + kWarps - 1) / kWarps); }

__global__ void maskSelfKernel(float* dist, int64_t ld, int64_t rows, int64_t cols, int64_t row0,
                               int64_t col0) {
    int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    int64_t c = row0 + r - col0;
    if (c >= 0 && c < cols) dist[r * ld + c] = __int_as_float(0x7fc00000);
}

__global__ void nonFiniteRowKernel(const float* __restrict__ x, int64_t total, int d,
                                   unsigned long long* __restrict__ firstBad) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
        if (!isfinite(x[i])) atomicMin(firstBad, (unsigned long long)(i / d));
}

/// One block: the first row of x (total entries, rows of d) with a NaN or
/// infinite entry, or -1, into *result (host memory mapped for the device).
__global__ void smallNonFiniteRowKernel(const float* __restrict__ x, int64_t total, int d,
                                        int64_t* result) {
    __shared__ unsigned long long first;
    if (threadIdx.x == 0) first = ~0ull;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < total; i += blockDim.x)
        if (!isfinite(x[i])) atomicMin(&first, (unsigned long long)(i / d));
    __syncthreads();
    if (threadIdx.x == 0) *result = first == ~0ull ? -1 : int64_t(first);
}

}  // namespace

DeferredFiniteCheck::DeferredFiniteCheck() {
    void* p = nullptr;
    FAISS_EXT_CUDA_CHECK(cudaHostAlloc(&p, sizeof(int64_t),
                                       cudaHostAllocMapped | cudaHostAllocPortable));
    mapped_ = static_cast<int64_t*>(p);
    cudaError_t err = cudaMalloc(&first_, sizeof(unsigned long long));
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&done_, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (first_) cudaFree(first_);
        cudaFreeHost(mapped_);
        throwCudaError(err, "DeferredFiniteCheck", __FILE__, __LINE__);
    }
}

DeferredFiniteCheck::~DeferredFiniteCheck() {
    cudaEventDestroy(done_);
    cudaFree(first_);
    cudaFreeHost(mapped_);
}

void DeferredFiniteCheck::start(const float* x, int64_t n, int d, cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(n >= 1 && d >= 1, "DeferredFiniteCheck: %lld x %d entries",
                           (long long)n, d);
    const int64_t total = n * int64_t(d);
    if (total <= kSmallCheckEntries) {
        int64_t* out = nullptr;
        FAISS_EXT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&out), mapped_, 0));
        smallNonFiniteRowKernel<<<1, 1024, 0, stream>>>(x, total, d, out);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    } else {
        // ~0 (no row) reads as the int64 -1 in the mapped word
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(first_, 0xFF, sizeof(unsigned long long), stream));
        const int64_t blocks = std::min<int64_t>((total + 255) / 256, 4096);
        nonFiniteRowKernel<<<unsigned(blocks), 256, 0, stream>>>(x, total, d, first_);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(mapped_, first_, sizeof(int64_t),
                                             cudaMemcpyDeviceToHost, stream));
    }
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(done_, stream));
}

int64_t DeferredFiniteCheck::wait() {
    FAISS_EXT_CUDA_CHECK(cudaEventSynchronize(done_));
    // volatile: the device wrote it, not this thread
    return *static_cast<volatile int64_t*>(mapped_);
}

void maskSelfPairs(float* dist, int64_t ld, int64_t rows, int64_t cols, int64_t row0, int64_t col0,
                   cudaStream_t stream) {
    if (rows <= 0 || cols <= 0 || row0 + rows <= col0 || col0 + cols <= row0) return;
    maskSelfKernel<<<unsigned((rows + 255) / 256), 256, 0, stream>>>(dist, ld, rows, cols, row0, col0);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void rowSquaredNorms(const float* x, int64_t n, int d, float* norms, cudaStream_t stream) {
    if (n == 0) return;
    rowSquaredNormsKernel<<<blocksFor(n), 32 * kWarps, 0, stream>>>(x, n, d, norms);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

float maxSquaredNorm(const float* x, int64_t n, int d, const float* norms, unsigned* scratch,
                     cudaStream_t stream) {
    if (n == 0) return 0.f;
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(unsigned), stream));
    maxSquaredNormKernel<<<blocksFor(n), 32 * kWarps, 0, stream>>>(x, n, d, norms, scratch);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    unsigned bits = 0;
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(&bits, scratch, sizeof(bits), cudaMemcpyDeviceToHost,
                                         stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
}

void prepareVectorsDevice(FlatMetric metric, float* x, int64_t n, int d, cudaStream_t stream) {
    if (n == 0 || !isPreparedMetric(metric)) return;
    prepareKernel<<<blocksFor(n), 32 * kWarps, 0, stream>>>(x, n, d, metric == FlatMetric::Pearson);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace faiss_ext
