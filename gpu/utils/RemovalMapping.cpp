#include "faiss_ext/gpu/utils/RemovalMapping.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <vector>

namespace faiss_ext {
namespace gpu {

RemovalMapping::RemovalMapping(GpuResources* res, int device, cudaStream_t stream,
                               const IdSelection& removed)
        : kept_(res, device, size_t(removed.size() - removed.count()), stream),
          newId_(res, device, size_t(removed.size()), stream) {
    const std::vector<uint32_t> kept = removed.unselectedPositions();
    std::vector<int> newId(size_t(removed.size()), -1);
    for (size_t j = 0; j < kept.size(); ++j) newId[kept[j]] = int(j);
    // Pageable host vectors: the copies complete before they go out of scope.
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(kept_.data(), kept.data(), sizeof(uint32_t) * kept.size(),
                                         cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(newId_.data(), newId.data(), sizeof(int) * newId.size(),
                                         cudaMemcpyHostToDevice, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace gpu
}  // namespace faiss_ext
