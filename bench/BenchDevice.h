// Device-side pieces shared by the GPU benchmark programs.
#pragma once

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

namespace faiss_ext {
namespace bench {

/// Device memory that frees itself.
template <typename T>
struct DeviceArray {
    T* p = nullptr;
    explicit DeviceArray(size_t n) {
        void* v = nullptr;
        FAISS_EXT_CUDA_CHECK(cudaMalloc(&v, std::max<size_t>(1, n) * sizeof(T)));
        p = static_cast<T*>(v);
    }
    ~DeviceArray() { cudaFree(p); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
};

}  // namespace bench
}  // namespace faiss_ext
