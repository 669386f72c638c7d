// Device queries and error checks that throw (never abort): a library loaded
// into a service must report CUDA failures as exceptions.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <faiss/impl/FaissAssert.h>

namespace faiss_ext {
namespace gpu {

/// Number of CUDA devices usable here; 0 when there is no GPU or no driver
/// (never throws).
int getNumDevices();

/// Throws a clear error unless `device` names a usable GPU.
void checkDevice(int device);

/// Current device of the calling thread.
int getCurrentDevice();

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
