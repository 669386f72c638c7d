// The centred copy of a corpus (see CentredCorpus.h).
#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"

#include <algorithm>
#include <cstring>

#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

/// sums[j] += the column sums of rows [r0, r1) of x (n x d), one row range
/// per block, threads over the columns (coalesced reads of each row).
__global__ void columnSumsKernel(const float* x, int64_t n, int d, int64_t rowsPerBlock,
                                 double* sums) {
    const int64_t r0 = int64_t(blockIdx.x) * rowsPerBlock;
    const int64_t r1 = std::min(n, r0 + rowsPerBlock);
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        double s = 0.0;
        for (int64_t r = r0; r < r1; ++r) s += double(x[r * d + j]);
        atomicAdd(&sums[j], s);
    }
}

__global__ void meanKernel(const double* sums, int d, int64_t n, float* centre) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < d) centre[j] = float(sums[j] / double(n));
}

/// *maxBits = the largest |x_i - c|^2 over the rows (one warp per row), as
/// the bits of a non-negative float (ordered as unsigned).
__global__ void centredMaxSqNormKernel(const float* x, int64_t n, int d, const float* centre,
                                       unsigned* maxBits) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
    for (int64_t r = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < n;
         r += warps) {
        float s = 0.f;
        for (int j = lane; j < d; j += 32) {
            const float t = x[r * d + j] - centre[j];
            s = fmaf(t, t, s);
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xFFFFFFFFu, s, o);
        if (lane == 0) atomicMax(maxBits, __float_as_uint(s));  // NaN's bits exceed +inf's
    }
}

__global__ void subtractCentreKernel(const float* x, int64_t total, int d, const float* centre,
                                     float* out) {
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
         t += int64_t(gridDim.x) * blockDim.x) {
        out[t] = x[t] - centre[t % d];
    }
}

/// One warp per row: out[r] = q_r . centre.
__global__ void centreDotsKernel(const float* q, int64_t n, int d, const float* centre,
                                 float* out) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
    for (int64_t r = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < n;
         r += warps) {
        float s = 0.f;
        for (int j = lane; j < d; j += 32) s = fmaf(q[r * d + j], centre[j], s);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xFFFFFFFFu, s, o);
        if (lane == 0) out[r] = s;
    }
}

__global__ void addRowOffsetsKernel(float* distances, int64_t total, int64_t k,
                                    const float* offsets) {
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
         t += int64_t(gridDim.x) * blockDim.x) {
        distances[t] += offsets[t / k];
    }
}

}  // namespace

void centreDots(const float* q, int64_t n, int d, const float* centre, float* out,
                cudaStream_t stream) {
    if (n == 0) return;
    centreDotsKernel<<<gridStrideBlocks(n, 8), 256, 0, stream>>>(q, n, d, centre, out);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void addRowOffsets(float* distances, int64_t rows, int64_t k, const float* offsets,
                   cudaStream_t stream) {
    if (rows * k == 0 || !distances) return;
    addRowOffsetsKernel<<<gridStrideBlocks(rows * k, 256), 256, 0, stream>>>(distances, rows * k, k,
                                                                  offsets);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void corpusMean(GpuResources* res, int device, cudaStream_t stream, const float* x, int64_t n,
                int d, float* mean) {
    TempBuffer<double> sums(res, device, size_t(d), stream);
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(sums.data(), 0, sizeof(double) * d, stream));
    const int64_t blocks = std::min<int64_t>(1024, (n + 255) / 256);
    const int64_t rowsPerBlock = (n + blocks - 1) / blocks;
    columnSumsKernel<<<unsigned(blocks), 128, 0, stream>>>(x, n, d, rowsPerBlock, sums.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    meanKernel<<<unsigned((d + 127) / 128), 128, 0, stream>>>(sums.data(), d, n, mean);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void subtractCentre(const float* x, int64_t n, int d, const float* centre, float* out,
                    cudaStream_t stream) {
    const int64_t total = n * d;
    if (total == 0) return;
    subtractCentreKernel<<<gridStrideBlocks(total, 256), 256, 0, stream>>>(x, total, d, centre, out);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

double centreRows(const float* x, int64_t n, int d, const float* centre, float* out,
                  float* sqNorms, unsigned* scratch, cudaStream_t stream) {
    subtractCentre(x, n, d, centre, out, stream);
    rowSquaredNorms(out, n, d, sqNorms, stream);
    return maxSquaredNorm(out, n, d, sqNorms, scratch, stream);
}

bool CentredCorpus::view(GpuResources* res, int device, cudaStream_t stream, const float* vectors,
                         int64_t nb, int d, double maxSqNorm, CentredView* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!decided_) {
        useful_ = build_(res, device, stream, vectors, nb, d, maxSqNorm);
        decided_ = true;
    }
    if (!useful_) return false;
    out->centre = centre_.data();
    out->vectors = vectors_.data();
    out->sqNorms = sqNorms_.data();
    out->maxSqNorm = maxSqNorm_;
    return true;
}

bool CentredCorpus::build_(GpuResources* res, int device, cudaStream_t stream,
                           const float* vectors, int64_t nb, int d, double maxSqNorm) {
    if (nb < 2 || !(maxSqNorm > 0.0)) return false;
    const size_t bytes = sizeof(float) * (size_t(nb) * d + size_t(nb) + size_t(d));
    size_t freeBytes = 0, totalBytes = 0;
    FAISS_EXT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
    if (double(bytes) > kCopyMemoryShare * double(freeBytes)) return false;
    // The mean and the gain first, in temporary memory: nothing resident is
    // allocated where centring would not pay.
    TempBuffer<float> centre(res, device, size_t(d), stream);
    corpusMean(res, device, stream, vectors, nb, d, centre.data());
    TempBuffer<unsigned> maxBits(res, device, 1, stream);
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(maxBits.data(), 0, sizeof(unsigned), stream));
    const unsigned grid = unsigned(std::min<int64_t>((nb + 7) / 8, 8192));
    centredMaxSqNormKernel<<<grid, 256, 0, stream>>>(vectors, nb, d, centre.data(),
                                                     maxBits.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    unsigned hostBits = 0;
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(&hostBits, maxBits.data(), sizeof(unsigned),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    float estimate = 0.f;
    std::memcpy(&estimate, &hostBits, sizeof(float));
    if (!(double(estimate) <= kCentringGain * maxSqNorm)) return false;  // NaN: not useful either

    // Worth it: resident memory (a failure throws, as every allocation does).
    DeviceVector<float> c, copy, norms;
    c.allocate(res, device, size_t(d), "bounded TF32 search", "the corpus mean");
    copy.allocate(res, device, size_t(nb) * d, "bounded TF32 search", "the centred corpus");
    norms.allocate(res, device, size_t(nb), "bounded TF32 search", "the centred norms");
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(c.data(), centre.data(), sizeof(float) * d,
                                         cudaMemcpyDeviceToDevice, stream));
    // The bound's maximum from the norms the search reads (the estimate
    // above summed in another order).
    const double centredMax = centreRows(vectors, nb, d, c.data(), copy.data(), norms.data(),
                                         maxBits.data(), stream);
    centre_ = std::move(c);
    vectors_ = std::move(copy);
    sqNorms_ = std::move(norms);
    maxSqNorm_ = centredMax;
    return true;
}

void CentredCorpus::invalidate() {
    std::lock_guard<std::mutex> lock(mutex_);
    decided_ = false;
    useful_ = false;
    centre_.release();
    vectors_.release();
    sqNorms_.release();
    maxSqNorm_ = 0.0;
}

}  // namespace gpu
}  // namespace faiss_ext
