// Sorting the selected keys of each row and decoding them to FAISS results.
// Rows of up to kMaxSharedSort keys are sorted by a bitonic network in shared
// memory (one block per row); longer rows by CUB's segmented sort.
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cub/device/device_segmented_sort.cuh>

#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

namespace faiss_ext {
namespace gpu {
namespace select {

namespace {

constexpr int64_t kMaxSharedSort = 4096;

__global__ void bitonicSortRowsKernel(uint64_t* keys, int64_t k, int p) {
    extern __shared__ uint64_t s[];
    uint64_t* row = keys + int64_t(blockIdx.x) * k;
    for (int i = threadIdx.x; i < p; i += blockDim.x) s[i] = i < k ? row[i] : kMaxKey;
    __syncthreads();
    for (int size = 2; size <= p; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < p / 2; i += blockDim.x) {
                int pos = 2 * i - (i & (stride - 1));
                bool ascending = (pos & size) == 0;
                uint64_t a = s[pos], b = s[pos + stride];
                if ((a > b) == ascending) {
                    s[pos] = b;
                    s[pos + stride] = a;
                }
            }
            __syncthreads();
        }
    }
    for (int i = threadIdx.x; i < k; i += blockDim.x) row[i] = s[i];
}

__global__ void rowOffsetsKernel(int64_t* offsets, int64_t rows, int64_t k) {
    int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i <= rows) offsets[i] = i * k;
}

__global__ void decodeKeysKernel(const uint64_t* keys, int64_t keyStride, int64_t rows,
                                 int64_t kk, int64_t k, KeyDecode decode, const float* rowAdd,
                                 float* distances, int64_t* labels) {
    int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * k) return;
    int64_t r = i / k, j = i % k;
    float d;
    int64_t label;
    if (j < kk) {
        uint64_t key = keys[r * keyStride + j];
        float v = keyValue(key);
        label = int64_t(keyIndex(key));
        if (decode == KeyDecode::L2) {
            d = v + (rowAdd ? rowAdd[r] : 0.f);
            d = d < 0.f ? 0.f : d;
        } else if (decode == KeyDecode::Negated) {
            d = -v;
        } else {
            d = v;
        }
    } else {
        label = -1;
        d = decode == KeyDecode::Negated ? -INFINITY : INFINITY;
    }
    if (distances) distances[i] = d;
    if (labels) labels[i] = label;
}

}  // namespace

size_t sortKeyRowsTempBytes(int64_t rows, int64_t k) {
    if (k <= kMaxSharedSort || rows == 0) return 0;
    // CUB's answer depends on the shape and the device only; asking it costs
    // several CUDA calls, and the large-k search asks before every GEMM.
    static std::mutex mutex;
    static std::map<std::tuple<int, int64_t, int64_t>, size_t> known;
    const auto shape = std::make_tuple(getCurrentDevice(), rows, k);
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = known.find(shape);
        if (it != known.end()) return it->second;
    }
    size_t cubBytes = 0;
    FAISS_EXT_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(
            nullptr, cubBytes, (const uint64_t*)nullptr, (uint64_t*)nullptr, rows * k, rows,
            (const int64_t*)nullptr, (const int64_t*)nullptr));
    auto align = [](size_t b) { return (b + 255) & ~size_t(255); };
    const size_t bytes =
            align(cubBytes) + align(sizeof(int64_t) * (rows + 1)) + align(sizeof(uint64_t) * rows * k);
    std::lock_guard<std::mutex> lock(mutex);
    if (known.size() >= 256) known.clear();  // a bound for processes that try many shapes
    known.emplace(shape, bytes);
    return bytes;
}

void sortKeyRows(uint64_t* keys, int64_t rows, int64_t k, void* temp, size_t tempBytes,
                 cudaStream_t stream) {
    if (rows == 0 || k <= 1) return;
    if (k <= kMaxSharedSort) {
        int p = 1;
        while (p < k) p <<= 1;
        int threads = p / 2 < 512 ? (p / 2 < 32 ? 32 : p / 2) : 512;
        FAISS_THROW_IF_NOT(rows < (int64_t(1) << 31));
        bitonicSortRowsKernel<<<unsigned(rows), threads, size_t(p) * sizeof(uint64_t), stream>>>(
                keys, k, p);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        return;
    }
    size_t need = sortKeyRowsTempBytes(rows, k);
    FAISS_THROW_IF_NOT_FMT(temp && tempBytes >= need,
                           "sortKeyRows: %zu bytes of temporary memory needed, %zu given", need,
                           tempBytes);
    auto align = [](size_t b) { return (b + 255) & ~size_t(255); };
    size_t cubBytes = need - align(sizeof(int64_t) * (rows + 1)) - align(sizeof(uint64_t) * rows * k);
    char* base = static_cast<char*>(temp);
    int64_t* offsets = reinterpret_cast<int64_t*>(base + align(cubBytes));
    uint64_t* sorted = reinterpret_cast<uint64_t*>(base + align(cubBytes) +
                                                   align(sizeof(int64_t) * (rows + 1)));
    rowOffsetsKernel<<<unsigned((rows + 1 + 255) / 256), 256, 0, stream>>>(offsets, rows, k);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    FAISS_EXT_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(base, cubBytes, keys, sorted, rows * k,
                                                            rows, offsets, offsets + 1, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(keys, sorted, sizeof(uint64_t) * rows * k,
                                         cudaMemcpyDeviceToDevice, stream));
}

void decodeKeys(const uint64_t* keys, int64_t rows, int64_t kk, int64_t k, KeyDecode decode,
                const float* rowAdd, float* distances, int64_t* labels, cudaStream_t stream,
                int64_t keyStride) {
    int64_t total = rows * k;
    if (total == 0) return;
    decodeKeysKernel<<<unsigned((total + 255) / 256), 256, 0, stream>>>(
            keys, keyStride > 0 ? keyStride : kk, rows, kk, k, decode, rowAdd, distances, labels);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
