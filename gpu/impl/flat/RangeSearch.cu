#include "faiss_ext/gpu/impl/flat/RangeSearch.h"

#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/IdSelection.h"

#include <faiss/impl/FaissAssert.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>

namespace faiss_ext {
namespace gpu {

namespace {

constexpr int kThreads = 256;

/// One tile of dot products (rows x w, leading dimension ld): L2 tiles
/// hold -2 <q, x>, the others <q, x>.
struct RangeTile {
    const float* dots;
    int64_t ld;
    int64_t w;
    int64_t col0;                ///< corpus position of column 0
    const float* qSqNorms;       ///< this tile's first query's |q|^2 (L2)
    const float* xSqNorms;       ///< this tile's first column's |x|^2 (L2)
    const uint32_t* keepBits;    ///< over the whole corpus, or null
    float radius;
    bool l2;
};

/// The distance of (row, col) as faiss::IndexFlat computes it from norms
/// and products (L2: |q|^2 + |x|^2 - 2 <q, x>, clamped at 0), or the
/// similarity; NaN for an excluded column, which never matches.
__device__ __forceinline__ float tileValue(const RangeTile& t, int64_t row, int64_t col) {
    const int64_t j = t.col0 + col;
    if (t.keepBits && !((t.keepBits[j >> 5] >> (j & 31)) & 1u)) return __int_as_float(0x7fc00000);
    const float v = t.dots[row * t.ld + col];
    if (!t.l2) return v;
    const float d = (t.qSqNorms[row] + t.xSqNorms[col]) + v;
    return d < 0.f ? 0.f : d;
}

/// FAISS's strict comparisons: L2 below the radius, similarities above it.
__device__ __forceinline__ bool inRange(const RangeTile& t, float v) {
    return t.l2 ? v < t.radius : v > t.radius;
}

/// counts[row] = hits of row `blockIdx.x` in the tile.
__global__ void countHitsKernel(RangeTile t, int* counts) {
    using Reduce = cub::BlockReduce<int, kThreads>;
    __shared__ typename Reduce::TempStorage tmp;
    const int64_t row = blockIdx.x;
    int n = 0;
    for (int64_t col = threadIdx.x; col < t.w; col += kThreads) n += inRange(t, tileValue(t, row, col));
    const int total = Reduce(tmp).Sum(n);
    if (threadIdx.x == 0) counts[row] = total;
}

/// The hits of row row0 + blockIdx.x, in column order, at
/// labels / distances [offsets[blockIdx.x] ...).
__global__ void writeHitsKernel(RangeTile t, int64_t row0, const int64_t* offsets,
                                int64_t labelBase, int64_t* labels, float* distances) {
    using Scan = cub::BlockScan<int, kThreads>;
    __shared__ typename Scan::TempStorage tmp;
    const int64_t row = row0 + blockIdx.x;
    int64_t out = offsets[blockIdx.x];
    for (int64_t base = 0; base < t.w; base += kThreads) {
        const int64_t col = base + threadIdx.x;
        const float v = col < t.w ? tileValue(t, row, col) : 0.f;
        const int hit = col < t.w && inRange(t, v);
        int pos, chunkHits;
        Scan(tmp).ExclusiveSum(hit, pos, chunkHits);
        if (hit) {
            labels[out + pos] = labelBase + t.col0 + col;
            distances[out + pos] = v;
        }
        out += chunkHits;
        __syncthreads();  // tmp is reused by the next chunk's scan
    }
}

/// Sizes of one range search's buffers within `budget` bytes.
struct RangePlan {
    int64_t rows = 0;    ///< queries per GEMM tile
    int64_t cols = 0;    ///< corpus vectors per tile
    int64_t hitCap = 0;  ///< hits one copy-out holds (>= cols: one row always fits)
};

RangePlan planRange(size_t budget, int64_t nq, int64_t nb, int d, bool onHost, bool l2) {
    RangePlan p;
    p.hitCap = int64_t(budget / 10 * 3 / (sizeof(int64_t) + sizeof(float)));
    const size_t perColFixed = (onHost ? sizeof(float) * size_t(d) : 0) + (l2 ? sizeof(float) : 0);
    for (p.rows = std::min<int64_t>(nq, 2048);; p.rows = (p.rows + 1) / 2) {
        const size_t perCol = sizeof(float) * size_t(p.rows) + perColFixed;
        p.cols = std::min<int64_t>({nb, int64_t(budget / 10 * 6 / perCol), p.hitCap});
        p.cols = p.cols >= nb ? nb : p.cols / 4 * 4;
        if (p.cols >= std::min<int64_t>(nb, 4096) || p.rows == 1) break;
    }
    FAISS_THROW_IF_NOT_FMT(p.cols >= 1, "range_search: %zu bytes of temporary GPU memory do not "
                           "hold one query's distances to one vector tile", budget);
    return p;
}

/// Appends `n` hits, grouped by row as `counts` (rows r0 .. r0 + counts.size() - 1) says.
void appendHits(const std::vector<int>& counts, int64_t r0, int64_t r1, const int64_t* labels,
                const float* distances, RangeHits* hits, int64_t hitRow0) {
    size_t at = 0;
    for (int64_t r = r0; r < r1; ++r) {
        const size_t n = size_t(counts[size_t(r)]);
        auto& L = hits->labels[size_t(hitRow0 + r)];
        auto& D = hits->distances[size_t(hitRow0 + r)];
        L.insert(L.end(), labels + at, labels + at + n);
        D.insert(D.end(), distances + at, distances + at + n);
        at += n;
    }
}

/// Copies out one tile's hits (rows 0 .. rows - 1, per-row counts on the
/// host) in groups of rows whose hits fit p.hitCap.
void collectTile(const RangeTile& t, int64_t labelOffset, const std::vector<int>& counts,
                 int64_t rows, const RangePlan& p, int64_t* dLabels, float* dDistances,
                 int64_t* dOffsets, RangeHits* hits, int64_t hitRow0, cudaStream_t stream) {
    std::vector<int64_t> offsets, hLabels;
    std::vector<float> hDistances;
    for (int64_t r0 = 0; r0 < rows;) {
        int64_t r1 = r0, total = 0;
        offsets.clear();
        while (r1 < rows && total + counts[size_t(r1)] <= p.hitCap) {
            offsets.push_back(total);
            total += counts[size_t(r1++)];
        }
        if (total > 0) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dOffsets, offsets.data(),
                                                 sizeof(int64_t) * offsets.size(),
                                                 cudaMemcpyHostToDevice, stream));
            writeHitsKernel<<<unsigned(r1 - r0), kThreads, 0, stream>>>(t, r0, dOffsets, labelOffset,
                                                                         dLabels, dDistances);
            FAISS_EXT_CUDA_CHECK(cudaGetLastError());
            hLabels.resize(size_t(total));
            hDistances.resize(size_t(total));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hLabels.data(), dLabels, sizeof(int64_t) * total,
                                                 cudaMemcpyDeviceToHost, stream));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hDistances.data(), dDistances,
                                                 sizeof(float) * total, cudaMemcpyDeviceToHost,
                                                 stream));
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
            appendHits(counts, r0, r1, hLabels.data(), hDistances.data(), hits, hitRow0);
        }
        r0 = r1;
    }
}

}  // namespace

void flatRangeSearch(GpuResources* res, int device, cudaStream_t stream, const RangeCorpus& c,
                     FlatMetric metric, const float* q, const float* qSqNorms, int64_t nq,
                     float radius, RangeHits* hits, int64_t hitRow0) {
    if (nq == 0 || c.nb == 0) return;
    DeviceScope scope(device);
    const bool l2 = metric == FlatMetric::L2;
    const size_t budget = res->getTempMemoryAvailable(device) / 10 * 9;
    const RangePlan p = planRange(budget, nq, c.nb, c.d, c.onHost, l2);
    const int64_t ld = (p.cols + 3) / 4 * 4;
    TempBuffer<float> dots(res, device, size_t(p.rows) * ld, stream);
    TempBuffer<float> staged(res, device, c.onHost ? size_t(p.cols) * c.d : 0, stream);
    const bool ownNorms = l2 && (c.onHost || !c.sqNorms);
    TempBuffer<float> tileNorms(res, device, ownNorms ? size_t(p.cols) : 0, stream);
    TempBuffer<int> dCounts(res, device, size_t(p.rows), stream);
    TempBuffer<int64_t> dOffsets(res, device, size_t(p.rows), stream);
    TempBuffer<int64_t> dLabels(res, device, size_t(p.hitCap), stream);
    TempBuffer<float> dDistances(res, device, size_t(p.hitCap), stream);
    cublasHandle_t blas = res->getBlasHandle(device);
    std::vector<int> counts(size_t(p.rows));

    for (int64_t c0 = 0; c0 < c.nb; c0 += p.cols) {
        const int64_t w = std::min(p.cols, c.nb - c0);
        const float* xb = c.vectors + size_t(c0) * c.d;
        const float* xn = l2 && !ownNorms ? c.sqNorms + c0 : tileNorms.data();
        if (c.onHost) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(staged.data(), xb, sizeof(float) * size_t(w) * c.d,
                                                 cudaMemcpyHostToDevice, stream));
            xb = staged.data();
        }
        if (ownNorms) rowSquaredNorms(xb, w, c.d, tileNorms.data(), stream);
        for (int64_t q0 = 0; q0 < nq; q0 += p.rows) {
            const int64_t rows = std::min(p.rows, nq - q0);
            const int64_t tld = (w + 3) / 4 * 4;
            gemmDotProducts(blas, q + size_t(q0) * c.d, rows, xb, w, c.d, l2 ? -2.f : 1.f,
                            dots.data(), tld);
            const RangeTile t{dots.data(), tld, w, c0, l2 ? qSqNorms + q0 : nullptr, xn,
                              c.keepBits, radius, l2};
            countHitsKernel<<<unsigned(rows), kThreads, 0, stream>>>(t, dCounts.data());
            FAISS_EXT_CUDA_CHECK(cudaGetLastError());
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(counts.data(), dCounts.data(), sizeof(int) * rows,
                                                 cudaMemcpyDeviceToHost, stream));
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
            collectTile(t, c.labelOffset, counts, rows, p, dLabels.data(), dDistances.data(),
                        dOffsets.data(), hits, hitRow0 + q0, stream);
        }
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void flatRangeSearchQueries(GpuResources* res, int device, RangeCorpus c,
                            const IdSelection* filter, FlatMetric metric, const float* queries,
                            int64_t nq, bool prepared, float radius, RangeHits* hits,
                            int64_t hitRow0) {
    if (nq == 0 || c.nb == 0) return;
    FAISS_THROW_IF_NOT_FMT(!filter || filter->size() == c.nb, "range_search: selection over %lld "
                           "positions, corpus of %lld", (long long)filter->size(), (long long)c.nb);
    DeviceScope scope(device);
    cudaStream_t stream = res->getDefaultStream(device);
    const bool partial = filter && filter->count() < c.nb;
    if (partial && filter->count() == 0) return;
    const bool masked = partial && !filter->contiguous();
    TempBuffer<uint32_t> bits(res, device, masked ? filter->words().size() : 0, stream);
    if (masked) {
        filter->copyWordsTo(bits.data(), stream);
        c.keepBits = bits.data();
    } else if (partial) {
        c.vectors += size_t(filter->first()) * c.d;
        if (c.sqNorms) c.sqNorms += filter->first();
        c.nb = filter->count();
        c.labelOffset += filter->first();
    }
    const bool prepare = isPreparedMetric(metric) && !prepared;
    TempBuffer<float> own(res, device, prepare ? size_t(nq) * c.d : 0, stream);
    const float* q = queries;
    if (prepare) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(own.data(), queries, sizeof(float) * size_t(nq) * c.d,
                                             cudaMemcpyDeviceToDevice, stream));
        prepareVectorsDevice(metric, own.data(), nq, c.d, stream);
        q = own.data();
    }
    const bool l2 = metric == FlatMetric::L2;
    TempBuffer<float> norms(res, device, l2 ? size_t(nq) : 0, stream);
    if (l2) rowSquaredNorms(q, nq, c.d, norms.data(), stream);
    flatRangeSearch(res, device, stream, c, metric, q, norms.data(), nq, radius, hits, hitRow0);
}

}  // namespace gpu
}  // namespace faiss_ext
