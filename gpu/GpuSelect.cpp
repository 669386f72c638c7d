#include "faiss_ext/gpu/GpuSelect.h"

#include "faiss_ext/gpu/impl/flat/RowSelector.h"
#include "faiss_ext/gpu/impl/select/MergeQueue.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"
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
    // commit dbe9984e5414; docs/benchmark-tables.md, "Crossovers"): the merge
    // queue beats quick multi-select only with many rows, k <= 32 and rows
    // of at most 2^16 (by 1.05-1.7x: 2048 x 2^13, k = 32: 0.13 vs 0.22 ms);
    // quick multi-select wins everywhere else, by up to 20x at large k.
    // TH-heap never won: its pruned rows cross PCIe and are sorted on the
    // CPU, 1.3-3x slower than quick multi-select at nq = 1, k <= 32, and
    // 20-300x slower at nq >= 64. d does not move these
    // crossovers: selection alone does not see it, it only scales the GEMM
    // in front. (selectK's Auto then runs the sampled-threshold filter instead
    // of quick multi-select on device matrices in its range: see selectK.)
    (void)d;
    if (rows >= 2048 && k <= 32 && n <= 65536) return SelectAlgo::MergeQueue;
    return SelectAlgo::QuickMultiSelect;
}

namespace {

/// Where selectK's results go: outputs (either may be null) and the ids
/// they are mapped through, each with where it lives.
struct SelectOutputs {
    float* values;
    int64_t* indices;
    bool valuesOnDev;
    bool indicesOnDev;
    const int64_t* inIndices;
    bool inIndicesOnDev;
};

/// Selects m rows of `src` (m x n) with `sel` and decodes them to device
/// vals / ids (m x k; either may be null). staging (m x n floats, or null):
/// the rows are copied there first (host rows), negated when largest.
void selectRowBlock(RowSelector& sel, const float* src, float* staging, int64_t m, int64_t n,
                    int64_t k, bool largest, float* vals, int64_t* ids, cudaStream_t stream) {
    if (staging) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(staging, src, sizeof(float) * size_t(m) * n,
                                             cudaMemcpyDefault, stream));
        if (largest) select::negateCopy(staging, staging, m * n, stream);
        src = staging;
    }
    sel.begin(m);
    sel.addTile(src, n, nullptr, 0, n);
    const uint64_t* keys = sel.finish();
    select::decodeKeys(keys, m, k, k,
                       largest ? select::KeyDecode::Negated : select::KeyDecode::Identity, nullptr,
                       vals, ids, stream);
}

/// Maps the ids of rows r0..r0+m-1 (device vals / ids, m x k) through the
/// input ids and copies them to the outputs; returns once they are there
/// (the buffers are reused by the next row block; host outputs must be
/// complete).
void deliverRowBlock(const SelectOutputs& out, const float* vals, int64_t* ids, int64_t r0,
                     int64_t m, int64_t n, int64_t k, std::vector<int64_t>& hostIds,
                     cudaStream_t stream) {
    if (out.inIndices && out.inIndicesOnDev) {
        select::gatherIndices(out.inIndices + size_t(r0) * n, n, ids, m, k, stream);
    }
    if (out.values) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(out.values + size_t(r0) * k, vals,
                                             sizeof(float) * size_t(m) * k,
                                             out.valuesOnDev ? cudaMemcpyDeviceToDevice
                                                             : cudaMemcpyDeviceToHost,
                                             stream));
    }
    if (out.indices) {
        if (out.inIndices && !out.inIndicesOnDev) {
            // Ids on the host: map the column numbers there.
            hostIds.resize(size_t(m) * k);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostIds.data(), ids,
                                                 sizeof(int64_t) * size_t(m) * k,
                                                 cudaMemcpyDeviceToHost, stream));
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
            for (int64_t r = 0; r < m; ++r) {
                for (int64_t j = 0; j < k; ++j) {
                    int64_t& l = hostIds[size_t(r) * k + j];
                    l = out.inIndices[size_t(r0 + r) * n + l];
                }
            }
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(out.indices + size_t(r0) * k, hostIds.data(),
                                                 sizeof(int64_t) * size_t(m) * k,
                                                 cudaMemcpyDefault, stream));
        } else {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(out.indices + size_t(r0) * k, ids,
                                                 sizeof(int64_t) * size_t(m) * k,
                                                 out.indicesOnDev ? cudaMemcpyDeviceToDevice
                                                                  : cudaMemcpyDeviceToHost,
                                                 stream));
        }
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

/// Rows of perRow bytes each (at most `rows`) that 90% of the temporary
/// memory left holds; throws a clear error when not even one does.
int64_t rowsThatFit(GpuResources* res, int device, size_t perRow, int64_t rows) {
    const size_t budget = res->getTempMemoryAvailable(device) / 10 * 9;
    const int64_t fit = std::min<int64_t>(rows, int64_t(budget / perRow));
    FAISS_THROW_IF_NOT_FMT(fit >= 1,
                           "selectK: GPU temporary memory too small: %zu bytes available, %zu "
                           "needed per row (raise StandardGpuResources::setTempMemory)",
                           budget, perRow);
    return fit;
}

/// Device bytes quick multi-select needs to redo one row of n (staging
/// included when largest: the row is negated into it).
size_t fallbackBytesPerRow(int64_t n, int64_t k, bool largest) {
    return (largest ? sizeof(float) * n : 0) +
           RowSelector::bytesPerRow(SelectAlgo::QuickMultiSelect, n, 1, n, k, 4, 8);
}

/// The rows r with flags[r] of the device matrix `values` (rows of n)
/// selected again by quick multi-select, into device vals / ids (k per row,
/// row r at r * k; either may be null): the sampled-threshold path's fallback.
/// Runs of consecutive flagged rows go together, in row blocks sized from
/// the temporary memory left.
void redoFlaggedRows(GpuResources* res, int device, cudaStream_t stream, const float* values,
                     const std::vector<uint8_t>& flags, int64_t n, int64_t k, bool largest,
                     float* vals, int64_t* ids) {
    const int64_t rows = int64_t(flags.size());
    int64_t longest = 0, run = 0;
    for (uint8_t f : flags) {
        run = f ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    if (longest == 0) return;
    const int64_t blockRows = rowsThatFit(res, device, fallbackBytesPerRow(n, k, largest), longest);
    TempBuffer<float> staging(res, device, largest ? size_t(blockRows) * n : 0, stream);
    RowSelector sel(res, device, stream, SelectAlgo::QuickMultiSelect, blockRows, n, 1, n, k, 4,
                    8);
    for (int64_t r = 0; r < rows;) {
        if (!flags[size_t(r)]) {
            ++r;
            continue;
        }
        int64_t m = 1;
        while (m < blockRows && r + m < rows && flags[size_t(r + m)]) ++m;
        selectRowBlock(sel, values + size_t(r) * n, largest ? staging.data() : nullptr, m, n, k,
                       largest, vals ? vals + size_t(r) * k : nullptr,
                       ids ? ids + size_t(r) * k : nullptr, stream);
        r += m;
    }
}

/// selectK by the sampled-threshold filter (impl/select/SampledThresholdSelect.h)
/// for a device matrix, flagged rows redone by quick multi-select. direct:
/// the results are decoded straight into the outputs (both on this device or
/// null, ids mapped on the device if at all); else through buffers, as the
/// usual path. Returns false, having done nothing, when its buffers and one
/// row of the fallback do not fit the temporary memory (selectK then takes
/// the usual path).
bool selectSampledThreshold(GpuResources* res, int device, cudaStream_t stream,
                            const float* values, int64_t rows, int64_t n, int64_t k, bool largest,
                            const SelectOutputs& out, bool direct) {
    const size_t perRow = select::sampledThresholdScratchBytes(1, n, k) + 1 +
                          (direct ? 0 : (sizeof(float) + sizeof(int64_t)) * k);
    const size_t fallbackRow = fallbackBytesPerRow(n, k, largest);
    const size_t budget = res->getTempMemoryAvailable(device) / 10 * 9;
    if (budget < fallbackRow + perRow) return false;
    const int64_t blockRows = std::min<int64_t>(
            {rows, int64_t((budget - fallbackRow) / perRow), select::kSampledThresholdMaxRows});
    const size_t scratchBytes = select::sampledThresholdScratchBytes(blockRows, n, k);
    TempBuffer<char> scratch(res, device, scratchBytes, stream);
    TempBuffer<uint8_t> flags(res, device, size_t(blockRows), stream);
    TempBuffer<float> vals(res, device, direct ? 0 : size_t(blockRows) * k, stream);
    TempBuffer<int64_t> ids(res, device, direct ? 0 : size_t(blockRows) * k, stream);
    std::vector<uint8_t> hostFlags;
    std::vector<int64_t> hostIds;
    for (int64_t r0 = 0; r0 < rows; r0 += blockRows) {
        const int64_t m = std::min(blockRows, rows - r0);
        float* v = direct ? (out.values ? out.values + size_t(r0) * k : nullptr) : vals.data();
        int64_t* ix = direct ? (out.indices ? out.indices + size_t(r0) * k : nullptr) : ids.data();
        const float* src = values + size_t(r0) * n;
        select::sampledThresholdSelect(src, m, n, k, largest, v, ix, flags.data(), scratch.data(),
                                       scratchBytes, stream);
        // The one wait of the path: which rows need the fallback.
        if (select::fetchSampledThresholdFlags(flags.data(), m, hostFlags, stream) > 0)
            redoFlaggedRows(res, device, stream, src, hostFlags, n, k, largest, v, ix);
        if (!direct) {
            deliverRowBlock(out, vals.data(), ids.data(), r0, m, n, k, hostIds, stream);
        } else if (out.indices && out.inIndices) {
            select::gatherIndices(out.inIndices + size_t(r0) * n, n, ix, m, k, stream);
        }
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return true;
}

}  // namespace

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
    int vOutDevice = -1, iOutDevice = -1;
    const bool vOutDev = outValues && isDevicePointer(outValues, &vOutDevice);
    const bool iOutDev = outIndices && isDevicePointer(outIndices, &iOutDevice);

    const SelectOutputs out{outValues, outIndices, vOutDev, iOutDev, options.inIndices, idxOnDev};

    // Auto on a device matrix with rows much longer than k: one read of the
    // matrix by the sampled-threshold filter (where Auto would have run quick
    // multi-select: the merge queue keeps its measured region).
    if (options.algo == SelectAlgo::Auto && algo == SelectAlgo::QuickMultiSelect && valuesOnDev &&
        select::sampledThresholdApplies(n, k)) {
        const bool direct =
                (!outValues || (vOutDev && vOutDevice == device)) &&
                (!outIndices || (iOutDev && iOutDevice == device && (!options.inIndices || idxOnDev)));
        if (selectSampledThreshold(res.get(), device, stream, values, rows, n, k, largest, out,
                                   direct)) {
            return;
        }
    }

    // Row blocks sized from the temporary memory budget.
    const bool copyIn = !valuesOnDev || largest;
    const size_t perRow = (copyIn ? sizeof(float) * n : 0) +
                          RowSelector::bytesPerRow(algo, n, 1, n, k, 4, 8) +
                          (sizeof(float) + sizeof(int64_t)) * k;
    const int64_t blockRows = rowsThatFit(res.get(), device, perRow, rows);
    TempBuffer<float> in(res.get(), device, copyIn ? size_t(blockRows) * n : 0, stream);
    TempBuffer<float> vals(res.get(), device, size_t(blockRows) * k, stream);
    TempBuffer<int64_t> ids(res.get(), device, size_t(blockRows) * k, stream);
    RowSelector sel(res.get(), device, stream, algo, blockRows, n, 1, n, k, 4, 8);
    std::vector<int64_t> hostIds;
    for (int64_t r0 = 0; r0 < rows; r0 += blockRows) {
        const int64_t m = std::min(blockRows, rows - r0);
        selectRowBlock(sel, values + size_t(r0) * n, copyIn ? in.data() : nullptr, m, n, k,
                       largest, vals.data(), ids.data(), stream);
        deliverRowBlock(out, vals.data(), ids.data(), r0, m, n, k, hostIds, stream);
    }
}

}  // namespace gpu
}  // namespace faiss_ext
