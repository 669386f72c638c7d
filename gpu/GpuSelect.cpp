#include "faiss_ext/gpu/GpuSelect.h"

#include "faiss_ext/gpu/impl/RowSelector.h"
#include "faiss_ext/gpu/impl/select/MergeQueue.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/SelectUtils.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gpu {

const char* selectAlgoName(SelectAlgo algo) {
    switch (algo) {
        case SelectAlgo::Auto: return "auto";
        case SelectAlgo::QuickMultiSelect: return "quick-multi-select";
        case SelectAlgo::MergeQueue: return "merge-queue";
        case SelectAlgo::THHeap: return "th-heap";
    }
    return "unknown";
}

SelectAlgo selectAlgoFromName(const char* name) {
    FAISS_THROW_IF_NOT_MSG(name, "selectAlgoFromName: null name");
    const std::string s(name);
    if (s == "auto") return SelectAlgo::Auto;
    if (s == "quick-multi-select" || s == "qms") return SelectAlgo::QuickMultiSelect;
    if (s == "merge-queue" || s == "mq") return SelectAlgo::MergeQueue;
    if (s == "th-heap" || s == "thheap") return SelectAlgo::THHeap;
    FAISS_THROW_FMT("unknown selection algorithm '%s' (auto, quick-multi-select, merge-queue, "
                    "th-heap)", name);
}

SelectAlgo chooseSelectAlgo(int64_t rows, int64_t n, int64_t k, int64_t d) {
    // Crossovers of bench suite `select` (bench/results/select.jsonl, H100,
    // commit dbe9984e5414; docs/benchmarks.md, "Crossovers"): the merge
    // queue beats quick multi-select only with many rows, k <= 32 and rows
    // of at most 2^16 (by 1.05-1.7x: 2048 x 2^13, k = 32: 0.13 vs 0.22 ms);
    // quick multi-select wins everywhere else, by up to 20x at large k.
    // TH-heap never won: its pruned rows cross PCIe and are sorted on the
    // CPU, 1.3-3x slower than quick multi-select at nq = 1, k <= 32, and
    // 20-300x slower at nq >= 64. d does not move these
    // crossovers: selection alone does not see it, it only scales the GEMM
    // in front.
    (void)d;
    if (rows >= 2048 && k <= 32 && n <= 65536) return SelectAlgo::MergeQueue;
    return SelectAlgo::QuickMultiSelect;
}

void selectK(GpuResourcesProvider* provider, const float* values, int64_t rows, int64_t n,
             int64_t k, bool largest, float* outValues, int64_t* outIndices,
             const SelectKOptions& options) {
    FAISS_THROW_IF_NOT_MSG(provider, "selectK: null resources provider");
    FAISS_THROW_IF_NOT_FMT(rows >= 0, "selectK: rows must be >= 0 (got %lld)", (long long)rows);
    FAISS_THROW_IF_NOT_FMT(n >= 1, "selectK: n must be >= 1 (got %lld)", (long long)n);
    FAISS_THROW_IF_NOT_FMT(k >= 1 && k <= n, "selectK: k = %lld not in [1, n = %lld]",
                           (long long)k, (long long)n);
    FAISS_THROW_IF_NOT_FMT(n <= (int64_t(1) << 32) - 1, "selectK: n = %lld exceeds 2^32 - 1",
                           (long long)n);
    FAISS_THROW_IF_NOT_FMT(int(options.algo) >= 0 && int(options.algo) <= 3,
                           "selectK: unknown selection algorithm %d", int(options.algo));
    if (rows == 0) return;
    FAISS_THROW_IF_NOT_MSG(values, "selectK: values is a null pointer");
    FAISS_THROW_IF_NOT_MSG(outValues || outIndices,
                           "selectK: both outputs are null (nothing to return)");
    SelectAlgo algo = options.algo == SelectAlgo::Auto ? chooseSelectAlgo(rows, n, k)
                                                       : options.algo;
    FAISS_THROW_IF_NOT_FMT(algo != SelectAlgo::MergeQueue || k <= select::kMergeQueueMaxK,
                           "selectK: the merge queue selects at most k = %lld (asked for %lld)",
                           (long long)select::kMergeQueueMaxK, (long long)k);
    int device = options.device;
    if (device < 0) {
        device = getCurrentDevice();
    } else {
        checkDevice(device);
    }
    std::shared_ptr<GpuResources> res = provider->getResources();
    res->initializeForDevice(device);
    DeviceScope scope(device);
    cudaStream_t stream = res->getDefaultStream(device);

    int vDev = -1, iDev = -1;
    const bool valuesOnDev = isDevicePointer(values, &vDev);
    FAISS_THROW_IF_NOT_FMT(!valuesOnDev || vDev == device,
                           "selectK: values live on device %d, selection runs on device %d", vDev,
                           device);
    const bool idxOnDev = options.inIndices && isDevicePointer(options.inIndices, &iDev);
    FAISS_THROW_IF_NOT_FMT(!idxOnDev || iDev == device,
                           "selectK: inIndices live on device %d, selection runs on device %d",
                           iDev, device);
    const bool vOutDev = outValues && isDevicePointer(outValues);
    const bool iOutDev = outIndices && isDevicePointer(outIndices);

    // Row blocks sized from the temporary memory budget.
    const bool copyIn = !valuesOnDev || largest;
    const size_t perRow = (copyIn ? sizeof(float) * n : 0) +
                          RowSelector::bytesPerRow(algo, n, 1, n, k, 4, 8) +
                          (sizeof(float) + sizeof(int64_t)) * k;
    const size_t budget = res->getTempMemoryAvailable(device) / 10 * 9;
    const int64_t blockRows = std::min<int64_t>(rows, int64_t(budget / perRow));
    FAISS_THROW_IF_NOT_FMT(blockRows >= 1,
                           "selectK: GPU temporary memory too small: %zu bytes available, %zu "
                           "needed per row (raise StandardGpuResources::setTempMemory)",
                           budget, perRow);
    TempBuffer<float> in(res.get(), device, copyIn ? size_t(blockRows) * n : 0, stream);
    TempBuffer<float> vals(res.get(), device, size_t(blockRows) * k, stream);
    TempBuffer<int64_t> ids(res.get(), device, size_t(blockRows) * k, stream);
    RowSelector sel(res.get(), device, stream, algo, blockRows, n, 1, n, k, 4, 8);
    std::vector<int64_t> hostIds;
    for (int64_t r0 = 0; r0 < rows; r0 += blockRows) {
        const int64_t m = std::min(blockRows, rows - r0);
        const float* src = values + size_t(r0) * n;
        if (copyIn) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(in.data(), src, sizeof(float) * size_t(m) * n,
                                                 cudaMemcpyDefault, stream));
            if (largest) select::negateCopy(in.data(), in.data(), m * n, stream);
            src = in.data();
        }
        sel.begin(m);
        sel.addTile(src, n, nullptr, 0, n);
        const uint64_t* keys = sel.finish();
        select::decodeKeys(keys, m, k, k,
                           largest ? select::KeyDecode::Negated : select::KeyDecode::Identity,
                           nullptr, vals.data(), ids.data(), stream);
        if (options.inIndices && idxOnDev) {
            select::gatherIndices(options.inIndices + size_t(r0) * n, n, ids.data(), m, k, stream);
        }
        if (outValues) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(outValues + size_t(r0) * k, vals.data(),
                                                 sizeof(float) * size_t(m) * k,
                                                 vOutDev ? cudaMemcpyDeviceToDevice
                                                         : cudaMemcpyDeviceToHost,
                                                 stream));
        }
        if (outIndices) {
            if (options.inIndices && !idxOnDev) {
                // Ids on the host: map the column numbers there.
                hostIds.resize(size_t(m) * k);
                FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostIds.data(), ids.data(),
                                                     sizeof(int64_t) * size_t(m) * k,
                                                     cudaMemcpyDeviceToHost, stream));
                FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
                for (int64_t r = 0; r < m; ++r) {
                    for (int64_t j = 0; j < k; ++j) {
                        int64_t& l = hostIds[size_t(r) * k + j];
                        l = options.inIndices[size_t(r0 + r) * n + l];
                    }
                }
                FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(outIndices + size_t(r0) * k, hostIds.data(),
                                                     sizeof(int64_t) * size_t(m) * k,
                                                     cudaMemcpyDefault, stream));
            } else {
                FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(outIndices + size_t(r0) * k, ids.data(),
                                                     sizeof(int64_t) * size_t(m) * k,
                                                     iOutDev ? cudaMemcpyDeviceToDevice
                                                             : cudaMemcpyDeviceToHost,
                                                     stream));
            }
        }
        // Buffers are reused by the next block; host outputs must be complete.
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
}

}  // namespace gpu
}  // namespace faiss_ext
