// The bounded TF32 search of vectors kept in pinned host memory (issue 39:
// host-resident corpora streamed at the rate of the device path).
//
// The corpus is streamed in tiles of rows (HostTileStream.h: a copy stream
// fills the next tile while this one is searched). Each tile is searched as
// a corpus of its own by boundedFlatSearch (BoundedFlatSearch.h), with the
// FP32 path over the staged tile as its fallback, so each tile's answer is
// exact; the running answer of a query is merged with each tile's, which
// keeps it exact. Data far from the origin: the tiles are centred on the
// first tile's mean when that shrinks the largest norm as CentredCorpus.h
// requires (any translation keeps L2 distances, and under products shifts
// each query's similarities by one number); the translation need not be
// the corpus mean, only the same for every tile. Under Auto the queries a
// tile's TF32 pass cannot certify go to BF16x3 products over the same
// (centred) tile, whose bound is 3-16 times tighter, before FP32: on
// clusters far apart and far from the origin, which no one centre brings
// close, TF32 certifies almost nothing and BF16x3 most. Where a tile's
// TF32 pass certifies fewer than kBoundedBailOutShare of the queries, the
// later tiles skip it (as the device path's later row blocks do) and go to
// BF16x3 under Auto, to FP32 otherwise.
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "faiss_ext/gpu/impl/flat/BoundedFlatSearch.h"
#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"
#include "faiss_ext/gpu/impl/flat/HostTileStream.h"
#include "faiss_ext/gpu/impl/flat/SplitBf16.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

/// For each query, the k best of its running results a (ids of the
/// storage) and of one tile's results b (ids of the tile, row0 added here),
/// ties to the lower id (a's come from earlier rows), id -1 (rows with fewer
/// than k results) last; written to out. Both lists are sorted best first,
/// so this is the head of their merge: r = i + j < k keeps both in range.
__global__ void mergeTileResultsKernel(const float* aD, const int64_t* aL, const float* bD,
                                       const int64_t* bL, int64_t nq, int64_t k, int64_t row0,
                                       bool largestFirst, float* outD, int64_t* outL) {
    const int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (q >= nq) return;
    const size_t o = size_t(q) * k;
    int64_t i = 0, j = 0;
    for (int64_t r = 0; r < k; ++r) {
        const int64_t la = aL[o + i];
        const int64_t lb = bL[o + j] < 0 ? -1 : bL[o + j] + row0;
        const float da = aD[o + i], db = bD[o + j];
        bool takeA;
        if (la < 0 || lb < 0) {
            takeA = lb < 0;
        } else {
            const bool better = largestFirst ? da > db : da < db;
            takeA = better || (da == db && la < lb);
        }
        outD[o + r] = takeA ? da : db;
        outL[o + r] = takeA ? la : lb;
        takeA ? ++i : ++j;
    }
}

/// The tiles' translation (CentredCorpus.h's rule, decided on the first
/// tile: the first tile's mean, kept where it at least halves the largest
/// norm) and the centred copy of the tile being searched.
class TileCentring {
public:
    TileCentring(GpuResources* res, int device, cudaStream_t stream, int64_t rows, int d, bool l2)
            : res_(res), device_(device), stream_(stream), d_(d), l2_(l2),
              centre_(res, device, size_t(d), stream),
              vectors_(res, device, size_t(rows) * d, stream),
              sqNorms_(res, device, size_t(rows), stream),
              scratch_(res, device, 1, stream) {}

    /// Points corpus (the staged rows xb, w of them, GEMMs over gemmRows)
    /// at their centred copy where centring applies; decides on the first
    /// call, against the stored vectors' largest |x|^2.
    void apply(const float* xb, int64_t w, int64_t gemmRows, double storedMaxSqNorm,
               BoundedCorpus* corpus) {
        if (decided_ && !on_) return;
        if (!decided_) corpusMean(res_, device_, stream_, xb, w, d_, centre_.data());
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(vectors_.data() + size_t(w) * d_, 0,
                                             sizeof(float) * size_t(gemmRows - w) * d_, stream_));
        const double maxSq = centreRows(xb, w, d_, centre_.data(), vectors_.data(),
                                        sqNorms_.data(), scratch_.data(), stream_);
        if (!decided_) on_ = maxSq <= kCentringGain * storedMaxSqNorm;
        decided_ = true;
        if (!on_) return;
        corpus->vectors = vectors_.data();
        corpus->sqNorms = l2_ ? sqNorms_.data() : nullptr;
        corpus->maxSqNorm = maxSq;
        corpus->centre = centre_.data();
    }

private:
    GpuResources* res_;
    int device_;
    cudaStream_t stream_;
    int d_;
    bool l2_;
    bool decided_ = false, on_ = false;
    TempBuffer<float> centre_, vectors_, sqNorms_;
    TempBuffer<unsigned> scratch_;
};

/// The n queries q (prepared) over one tile by BF16x3 products: the split
/// of the tile's rows as the TF32 pass multiplied them (centred or not),
/// made by splitRowsInTemp; where it does not fit the queries go to byFp32.
/// Counts each route in *stats.
void searchTileBf16x3(GpuResources* res, int device, cudaStream_t stream,
                      const BoundedCorpus& tf32, const float* q, int64_t n, int64_t k,
                      const TileSelection& candidates, bool sampledCandidates, float* distances,
                      int64_t* labels, const Fp32SearchFn& byFp32, BoundedSearchStats* stats) {
    const std::unique_ptr<TempBuffer<Bf16Bits>> rows =
            splitRowsInTemp(res, device, stream, tf32.vectors, tf32.gemmRows, tf32.d);
    if (!rows) {
        byFp32(q, n, distances, labels);
        stats->fallbackQueries += n;
        return;
    }
    BoundedCorpus split = tf32;
    split.splitDim = bf16PaddedDim(tf32.d);
    split.split = rows->data();
    boundedFlatSearch(res, device, stream, split, q, n, k, candidates, sampledCandidates,
                      distances, labels, byFp32, stats);
}

}  // namespace

bool FlatStorage::searchHostBounded_(const CorpusView& c, const float* q, int64_t nq, int64_t k,
                                     float* distances, int64_t* labels,
                                     const FlatSearchOptions& opt, cudaStream_t stream) const {
    const bool l2 = metric_ == FlatMetric::L2;
    const int64_t nb = c.nb;
    const size_t rowBytes = sizeof(float) * (size_t(d_) + (l2 ? 1 : 0));
    const int64_t rows = hostTileRows(res_->getTempMemoryAvailable(device_), nb, rowBytes);
    if (rows == 0) return false;
    const std::vector<int64_t> starts = hostTileStarts(nb, rows);

    TilePlan plan;
    plan.rows = nq;
    plan.cols = rows;
    plan.colTiles = int64_t(starts.size()) - 1;
    const size_t resultRows = plan.colTiles > 1 ? size_t(nq) * k : 0;  // one tile: none
    TempBuffer<float> runD(res_, device_, resultRows, stream), tileD(res_, device_, resultRows, stream),
            mergedD(res_, device_, resultRows, stream);
    TempBuffer<int64_t> runL(res_, device_, resultRows, stream), tileL(res_, device_, resultRows, stream),
            mergedL(res_, device_, resultRows, stream);
    TileCentring centring(res_, device_, stream, rows, d_, l2);
    HostTileStream host(res_, device_, stream, copyStream_, c.vectors, c.norms, nb, d_, plan, l2);
    host.setTileStarts(starts);

    const FlatSearchOptions fp32 = fp32FallbackOptions_(opt);
    const TileSelection candidates{opt.candidateAlgo, opt.group, opt.thFactor};
    if (opt.beforeResults) opt.beforeResults();

    // One tile writes the caller's rows directly; more merge tile by tile.
    const bool oneTile = plan.colTiles == 1;
    float* accD = oneTile ? distances : runD.data();
    int64_t* accL = oneTile ? labels : runL.data();
    float* spareD = mergedD.data();
    int64_t* spareL = mergedL.data();
    bool bailed = false;
    int64_t fallbacks = 0;
    host.issueCopy(0);
    for (int64_t t = 0; t < plan.colTiles; ++t) {
        const int64_t row0 = starts[size_t(t)];
        const int64_t w = starts[size_t(t) + 1] - row0;
        const int64_t gemmRows = (w + 3) / 4 * 4;  // <= rows: the staging holds them
        if (t + 1 < plan.colTiles) host.issueCopy(t + 1);
        const float* xb = nullptr;
        const float* xn = nullptr;
        host.await(t, &xb, &xn);
        // The GEMMs read up to gemmRows (BoundedCorpus::gemmRows); rows past
        // w are never selected, zeroed so that they hold no NaN.
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(const_cast<float*>(xb) + size_t(w) * d_, 0,
                                             sizeof(float) * size_t(gemmRows - w) * d_, stream));
        const CorpusView tile{xb, xn, w, false, maxSqNorm_, nullptr, -1, gemmRows};
        const Fp32SearchFn byFp32 = [&](const float* sub, int64_t n, float* subD, int64_t* subL) {
            searchView_(tile, sub, n, k, subD, subL, fp32);
        };
        float* outD = t == 0 ? accD : tileD.data();
        int64_t* outL = t == 0 ? accL : tileL.data();
        if (bailed && !opt.cascadeToBf16x3) {
            byFp32(q, nq, outD, outL);
            fallbacks = nq;
        } else {
            BoundedCorpus corpus;
            SplitScratch none;  // (TF32: no split)
            boundedCorpus_(tile, DistancePrecision::TF32Bounded, stream, &corpus, &none);
            centring.apply(xb, w, gemmRows, maxSqNorm_, &corpus);
            BoundedSearchStats tf32, bf16;
            const Fp32SearchFn byBf16x3 = [&](const float* sub, int64_t n, float* subD,
                                              int64_t* subL) {
                searchTileBf16x3(res_, device_, stream, corpus, sub, n, k, candidates,
                                 opt.sampledCandidates, subD, subL, byFp32, &bf16);
            };
            const Fp32SearchFn& fallback = opt.cascadeToBf16x3 ? byBf16x3 : byFp32;
            if (bailed) {
                fallback(q, nq, outD, outL);
            } else {
                boundedFlatSearch(res_, device_, stream, corpus, q, nq, k, candidates,
                                  opt.sampledCandidates, outD, outL, fallback, &tf32);
                bailed = double(tf32.certifiedQueries) < kBoundedBailOutShare * double(nq);
            }
            const int64_t byFp32Count = opt.cascadeToBf16x3 ? bf16.fallbackQueries
                                        : bailed                ? nq
                                                                : tf32.fallbackQueries;
            fallbacks = std::max(fallbacks, byFp32Count);
        }
        host.release(t);
        if (t == 0) continue;
        mergeTileResultsKernel<<<blocksFor(nq, 128), 128, 0, stream>>>(
                accD, accL, tileD.data(), tileL.data(), nq, k, row0, !l2, spareD, spareL);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        std::swap(accD, spareD);  // the merged rows are the running ones now
        std::swap(accL, spareL);
    }
    if (!oneTile) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances, accD, sizeof(float) * size_t(nq) * k,
                                             cudaMemcpyDeviceToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels, accL, sizeof(int64_t) * size_t(nq) * k,
                                             cudaMemcpyDeviceToDevice, stream));
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (opt.boundedStats) {
        opt.boundedStats->certifiedQueries += nq - fallbacks;
        opt.boundedStats->fallbackQueries += fallbacks;
    }
    return true;
}

}  // namespace gpu
}  // namespace faiss_ext
