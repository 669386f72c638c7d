// A resident device allocation that frees itself; and the one place that
// tells how faiss_ext holds memory.
//
// Device memory has two lifetimes, each with one type, both handed out by
// the GpuResources:
//   - resident data (index storage, graphs, tables, trained models), kept as
//     long as its owner: DeviceVector<T>. Given a GpuResources* it allocates
//     through GpuResources::allocResident / freeResident, whose default is
//     deviceMalloc / deviceFree (utils/DeviceUtils.h): counted by
//     getDeviceMemoryStats, failing on demand under setAllocFailureInjection,
//     outside the temporary memory limit. Code that holds no resources
//     (GpuCuckooHashTable, the free helpers of impl/VectorPrep and
//     impl/graph/HalfVectors, the LSH build and search engines) uses the
//     resource-less form, which calls deviceMalloc / deviceFree itself on
//     the current device: the same memory, counting and failure injection as
//     the default resources, so the two forms differ only for a GpuResources
//     subclass that overrides allocResident. Nothing else in faiss_ext calls
//     cudaMalloc or deviceMalloc directly.
//   - scratch memory of one call, ordered on a stream: TempBuffer<T>
//     (GpuResources.h), from GpuResources::allocTemp, the resources'
//     stream-ordered pool with its limit.
// Pinned host memory:
//   - staging of host input and output: the resources' one buffer
//     (GpuResources::getPinnedMemory, under getPinnedMemoryMutex);
//   - vectors that Auto / Host storage keeps on the host (FlatStorage):
//     cudaHostAlloc blocks owned by the storage, sized like the data;
//   - TH-heap's host-side candidate lists (impl/flat/RowSelector.cpp): a
//     process-wide cache of pinned blocks, PinnedCache, kept apart from the
//     resources' buffer on purpose. A search with host queries holds the
//     buffer's mutex (GpuIndex::searchPagedHostInput_) while the selection
//     runs inside it, so TH-heap taking the same mutex would deadlock, and
//     sharing the buffer without it would overwrite the staged queries.
//     TH-heap also needs up to six blocks at once, double-buffered and sized
//     by rows x kept keys (growing during a search), where the resources'
//     buffer is one fixed block (0 bytes when disabled); and serialising on
//     that one mutex would make concurrent searches of indexes that share
//     resources wait for each other for the whole selection.
#pragma once

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cuda_runtime_api.h>
#include <faiss/impl/FaissAssert.h>

#include <cstddef>
#include <utility>

namespace faiss_ext {
namespace gpu {

/// count elements of T on one device, freed by the destructor or release();
/// movable, not copyable. Allocated through a GpuResources when given one
/// (which must then outlive the vector), else through deviceMalloc on the
/// current device. allocate() frees the previous contents first: to keep
/// state unchanged on failure, allocate into a fresh vector and move it in.
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
        std::swap(res_, o.res_);
        std::swap(device_, o.device_);
    }
    /// Allocates count elements on `device` through res->allocResident
    /// (freeing any previous ones); throws "<who>: out of device memory ...
    /// for <what>" on failure, leaving the vector empty.
    void allocate(GpuResources* res, int device, size_t count, const char* who,
                  const char* what) {
        throwIfFailed_(tryAllocate(res, device, count), count, who, what);
    }
    /// The same on the current device through deviceMalloc, for code that
    /// holds no resources.
    void allocate(size_t count, const char* who, const char* what) {
        throwIfFailed_(tryAllocate(count), count, who, what);
    }
    /// allocate() that returns the CUDA error instead of throwing (for
    /// callers with their own messages); the vector is empty on failure.
    cudaError_t tryAllocate(GpuResources* res, int device, size_t count) {
        release();
        if (count == 0) return cudaSuccess;
        void* p = nullptr;
        cudaError_t err = res->allocResident(device, &p, count * sizeof(T));
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            return err;
        }
        p_ = static_cast<T*>(p);
        n_ = count;
        res_ = res;
        device_ = device;
        return cudaSuccess;
    }
    /// tryAllocate on the current device through deviceMalloc.
    cudaError_t tryAllocate(size_t count) {
        release();
        if (count == 0) return cudaSuccess;
        void* p = nullptr;
        cudaError_t err = deviceMalloc(&p, count * sizeof(T));
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            return err;
        }
        p_ = static_cast<T*>(p);
        n_ = count;
        return cudaSuccess;
    }
    /// Frees the memory (no-op when empty).
    void release() noexcept {
        if (p_) {
            if (res_) {
                res_->freeResident(device_, p_, n_ * sizeof(T));
            } else {
                deviceFree(p_);
            }
        }
        p_ = nullptr;
        n_ = 0;
        res_ = nullptr;
        device_ = -1;
    }
    /// Device pointer (null when empty).
    T* data() const { return p_; }
    /// Number of elements.
    size_t size() const { return n_; }

private:
    static void throwIfFailed_(cudaError_t err, size_t count, const char* who, const char* what) {
        if (err == cudaSuccess) return;
        FAISS_THROW_FMT("%s: out of device memory allocating %zu bytes for %s (%s); nothing "
                        "was changed",
                        who, count * sizeof(T), what, cudaGetErrorString(err));
    }

    T* p_ = nullptr;
    size_t n_ = 0;
    GpuResources* res_ = nullptr;  ///< null: deviceMalloc / deviceFree
    int device_ = -1;
};

}  // namespace gpu
}  // namespace faiss_ext
