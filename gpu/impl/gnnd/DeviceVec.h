// A device allocation that frees itself (resident buffers of GpuKnnGraphGNND
// and of the out-of-core builder's workers).
#pragma once

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cuda_runtime_api.h>
#include <faiss/impl/FaissAssert.h>

#include <cstddef>
#include <utility>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

template <typename T>
class DeviceVec {
public:
    DeviceVec() = default;
    ~DeviceVec() { release(); }
    DeviceVec(const DeviceVec&) = delete;
    DeviceVec& operator=(const DeviceVec&) = delete;
    DeviceVec(DeviceVec&& o) noexcept { swap(o); }
    DeviceVec& operator=(DeviceVec&& o) noexcept {
        swap(o);
        return *this;
    }
    void swap(DeviceVec& o) noexcept {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
    }
    /// Allocates count elements on the current device (freeing any previous
    /// ones); throws "<who>: out of device memory ... for <what>" on failure.
    void allocate(size_t count, const char* who, const char* what) {
        release();
        if (count == 0) return;
        cudaError_t err = deviceMalloc(&p_, count * sizeof(T));
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            p_ = nullptr;
            FAISS_THROW_FMT("%s: out of device memory allocating %zu bytes for %s (%s); nothing "
                            "was changed",
                            who, count * sizeof(T), what, cudaGetErrorString(err));
        }
        n_ = count;
    }
    void release() {
        if (p_) deviceFree(p_);
        p_ = nullptr;
        n_ = 0;
    }
    T* data() const { return p_; }
    size_t size() const { return n_; }

private:
    T* p_ = nullptr;
    size_t n_ = 0;
};

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
