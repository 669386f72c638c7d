// The entry points of each query (SearchGraph.h, nearestEntryPoints): the
// sampled nodes nearest to it, found by one TF32 GEMM of the queries with
// the sample and a warp-wide selection per query. Seeds need only be near
// the query, not exact: before, the exact engine's bounded search (GEMM,
// multi-pass selection, FP32 re-scoring, sort, certificate: some twenty
// launches) took 0.85 ms of a 2.3 ms search of 10,000 queries at itopk 16
// on a 1M x 128 set (H200, bench/trace_search), and the beam search 1.2 ms.
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>

#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/graph/NearestEntryPoints.h"
#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"
#include "faiss_ext/gpu/utils/WarpSort.cuh"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kWarpsPerBlock = 4;
/// The id of an empty slot (sorts after every entry point of the same key).
constexpr uint32_t kNoEntry = 0xFFFFFFFFu;

/// Inserts (key, id) into a lane's list of the L smallest, sorted
/// ascending in registers (unrolled: no local memory), when it beats the
/// last; ids arrive in increasing order, so ties keep the older first.
template <int L>
__device__ __forceinline__ void insertSorted(float (&keys)[L], uint32_t (&ids)[L], float key,
                                             uint32_t id) {
    if (!(key < keys[L - 1])) return;
    keys[L - 1] = key;
    ids[L - 1] = id;
#pragma unroll
    for (int t = L - 1; t > 0; --t) {
        if (keys[t] < keys[t - 1]) {
            const float k = keys[t];
            keys[t] = keys[t - 1];
            keys[t - 1] = k;
            const uint32_t i = ids[t];
            ids[t] = ids[t - 1];
            ids[t - 1] = i;
        }
    }
}

/// One warp per query row of `dots` (alpha x q.x, ld floats a row): keys
/// dots + sqNorms[j] (L2) or dots (inner product, already negated). Each
/// lane keeps the L smallest of its columns j = lane, lane + 32, ... in
/// registers; then perQuery <= L rounds take the smallest head of the
/// 32 lists (a warp-wide minimum) and pop it. An insertion costs L steps
/// but happens about L (1 + ln(count / 32 / L)) times per lane: a few
/// hundred operations per lane, where a warp-wide sort of every chunk of
/// 32 columns cost ~250 us for 10,000 queries x 4,096 (H200).
template <int L>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
        nearestEntryPointsKernel(const float* dots, int64_t ld, const float* sqNorms, int count,
                                 int64_t rows, int perQuery, int64_t* out) {
    const int lane = threadIdx.x & 31;
    const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= rows) return;  // whole warps leave together
    const float* r = dots + row * ld;
    float keys[L];
    uint32_t ids[L];
#pragma unroll
    for (int t = 0; t < L; ++t) {
        keys[t] = INFINITY;
        ids[t] = kNoEntry;
    }
    for (int j = lane; j < count; j += 32) {
        const float key = sqNorms ? r[j] + sqNorms[j] : r[j];
        insertSorted(keys, ids, key, uint32_t(j));  // NaN never beats INFINITY: skipped
    }
    for (int rank = 0; rank < perQuery; ++rank) {
        float bestKey = keys[0];
        uint32_t bestId = ids[0];
        for (int o = 16; o > 0; o >>= 1) {
            const float k = __shfl_xor_sync(kFull, bestKey, o);
            const uint32_t i = __shfl_xor_sync(kFull, bestId, o);
            if (pairLess(k, i, bestKey, bestId)) {
                bestKey = k;
                bestId = i;
            }
        }
        if (lane == 0) {
            out[row * perQuery + rank] =
                    bestId == kNoEntry || bestKey == INFINITY ? -1 : int64_t(bestId);
        }
        if (ids[0] == bestId && bestId != kNoEntry) {  // the owner pops its head
#pragma unroll
            for (int t = 0; t + 1 < L; ++t) {
                keys[t] = keys[t + 1];
                ids[t] = ids[t + 1];
            }
            keys[L - 1] = INFINITY;
            ids[L - 1] = kNoEntry;
        }
    }
}

}  // namespace

int64_t entryDotsLd(int count) { return (int64_t(count) + 3) / 4 * 4; }

int64_t entryGemmRows(int64_t nq) {
    const int64_t step = kEntryGemmRowStep;
    return nq >= step ? (nq + step - 1) / step * step : nextPow2(int(nq));
}

void nearestEntryPoints(cublasHandle_t blas, cudaStream_t stream, const float* entries,
                        const float* sqNorms, int count, int d, const float* q, int64_t nq,
                        int64_t gemmRows, int perQuery, float* dots, int64_t* out) {
    FAISS_THROW_IF_NOT_FMT(count >= 1 && d >= 1 && nq >= 0 && gemmRows >= nq && perQuery >= 1 &&
                                   perQuery <= kMaxNearestEntrySeeds,
                           "nearestEntryPoints: bad arguments (count %d, d %d, nq %lld, "
                           "gemmRows %lld, perQuery %d <= %d)",
                           count, d, (long long)nq, (long long)gemmRows, perQuery,
                           kMaxNearestEntrySeeds);
    if (nq == 0) return;
    const int64_t ld = entryDotsLd(count);
    // L2: |x|^2 - 2 q.x ranks as |q - x|^2; inner products: -q.x, smaller first
    gemmDotProductsTf32(blas, q, gemmRows, entries, count, d, sqNorms ? -2.f : -1.f, dots, ld);
    const unsigned blocks = unsigned((nq + kWarpsPerBlock - 1) / kWarpsPerBlock);
    const int threads = 32 * kWarpsPerBlock;
    if (perQuery <= 8) {
        nearestEntryPointsKernel<8><<<blocks, threads, 0, stream>>>(dots, ld, sqNorms, count, nq,
                                                                    perQuery, out);
    } else if (perQuery <= 16) {
        nearestEntryPointsKernel<16><<<blocks, threads, 0, stream>>>(dots, ld, sqNorms, count, nq,
                                                                     perQuery, out);
    } else {
        nearestEntryPointsKernel<32><<<blocks, threads, 0, stream>>>(dots, ld, sqNorms, count, nq,
                                                                     perQuery, out);
    }
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
