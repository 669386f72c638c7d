// Device queries and error checks that throw (never abort): a library loaded
// into a service must report CUDA failures as exceptions.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <faiss/impl/FaissAssert.h>

#include <cstddef>
#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// Number of CUDA devices usable here; 0 when there is no GPU or no driver
/// (never throws).
int getNumDevices();

/// Throws a clear error unless `device` names a usable GPU.
void checkDevice(int device);

/// Current device of the calling thread.
int getCurrentDevice();

/// Free memory of `device` as CUDA reports it (0 where it cannot tell),
/// after the unused memory kept by the default stream-ordered pool (freed
/// temporary memory) is handed back: what a large allocation can get.
size_t deviceFreeBytes(int device);

/// Whether p is a device (or managed) pointer; *device receives its device.
bool isDevicePointer(const void* p, int* device = nullptr);

/// Sets the current device for a scope and restores the previous one.
class DeviceScope {
public:
    /// Makes `device` current (device < 0 leaves it unchanged).
    explicit DeviceScope(int device);
    ~DeviceScope();
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    int prevDevice_;
};

/// Device memory of this process on one device, as faiss_ext sees it.
struct DeviceMemoryStats {
    /// Bytes held by faiss_ext's resident allocations (deviceMalloc): index
    /// storage, tables, graphs.
    size_t allocatedBytes = 0;
    /// Live deviceMalloc allocations.
    size_t allocations = 0;
    /// Bytes reserved by CUDA's default stream-ordered pool of the device,
    /// which backs GpuResources::allocTemp (kept after use, by design).
    size_t poolReservedBytes = 0;
    /// Bytes of that pool in use right now.
    size_t poolUsedBytes = 0;
};

/// Per-process figures for `device` (no other process is counted).
DeviceMemoryStats getDeviceMemoryStats(int device);

/// cudaMalloc on the current device through one door: counted in
/// getDeviceMemoryStats and subject to setAllocFailureInjection. Returns the
/// CUDA error (cudaErrorMemoryAllocation when a failure is injected).
cudaError_t deviceMalloc(void** p, size_t bytes);

/// deviceMalloc for a typed pointer.
template <typename T>
cudaError_t deviceMalloc(T** p, size_t bytes) {
    return deviceMalloc(reinterpret_cast<void**>(p), bytes);
}

/// Frees memory from deviceMalloc (nullptr is a no-op).
void deviceFree(void* p);

/// Testing hook: the n-th device allocation from now (0 = the next one) made
/// through deviceMalloc or StandardGpuResources' temporary memory fails as if
/// the device were out of memory; n < 0 turns injection off (the default).
/// Process-wide; for tests of failure paths.
void setAllocFailureInjection(int64_t n);

/// Whether an injected failure is still pending (testing hook).
bool allocFailureInjectionPending();

/// Consumes one tick of the fault injector; true when this allocation must
/// fail (used by the allocators themselves).
bool consumeAllocFailureInjection();

/// Throws faiss::FaissException describing a failed CUDA call.
[[noreturn]] void throwCudaError(cudaError_t err, const char* expr, const char* file, int line);
/// Throws faiss::FaissException describing a failed cuBLAS call.
[[noreturn]] void throwCublasError(cublasStatus_t st, const char* expr, const char* file, int line);

}  // namespace gpu
}  // namespace faiss_ext

/// Checks a CUDA runtime call; throws faiss::FaissException on failure.
#define FAISS_EXT_CUDA_CHECK(expr)                                                   \
    do {                                                                             \
        cudaError_t faiss_ext_err_ = (expr);                                         \
        if (faiss_ext_err_ != cudaSuccess)                                           \
            ::faiss_ext::gpu::throwCudaError(faiss_ext_err_, #expr, __FILE__, __LINE__); \
    } while (0)

/// Checks a kernel launch (the launch itself and its configuration).
#define FAISS_EXT_CUDA_CHECK_LAUNCH() FAISS_EXT_CUDA_CHECK(cudaGetLastError())

/// Checks a cuBLAS call; throws faiss::FaissException on failure.
#define FAISS_EXT_CUBLAS_CHECK(expr)                                                   \
    do {                                                                               \
        cublasStatus_t faiss_ext_st_ = (expr);                                         \
        if (faiss_ext_st_ != CUBLAS_STATUS_SUCCESS)                                    \
            ::faiss_ext::gpu::throwCublasError(faiss_ext_st_, #expr, __FILE__, __LINE__); \
    } while (0)
