#include "gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissException.h>

#include <string>

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

int getCurrentDevice() {
    int dev = -1;
    FAISS_EXT_CUDA_CHECK(cudaGetDevice(&dev));
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
