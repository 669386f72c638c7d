// k-means on the device (see DeviceKMeans.h), shared by the residual
// corpus's build and the search graph's probe lists.
#include <algorithm>

#include "faiss_ext/gpu/impl/flat/DeviceKMeans.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

constexpr int kLloydIterations = 8;
/// Sample rows per partition for the Lloyd iterations: enough for the
/// centres of well-separated clusters, small enough that the iterations
/// cost little next to the one assignment of every row.
constexpr int64_t kSamplePerPartition = 64;
constexpr int kWarpsPerBlock = 8;  // the warp-per-row kernel: 256 threads
constexpr unsigned kFullMask = 0xFFFFFFFFu;

using Build = KMeansJob;

/// The row of x behind sample index i of `count` evenly strided ones
/// (count == nb: row i itself).
__device__ __forceinline__ int64_t sampleRow(int64_t i, int64_t nb, int64_t count) {
    return int64_t((uint64_t(i) * uint64_t(nb)) / uint64_t(count));
}

/// out (n x d) = sample rows c0 .. c0 + n of `count`, minus the mean.
__global__ void gatherCentredKernel(const float* x, int64_t nb, int64_t count, int64_t c0,
                                    int64_t n, int d, const float* mean, float* out) {
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n * d;
         t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = t / d;
        const int j = int(t - i * d);
        out[t] = x[sampleRow(c0 + i, nb, count) * d + j] - mean[j];
    }
}

/// Centre p = sample row p * (count / P) minus the mean: P distinct rows
/// spread over the sample (count >= P).
__global__ void initCentresKernel(const float* x, int64_t nb, int64_t count, int64_t P, int d,
                                  const float* mean, float* centres) {
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < P * d;
         t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t p = t / d;
        const int j = int(t - p * d);
        centres[t] = x[sampleRow(p * (count / P), nb, count) * d + j] - mean[j];
    }
}

/// assign[r] = argmin_p |c_p|^2 + dots[r][p] (dots = -2 x.c), one warp per
/// row; ties and NaN keep the lowest index.
__global__ void nearestCentreKernel(const float* dots, int64_t n, int P, const float* norms,
                                    int32_t* assign) {
    const int lane = threadIdx.x & 31;
    for (int64_t r = firstWarpRow(); r < n; r += gridWarps()) {
        float best = infinity();
        int bestP = P;
        for (int p = lane; p < P; p += 32) {
            const float v = norms[p] + dots[r * P + p];
            if (v < best) {
                best = v;
                bestP = p;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_down_sync(kFullMask, best, o);
            const int op = __shfl_down_sync(kFullMask, bestP, o);
            if (ov < best || (ov == best && op < bestP)) {
                best = ov;
                bestP = op;
            }
        }
        if (lane == 0) assign[r] = bestP < P ? bestP : 0;
    }
}

/// sums[assign[i]] += row i of rows (n x d); counts[assign[i]] += 1.
__global__ void accumulateKernel(const float* rows, int64_t n, int d, const int32_t* assign,
                                 double* sums, unsigned* counts) {
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n * d;
         t += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = t / d;
        const int j = int(t - i * d);
        const int64_t p = assign[i];
        atomicAdd(&sums[p * d + j], double(rows[t]));
        if (j == 0) atomicAdd(&counts[p], 1u);
    }
}

/// Centre = mean of its rows; an empty partition keeps its centre.
__global__ void updateCentresKernel(const double* sums, const unsigned* counts, int64_t P, int d,
                                    float* centres) {
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < P * d;
         t += int64_t(gridDim.x) * blockDim.x) {
        const unsigned c = counts[t / d];
        if (c > 0) centres[t] = float(sums[t] / double(c));
    }
}

/// Two events that order work between two streams, destroyed on scope exit.
struct EventPair {
    cudaEvent_t e[2] = {nullptr, nullptr};
    EventPair() {
        FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&e[0], cudaEventDisableTiming));
        const cudaError_t err = cudaEventCreateWithFlags(&e[1], cudaEventDisableTiming);
        if (err != cudaSuccess) cudaEventDestroy(e[0]);
        FAISS_EXT_CUDA_CHECK(err);
    }
    ~EventPair() {
        for (cudaEvent_t ev : e) {
            if (ev) cudaEventDestroy(ev);
        }
    }
    EventPair(const EventPair&) = delete;
    EventPair& operator=(const EventPair&) = delete;
};

/// dots (n x P) = -2 rows . centres in plain FP32. The handle runs on the
/// resources' default stream (GpuResources.h), which is what callers pass
/// as `stream`; where they pass another, events order the GEMM after the
/// work queued on `stream` and that stream's later work after it (the
/// shared handle is not rebound: other searches use it).
void centreProducts(const Build& b, const float* rows, int64_t n, const float* centres,
                    float* dots) {
    cublasHandle_t blas = b.res->getBlasHandle(b.device);
    cudaStream_t blasStream = nullptr;
    FAISS_EXT_CUBLAS_CHECK(cublasGetStream(blas, &blasStream));
    if (blasStream == b.stream) {
        gemmDotProducts(blas, rows, n, centres, b.P, b.d, -2.f, dots, b.P);
        return;
    }
    EventPair ev;
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(ev.e[0], b.stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(blasStream, ev.e[0], 0));
    gemmDotProducts(blas, rows, n, centres, b.P, b.d, -2.f, dots, b.P);
    FAISS_EXT_CUDA_CHECK(cudaEventRecord(ev.e[1], blasStream));
    FAISS_EXT_CUDA_CHECK(cudaStreamWaitEvent(b.stream, ev.e[1], 0));
}

}  // namespace

/// assign[i] = the centre nearest to sample row i of `count` minus the
/// mean (count == nb: every row), by |c|^2 - 2 x.c, in chunks of rows that
/// fit in a quarter of the free temporary memory; with sums / counts, each
/// row is also added to its centre's sums (a Lloyd step).
void assignNearest(const KMeansJob& b, int64_t count, const float* mean, const float* centres,
                   int32_t* assign, double* sums, unsigned* counts) {
    TempBuffer<float> norms(b.res, b.device, size_t(b.P), b.stream);
    rowSquaredNorms(centres, b.P, b.d, norms.data(), b.stream);
    const int64_t rowBytes = int64_t(sizeof(float)) * (b.d + b.P);
    const int64_t fit = int64_t(b.res->getTempMemoryAvailable(b.device) / 4) / rowBytes;
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>({count, fit, INT32_MAX}));
    TempBuffer<float> rows(b.res, b.device, size_t(chunk) * b.d, b.stream);
    TempBuffer<float> dots(b.res, b.device, size_t(chunk) * b.P, b.stream);
    for (int64_t c0 = 0; c0 < count; c0 += chunk) {
        const int64_t n = std::min(chunk, count - c0);
        gatherCentredKernel<<<gridStrideBlocks(n * b.d), 256, 0, b.stream>>>(
            b.x, b.nb, count, c0, n, b.d, mean, rows.data());
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        centreProducts(b, rows.data(), n, centres, dots.data());
        nearestCentreKernel<<<gridStrideBlocks(n, kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
                              b.stream>>>(dots.data(), n, int(b.P), norms.data(), assign + c0);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        if (!sums) continue;
        accumulateKernel<<<gridStrideBlocks(n * b.d), 256, 0, b.stream>>>(
            rows.data(), n, b.d, assign + c0, sums, counts);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
}

/// centres (P x d) = k-means centres of x - mean: kLloydIterations Lloyd
/// steps on min(nb, 64 P) strided sample rows, from P of them.
void kmeansCentres(const KMeansJob& b, const float* mean, float* centres) {
    const int64_t count = std::min(b.nb, kSamplePerPartition * b.P);
    const int64_t total = b.P * b.d;
    initCentresKernel<<<gridStrideBlocks(total), 256, 0, b.stream>>>(b.x, b.nb, count, b.P, b.d,
                                                                     mean, centres);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    TempBuffer<int32_t> assign(b.res, b.device, size_t(count), b.stream);
    TempBuffer<double> sums(b.res, b.device, size_t(total), b.stream);
    TempBuffer<unsigned> counts(b.res, b.device, size_t(b.P), b.stream);
    for (int it = 0; it < kLloydIterations; ++it) {
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(sums.data(), 0, sizeof(double) * total, b.stream));
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, sizeof(unsigned) * b.P, b.stream));
        assignNearest(b, count, mean, centres, assign.data(), sums.data(), counts.data());
        updateCentresKernel<<<gridStrideBlocks(total), 256, 0, b.stream>>>(
            sums.data(), counts.data(), b.P, b.d, centres);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace gpu
}  // namespace faiss_ext
