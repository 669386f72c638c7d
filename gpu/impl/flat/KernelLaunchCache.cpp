#include "faiss_ext/gpu/impl/flat/KernelLaunchCache.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

namespace faiss_ext {
namespace gpu {

namespace {

/// All cached facts behind one lock: lookups are rare enough (a few per
/// search) that contention does not matter, and one lock keeps the
/// shared-memory limit and the occupancy taken under it consistent.
struct LaunchCache {
    std::mutex mutex;
    std::map<int, int> smCount;
    std::map<std::pair<const void*, int>, size_t> smemLimit;
    std::map<std::tuple<const void*, int, int, size_t>, int> blocksPerSm;
};

LaunchCache& cache() {
    static LaunchCache c;
    return c;
}

}  // namespace

int cachedSmCount(int device) {
    LaunchCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.smCount.find(device);
    if (it != c.smCount.end()) return it->second;
    int sms = 0;
    FAISS_EXT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    c.smCount[device] = sms;
    return sms;
}

int cachedBlocksPerSm(const void* kernel, int device, int threads, size_t smem) {
    LaunchCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto key = std::make_tuple(kernel, device, threads, smem);
    auto it = c.blocksPerSm.find(key);
    if (it != c.blocksPerSm.end()) return it->second;
    size_t& limit = c.smemLimit[std::make_pair(kernel, device)];
    if (smem > limit) {
        FAISS_EXT_CUDA_CHECK(cudaFuncSetAttribute(
                kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        limit = smem;
    }
    int perSm = 0;
    FAISS_EXT_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, threads, smem));
    c.blocksPerSm[key] = perSm;
    return perSm;
}

}  // namespace gpu
}  // namespace faiss_ext
