// GPU cuckoo hash table (see GpuCuckooHashTable.h): Alcantara et al.'s
// parallel insert, one thread per key.
#include "faiss_ext/gpu/GpuCuckooHashTable.h"

#include "faiss_ext/CuckooHashTable.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>

namespace faiss_ext {
namespace gpu {

namespace {

struct Seeds {
    uint64_t s[lsh::kMaxCuckooSubTables];
};

/// Inserts key i (slot entry i + 1). A thread that needs more than maxChain
/// evictions sets *failed; the table is then rebuilt by the host.
__global__ void cuckooInsertKernel(const uint64_t* __restrict__ keys, size_t n,
                                   uint32_t* __restrict__ slots, uint32_t subSize, int subTables,
                                   Seeds seeds, int maxChain, int* failed) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t cur = uint32_t(i) + 1;
    int sub = 0;
    for (int step = 0; step <= maxChain; ++step) {
        const uint32_t slot = lsh::cuckooSlot(keys[cur - 1], seeds.s[sub], subSize);
        cur = atomicExch(&slots[size_t(sub) * subSize + slot], cur);
        if (cur == 0) return;
        sub = sub + 1 == subTables ? 0 : sub + 1;
        if (*(volatile int*)failed) return;  // another chain failed: the build restarts
    }
    atomicExch(failed, 1);
}

__global__ void cuckooFindKernel(lsh::CuckooView view, const uint64_t* __restrict__ keys,
                                 size_t n, int64_t* __restrict__ out) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = view.find(keys[i]);
}

__global__ void countAdjacentEqualKernel(const uint64_t* sorted, size_t n, int* count) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i + 1 < n && sorted[i] == sorted[i + 1]) atomicAdd(count, 1);
}

}  // namespace

GpuCuckooHashTable::~GpuCuckooHashTable() { clear(); }

size_t GpuCuckooHashTable::countRepeatedKeys(const uint64_t* deviceKeys, size_t n,
                                             cudaStream_t stream) {
    if (n < 2) return 0;
    uint64_t* sorted = nullptr;
    void* temp = nullptr;
    int* count = nullptr;
    size_t tempBytes = 0;
    int h = 0;
    cudaError_t e = cub::DeviceRadixSort::SortKeys(nullptr, tempBytes, deviceKeys, sorted, n, 0, 64,
                                                   stream);
    if (e == cudaSuccess) e = deviceMalloc(&sorted, n * sizeof(uint64_t));
    if (e == cudaSuccess) e = deviceMalloc(&temp, std::max<size_t>(tempBytes, 1));
    if (e == cudaSuccess) e = deviceMalloc(&count, sizeof(int));
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortKeys(temp, tempBytes, deviceKeys, sorted, n, 0, 64, stream);
    if (e == cudaSuccess) e = cudaMemsetAsync(count, 0, sizeof(int), stream);
    if (e == cudaSuccess) {
        countAdjacentEqualKernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(sorted, n, count);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&h, count, sizeof(int), cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (sorted) deviceFree(sorted);
    if (temp) deviceFree(temp);
    if (count) deviceFree(count);
    FAISS_EXT_CUDA_CHECK(e);
    return size_t(h);
}

void GpuCuckooHashTable::clear() {
    if (keys_) deviceFree(keys_);
    if (slots_) deviceFree(slots_);
    keys_ = nullptr;
    slots_ = nullptr;
    n_ = 0;
    subSize_ = 0;
    subTables_ = 0;
    attempts_ = growths_ = 0;
}

void GpuCuckooHashTable::swap(GpuCuckooHashTable& o) noexcept {
    std::swap(keys_, o.keys_);
    std::swap(slots_, o.slots_);
    std::swap(n_, o.n_);
    std::swap(subSize_, o.subSize_);
    std::swap(subTables_, o.subTables_);
    for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s) std::swap(seeds_[s], o.seeds_[s]);
    std::swap(attempts_, o.attempts_);
    std::swap(growths_, o.growths_);
}

lsh::CuckooView GpuCuckooHashTable::view() const {
    lsh::CuckooView v;
    v.slots = slots_;
    v.keys = keys_;
    v.subSize = subSize_;
    v.subTables = subTables_;
    for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s) v.seeds[s] = seeds_[s];
    return v;
}

void GpuCuckooHashTable::buildFromHost(const uint64_t* keys, size_t n, int subTables,
                                       float maxLoad, uint64_t seed, cudaStream_t stream,
                                       int maxAttempts) {
    FAISS_THROW_IF_NOT_MSG(n == 0 || keys, "GpuCuckooHashTable: null keys");
    uint64_t* d = nullptr;
    if (n > 0) {
        FAISS_EXT_CUDA_CHECK(deviceMalloc(&d, n * sizeof(uint64_t)));
        cudaError_t e = cudaMemcpyAsync(d, keys, n * sizeof(uint64_t), cudaMemcpyHostToDevice, stream);
        if (e != cudaSuccess) {
            deviceFree(d);
            FAISS_EXT_CUDA_CHECK(e);
        }
    }
    try {
        build(d, n, subTables, maxLoad, seed, stream, maxAttempts);
    } catch (...) {
        if (d) deviceFree(d);
        throw;
    }
    if (d) deviceFree(d);
}

void GpuCuckooHashTable::build(const uint64_t* deviceKeys, size_t n, int subTables, float maxLoad,
                               uint64_t seed, cudaStream_t stream, int maxAttempts) {
    FAISS_THROW_IF_NOT_FMT(subTables >= 2 && subTables <= lsh::kMaxCuckooSubTables,
                           "GpuCuckooHashTable: subTables must be in [2, %d], got %d",
                           lsh::kMaxCuckooSubTables, subTables);
    FAISS_THROW_IF_NOT_FMT(maxLoad > 0.f && maxLoad < 1.f,
                           "GpuCuckooHashTable: maxLoad must be in (0, 1), got %g",
                           double(maxLoad));
    FAISS_THROW_IF_NOT_FMT(maxAttempts >= 1,
                           "GpuCuckooHashTable: maxAttempts must be >= 1, got %d", maxAttempts);
    FAISS_THROW_IF_NOT_FMT(n < (size_t(1) << 32) - 1,
                           "GpuCuckooHashTable: at most 2^32 - 2 keys, got %zu", n);
    FAISS_THROW_IF_NOT_MSG(n == 0 || deviceKeys, "GpuCuckooHashTable: null keys");

    uint64_t* keys = nullptr;
    uint32_t* slots = nullptr;
    int* flag = nullptr;
    auto freeAll = [&]() {
        if (keys) deviceFree(keys);
        if (slots) deviceFree(slots);
        if (flag) deviceFree(flag);
        keys = nullptr;
        slots = nullptr;
        flag = nullptr;
    };
    try {
        FAISS_EXT_CUDA_CHECK(deviceMalloc(&flag, sizeof(int)));
        if (n > 0) {
            FAISS_EXT_CUDA_CHECK(deviceMalloc(&keys, n * sizeof(uint64_t)));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(keys, deviceKeys, n * sizeof(uint64_t),
                                                 cudaMemcpyDeviceToDevice, stream));
            const size_t dup = countRepeatedKeys(keys, n, stream);
            FAISS_THROW_IF_NOT_MSG(dup == 0, "GpuCuckooHashTable: keys must be distinct");
        }
        const double want = std::ceil(double(n) / double(maxLoad) / subTables);
        uint64_t subSize = std::max<uint64_t>(1, uint64_t(want));
        const int chain = CuckooHashTable::maxChain(n);
        int attempts = 0, growths = 0;
        Seeds seeds = {};
        for (;;) {
            FAISS_THROW_IF_NOT_FMT(subSize * subTables < (uint64_t(1) << 36),
                                   "GpuCuckooHashTable: cannot place %zu keys", n);
            if (slots) deviceFree(slots);
            slots = nullptr;
            FAISS_EXT_CUDA_CHECK(deviceMalloc(&slots, subSize * subTables * sizeof(uint32_t)));
            bool ok = false;
            for (int a = 0; a < maxAttempts && !ok; ++a) {
                const int attempt = attempts++;
                for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s)
                    seeds.s[s] = s < subTables ? lsh::cuckooSubSeed(seed, attempt, s) : 0;
                FAISS_EXT_CUDA_CHECK(
                    cudaMemsetAsync(slots, 0, subSize * subTables * sizeof(uint32_t), stream));
                FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), stream));
                if (n > 0) {
                    cuckooInsertKernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(
                        keys, n, slots, uint32_t(subSize), subTables, seeds, chain, flag);
                    FAISS_EXT_CUDA_CHECK_LAUNCH();
                }
                int failed = 0;
                FAISS_EXT_CUDA_CHECK(
                    cudaMemcpyAsync(&failed, flag, sizeof(int), cudaMemcpyDeviceToHost, stream));
                FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
                ok = failed == 0;
            }
            if (ok) break;
            subSize = subSize + std::max<uint64_t>(1, subSize / 20);
            ++growths;
        }
        deviceFree(flag);
        flag = nullptr;
        clear();
        keys_ = keys;
        slots_ = slots;
        keys = nullptr;
        slots = nullptr;
        n_ = n;
        subSize_ = uint32_t(subSize);
        subTables_ = subTables;
        for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s) seeds_[s] = seeds.s[s];
        attempts_ = attempts;
        growths_ = growths;
    } catch (...) {
        freeAll();
        throw;
    }
}

void GpuCuckooHashTable::find(const uint64_t* deviceKeys, size_t n, int64_t* deviceOut,
                              cudaStream_t stream) const {
    if (n == 0) return;
    cuckooFindKernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(view(), deviceKeys, n, deviceOut);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

std::vector<int64_t> GpuCuckooHashTable::findHost(const std::vector<uint64_t>& keys,
                                                  cudaStream_t stream) const {
    std::vector<int64_t> out(keys.size());
    if (keys.empty()) return out;
    uint64_t* dk = nullptr;
    int64_t* dout = nullptr;
    cudaError_t e = deviceMalloc(&dk, keys.size() * sizeof(uint64_t));
    if (e == cudaSuccess) e = deviceMalloc(&dout, keys.size() * sizeof(int64_t));
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dk, keys.data(), keys.size() * sizeof(uint64_t), cudaMemcpyHostToDevice,
                            stream);
    if (e == cudaSuccess) {
        cuckooFindKernel<<<unsigned((keys.size() + 255) / 256), 256, 0, stream>>>(view(), dk,
                                                                                  keys.size(), dout);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(out.data(), dout, keys.size() * sizeof(int64_t), cudaMemcpyDeviceToHost,
                            stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (dk) deviceFree(dk);
    if (dout) deviceFree(dout);
    FAISS_EXT_CUDA_CHECK(e);
    return out;
}

}  // namespace gpu
}  // namespace faiss_ext
