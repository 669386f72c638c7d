// The probe search (see ProbeSearch.h), per chunk of queries:
//   1. the `probes` nearest centres of each query (FlatStorage::search);
//   2. the query-list pairs counted per list, grouped by list (a scatter
//      through per-list cursors), and cut into work items of up to 8 x
//      queries-a-warp pairs of one list (ProbePlan.h, on the host from the
//      lists' counts);
//   3. scanListsKernel, one block per item: the item's queries and, 32 at a
//      time, the list's vectors in shared memory, every distance in FP32,
//      each query's k best kept sorted in shared memory (candidates that
//      beat the current k-th are buffered, then merged by a warp bitonic
//      sort; with current answers to merge, their k-th starts as one of
//      the k best, so that only vectors nearer than it are sorted),
//      written per pair;
//   4. mergeProbesKernel, one warp per query: the k best over its pairs
//      (and its current answers, a probed row that is also one of them
//      counted once).
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <vector>

#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"
#include "faiss_ext/gpu/impl/graph/ProbePlan.h"
#include "faiss_ext/gpu/impl/graph/ProbeSearch.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"
#include "faiss_ext/gpu/utils/WarpSort.cuh"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

const char* const kWho = "probe search";
constexpr int kWarps = 8;          // scanListsKernel: 256 threads
constexpr int kRowsPerChunk = 32;  // list vectors in shared memory at once (a warp's lanes)
constexpr int kMaxQueriesPerWarp = 4;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr uint32_t kNoRow = 0xFFFFFFFFu;

using WorkItem = ProbeWorkItem;

/// The sorted-array width of a query's best: a power of two >= 32 and >= k
/// (its array holds `width` best, sorted, then `width` buffered candidates).
int bestWidth(int64_t k) {
    int w = 32;
    while (w < k) w <<= 1;
    return w;
}

/// The queries' stride in shared memory: d rounded up to whole float4s
/// (zeros past d), so that a warp reads four coordinates of a query, the
/// same for all lanes, in one 16-byte load.
__host__ __device__ inline int queryStride(int d) { return (d + 3) & ~3; }

/// The stride of the list vectors in shared memory: odd, so that the 32
/// lanes reading coordinate j of 32 rows hit 32 different banks, and at
/// least queryStride(d) (zeros past d, as the queries have).
__host__ __device__ inline int rowStride(int d) { return queryStride(d) | 1; }

/// One coordinate's term of a key: q x for similarities, (q - x)^2 for L2.
__device__ __forceinline__ float productStep(float acc, float q, float x, bool similarity) {
    return similarity ? fmaf(q, x, acc) : fmaf(q - x, q - x, acc);
}

/// The key and row of a result (distance d, label l) in the index's
/// conventions: keys order nearest first; -1 labels become kNoRow.
__device__ __forceinline__ float keyOfDistance(float d, bool similarity) {
    return similarity ? -d : d;
}
__device__ __forceinline__ uint32_t rowOfLabel(int64_t l) { return l < 0 ? kNoRow : uint32_t(l); }

/// Shared memory of scanListsKernel with qpw queries a warp.
size_t scanSharedBytes(int d, int qpw, int width) {
    const size_t queries = size_t(kWarps) * qpw;
    return queries * size_t(queryStride(d)) * sizeof(float) +
           size_t(kRowsPerChunk) * size_t(rowStride(d)) * sizeof(float) +
           queries * 2 * size_t(width) * (sizeof(float) + sizeof(uint32_t));
}

int maxSharedBytes(int device) {
    int bytes = 0;
    FAISS_EXT_CUDA_CHECK(
        cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return bytes;
}

/// The most queries a warp takes (4, 2 or 1) whose shared memory fits; 0: none.
int queriesPerWarp(int d, int width, int device) {
    const size_t limit = size_t(maxSharedBytes(device));
    for (int qpw = kMaxQueriesPerWarp; qpw >= 1; qpw >>= 1) {
        if (scanSharedBytes(d, qpw, width) <= limit) return qpw;
    }
    return 0;
}

/// counts[l] += 1 for each pair's list l; a pair without a list (l < 0: no
/// such centre) gets empty partial results here, as no item will write it.
__global__ void countPairsKernel(const int64_t* pairLists, int64_t pairs, int k, unsigned* counts,
                                 float* partialKeys, uint32_t* partialRows) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t l = pairLists[i];
        if (l >= 0) {
            atomicAdd(&counts[l], 1u);
            continue;
        }
        for (int j = 0; j < k; ++j) {
            partialKeys[i * k + j] = infinity();
            partialRows[i * k + j] = kNoRow;
        }
    }
}

/// grouped[cursor[l]++] = i for each pair i of list l (the order within a
/// list is free: a pair's results do not depend on its tile's company).
__global__ void groupPairsKernel(const int64_t* pairLists, int64_t pairs, unsigned* cursor,
                                 uint32_t* grouped) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t l = pairLists[i];
        if (l >= 0) grouped[atomicAdd(&cursor[l], 1u)] = uint32_t(i);
    }
}

struct ScanArgs {
    const WorkItem* items;
    const uint32_t* grouped;  ///< pair indices grouped by list
    const float* queries;     ///< the chunk's, m x d
    const float* vectors;     ///< the storage's, nb x d
    const uint32_t* rows;     ///< ProbeLists::rows
    const int64_t* offsets;   ///< ProbeLists::offsets
    int d;
    int probes;
    int k;
    int width;  ///< bestWidth(k)
    int qpw;    ///< queries a warp
    bool similarity;
    /// The chunk's current answers to merge (m x k; null: none): their k-th
    /// starts in each pair's best.
    const float* currentD;
    const int64_t* currentI;
    const uint32_t* keepBits;  ///< the selection over storage rows (null: all)
    float* partialKeys;        ///< pairs x k
    uint32_t* partialRows;     ///< pairs x k
};

/// Candidates of one query (their keys and rows, one per lane; NaN and
/// invalid lanes never enter) merged into its best (keys / rows: width
/// best, sorted, then width of buffer): those beating the current k-th are
/// buffered and the whole sorted again.
__device__ void offerCandidates(float key, uint32_t row, bool valid, int k, int width, float* keys,
                                uint32_t* rows, int lane) {
    const bool take = valid && pairLess(key, row, keys[k - 1], rows[k - 1]);
    const unsigned mask = __ballot_sync(kFullMask, take);
    if (mask == 0) return;
    if (take) {
        const int pos = __popc(mask & ((1u << lane) - 1u));
        keys[width + pos] = key;
        rows[width + pos] = row;
    }
    for (int p = __popc(mask) + lane; p < width; p += 32) {
        keys[width + p] = infinity();
        rows[width + p] = kNoRow;
    }
    __syncwarp();
    warpBitonicSort(keys, rows, 2 * width, lane);
}

/// One work item: its queries' k best among the list's vectors.
__global__ void scanListsKernel(ScanArgs a) {
    extern __shared__ float4 scanShared[];  // (float4: the query rows' loads need 16 bytes)
    float* shared = reinterpret_cast<float*>(scanShared);
    const WorkItem item = a.items[blockIdx.x];
    const int queries = kWarps * a.qpw;
    const int dq = queryStride(a.d), stride = rowStride(a.d);
    float* qs = shared;                             // queries x dq (16-byte aligned rows)
    float* xs = qs + size_t(queries) * dq;          // kRowsPerChunk x stride
    float* bestKeys = xs + kRowsPerChunk * stride;  // queries x 2 width
    uint32_t* bestRows = reinterpret_cast<uint32_t*>(bestKeys + size_t(queries) * 2 * a.width);
    for (int64_t t = threadIdx.x; t < int64_t(queries) * dq; t += blockDim.x) {
        const int i = int(t / dq);
        const int j = int(t - int64_t(i) * dq);
        const uint32_t pair = a.grouped[item.first + min(uint32_t(i), item.count - 1)];
        qs[t] = j < a.d ? a.queries[int64_t(pair / uint32_t(a.probes)) * a.d + j] : 0.f;
    }
    for (int t = threadIdx.x; t < queries * 2 * a.width; t += blockDim.x) {
        bestKeys[t] = infinity();
        bestRows[t] = kNoRow;
        // the current k-th answer in each of the first k places (sorted, and
        // the k-th to beat from the start; its copies come back in the
        // partial results, where the merge drops them as a current row)
        const int slot = t / (2 * a.width);
        if (a.currentD && t - slot * 2 * a.width < a.k && slot < int(item.count)) {
            const int64_t e =
                int64_t(a.grouped[item.first + slot] / uint32_t(a.probes)) * a.k + (a.k - 1);
            bestKeys[t] = keyOfDistance(a.currentD[e], a.similarity);
            bestRows[t] = rowOfLabel(a.currentI[e]);
        }
    }
    __syncthreads();  // (an empty list runs no chunk: the write-out reads these)
    const int64_t begin = a.offsets[item.list], end = a.offsets[item.list + 1];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    // warp w scores slots w, w + kWarps, ...: an item of few queries spreads
    // them over the warps instead of loading the first ones
    const int mine = max(0, min(a.qpw, (int(item.count) - warp + kWarps - 1) / kWarps));
    for (int64_t c0 = begin; c0 < end; c0 += kRowsPerChunk) {
        const int inChunk = int(min(int64_t(kRowsPerChunk), end - c0));
        __syncthreads();  // (the previous chunk's readers are done)
        for (int t = threadIdx.x; t < inChunk * dq; t += blockDim.x) {
            const int r = t / dq, j = t - r * dq;
            xs[r * stride + j] = j < a.d ? a.vectors[int64_t(a.rows[c0 + r]) * a.d + j] : 0.f;
        }
        __syncthreads();
        if (mine == 0) continue;  // (warp-uniform: this warp holds no query of the item)
        const uint32_t row = lane < inChunk ? a.rows[c0 + lane] : kNoRow;
        const bool valid =
            row != kNoRow && (!a.keepBits || ((a.keepBits[row >> 5] >> (row & 31)) & 1u));
        float acc[kMaxQueriesPerWarp] = {0.f, 0.f, 0.f, 0.f};
        const float* x = xs + lane * stride;
        for (int j = 0; j < dq; j += 4) {
            const float x0 = x[j], x1 = x[j + 1], x2 = x[j + 2], x3 = x[j + 3];
#pragma unroll
            for (int i = 0; i < kMaxQueriesPerWarp; ++i) {
                if (i >= mine) break;
                const float4 q4 =
                    *reinterpret_cast<const float4*>(qs + size_t(warp + kWarps * i) * dq + j);
                acc[i] = productStep(acc[i], q4.x, x0, a.similarity);
                acc[i] = productStep(acc[i], q4.y, x1, a.similarity);
                acc[i] = productStep(acc[i], q4.z, x2, a.similarity);
                acc[i] = productStep(acc[i], q4.w, x3, a.similarity);
            }
        }
        for (int i = 0; i < mine; ++i) {
            const size_t slot = size_t(warp + kWarps * i);
            offerCandidates(keyOfDistance(acc[i], a.similarity), row, valid, a.k, a.width,
                            bestKeys + slot * 2 * a.width, bestRows + slot * 2 * a.width, lane);
        }
    }
    __syncwarp();
    for (int i = 0; i < mine; ++i) {
        const int slot = warp + kWarps * i;
        const int64_t pair = a.grouped[item.first + slot];
        for (int j = lane; j < a.k; j += 32) {
            a.partialKeys[pair * a.k + j] = bestKeys[size_t(slot) * 2 * a.width + j];
            a.partialRows[pair * a.k + j] = bestRows[size_t(slot) * 2 * a.width + j];
        }
    }
}

/// Whether `row` is one of the k current answers in seedRows (shared, one
/// warp's): the merge counts such a row once.
__device__ __forceinline__ bool isSeedRow(uint32_t row, const uint32_t* seedRows, int k) {
    for (int j = 0; j < k; ++j) {
        if (seedRows[j] == row) return true;
    }
    return false;
}

struct MergeArgs {
    const float* partialKeys;
    const uint32_t* partialRows;
    int64_t m;
    int probes;
    int k;
    int width;
    bool similarity;
    bool mergeCurrent;  ///< distances / labels hold current answers to merge
    float* distances;
    int64_t* labels;
};

/// One warp per query: the k best over its `probes` pairs' partial results
/// (each sorted) and, with mergeCurrent, its current answers, into the
/// outputs in the index's conventions.
__global__ void mergeProbesKernel(MergeArgs a) {
    extern __shared__ float shared[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int warps = blockDim.x >> 5, width = a.width, k = a.k;
    float* keys = shared + size_t(warp) * 2 * width;
    uint32_t* rows =
        reinterpret_cast<uint32_t*>(shared + size_t(warps) * 2 * width) + size_t(warp) * 2 * width;
    uint32_t* seedRows =
        reinterpret_cast<uint32_t*>(shared + size_t(warps) * 4 * width) + size_t(warp) * width;
    for (int64_t q = firstWarpRow(); q < a.m; q += gridWarps()) {
        for (int t = lane; t < width; t += 32) {
            const bool seed = a.mergeCurrent && t < k;
            keys[t] = seed ? keyOfDistance(a.distances[q * k + t], a.similarity) : infinity();
            rows[t] = seed ? rowOfLabel(a.labels[q * k + t]) : kNoRow;
            seedRows[t] = rows[t];
        }
        __syncwarp();
        for (int s = 0; s < a.probes; ++s) {
            const int64_t base = (q * a.probes + s) * k;
            // (a pair whose best does not beat the k-th changes nothing)
            if (!pairLess(a.partialKeys[base], a.partialRows[base], keys[k - 1], rows[k - 1])) {
                __syncwarp();
                continue;
            }
            for (int t = lane; t < width; t += 32) {
                const uint32_t row = t < k ? a.partialRows[base + t] : kNoRow;
                const bool keep = row != kNoRow && !(a.mergeCurrent && isSeedRow(row, seedRows, k));
                keys[width + t] = keep ? a.partialKeys[base + t] : infinity();
                rows[width + t] = keep ? row : kNoRow;
            }
            __syncwarp();
            warpBitonicSort(keys, rows, 2 * width, lane);
        }
        for (int j = lane; j < k; j += 32) {
            a.distances[q * k + j] = a.similarity ? -keys[j] : keys[j];
            a.labels[q * k + j] = rows[j] == kNoRow ? int64_t(-1) : int64_t(rows[j]);
        }
        __syncwarp();
    }
}

/// Steps 1-2 and 3 for m queries (one chunk).
void scanChunk(GpuResources* res, int device, cudaStream_t stream, const ProbeLists& lists,
               const ProbeRequest& r, int64_t m, const float* queries, const float* currentD,
               const int64_t* currentI, int probes, int qpw, float* partialKeys,
               uint32_t* partialRows) {
    const int64_t pairs = m * probes;
    const int d = lists.dim();
    TempBuffer<float> coarseD(res, device, size_t(pairs), stream);
    TempBuffer<int64_t> coarseI(res, device, size_t(pairs), stream);
    FlatSearchOptions o =
        planFlatSearch(lists.lists(), true, FlatMetric::L2, d, m, probes, FlatSearchRequest());
    o.queriesPrepared = true;
    lists.centres().search(queries, m, probes, coarseD.data(), coarseI.data(), o);
    const size_t P = size_t(lists.lists());
    TempBuffer<unsigned> counts(res, device, P, stream);
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, sizeof(unsigned) * P, stream));
    countPairsKernel<<<gridStrideBlocks(pairs), 256, 0, stream>>>(
        coarseI.data(), pairs, int(r.k), counts.data(), partialKeys, partialRows);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    std::vector<unsigned> hostCounts(P), firsts;
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostCounts.data(), counts.data(), sizeof(unsigned) * P,
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<WorkItem> items = probeWorkItems(hostCounts, kWarps * qpw, firsts);
    if (items.empty()) return;
    TempBuffer<WorkItem> deviceItems(res, device, items.size(), stream);
    TempBuffer<uint32_t> grouped(res, device, size_t(pairs), stream);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(deviceItems.data(), items.data(),
                                         sizeof(WorkItem) * items.size(), cudaMemcpyHostToDevice,
                                         stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(counts.data(), firsts.data(), sizeof(unsigned) * P,
                                         cudaMemcpyHostToDevice, stream));
    groupPairsKernel<<<gridStrideBlocks(pairs), 256, 0, stream>>>(coarseI.data(), pairs,
                                                                  counts.data(), grouped.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    ScanArgs a;
    a.items = deviceItems.data();
    a.grouped = grouped.data();
    a.queries = queries;
    a.vectors = lists.vectors();
    a.rows = lists.rows();
    a.offsets = lists.offsets();
    a.d = d;
    a.probes = probes;
    a.k = int(r.k);
    a.width = bestWidth(r.k);
    a.qpw = qpw;
    a.similarity = r.similarity;
    a.currentD = r.mergeCurrent ? currentD : nullptr;
    a.currentI = r.mergeCurrent ? currentI : nullptr;
    a.keepBits = r.keepBits;
    a.partialKeys = partialKeys;
    a.partialRows = partialRows;
    const size_t smem = scanSharedBytes(d, qpw, a.width);
    FAISS_EXT_CUDA_CHECK(cudaFuncSetAttribute(
        scanListsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    scanListsKernel<<<unsigned(items.size()), 32 * kWarps, smem, stream>>>(a);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    // (items and firsts outlive their copies: the stream is synchronised
    // by the caller before this chunk's buffers are reused)
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

bool probeSearchApplies(int64_t k, int dim, int device) {
    return k >= 1 && k <= kProbeMaxK && dim >= 1 && queriesPerWarp(dim, bestWidth(k), device) > 0;
}

void probeSearch(GpuResources* res, int device, const ProbeLists& lists, const ProbeRequest& r) {
    const int d = lists.dim();
    FAISS_THROW_IF_NOT_FMT(r.m >= 0 && r.probes >= 1 && probeSearchApplies(r.k, d, device),
                           "%s: m = %lld, k = %lld, probes = %d (k in [1, %d], d = %d)", kWho,
                           (long long)r.m, (long long)r.k, r.probes, kProbeMaxK, d);
    if (r.m == 0) return;
    DeviceScope scope(device);
    cudaStream_t stream = res->getDefaultStream(device);
    const int probes = int(std::min<int64_t>(r.probes, lists.lists()));
    const int width = bestWidth(r.k);
    const int qpw = queriesPerWarp(d, width, device);
    // per query: coarse keys and lists, grouped pair, partial results
    const int64_t perQuery = int64_t(probes) * (sizeof(float) + sizeof(int64_t) + sizeof(uint32_t) +
                                                r.k * (sizeof(float) + sizeof(uint32_t)));
    const int64_t fit = int64_t(res->getTempMemoryAvailable(device) / 4) / perQuery;
    const int64_t chunk =
        std::max<int64_t>(1, std::min<int64_t>({r.m, fit, int64_t(INT32_MAX) / probes}));
    TempBuffer<float> partialKeys(res, device, size_t(chunk * probes * r.k), stream);
    TempBuffer<uint32_t> partialRows(res, device, size_t(chunk * probes * r.k), stream);
    const int mergeWarps = 4;
    // per warp: the best and its buffer (keys, rows), the current answers' rows
    const size_t mergeSmem =
        size_t(mergeWarps) * width * (2 * sizeof(float) + 3 * sizeof(uint32_t));
    for (int64_t q0 = 0; q0 < r.m; q0 += chunk) {
        const int64_t m = std::min(chunk, r.m - q0);
        float* outD = r.distances + q0 * r.k;
        int64_t* outI = r.labels + q0 * r.k;
        scanChunk(res, device, stream, lists, r, m, r.queries + q0 * d, outD, outI, probes, qpw,
                  partialKeys.data(), partialRows.data());
        MergeArgs a;
        a.partialKeys = partialKeys.data();
        a.partialRows = partialRows.data();
        a.m = m;
        a.probes = probes;
        a.k = int(r.k);
        a.width = width;
        a.similarity = r.similarity;
        a.mergeCurrent = r.mergeCurrent;
        a.distances = outD;
        a.labels = outI;
        mergeProbesKernel<<<gridStrideBlocks(m, mergeWarps), 32 * mergeWarps, mergeSmem, stream>>>(
            a);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
