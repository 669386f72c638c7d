#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissException.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace faiss_ext {
namespace gpu {

int getNumDevices() {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device / no driver" error
        return 0;
    }
    return n;
}

void checkDevice(int device) {
    int n = getNumDevices();
    FAISS_THROW_IF_NOT_FMT(n > 0, "no CUDA GPU is available (asked for device %d)", device);
    FAISS_THROW_IF_NOT_FMT(device >= 0 && device < n,
                           "GPU device %d does not exist (this machine has %d GPU%s)", device, n,
                           n == 1 ? "" : "s");
}

namespace {
/// Hands the unused memory that the device's default stream-ordered pool
/// keeps (StandardGpuResources sets no release threshold, so that temporary
/// memory is reused) back to the device, where cudaMalloc can get it.
void trimDefaultPool(int device) {
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
        cudaMemPoolTrimTo(pool, 0) != cudaSuccess)
        (void)cudaGetLastError();
}
}  // namespace

size_t deviceFreeBytes(int device) {
    DeviceScope scope(device);
    trimDefaultPool(device);
    size_t freeB = 0, totalB = 0;
    if (cudaMemGetInfo(&freeB, &totalB) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return freeB;
}

int getCurrentDevice() {
    int dev = -1;
    const cudaError_t err = cudaGetDevice(&dev);
    // without a GPU (or a driver) cudaGetDevice fails with
    // cudaErrorInsufficientDriver / NoDevice: say what that means
    if (err != cudaSuccess && getNumDevices() == 0) {
        FAISS_THROW_MSG("no CUDA GPU is available (asked for the current device)");
    }
    FAISS_EXT_CUDA_CHECK(err);
    return dev;
}

bool isDevicePointer(const void* p, int* device) {
    if (!p) return false;
    cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, p);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    bool dev = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
    if (dev && device) *device = attr.device;
    return dev;
}

namespace {

struct AllocRegistry {
    std::mutex mutex;
    std::unordered_map<void*, std::pair<int, size_t>> live;  // ptr -> (device, bytes)
    std::map<int, DeviceMemoryStats> perDevice;
};

AllocRegistry& registry() {
    static AllocRegistry* r = new AllocRegistry();  // never destroyed: used from static dtors
    return *r;
}

std::atomic<int64_t> gFailCountdown{-1};

}  // namespace

bool consumeAllocFailureInjection() {
    int64_t cur = gFailCountdown.load();
    while (cur >= 0) {
        if (gFailCountdown.compare_exchange_weak(cur, cur - 1)) return cur == 0;
    }
    return false;
}

void setAllocFailureInjection(int64_t n) { gFailCountdown.store(n < 0 ? -1 : n); }

bool allocFailureInjectionPending() { return gFailCountdown.load() >= 0; }

cudaError_t deviceMalloc(void** p, size_t bytes) {
    *p = nullptr;
    if (consumeAllocFailureInjection()) return cudaErrorMemoryAllocation;
    int dev = -1;
    cudaGetDevice(&dev);
    cudaError_t err = cudaMalloc(p, bytes);
    if (err == cudaErrorMemoryAllocation) {
        // the memory may be held, unused, by the temporary memory's pool
        (void)cudaGetLastError();
        trimDefaultPool(dev);
        err = cudaMalloc(p, bytes);
    }
    if (err != cudaSuccess) {
        *p = nullptr;
        return err;
    }
    AllocRegistry& r = registry();
    std::lock_guard<std::mutex> g(r.mutex);
    r.live[*p] = {dev, bytes};
    DeviceMemoryStats& s = r.perDevice[dev];
    s.allocatedBytes += bytes;
    s.allocations += 1;
    return cudaSuccess;
}

void deviceFree(void* p) {
    if (!p) return;
    {
        AllocRegistry& r = registry();
        std::lock_guard<std::mutex> g(r.mutex);
        auto it = r.live.find(p);
        if (it != r.live.end()) {
            DeviceMemoryStats& s = r.perDevice[it->second.first];
            s.allocatedBytes -= it->second.second;
            s.allocations -= 1;
            r.live.erase(it);
        }
    }
    cudaFree(p);
}

DeviceMemoryStats getDeviceMemoryStats(int device) {
    DeviceMemoryStats out;
    {
        AllocRegistry& r = registry();
        std::lock_guard<std::mutex> g(r.mutex);
        auto it = r.perDevice.find(device);
        if (it != r.perDevice.end()) out = it->second;
    }
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
        uint64_t v = 0;
        if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v) == cudaSuccess)
            out.poolReservedBytes = v;
        if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v) == cudaSuccess)
            out.poolUsedBytes = v;
    }
    cudaGetLastError();
    return out;
}

DeviceScope::DeviceScope(int device) : prevDevice_(-1) {
    if (device >= 0) {
        FAISS_EXT_CUDA_CHECK(cudaGetDevice(&prevDevice_));
        if (prevDevice_ != device) {
            FAISS_EXT_CUDA_CHECK(cudaSetDevice(device));
        } else {
            prevDevice_ = -1;
        }
    }
}

DeviceScope::~DeviceScope() {
    if (prevDevice_ >= 0) cudaSetDevice(prevDevice_);
}

void throwCudaError(cudaError_t err, const char* expr, const char* file, int line) {
    std::string msg = std::string("CUDA error ") + cudaGetErrorName(err) + " (" +
                      cudaGetErrorString(err) + ") in " + expr;
    throw faiss::FaissException(msg, "faiss_ext", file, line);
}

void throwCublasError(cublasStatus_t st, const char* expr, const char* file, int line) {
    std::string msg = std::string("cuBLAS error ") + cublasGetStatusName(st) + " (" +
                      cublasGetStatusString(st) + ") in " + expr;
    throw faiss::FaissException(msg, "faiss_ext", file, line);
}

}  // namespace gpu
}  // namespace faiss_ext
