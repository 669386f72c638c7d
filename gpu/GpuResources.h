// GPU resources shared by indexes: cuBLAS handles, streams, a temporary
// memory pool with a limit, pinned staging memory. Shaped like FAISS's
// faiss/gpu/GpuResources.h so FAISS GPU users find the same names.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>

namespace faiss_ext {
namespace gpu {

/// What a GPU index needs from its environment, per device.
class GpuResources {
public:
    virtual ~GpuResources();

    /// Creates the per-device state (handle, stream, pool) if not yet done.
    virtual void initializeForDevice(int device) = 0;

    /// cuBLAS handle bound to the device's default stream.
    virtual cublasHandle_t getBlasHandle(int device) = 0;

    /// The stream all work of our indexes on `device` is ordered on.
    virtual cudaStream_t getDefaultStream(int device) = 0;

    /// Allocates `bytes` of temporary memory ordered on `stream`; throws
    /// faiss::FaissException (and allocates nothing) when the request would
    /// pass the temporary memory limit or the device is out of memory.
    virtual void* allocTemp(int device, size_t bytes, cudaStream_t stream) = 0;

    /// Returns temporary memory from allocTemp.
    virtual void freeTemp(int device, void* p, size_t bytes, cudaStream_t stream) = 0;

    /// Bytes of temporary memory that may still be allocated on `device`.
    virtual size_t getTempMemoryAvailable(int device) = 0;

    /// The temporary memory limit of `device` in bytes.
    virtual size_t getTempMemoryLimit(int device) = 0;

    /// Bytes that indexes using these resources may keep resident on `device`
    /// for their stored data (beyond the temporary memory). Indexes with
    /// automatic storage keep their data in host memory past it and stream
    /// it through the GPU. Default: no limit (SIZE_MAX).
    virtual size_t getDeviceMemoryLimit(int device);

    /// Allocates `bytes` of resident device memory on `device` (index storage,
    /// graphs, tables: memory kept as long as its owner, outside the temporary
    /// limit) into *p. Returns the CUDA error and leaves *p null on failure;
    /// throws nothing, so that callers keep their own messages and leave their
    /// state unchanged. Default: deviceMalloc (utils/DeviceUtils.h) with
    /// `device` current, so the memory is counted by getDeviceMemoryStats and
    /// fails on demand under setAllocFailureInjection. Override both this and
    /// freeResident to place resident memory elsewhere. DeviceVector calls it.
    virtual cudaError_t allocResident(int device, void** p, size_t bytes);

    /// Returns memory from allocResident (p may be null); must not fail.
    virtual void freeResident(int device, void* p, size_t bytes) noexcept;

    /// Pinned host memory for staging transfers (pointer, size); may be empty.
    /// Hold getPinnedMemoryMutex() while using it: it is shared.
    virtual std::pair<void*, size_t> getPinnedMemory() = 0;

    /// Serialises the users of the pinned staging buffer.
    std::mutex& getPinnedMemoryMutex() { return pinnedMutex_; }

    /// Blocks until all work on the device's default stream is done.
    void syncDefaultStream(int device);

private:
    std::mutex pinnedMutex_;
};

/// Something that hands out a GpuResources (FAISS's GpuResourcesProvider).
class GpuResourcesProvider {
public:
    virtual ~GpuResourcesProvider();

    /// The shared resources object.
    virtual std::shared_ptr<GpuResources> getResources() = 0;
};

/// A GpuResources that is itself a provider (to wrap an existing object).
class GpuResourcesProviderFromInstance : public GpuResourcesProvider {
public:
    /// Wraps res (shared).
    explicit GpuResourcesProviderFromInstance(std::shared_ptr<GpuResources> res);
    std::shared_ptr<GpuResources> getResources() override;

private:
    std::shared_ptr<GpuResources> res_;
};

/// RAII temporary device buffer from GpuResources::allocTemp.
template <typename T>
class TempBuffer {
public:
    /// Allocates count elements of T on `device`, ordered on `stream`.
    TempBuffer(GpuResources* res, int device, size_t count, cudaStream_t stream)
            : res_(res), device_(device), stream_(stream), count_(count) {
        bytes_ = count * sizeof(T);
        ptr_ = bytes_ ? static_cast<T*>(res_->allocTemp(device, bytes_, stream)) : nullptr;
    }
    ~TempBuffer() {
        if (ptr_) res_->freeTemp(device_, ptr_, bytes_, stream_);
    }
    TempBuffer(const TempBuffer&) = delete;
    TempBuffer& operator=(const TempBuffer&) = delete;

    /// Device pointer.
    T* data() const { return ptr_; }
    /// Number of elements.
    size_t size() const { return count_; }

private:
    GpuResources* res_;
    int device_;
    cudaStream_t stream_;
    size_t count_;
    size_t bytes_;
    T* ptr_;
};

}  // namespace gpu
}  // namespace faiss_ext
