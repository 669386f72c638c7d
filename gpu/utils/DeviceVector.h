// A resident device allocation that frees itself.
//
// Device memory in faiss_ext has two lifetimes, each with one type:
//   - resident data (index storage, graphs, tables, trained models), kept as
//     long as its owner: DeviceVector<T>, allocated through deviceMalloc
//     (utils/DeviceUtils.h), so that it is counted by getDeviceMemoryStats
//     and fails on demand under setAllocFailureInjection;
//   - scratch memory of one call, ordered on a stream: TempBuffer<T>
//     (GpuResources.h), from GpuResources::allocTemp, the resources'
//     stream-ordered pool with its limit.
// Pinned host memory for staging transfers comes from the resources too
// (GpuResources::getPinnedMemory).
#pragma once

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cuda_runtime_api.h>
#include <faiss/impl/FaissAssert.h>

#include <cstddef>
#include <utility>

namespace faiss_ext {
namespace gpu {

/// count elements of T on the current device at allocate() time, freed by
/// the destructor or release(); movable, not copyable.
template <typename T>
class DeviceVector {
public:
    DeviceVector() = default;
    ~DeviceVector() { release(); }
    DeviceVector(const DeviceVector&) = delete;
    DeviceVector& operator=(const DeviceVector&) = delete;
    DeviceVector(DeviceVector&& o) noexcept { swap(o); }
    DeviceVector& operator=(DeviceVector&& o) noexcept {
        swap(o);
        return *this;
    }
    /// Exchanges the allocations of two vectors.
    void swap(DeviceVector& o) noexcept {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
    }
    /// Allocates count elements on the current device (freeing any previous
    /// ones); throws "<who>: out of device memory ... for <what>" on failure.
    void allocate(size_t count, const char* who, const char* what) {
        release();
        if (count == 0) return;
        cudaError_t err = deviceMalloc(&p_, count * sizeof(T));
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            p_ = nullptr;
            FAISS_THROW_FMT("%s: out of device memory allocating %zu bytes for %s (%s); nothing "
                            "was changed",
                            who, count * sizeof(T), what, cudaGetErrorString(err));
        }
        n_ = count;
    }
    /// Frees the memory (no-op when empty).
    void release() {
        if (p_) deviceFree(p_);
        p_ = nullptr;
        n_ = 0;
    }
    /// Device pointer (null when empty).
    T* data() const { return p_; }
    /// Number of elements.
    size_t size() const { return n_; }

private:
    T* p_ = nullptr;
    size_t n_ = 0;
};

}  // namespace gpu
}  // namespace faiss_ext
