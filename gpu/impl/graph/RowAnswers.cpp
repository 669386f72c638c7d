#include "faiss_ext/gpu/impl/graph/RowAnswers.h"

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/FilterKernels.h"
#include "faiss_ext/gpu/impl/graph/FilteredResults.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

std::vector<uint32_t> flaggedRows(const uint8_t* flags, int64_t n, cudaStream_t stream) {
    std::vector<uint8_t> isFlagged(static_cast<size_t>(n));
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(isFlagged.data(), flags, size_t(n), cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<uint32_t> rows;
    for (int64_t i = 0; i < n; ++i) {
        if (isFlagged[size_t(i)]) rows.push_back(uint32_t(i));
    }
    return rows;
}

void answerRowsAgain(GpuResources* res, int device, int d, const std::vector<uint32_t>& rows,
                     const float* q, int64_t k, const RowSearch& search, float* distances,
                     int64_t* labels) {
    if (rows.empty()) return;
    cudaStream_t stream = res->getDefaultStream(device);
    const int64_t m = int64_t(rows.size());
    TempBuffer<uint32_t> dRows(res, device, size_t(m), stream);
    TempBuffer<float> rowQ(res, device, size_t(m) * d, stream);
    TempBuffer<float> rowD(res, device, size_t(m) * k, stream);
    TempBuffer<int64_t> rowI(res, device, size_t(m) * k, stream);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dRows.data(), rows.data(), sizeof(uint32_t) * size_t(m),
                                         cudaMemcpyHostToDevice, stream));
    gatherSelectedRows(q, nullptr, dRows.data(), m, d, rowQ.data(), nullptr, stream);
    gatherResultRows(distances, labels, dRows.data(), m, int(k), rowD.data(), rowI.data(), stream);
    search(m, rowQ.data(), k, rowD.data(), rowI.data());
    scatterResultRows(rowD.data(), rowI.data(), dRows.data(), m, int(k), distances, labels, stream);
    // the rows (host memory) and the buffers must outlive the copies
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
