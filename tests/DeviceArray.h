// A cudaMalloc'ed array for the GPU tests, freed on scope exit, with
// copies to and from host vectors.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "TestUtils.h"

namespace faiss_ext {
namespace test {

/// `count` elements of T on the current device (p is null when the
/// allocation failed: the tests check it).
template <typename T>
struct DeviceArray {
    explicit DeviceArray(size_t count) : n(count) {
        if (cudaMalloc(reinterpret_cast<void**>(&p), sizeof(T) * std::max<size_t>(n, 1)) !=
            cudaSuccess) {
            p = nullptr;
        }
    }
    ~DeviceArray() {
        if (p) cudaFree(p);
    }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    /// Copies n elements from h and waits until they are on the device.
    void upload(const T* h) {
        EXPECT_EQ(cudaMemcpy(p, h, sizeof(T) * n, cudaMemcpyHostToDevice), cudaSuccess);
        syncAfterHostCopy();
    }
    void upload(const std::vector<T>& h) { upload(h.data()); }
    std::vector<T> download() const {
        std::vector<T> h(n);
        EXPECT_EQ(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost), cudaSuccess);
        return h;
    }
    T* p = nullptr;
    size_t n;
};

}  // namespace test
}  // namespace faiss_ext
