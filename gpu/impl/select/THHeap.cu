// GPU side of TH-heap: sampled thresholds, counting and compaction.
#include "faiss_ext/gpu/impl/select/THHeap.h"
#include "faiss_ext/gpu/impl/select/MergeQueue.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>

namespace faiss_ext {
namespace gpu {
namespace select {

namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;

__global__ void gatherSamplesKernel(const float* dist, int64_t ld, const float* colAdd,
                                    int64_t rows, int64_t n, int64_t nS, uint32_t seed,
                                    float* samples) {
    const int64_t stride = n / nS;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < nS;
             i += int64_t(gridDim.x) * blockDim.x) {
            int64_t pos = i * stride + int64_t(hashMix(uint32_t(i) * 2654435761u ^ seed) % uint64_t(stride));
            samples[row * nS + i] = dist[row * ld + pos] + (colAdd ? colAdd[pos] : 0.f);
        }
    }
}

__global__ void thresholdsFromSortedKernel(const uint64_t* run, int64_t rows, int64_t k,
                                           uint32_t* thresholds) {
    int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r < rows) thresholds[r] = uint32_t(run[r * k + k - 1] >> 32);
}

__global__ void thresholdsFromUnsortedKernel(const uint64_t* keys, int64_t rows, int64_t k,
                                             uint32_t* thresholds) {
    const int lane = threadIdx.x & 31;
    int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    if (r >= rows) return;
    uint32_t m = 0;
    for (int64_t j = lane; j < k; j += 32) m = max(m, uint32_t(keys[r * k + j] >> 32));
    for (int s = 16; s >= 1; s >>= 1) m = max(m, __shfl_xor_sync(kFull, m, s));
    if (lane == 0) thresholds[r] = m;
}

__global__ void countKernel(const float* dist, int64_t ld, const float* colAdd, int64_t rows,
                            int64_t n, const uint32_t* thresholds, unsigned long long* counts) {
    const int lane = threadIdx.x & 31;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const uint32_t t = thresholds[row];
        const float* d = dist + row * ld;
        unsigned c = 0;
        for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < n;
             j += int64_t(gridDim.x) * blockDim.x) {
            c += orderedFloatBits(d[j] + (colAdd ? colAdd[j] : 0.f)) <= t;
        }
        for (int s = 16; s >= 1; s >>= 1) c += __shfl_xor_sync(kFull, c, s);
        if (lane == 0 && c) atomicAdd(counts + row, (unsigned long long)c);
    }
}

__global__ void compactKernel(const float* dist, int64_t ld, const float* colAdd, uint32_t colBase,
                              int64_t r0, int64_t r1, int64_t n, const uint32_t* thresholds,
                              const int64_t* offsets, uint64_t* out, unsigned long long* cursor) {
    const int lane = threadIdx.x & 31;
    const unsigned ltMask = (1u << lane) - 1;
    const int64_t base0 = offsets[r0];
    for (int64_t row = r0 + blockIdx.y; row < r1; row += gridDim.y) {
        const uint32_t t = thresholds[row];
        const float* d = dist + row * ld;
        uint64_t* o = out + (offsets[row] - base0);
        // Whole warps iterate together so that the ballot sees every lane.
        for (int64_t j0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) & ~int64_t(31); j0 < n;
             j0 += int64_t(gridDim.x) * blockDim.x) {
            int64_t j = j0 + lane;
            uint32_t ob = 0xFFFFFFFFu;
            bool pass = false;
            if (j < n) {
                ob = orderedFloatBits(d[j] + (colAdd ? colAdd[j] : 0.f));
                pass = ob <= t;
            }
            unsigned m = __ballot_sync(kFull, pass);
            if (m == 0) continue;
            unsigned long long pos = 0;
            if (lane == 0) pos = atomicAdd(cursor + (row - r0), (unsigned long long)__popc(m));
            pos = __shfl_sync(kFull, pos, 0);
            if (pass) o[pos + __popc(m & ltMask)] = (uint64_t(ob) << 32) | (colBase + uint32_t(j));
        }
    }
}

dim3 rowGrid(int64_t rows, int64_t n, int threads) {
    unsigned gy = unsigned(std::min<int64_t>(std::max<int64_t>(rows, 1), 65535));
    int64_t gx = std::min<int64_t>((n + threads - 1) / threads, std::max<int64_t>(1, 8192 / gy));
    return dim3(unsigned(std::max<int64_t>(gx, 1)), gy);
}

}  // namespace

size_t thSampleScratchBytes(int64_t rows, int64_t nS, int64_t k) {
    size_t b = align256(sizeof(float) * size_t(rows) * nS);
    if (k <= kMergeQueueMaxK) {
        b += align256(sizeof(uint64_t) * size_t(rows) * k) +
             align256(mergeQueueScratchBytes(rows, nS, k, 4));
    } else {
        b += align256(sizeof(uint64_t) * size_t(rows) * k) +
             2 * align256(sizeof(uint64_t) * size_t(rows) * nS);
    }
    return b;
}

void thSampleThresholds(const float* dist, int64_t ld, const float* colAdd, int64_t rows,
                        int64_t n, int64_t k, int64_t nS, uint32_t seed, uint32_t* thresholds,
                        void* scratch, size_t scratchBytes, cudaStream_t stream) {
    FAISS_THROW_IF_NOT_FMT(k >= 1 && k <= nS && nS <= n,
                           "TH-heap sampling: need 1 <= k (%lld) <= samples (%lld) <= n (%lld)",
                           (long long)k, (long long)nS, (long long)n);
    FAISS_THROW_IF_NOT_MSG(scratchBytes >= thSampleScratchBytes(rows, nS, k),
                           "TH-heap sampling: scratch too small");
    if (rows == 0) return;
    char* base = static_cast<char*>(scratch);
    base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + 255) & ~uintptr_t(255));
    float* samples = reinterpret_cast<float*>(base);
    base += align256(sizeof(float) * size_t(rows) * nS);
    uint64_t* sel = reinterpret_cast<uint64_t*>(base);
    base += align256(sizeof(uint64_t) * size_t(rows) * k);
    gatherSamplesKernel<<<rowGrid(rows, nS, 256), 256, 0, stream>>>(dist, ld, colAdd, rows, n, nS,
                                                                     seed, samples);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    if (k <= kMergeQueueMaxK) {
        MergeQueueArgs a;
        a.dist = samples;
        a.ld = nS;
        a.n = nS;
        a.rows = rows;
        a.k = k;
        a.run = sel;
        a.runStride = k;
        a.group = 4;
        a.scratch = base;
        a.scratchBytes = mergeQueueScratchBytes(rows, nS, k, 4);
        mergeQueueSelect(a, stream);
        thresholdsFromSortedKernel<<<unsigned((rows + 255) / 256), 256, 0, stream>>>(sel, rows, k,
                                                                                      thresholds);
    } else {
        SelectArgs a;
        a.dist = samples;
        a.ld = nS;
        a.n = nS;
        a.rows = rows;
        a.k = k;
        a.out = sel;
        a.outStride = k;
        a.aux1 = reinterpret_cast<uint64_t*>(base);
        a.aux2 = reinterpret_cast<uint64_t*>(base + align256(sizeof(uint64_t) * size_t(rows) * nS));
        a.auxStride = nS;
        quickMultiSelect(a, stream);
        thresholdsFromUnsortedKernel<<<unsigned((rows * 32 + 255) / 256), 256, 0, stream>>>(
                sel, rows, k, thresholds);
    }
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void thCountRows(const float* dist, int64_t ld, const float* colAdd, int64_t rows, int64_t n,
                 const uint32_t* thresholds, unsigned long long* counts, cudaStream_t stream) {
    if (rows == 0) return;
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(unsigned long long) * rows, stream));
    countKernel<<<rowGrid(rows, n, 256), 256, 0, stream>>>(dist, ld, colAdd, rows, n, thresholds,
                                                           counts);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void thCompactRows(const float* dist, int64_t ld, const float* colAdd, uint32_t colBase,
                   int64_t r0, int64_t r1, int64_t n, const uint32_t* thresholds,
                   const int64_t* offsets, uint64_t* out, unsigned long long* cursor,
                   cudaStream_t stream) {
    if (r1 <= r0) return;
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(cursor, 0, sizeof(unsigned long long) * (r1 - r0), stream));
    compactKernel<<<rowGrid(r1 - r0, n, 256), 256, 0, stream>>>(dist, ld, colAdd, colBase, r0, r1, n,
                                                                thresholds, offsets, out, cursor);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
