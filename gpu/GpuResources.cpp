#include "faiss_ext/gpu/GpuResources.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cstdint>

namespace faiss_ext {
namespace gpu {

GpuResources::~GpuResources() = default;

void GpuResources::syncDefaultStream(int device) {
    DeviceScope scope(device);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(getDefaultStream(device)));
}

size_t GpuResources::getDeviceMemoryLimit(int) { return SIZE_MAX; }

cudaError_t GpuResources::allocResident(int device, void** p, size_t bytes) {
    *p = nullptr;
    int prev = -1;
    cudaError_t err = cudaGetDevice(&prev);
    if (err == cudaSuccess && prev != device) err = cudaSetDevice(device);
    if (err != cudaSuccess) return err;
    err = deviceMalloc(p, bytes);
    if (prev != device) cudaSetDevice(prev);
    return err;
}

void GpuResources::freeResident(int, void* p, size_t) noexcept { deviceFree(p); }

GpuResourcesProvider::~GpuResourcesProvider() = default;

GpuResourcesProviderFromInstance::GpuResourcesProviderFromInstance(
        std::shared_ptr<GpuResources> res)
        : res_(std::move(res)) {
    FAISS_THROW_IF_NOT_MSG(res_, "GpuResourcesProviderFromInstance: null resources");
}

std::shared_ptr<GpuResources> GpuResourcesProviderFromInstance::getResources() { return res_; }

}  // namespace gpu
}  // namespace faiss_ext
