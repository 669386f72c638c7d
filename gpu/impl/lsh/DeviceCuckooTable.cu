// The GPU cuckoo hash table (see DeviceCuckooTable.h): Alcantara et al.'s
// parallel insert, one thread per key.
#include "faiss_ext/gpu/impl/lsh/DeviceCuckooTable.h"

#include "faiss_ext/CuckooHashTable.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <utility>

namespace faiss_ext {
namespace gpu {
namespace lsh_impl {

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

DeviceCuckooTable::~DeviceCuckooTable() { clear(); }

size_t DeviceCuckooTable::countRepeatedKeys(const uint64_t* deviceKeys, size_t n,
                                             cudaStream_t stream) {
    if (n < 2) return 0;
    DeviceVector<uint64_t> sorted;
    DeviceVector<char> temp;
    DeviceVector<int> count;
    size_t tempBytes = 0;
    int h = 0;
    cudaError_t e = cub::DeviceRadixSort::SortKeys(nullptr, tempBytes, deviceKeys,
                                                   static_cast<uint64_t*>(nullptr), n, 0, 64,
                                                   stream);
    if (e == cudaSuccess) e = sorted.tryAllocate(n);
    if (e == cudaSuccess) e = temp.tryAllocate(std::max<size_t>(tempBytes, 1));
    if (e == cudaSuccess) e = count.tryAllocate(1);
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortKeys(temp.data(), tempBytes, deviceKeys, sorted.data(), n, 0,
                                           64, stream);
    if (e == cudaSuccess) e = cudaMemsetAsync(count.data(), 0, sizeof(int), stream);
    if (e == cudaSuccess) {
        countAdjacentEqualKernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(sorted.data(), n,
                                                                                count.data());
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&h, count.data(), sizeof(int), cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    sorted.release();
    temp.release();
    count.release();
    FAISS_EXT_CUDA_CHECK(e);
    return size_t(h);
}

void DeviceCuckooTable::clear() {
    keys_.release();
    slots_.release();
    n_ = 0;
    subSize_ = 0;
    subTables_ = 0;
    attempts_ = growths_ = 0;
}

void DeviceCuckooTable::swap(DeviceCuckooTable& o) noexcept {
    keys_.swap(o.keys_);
    slots_.swap(o.slots_);
    std::swap(n_, o.n_);
    std::swap(subSize_, o.subSize_);
    std::swap(subTables_, o.subTables_);
    for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s) std::swap(seeds_[s], o.seeds_[s]);
    std::swap(attempts_, o.attempts_);
    std::swap(growths_, o.growths_);
}

lsh::CuckooView DeviceCuckooTable::view() const {
    lsh::CuckooView v;
    v.slots = slots_.data();
    v.keys = keys_.data();
    v.subSize = subSize_;
    v.subTables = subTables_;
    for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s) v.seeds[s] = seeds_[s];
    return v;
}

void DeviceCuckooTable::buildFromHost(const uint64_t* keys, size_t n, int subTables,
                                       float maxLoad, uint64_t seed, cudaStream_t stream,
                                       int maxAttempts) {
    FAISS_THROW_IF_NOT_MSG(n == 0 || keys, "GpuCuckooHashTable: null keys");
    DeviceVector<uint64_t> d;
    if (n > 0) {
        FAISS_EXT_CUDA_CHECK(d.tryAllocate(n));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(d.data(), keys, n * sizeof(uint64_t),
                                             cudaMemcpyHostToDevice, stream));
    }
    build(d.data(), n, subTables, maxLoad, seed, stream, maxAttempts);
}

void DeviceCuckooTable::build(const uint64_t* deviceKeys, size_t n, int subTables, float maxLoad,
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

    // the new table is built aside (freed on failure); the table changes only at the end
    DeviceVector<uint64_t> keys;
    DeviceVector<uint32_t> slots;
    DeviceVector<int> flag;
    FAISS_EXT_CUDA_CHECK(flag.tryAllocate(1));
    if (n > 0) {
        FAISS_EXT_CUDA_CHECK(keys.tryAllocate(n));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(keys.data(), deviceKeys, n * sizeof(uint64_t),
                                             cudaMemcpyDeviceToDevice, stream));
        const size_t dup = countRepeatedKeys(keys.data(), n, stream);
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
        slots.release();
        FAISS_EXT_CUDA_CHECK(slots.tryAllocate(subSize * subTables));
        bool ok = false;
        for (int a = 0; a < maxAttempts && !ok; ++a) {
            const int attempt = attempts++;
            for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s)
                seeds.s[s] = s < subTables ? lsh::cuckooSubSeed(seed, attempt, s) : 0;
            FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(slots.data(), 0,
                                                 subSize * subTables * sizeof(uint32_t), stream));
            FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(flag.data(), 0, sizeof(int), stream));
            if (n > 0) {
                cuckooInsertKernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(
                    keys.data(), n, slots.data(), uint32_t(subSize), subTables, seeds, chain,
                    flag.data());
                FAISS_EXT_CUDA_CHECK_LAUNCH();
            }
            int failed = 0;
            FAISS_EXT_CUDA_CHECK(
                cudaMemcpyAsync(&failed, flag.data(), sizeof(int), cudaMemcpyDeviceToHost, stream));
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
            ok = failed == 0;
        }
        if (ok) break;
        subSize = subSize + std::max<uint64_t>(1, subSize / 20);
        ++growths;
    }
    flag.release();
    clear();
    keys_ = std::move(keys);
    slots_ = std::move(slots);
    n_ = n;
    subSize_ = uint32_t(subSize);
    subTables_ = subTables;
    for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s) seeds_[s] = seeds.s[s];
    attempts_ = attempts;
    growths_ = growths;
}

void DeviceCuckooTable::find(const uint64_t* deviceKeys, size_t n, int64_t* deviceOut,
                              cudaStream_t stream) const {
    if (n == 0) return;
    cuckooFindKernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(view(), deviceKeys, n, deviceOut);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

std::vector<int64_t> DeviceCuckooTable::findHost(const std::vector<uint64_t>& keys,
                                                  cudaStream_t stream) const {
    std::vector<int64_t> out(keys.size());
    if (keys.empty()) return out;
    DeviceVector<uint64_t> dk;
    DeviceVector<int64_t> dout;
    cudaError_t e = dk.tryAllocate(keys.size());
    if (e == cudaSuccess) e = dout.tryAllocate(keys.size());
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dk.data(), keys.data(), keys.size() * sizeof(uint64_t),
                            cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) {
        cuckooFindKernel<<<unsigned((keys.size() + 255) / 256), 256, 0, stream>>>(
                view(), dk.data(), keys.size(), dout.data());
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(out.data(), dout.data(), keys.size() * sizeof(int64_t),
                            cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    dk.release();
    dout.release();
    FAISS_EXT_CUDA_CHECK(e);
    return out;
}

}  // namespace lsh_impl
}  // namespace gpu
}  // namespace faiss_ext
