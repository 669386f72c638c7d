#include "faiss_ext/gpu/impl/gnnd/ShardWorker.h"

#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace gnnd {

ShardWorker::~ShardWorker() {
    if (stream) {
        DeviceScope scope(device);
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
}

std::unique_ptr<ShardWorker> ShardWorker::make(int device, GpuResources* res, int d, int K,
                                               int64_t rows, int64_t listRows, bool lists) {
    std::unique_ptr<ShardWorker> wk(new ShardWorker());
    wk->device = device;
    wk->res = res;
    wk->d = d;
    wk->K = K;
    DeviceScope scope(wk->device);
    FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&wk->stream, cudaStreamNonBlocking));
    wk->x.allocate(res, device, size_t(rows) * d, "gnndBuildFromFile", "vectors");
    wk->norms.allocate(res, device, size_t(rows), "gnndBuildFromFile", "norms");
    if (!lists) return wk;
    wk->ids.allocate(res, device, size_t(listRows) * K, "gnndBuildFromFile", "graph ids");
    wk->dists.allocate(res, device, size_t(listRows) * K, "gnndBuildFromFile",
                       "graph distances");
    wk->headIds.allocate(res, device, size_t(listRows) * K, "gnndBuildFromFile",
                         "shard graph ids");
    wk->headDists.allocate(res, device, size_t(listRows) * K, "gnndBuildFromFile",
                           "shard graph distances");
    return wk;
}

void ShardWorker::upload(const ShardData& s, int64_t row0, bool withGraph, FlatMetric metric) {
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(x.data() + size_t(row0) * d, s.x.data(),
                                         sizeof(float) * s.x.size(), cudaMemcpyHostToDevice,
                                         stream));
    prepareVectorsDevice(metric, x.data() + size_t(row0) * d, s.n, d, stream);
    rowSquaredNorms(x.data() + size_t(row0) * d, s.n, d, norms.data() + row0, stream);
    if (withGraph) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(ids.data() + size_t(row0) * K, s.ids.data(),
                                             sizeof(int) * s.ids.size(),
                                             cudaMemcpyHostToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dists.data() + size_t(row0) * K, s.dists.data(),
                                             sizeof(float) * s.dists.size(),
                                             cudaMemcpyHostToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(headIds.data() + size_t(row0) * K,
                                             s.headIds.data(), sizeof(int) * s.headIds.size(),
                                             cudaMemcpyHostToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(headDists.data() + size_t(row0) * K,
                                             s.headDists.data(),
                                             sizeof(float) * s.headDists.size(),
                                             cudaMemcpyHostToDevice, stream));
    }
}

void ShardWorker::download(ShardData& s, int64_t row0) {
    s.ids.resize(size_t(s.n) * K);
    s.dists.resize(size_t(s.n) * K);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.ids.data(), ids.data() + size_t(row0) * K,
                                         sizeof(int) * s.ids.size(), cudaMemcpyDeviceToHost,
                                         stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.dists.data(), dists.data() + size_t(row0) * K,
                                         sizeof(float) * s.dists.size(), cudaMemcpyDeviceToHost,
                                         stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
