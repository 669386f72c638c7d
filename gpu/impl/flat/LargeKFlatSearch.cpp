#include "faiss_ext/gpu/impl/flat/LargeKFlatSearch.h"

#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/select/RadixSelectRows.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace {

int64_t paddedWidth(int64_t nb) { return (nb + 3) / 4 * 4; }

/// Temporary bytes of a row block of `rows` rows: the distance tile, the
/// selected keys, the radix scratch and the sort's temporary memory, and
/// where the sampled-threshold filter applies its scratch and flags.
size_t blockBytes(int64_t rows, int64_t nb, int64_t kk) {
    const size_t filter = select::sampledThresholdKeysApply(nb, kk)
                                  ? select::sampledThresholdScratchBytes(rows, nb, kk) + size_t(rows)
                                  : 0;
    return sizeof(float) * size_t(rows) * paddedWidth(nb) + sizeof(uint64_t) * size_t(rows) * kk +
           select::radixSelectScratchBytes(rows) + select::sortKeyRowsTempBytes(rows, kk) + filter +
           6 * 256;  // allocation rounding
}

/// The kk smallest keys of each row of the block by the sampled-threshold
/// filter (one read of the tile; sorted), decoded into the block's results;
/// true when no row was flagged. Decodes before it waits for the flags, so
/// that the decode is queued while the filter runs: the rows the filter
/// could not settle (placeholders) are redone and decoded again by the
/// caller.
bool sampledSelectRows(const float* dist, int64_t ld, const float* colAdd, int64_t rows,
                       int64_t nb, int64_t kk, uint64_t* keys, uint8_t* flags, void* scratch,
                       size_t scratchBytes, const std::function<void()>& decode,
                       cudaStream_t stream) {
    select::sampledThresholdSelectKeys(dist, ld, colAdd, rows, nb, kk, keys, flags, scratch,
                                       scratchBytes, stream);
    decode();
    std::vector<uint8_t> host;
    return select::fetchSampledThresholdFlags(flags, rows, host, stream) == 0;
}

/// What every row block uses, carved from one allocation: the distance
/// tile, the selected keys and, where the sampled-threshold filter applies,
/// its scratch and flags. (The radix path's scratch and sort memory are
/// taken only by a block with a flagged row.)
struct BlockMemory {
    size_t dist, keys, filter, flags, total, filterBytes;
    BlockMemory(int64_t rows, int64_t nb, int64_t kk, bool sampled) {
        filterBytes = sampled ? select::sampledThresholdScratchBytes(rows, nb, kk) : 0;
        dist = 0;
        keys = dist + align256(sizeof(float) * size_t(rows) * paddedWidth(nb));
        filter = keys + align256(sizeof(uint64_t) * size_t(rows) * kk);
        flags = filter + align256(filterBytes);
        total = flags + align256(sampled ? size_t(rows) : 0);
    }
};

/// The kk smallest keys of each of `rows` rows of the tile by radix
/// selection, sorted: the path where the filter does not apply, and the
/// redo of a block with a flagged row.
void radixSelectBlock(GpuResources* res, int device, cudaStream_t stream, const float* dist,
                      int64_t ld, const float* colAdd, int64_t rows, int64_t nb, int64_t kk,
                      uint64_t* keys) {
    const size_t radixBytes = select::radixSelectScratchBytes(rows);
    TempBuffer<char> radixScratch(res, device, radixBytes, stream);
    const size_t sortBytes = select::sortKeyRowsTempBytes(rows, kk);
    TempBuffer<char> sortTemp(res, device, sortBytes, stream);
    select::radixSelectRows(dist, ld, colAdd, 0, rows, nb, kk, keys, radixScratch.data(),
                            radixBytes, stream);
    select::sortKeyRows(keys, rows, kk, sortTemp.data(), sortBytes, stream);
}

}  // namespace

int64_t radixRowsFit(size_t budget, int64_t nb, int64_t kk, int64_t nq) {
    FAISS_THROW_IF_NOT_FMT(nb >= 1 && kk >= 1 && kk <= nb && nq >= 1,
                           "radixRowsFit: bad shape (nb %lld, k %lld, nq %lld)", (long long)nb,
                           (long long)kk, (long long)nq);
    // Row blocks are launched as grid rows (< 65536) and GEMM tiles stay
    // under 2^31 entries, as the tiled path's planner keeps them.
    int64_t rows = std::min<int64_t>({nq, 65535, (int64_t(1) << 31) / paddedWidth(nb)});
    while (rows >= 1 && blockBytes(rows, nb, kk) > budget) rows /= 2;
    return std::max<int64_t>(rows, 0);
}

void radixLargeKSearch(GpuResources* res, int device, cudaStream_t stream,
                       const DeviceCorpus& corpus, const float* queries, int64_t nq, int64_t k,
                       select::KeyDecode decode, const float* qNorms, float* distances,
                       int64_t* labels, size_t budget, std::function<void()> beforeResults) {
    FAISS_THROW_IF_NOT_FMT(k >= 1 && nq >= 0 && corpus.nb >= 1 && corpus.d >= 1,
                           "radixLargeKSearch: bad shape (nq %lld, k %lld, nb %lld, d %d)",
                           (long long)nq, (long long)k, (long long)corpus.nb, corpus.d);
    if (nq == 0) return;
    const int64_t nb = corpus.nb, kk = std::min(k, nb), ld = paddedWidth(nb);
    const int64_t rowsMax = radixRowsFit(budget, nb, kk, nq);
    FAISS_THROW_IF_NOT_FMT(rowsMax >= 1, "radix large-k search: %zu bytes of temporary memory "
                           "hold no full distance row of %lld vectors at k = %lld", budget,
                           (long long)nb, (long long)kk);
    // The sampled-threshold filter reads each distance row once where it
    // applies; the radix passes (four reads) redo a block with a flagged row.
    const bool sampled = select::sampledThresholdKeysApply(nb, kk);
    const BlockMemory layout(rowsMax, nb, kk, sampled);
    TempBuffer<char> memory(res, device, layout.total, stream);
    float* dist = reinterpret_cast<float*>(memory.data() + layout.dist);
    uint64_t* keys = reinterpret_cast<uint64_t*>(memory.data() + layout.keys);
    void* filterScratch = memory.data() + layout.filter;
    uint8_t* flags = reinterpret_cast<uint8_t*>(memory.data() + layout.flags);
    const float alpha = corpus.sqNorms ? -2.f : -1.f;  // as the tiled path's keys
    cublasHandle_t blas = res->getBlasHandle(device);
    for (int64_t q0 = 0; q0 < nq; q0 += rowsMax) {
        const int64_t rows = std::min(rowsMax, nq - q0);
        gemmDotProducts(blas, queries + size_t(q0) * corpus.d, rows, corpus.vectors, nb, corpus.d,
                        alpha, dist, ld);
        auto decodeBlock = [&] {
            if (beforeResults) {  // once, while this block's GEMM and filter run
                beforeResults();
                beforeResults = nullptr;
            }
            select::decodeKeys(keys, rows, kk, k, decode, qNorms ? qNorms + q0 : nullptr,
                               distances + size_t(q0) * k, labels + size_t(q0) * k, stream);
        };
        if (!sampled || !sampledSelectRows(dist, ld, corpus.sqNorms, rows, nb, kk, keys, flags,
                                           filterScratch, layout.filterBytes, decodeBlock,
                                           stream)) {
            radixSelectBlock(res, device, stream, dist, ld, corpus.sqNorms, rows, nb, kk, keys);
            decodeBlock();
        }
    }
}

}  // namespace gpu
}  // namespace faiss_ext
