#include "faiss_ext/gpu/StandardGpuResources.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace faiss_ext {
namespace gpu {

namespace {
constexpr size_t kDefaultPinned = size_t(256) << 20;
constexpr size_t kMaxDefaultTemp = size_t(16) << 30;
constexpr size_t kUseDefault = std::numeric_limits<size_t>::max();
}  // namespace

StandardGpuResourcesImpl::StandardGpuResourcesImpl()
        : tempMemoryRequest_(kUseDefault), pinnedRequest_(kDefaultPinned) {}

StandardGpuResourcesImpl::~StandardGpuResourcesImpl() {
    for (auto& kv : devices_) {
        DeviceScope scope(kv.first);
        if (kv.second.blas) cublasDestroy(kv.second.blas);
        if (kv.second.stream && kv.second.ownStream) cudaStreamDestroy(kv.second.stream);
    }
    if (pinned_) cudaFreeHost(pinned_);
}

void StandardGpuResourcesImpl::setTempMemory(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    tempMemoryRequest_ = bytes;
    for (auto& kv : devices_) {
        if (bytes != kUseDefault) {
            kv.second.tempLimit = bytes;
        } else {
            size_t freeB = 0, totalB = 0;
            DeviceScope scope(kv.first);
            FAISS_EXT_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
            kv.second.tempLimit = std::min(totalB / 4, kMaxDefaultTemp);
        }
    }
}

void StandardGpuResourcesImpl::setDeviceMemoryLimit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    deviceMemoryLimit_ = bytes;
}

size_t StandardGpuResourcesImpl::getDeviceMemoryLimit(int) {
    std::lock_guard<std::mutex> lock(mutex_);
    return deviceMemoryLimit_;
}

void StandardGpuResourcesImpl::setPinnedMemory(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    FAISS_THROW_IF_NOT_MSG(!pinned_, "setPinnedMemory: the pinned buffer is already in use");
    pinnedRequest_ = bytes;
}

void StandardGpuResourcesImpl::setDefaultStream(int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    userStreams_[device] = stream;
    auto it = devices_.find(device);
    if (it != devices_.end()) {
        DeviceScope scope(device);
        if (it->second.ownStream && it->second.stream) {
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(it->second.stream));
            cudaStreamDestroy(it->second.stream);
        }
        it->second.stream = stream;
        it->second.ownStream = false;
        FAISS_EXT_CUBLAS_CHECK(cublasSetStream(it->second.blas, stream));
    }
}

StandardGpuResourcesImpl::DeviceState& StandardGpuResourcesImpl::state_(int device) {
    auto it = devices_.find(device);
    if (it != devices_.end()) return it->second;
    checkDevice(device);
    DeviceScope scope(device);
    DeviceState st;
    auto us = userStreams_.find(device);
    if (us != userStreams_.end()) {
        st.stream = us->second;
        st.ownStream = false;
    } else {
        FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
    }
    FAISS_EXT_CUBLAS_CHECK(cublasCreate(&st.blas));
    FAISS_EXT_CUBLAS_CHECK(cublasSetStream(st.blas, st.stream));
    // Exact search: plain FP32 GEMM, never TF32.
    FAISS_EXT_CUBLAS_CHECK(cublasSetMathMode(st.blas, CUBLAS_PEDANTIC_MATH));
    size_t freeB = 0, totalB = 0;
    FAISS_EXT_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
    st.tempLimit = tempMemoryRequest_ != kUseDefault ? tempMemoryRequest_
                                                     : std::min(totalB / 4, kMaxDefaultTemp);
    // Keep freed temporary memory in the stream-ordered pool.
    cudaMemPool_t pool;
    FAISS_EXT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t threshold = std::numeric_limits<uint64_t>::max();
    FAISS_EXT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    return devices_.emplace(device, st).first->second;
}

void StandardGpuResourcesImpl::initializeForDevice(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    state_(device);
}

cublasHandle_t StandardGpuResourcesImpl::getBlasHandle(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_(device).blas;
}

cudaStream_t StandardGpuResourcesImpl::getDefaultStream(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_(device).stream;
}

void* StandardGpuResourcesImpl::allocTemp(int device, size_t bytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& st = state_(device);
    FAISS_THROW_IF_NOT_FMT(st.tempInUse + bytes <= st.tempLimit,
                           "GPU temporary memory limit exceeded on device %d: %zu bytes asked, "
                           "%zu in use, limit %zu (StandardGpuResources::setTempMemory)",
                           device, bytes, st.tempInUse, st.tempLimit);
    DeviceScope scope(device);
    void* p = nullptr;
    cudaError_t err = consumeAllocFailureInjection() ? cudaErrorMemoryAllocation
                                                     : cudaMallocAsync(&p, bytes, stream);
    if (err != cudaSuccess) {
        cudaGetLastError();
        FAISS_THROW_FMT("GPU out of memory on device %d allocating %zu bytes of temporary memory (%s)",
                        device, bytes, cudaGetErrorString(err));
    }
    st.tempInUse += bytes;
    return p;
}

void StandardGpuResourcesImpl::freeTemp(int device, void* p, size_t bytes, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceScope scope(device);
    cudaFreeAsync(p, stream);
    auto it = devices_.find(device);
    if (it != devices_.end()) it->second.tempInUse -= std::min(bytes, it->second.tempInUse);
}

size_t StandardGpuResourcesImpl::getTempMemoryAvailable(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& st = state_(device);
    return st.tempLimit > st.tempInUse ? st.tempLimit - st.tempInUse : 0;
}

size_t StandardGpuResourcesImpl::getTempMemoryLimit(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_(device).tempLimit;
}

size_t StandardGpuResourcesImpl::getTempMemoryInUse(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = devices_.find(device);
    return it == devices_.end() ? 0 : it->second.tempInUse;
}

std::pair<void*, size_t> StandardGpuResourcesImpl::getPinnedMemory() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pinned_ && pinnedRequest_ > 0) {
        if (cudaHostAlloc(&pinned_, pinnedRequest_, cudaHostAllocDefault) != cudaSuccess) {
            cudaGetLastError();
            pinned_ = nullptr;
            pinnedRequest_ = 0;  // fall back to pageable copies
        } else {
            pinnedSize_ = pinnedRequest_;
        }
    }
    return {pinned_, pinnedSize_};
}

StandardGpuResources::StandardGpuResources()
        : res_(std::make_shared<StandardGpuResourcesImpl>()) {}
StandardGpuResources::~StandardGpuResources() = default;
std::shared_ptr<GpuResources> StandardGpuResources::getResources() { return res_; }
void StandardGpuResources::setTempMemory(size_t bytes) { res_->setTempMemory(bytes); }
void StandardGpuResources::setPinnedMemory(size_t bytes) { res_->setPinnedMemory(bytes); }

void StandardGpuResources::setDeviceMemoryLimit(size_t bytes) { res_->setDeviceMemoryLimit(bytes); }
void StandardGpuResources::setDefaultStream(int device, cudaStream_t stream) {
    res_->setDefaultStream(device, stream);
}
size_t StandardGpuResources::getTempMemoryInUse(int device) {
    return res_->getTempMemoryInUse(device);
}

}  // namespace gpu
}  // namespace faiss_ext
