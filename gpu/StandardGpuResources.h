// The default GpuResources: one cuBLAS handle and one stream per device, a
// stream-ordered temporary memory pool with a settable limit, and a pinned
// staging buffer. Mirrors faiss::gpu::StandardGpuResources.
#pragma once

#include "faiss_ext/gpu/GpuResources.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace faiss_ext {
namespace gpu {

/// The implementation behind StandardGpuResources.
class StandardGpuResourcesImpl : public GpuResources {
public:
    StandardGpuResourcesImpl();
    ~StandardGpuResourcesImpl() override;

    /// Sets the temporary memory limit in bytes for every device (takes
    /// effect for new allocations). SIZE_MAX means the default (see
    /// StandardGpuResources::setTempMemory).
    void setTempMemory(size_t bytes);
    /// Sets the size of the pinned staging buffer (before first use).
    void setPinnedMemory(size_t bytes);
    /// Uses `stream` instead of our own for `device` (not owned).
    void setDefaultStream(int device, cudaStream_t stream);
    /// Bytes of temporary memory in use on `device` right now.
    size_t getTempMemoryInUse(int device);
    /// Limit on data kept resident per device (StandardGpuResources::setDeviceMemoryLimit).
    void setDeviceMemoryLimit(size_t bytes);
    size_t getDeviceMemoryLimit(int device) override;

    void initializeForDevice(int device) override;
    cublasHandle_t getBlasHandle(int device) override;
    cudaStream_t getDefaultStream(int device) override;
    void* allocTemp(int device, size_t bytes, cudaStream_t stream) override;
    void freeTemp(int device, void* p, size_t bytes, cudaStream_t stream) override;
    size_t getTempMemoryAvailable(int device) override;
    size_t getTempMemoryLimit(int device) override;
    std::pair<void*, size_t> getPinnedMemory() override;

private:
    struct DeviceState {
        cublasHandle_t blas = nullptr;
        cudaStream_t stream = nullptr;
        bool ownStream = true;
        size_t tempLimit = 0;
        size_t tempInUse = 0;
    };
    DeviceState& state_(int device);

    std::mutex mutex_;
    std::map<int, DeviceState> devices_;
    std::map<int, cudaStream_t> userStreams_;
    size_t tempMemoryRequest_;
    size_t pinnedRequest_;
    size_t deviceMemoryLimit_ = SIZE_MAX;
    void* pinned_ = nullptr;
    size_t pinnedSize_ = 0;
};

/// Default resources provider: create one and pass it to GPU indexes.
class StandardGpuResources : public GpuResourcesProvider {
public:
    StandardGpuResources();
    ~StandardGpuResources() override;

    std::shared_ptr<GpuResources> getResources() override;

    /// Limits temporary memory (distance tiles, selection buffers) to `bytes`
    /// per device. The default is 1/4 of the device's memory, at most 16 GiB,
    /// taken from CUDA's stream-ordered pool as searches need it and kept in
    /// the pool afterwards (as FAISS keeps its temporary memory). Searches
    /// tile themselves to fit: more memory means wider tiles and faster
    /// searches at large k; a limit too small for even one tile makes them
    /// throw.
    void setTempMemory(size_t bytes);

    /// Size of the pinned host staging buffer (default 256 MiB; 0 disables).
    void setPinnedMemory(size_t bytes);

    /// Limits the data indexes keep resident on each device (their stored
    /// vectors) to `bytes`; SIZE_MAX (the default) means no limit beyond the
    /// device itself. Indexes with automatic storage (VectorStorage::Auto)
    /// keep data that would pass it in pinned host memory and stream it
    /// through the GPU for each search; indexes already holding more keep it
    /// until their next add.
    void setDeviceMemoryLimit(size_t bytes);

    /// Orders our work on `stream` (not owned) for `device`.
    void setDefaultStream(int device, cudaStream_t stream);

    /// Bytes of temporary memory in use on `device`.
    size_t getTempMemoryInUse(int device);

private:
    std::shared_ptr<StandardGpuResourcesImpl> res_;
};

}  // namespace gpu
}  // namespace faiss_ext
