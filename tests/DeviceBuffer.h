// A device copy of a host vector for the engine-level GPU tests, freed at
// the end of the scope.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace test {

template <class T>
struct DeviceBuffer {
    T* p = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(const std::vector<T>& h) : n(h.size()) {
        FAISS_EXT_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&p), sizeof(T) * std::max<size_t>(n, 1)));
        FAISS_EXT_CUDA_CHECK(cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice));
    }
    ~DeviceBuffer() { cudaFree(p); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    std::vector<T> toHost() const {
        std::vector<T> h(n);
        FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
        FAISS_EXT_CUDA_CHECK(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost));
        return h;
    }
};

}  // namespace test
}  // namespace faiss_ext
