#include "faiss_ext/gpu/impl/flat/FlatSearch.h"

#include "faiss_ext/gpu/impl/flat/BoundedFlatSearch.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/FilterKernels.h"
#include "faiss_ext/gpu/impl/flat/FlatTilePlan.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidates.h"
#include "faiss_ext/gpu/impl/flat/FusedFewQuery.h"
#include "faiss_ext/gpu/impl/flat/HostTileStream.h"
#include "faiss_ext/gpu/impl/flat/LargeKFlatSearch.h"
#include "faiss_ext/gpu/impl/flat/RangeSearch.h"
#include "faiss_ext/gpu/impl/flat/RowSelector.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace {

/// Keys carry 32-bit ids.
constexpr int64_t kMaxVectors = (int64_t(1) << 32) - 1;

/// Queries as the metric compares them, in temporary memory where they had
/// to be prepared, and their squared norms for L2.
struct PreparedQueries {
    const float* q = nullptr;                      ///< the prepared queries
    std::unique_ptr<TempBuffer<float>> prepared;   ///< when prepared here
    std::unique_ptr<TempBuffer<float>> norms;      ///< |q|^2, L2 only

    PreparedQueries(GpuResources* res, int device, FlatMetric metric, int d,
                    const float* queries, int64_t nq, bool alreadyPrepared,
                    cudaStream_t stream) {
        q = queries;
        if (isPreparedMetric(metric) && !alreadyPrepared) {
            prepared.reset(new TempBuffer<float>(res, device, size_t(nq) * d, stream));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(prepared->data(), queries,
                                                 sizeof(float) * size_t(nq) * d,
                                                 cudaMemcpyDeviceToDevice, stream));
            prepareVectorsDevice(metric, prepared->data(), nq, d, stream);
            q = prepared->data();
        }
        if (metric == FlatMetric::L2) {
            norms.reset(new TempBuffer<float>(res, device, size_t(nq), stream));
            rowSquaredNorms(q, nq, d, norms->data(), stream);
        }
    }
};

size_t bytesOf(int64_t n, int d, bool l2) {
    return sizeof(float) * size_t(n) * d + (l2 ? sizeof(float) * size_t(n) : 0);
}

}  // namespace

FlatStorage::FlatStorage(GpuResources* res, int device, int d, FlatMetric metric,
                         VectorStorage where)
        : res_(res), device_(device), d_(d), metric_(metric), request_(where) {
    onHost_ = where == VectorStorage::Host;
}

FlatStorage::~FlatStorage() {
    DeviceScope scope(device_);
    if (onHost_) freeHost_(vectors_, norms_);
    dVectors_.release();
    dNorms_.release();
    if (copyStream_) cudaStreamDestroy(copyStream_);
}

void FlatStorage::freeHost_(float* v, float* nn) {
    if (v) cudaFreeHost(v);
    if (nn) cudaFreeHost(nn);
}

bool FlatStorage::wantHost_(int64_t n) const {
    switch (request_) {
        case VectorStorage::Host: return true;
        case VectorStorage::Device: return false;
        default:
            return onHost_ ||
                   bytesOf(n, d_, metric_ == FlatMetric::L2) > res_->getDeviceMemoryLimit(device_);
    }
}

/// On the device the memory comes from the resources (dv / dn own it, *nv /
/// *nn point into it); on the host it is pinned and owned by the caller.
void FlatStorage::allocate_(int64_t n, bool onHost, float** nv, float** nn,
                            DeviceVector<float>* dv, DeviceVector<float>* dn) const {
    const bool l2 = metric_ == FlatMetric::L2;
    *nv = nullptr;
    *nn = nullptr;
    cudaError_t err;
    if (onHost) {
        err = cudaHostAlloc(reinterpret_cast<void**>(nv), sizeof(float) * size_t(n) * d_,
                            cudaHostAllocDefault);
        if (err == cudaSuccess && l2) {
            err = cudaHostAlloc(reinterpret_cast<void**>(nn), sizeof(float) * n, cudaHostAllocDefault);
        }
    } else {
        err = dv->tryAllocate(res_, device_, size_t(n) * d_);
        if (err == cudaSuccess && l2) err = dn->tryAllocate(res_, device_, size_t(n));
        *nv = dv->data();
        *nn = dn->data();
    }
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (onHost) freeHost_(*nv, *nn);
        dv->release();
        dn->release();
        *nv = *nn = nullptr;
        FAISS_THROW_FMT("out of %s memory on device %d: cannot hold %lld vectors of dimension %d "
                        "(%zu bytes)", onHost ? "pinned host" : "GPU", device_, (long long)n, d_,
                        bytesOf(n, d_, l2));
    }
}

namespace {

/// Rows the device storage allocates for n vectors: a multiple of 4, so
/// that the bounded search's GEMMs over the whole storage can run a width
/// that is a multiple of 4 (CorpusView::gemmRows; the rows past ntotal are
/// zeros the selection never reads).
int64_t paddedRows(int64_t n) { return (n + 3) / 4 * 4; }

}  // namespace

void FlatStorage::zeroPaddingRows_(cudaStream_t stream) {
    const int64_t end = std::min(capacity_, paddedRows(ntotal_));
    if (onHost_ || end <= ntotal_) return;
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(vectors_ + size_t(ntotal_) * d_, 0,
                                         sizeof(float) * size_t(end - ntotal_) * d_, stream));
}

void FlatStorage::reserve(int64_t n) {
    if (n <= capacity_) return;
    FAISS_THROW_IF_NOT_FMT(n <= kMaxVectors, "GpuIndexQuickSelectFlat holds at most %lld vectors "
                           "(asked for %lld)", (long long)kMaxVectors, (long long)n);
    n = paddedRows(n);
    DeviceScope scope(device_);
    centred_.invalidate();  // its memory first: the move below may need it
    split_.invalidate();
    residual_.invalidate();
    cudaStream_t stream = res_->getDefaultStream(device_);
    bool host = wantHost_(n);
    float* nv = nullptr;
    float* nn = nullptr;
    DeviceVector<float> dv, dn;  // the new device memory (freed here on failure)
    if (!host && request_ == VectorStorage::Auto) {
        try {
            allocate_(n, false, &nv, &nn, &dv, &dn);
        } catch (const faiss::FaissException&) {
            host = true;  // does not fit on the GPU: keep the vectors on the host
        }
    }
    if (!nv) allocate_(n, host, &nv, &nn, &dv, &dn);
    if (ntotal_ > 0) {
        cudaError_t err = cudaMemcpyAsync(nv, vectors_, sizeof(float) * size_t(ntotal_) * d_,
                                          cudaMemcpyDefault, stream);
        if (err == cudaSuccess && nn) {
            err = cudaMemcpyAsync(nn, norms_, sizeof(float) * ntotal_, cudaMemcpyDefault, stream);
        }
        if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess) {
            if (host) freeHost_(nv, nn);
            FAISS_EXT_CUDA_CHECK(err);
        }
    }
    if (onHost_) freeHost_(vectors_, norms_);
    dVectors_.release();
    dNorms_.release();
    dVectors_ = std::move(dv);
    dNorms_ = std::move(dn);
    vectors_ = nv;
    norms_ = nn;
    onHost_ = host;
    capacity_ = n;
}

void FlatStorage::append(const float* x, int64_t n, bool prepared) {
    if (n == 0) return;
    FAISS_THROW_IF_NOT_FMT(ntotal_ + n <= kMaxVectors, "GpuIndexQuickSelectFlat holds at most "
                           "%lld vectors (has %lld, adding %lld)", (long long)kMaxVectors,
                           (long long)ntotal_, (long long)n);
    DeviceScope scope(device_);
    centred_.invalidate();
    split_.invalidate();
    residual_.invalidate();
    if (ntotal_ + n > capacity_) reserve(std::max(ntotal_ + n, capacity_ + capacity_ / 2));
    cudaStream_t stream = res_->getDefaultStream(device_);
    float addedMax = 0.f;  // the largest |x|^2 added (maxSquaredNorm synchronises)
    if (!onHost_) {
        float* dst = vectors_ + size_t(ntotal_) * d_;
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dst, x, sizeof(float) * size_t(n) * d_,
                                             cudaMemcpyDefault, stream));
        if (!prepared) prepareVectorsDevice(metric_, dst, n, d_, stream);
        if (norms_) rowSquaredNorms(dst, n, d_, norms_ + ntotal_, stream);
        TempBuffer<unsigned> scratch(res_, device_, 1, stream);
        addedMax = maxSquaredNorm(dst, n, d_, norms_ ? norms_ + ntotal_ : nullptr, scratch.data(),
                                  stream);
    } else {
        // Through the device in chunks: preparation and norms run there.
        // Chunks within a quarter of the temporary memory (at most 64 MiB).
        const size_t room = std::min<size_t>(size_t(64) << 20, res_->getTempMemoryAvailable(device_) / 4);
        const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n, int64_t(room / (4 * (d_ + 1)))));
        TempBuffer<float> buf(res_, device_, size_t(chunk) * d_, stream);
        TempBuffer<float> nbuf(res_, device_, norms_ ? size_t(chunk) : 0, stream);
        TempBuffer<unsigned> scratch(res_, device_, 1, stream);
        for (int64_t i = 0; i < n; i += chunk) {
            const int64_t m = std::min(chunk, n - i);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(buf.data(), x + size_t(i) * d_,
                                                 sizeof(float) * size_t(m) * d_, cudaMemcpyDefault,
                                                 stream));
            if (!prepared) prepareVectorsDevice(metric_, buf.data(), m, d_, stream);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(vectors_ + size_t(ntotal_ + i) * d_, buf.data(),
                                                 sizeof(float) * size_t(m) * d_,
                                                 cudaMemcpyDeviceToHost, stream));
            if (norms_) {
                rowSquaredNorms(buf.data(), m, d_, nbuf.data(), stream);
                FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(norms_ + ntotal_ + i, nbuf.data(),
                                                     sizeof(float) * m, cudaMemcpyDeviceToHost,
                                                     stream));
            }
            addedMax = std::max(addedMax, maxSquaredNorm(buf.data(), m, d_,
                                                         norms_ ? nbuf.data() : nullptr,
                                                         scratch.data(), stream));
        }
    }
    ntotal_ += n;
    maxSqNorm_ = std::max(maxSqNorm_, double(addedMax));
    zeroPaddingRows_(stream);
}

void FlatStorage::reset() {
    DeviceScope scope(device_);
    centred_.invalidate();
    split_.invalidate();
    residual_.invalidate();
    if (onHost_) freeHost_(vectors_, norms_);
    dVectors_.release();
    dNorms_.release();
    vectors_ = nullptr;
    norms_ = nullptr;
    maxSqNorm_ = 0.0;
    ntotal_ = 0;
    capacity_ = 0;
    onHost_ = request_ == VectorStorage::Host;
}

int64_t FlatStorage::removeSelected(const IdSelection& removed) {
    FAISS_THROW_IF_NOT_FMT(removed.size() == ntotal_, "remove_ids: selection over %lld positions, "
                           "index has %lld", (long long)removed.size(), (long long)ntotal_);
    const int64_t gone = removed.count();
    if (gone == 0) return 0;
    centred_.invalidate();
    split_.invalidate();
    residual_.invalidate();
    const int64_t kept = ntotal_ - gone;
    std::vector<uint32_t> keep;
    keep.reserve(size_t(kept));
    for (int64_t i = 0; i < ntotal_; ++i) {
        if (!removed.contains(i)) keep.push_back(uint32_t(i));
    }
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    const bool l2 = metric_ == FlatMetric::L2;
    if (onHost_) {
        // Pinned host memory: compact in place (a kept row never moves up).
        for (int64_t j = 0; j < kept; ++j) {
            if (int64_t(keep[j]) == j) continue;
            std::memmove(vectors_ + size_t(j) * d_, vectors_ + size_t(keep[j]) * d_,
                         sizeof(float) * d_);
            if (l2) norms_[j] = norms_[keep[j]];
        }
        ntotal_ = kept;
        return gone;
    }
    // On the device: gather the kept rows into new memory, then swap, so a
    // failure (out of memory) leaves the storage as it was. maxSqNorm_ stays
    // an upper bound of what is left, which is all the TF32 bound needs.
    float* nv = nullptr;
    float* nn = nullptr;
    DeviceVector<float> dv, dn;
    const int64_t rows = paddedRows(std::max<int64_t>(kept, 1));
    allocate_(rows, false, &nv, &nn, &dv, &dn);
    TempBuffer<uint32_t> dKeep(res_, device_, size_t(kept), stream);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dKeep.data(), keep.data(), sizeof(uint32_t) * size_t(kept),
                                         cudaMemcpyHostToDevice, stream));
    gatherSelectedRows(vectors_, l2 ? norms_ : nullptr, dKeep.data(), kept, d_, nv, nn, stream);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    dVectors_ = std::move(dv);
    dNorms_ = std::move(dn);
    vectors_ = nv;
    norms_ = nn;
    capacity_ = rows;
    ntotal_ = kept;
    zeroPaddingRows_(stream);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return gone;
}

void FlatStorage::copyVectors(int64_t i0, int64_t n, float* out) const {
    if (n == 0) return;
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(out, vectors_ + size_t(i0) * d_,
                                         sizeof(float) * size_t(n) * d_, cudaMemcpyDefault, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void FlatStorage::search(const float* queries, int64_t nq, int64_t k, float* distances,
                         int64_t* labels, const FlatSearchOptions& opt) const {
    CorpusView all{vectors_, norms_, ntotal_, onHost_, maxSqNorm_, nullptr, 0};
    if (!onHost_) all.gemmRows = std::min(capacity_, paddedRows(ntotal_));
    if (opt.filter && opt.filter->count() < ntotal_) {
        searchFiltered_(*opt.filter, queries, nq, k, distances, labels, opt);
    } else {
        searchView_(all, queries, nq, k, distances, labels, opt);
    }
}

void FlatStorage::rangeSearch(const float* queries, int64_t nq, bool prepared, float radius,
                              const IdSelection* filter, RangeHits* hits, int64_t hitRow0) const {
    RangeCorpus c;
    c.vectors = vectors_;
    c.sqNorms = metric_ == FlatMetric::L2 ? norms_ : nullptr;
    c.nb = ntotal_;
    c.d = d_;
    c.onHost = onHost_;
    flatRangeSearchQueries(res_, device_, c, filter, metric_, queries, nq, prepared, radius, hits,
                           hitRow0);
}

/// The selected vectors as a corpus of their own, searched with every path
/// of an unfiltered search: a slice of the storage when they are one run,
/// else gathered into temporary memory when they fit in a quarter of it;
/// otherwise (or with vectors on the host) the whole storage is searched
/// with excluded columns masked in each distance tile (tiled FP32 path).
void FlatStorage::searchFiltered_(const IdSelection& s, const float* queries, int64_t nq,
                                  int64_t k, float* distances, int64_t* labels,
                                  const FlatSearchOptions& opt) const {
    FAISS_THROW_IF_NOT_FMT(s.size() == ntotal_, "filtered search: selection over %lld positions, "
                           "index has %lld", (long long)s.size(), (long long)ntotal_);
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    FlatSearchOptions o = opt;
    o.filter = nullptr;
    const bool l2 = metric_ == FlatMetric::L2;
    const int64_t n = s.count();
    if (n == 0 || s.contiguous()) {
        const int64_t first = n == 0 ? 0 : s.first();
        const CorpusView slice{vectors_ + size_t(first) * d_, l2 ? norms_ + first : nullptr, n,
                               onHost_, maxSqNorm_, nullptr, first};
        searchView_(slice, queries, nq, k, distances, labels, o);
        offsetLabels(labels, nq * k, first, stream);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }
    // The subset is followed by zero rows up to a multiple of 4 (CorpusView::gemmRows).
    const int64_t nPad = (n + 3) / 4 * 4;
    const size_t gatherBytes = sizeof(float) * size_t(nPad) * d_ + sizeof(float) * (l2 ? n : 0) +
                               sizeof(uint32_t) * size_t(n);
    if (!onHost_ && gatherBytes <= res_->getTempMemoryAvailable(device_) / 4) {
        const std::vector<uint32_t> ids = s.positions();
        TempBuffer<uint32_t> dIds(res_, device_, size_t(n), stream);
        TempBuffer<float> sub(res_, device_, size_t(nPad) * d_, stream);
        TempBuffer<float> subNorms(res_, device_, l2 ? size_t(n) : 0, stream);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dIds.data(), ids.data(), sizeof(uint32_t) * size_t(n),
                                             cudaMemcpyHostToDevice, stream));
        gatherSelectedRows(vectors_, norms_, dIds.data(), n, d_, sub.data(), subNorms.data(),
                           stream);
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(sub.data() + size_t(n) * d_, 0,
                                             sizeof(float) * size_t(nPad - n) * d_, stream));
        CorpusView gathered{sub.data(), subNorms.data(), n, false, maxSqNorm_, nullptr};
        gathered.gemmRows = nPad;
        searchView_(gathered, queries, nq, k, distances, labels, o);
        mapSelectedLabels(labels, nq * k, dIds.data(), stream);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }
    TempBuffer<uint32_t> bits(res_, device_, s.words().size(), stream);
    s.copyWordsTo(bits.data(), stream);
    const CorpusView masked{vectors_, norms_, ntotal_, onHost_, maxSqNorm_, bits.data()};
    searchView_(masked, queries, nq, k, distances, labels, o);
}

bool FlatStorage::boundedCorpus_(const CorpusView& c, DistancePrecision precision,
                                 cudaStream_t stream, BoundedCorpus* corpus,
                                 SplitScratch* scratch) const {
    const bool l2 = metric_ == FlatMetric::L2;
    corpus->vectors = c.vectors;
    corpus->sqNorms = l2 ? c.norms : nullptr;
    corpus->nb = c.nb;
    corpus->d = d_;
    corpus->metric = metric_;
    corpus->maxSqNorm = c.maxSqNorm;
    corpus->gemmRows = std::max(c.nb, c.gemmRows);
    CentredView centred;
    const float* whole = vectors_;  // the array corpus->vectors is a slice of
    if (c.storageRow0 >= 0 &&
        centred_.view(res_, device_, stream, vectors_, ntotal_, d_, maxSqNorm_, &centred)) {
        corpus->vectors = centred.vectors + size_t(c.storageRow0) * d_;
        corpus->sqNorms = l2 ? centred.sqNorms + c.storageRow0 : nullptr;
        corpus->maxSqNorm = centred.maxSqNorm;
        corpus->centre = centred.centre;
        corpus->gemmRows = c.nb;  // the copy holds no rows past the view
        whole = centred.vectors;
    }
    if (precision != DistancePrecision::BF16x3Bounded) return true;
    // BF16x3: the split of what the search multiplies, kept for the storage
    // (or its centred copy), or made for a gathered subset.
    const int dPad = bf16PaddedDim(d_);
    corpus->splitDim = dPad;
    if (c.storageRow0 >= 0) {
        SplitView split;
        if (!split_.view(res_, device_, stream, whole, ntotal_, d_, &split)) return false;
        corpus->split = split.rows + size_t(c.storageRow0) * 3 * dPad;
        corpus->gemmRows = c.nb;  // the kept split holds no rows past the storage
        return true;
    }
    // A gathered subset's split lives in temporary memory beside the subset
    // (and, under Auto's hand-over, the fallback's query buffers): where it
    // would take more than half of what is left, the search goes without it.
    scratch->rows = splitRowsInTemp(res_, device_, stream, corpus->vectors, corpus->gemmRows, d_);
    if (!scratch->rows) return false;
    corpus->split = scratch->rows->data();
    return true;
}

bool FlatStorage::residualApplies_(const CorpusView& c, const FlatSearchOptions& opt) const {
    // The whole storage on the device (a filter's subset or slice searches
    // without it), L2, rows the fused kernels take (16-byte chunks), ids in
    // 32 bits, and enough vectors for k-means partitions to pay.
    return metric_ == FlatMetric::L2 && opt.sampledCandidates && c.storageRow0 == 0 &&
           c.nb == ntotal_ && !c.onHost && d_ % 4 == 0 && ntotal_ >= kResidualMinVectors &&
           ntotal_ < (int64_t(1) << 32) && fusedCandidatesEnabled();
}

FlatSearchOptions FlatStorage::fp32FallbackOptions_(const FlatSearchOptions& opt) {
    FlatSearchOptions fp32 = opt;
    fp32.precision = DistancePrecision::FP32;
    fp32.queriesPrepared = true;
    fp32.boundedStats = nullptr;
    fp32.cascadeToBf16x3 = false;
    return fp32;
}

bool FlatStorage::searchBounded_(const CorpusView& c, const float* q, int64_t nq, int64_t k,
                                 float* distances, int64_t* labels, const FlatSearchOptions& opt,
                                 cudaStream_t stream) const {
    if (c.keepBits || opt.selfBase >= 0 || !boundedSearchSupported(d_)) return false;
    if (c.onHost) {
        return opt.precision == DistancePrecision::TF32Bounded &&
               searchHostBounded_(c, q, nq, k, distances, labels, opt, stream);
    }
    BoundedCorpus corpus;
    SplitScratch scratch;
    if (!boundedCorpus_(c, opt.precision, stream, &corpus, &scratch)) return false;
    const FlatSearchOptions fp32 = fp32FallbackOptions_(opt);
    const Fp32SearchFn byFp32 = [&](const float* sub, int64_t n, float* subD, int64_t* subL) {
        searchView_(c, sub, n, k, subD, subL, fp32);
    };
    const TileSelection candidates{opt.candidateAlgo, opt.group, opt.thFactor};
    if (opt.beforeResults) opt.beforeResults();
    if (!opt.cascadeToBf16x3) {
        boundedFlatSearch(res_, device_, stream, corpus, q, nq, k, candidates,
                          opt.sampledCandidates, distances, labels, byFp32, opt.boundedStats);
        return true;
    }
    searchAutoCascade_(c, corpus, q, nq, k, distances, labels, opt, byFp32, stream);
    return true;
}

void FlatStorage::searchAutoCascade_(const CorpusView& c, const BoundedCorpus& corpus,
                                     const float* q, int64_t nq, int64_t k, float* distances,
                                     int64_t* labels, const FlatSearchOptions& opt,
                                     const Fp32SearchFn& byFp32, cudaStream_t stream) const {
    // Auto's TF32: the queries it leaves uncertified (all but the first
    // block's on data far from the origin, where it bails out) go through
    // TF32 over the residual copy (whose bound scales with the spread
    // within k-means partitions, not with the norms: ResidualCorpus.h),
    // then BF16x3 products, whose bound is 3-16 times tighter, before FP32.
    const TileSelection candidates{opt.candidateAlgo, opt.group, opt.thFactor};
    BoundedSearchStats tf32, resid, bf16;
    const Fp32SearchFn byBf16x3 = [&](const float* sub, int64_t n, float* subD, int64_t* subL) {
        BoundedCorpus split;
        SplitScratch splitScratch;
        if (boundedCorpus_(c, DistancePrecision::BF16x3Bounded, stream, &split, &splitScratch)) {
            boundedFlatSearch(res_, device_, stream, split, sub, n, k, candidates,
                              opt.sampledCandidates, subD, subL, byFp32, &bf16);
        } else {
            byFp32(sub, n, subD, subL);
            bf16.fallbackQueries += n;
        }
    };
    // (the copy is built on the first search that hands it enough queries:
    // a few uncertified ties do not pay for k-means over the corpus)
    const Fp32SearchFn byResidual = [&](const float* sub, int64_t n, float* subD, int64_t* subL) {
        ResidualView view;
        if (n < kResidualMinQueries || !residualApplies_(c, opt) ||
            !residual_.view(res_, device_, stream, vectors_, ntotal_, d_, &view)) {
            byBf16x3(sub, n, subD, subL);
            return;
        }
        const BoundedCorpus r = residualCorpus_(c, &view);
        boundedFlatSearch(res_, device_, stream, r, sub, n, k, candidates, opt.sampledCandidates,
                          subD, subL, byBf16x3, &resid);
    };
    if (residualApplies_(c, opt) && residual_.built()) {
        // An earlier search found the plain TF32 pass wanting on these
        // vectors (it built the copy, which add / remove_ids / reset drop):
        // no first block to pay again.
        byResidual(q, nq, distances, labels);
    } else {
        boundedFlatSearch(res_, device_, stream, corpus, q, nq, k, candidates,
                          opt.sampledCandidates, distances, labels, byResidual, &tf32);
    }
    if (opt.boundedStats) {
        opt.boundedStats->certifiedQueries +=
            tf32.certifiedQueries + resid.certifiedQueries + bf16.certifiedQueries;
        opt.boundedStats->fallbackQueries += bf16.fallbackQueries;
        opt.boundedStats->residualQueries += resid.certifiedQueries;
    }
}

BoundedCorpus FlatStorage::residualCorpus_(const CorpusView& c, const ResidualView* view) const {
    BoundedCorpus r;
    r.vectors = c.vectors;
    r.sqNorms = c.norms;
    r.nb = c.nb;
    r.d = d_;
    r.metric = metric_;
    r.maxSqNorm = c.maxSqNorm;
    r.gemmRows = c.nb;
    r.residual = view;
    return r;
}

void FlatStorage::searchView_(const CorpusView& c, const float* queries, int64_t nq, int64_t k,
                              float* distances, int64_t* labels,
                              const FlatSearchOptions& opt) const {
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    const bool l2 = metric_ == FlatMetric::L2;
    const select::KeyDecode decode = l2 ? select::KeyDecode::L2 : select::KeyDecode::Negated;
    const int64_t nb = c.nb;
    const int64_t kk = std::min(k, nb);
    if (nq == 0) return;
    if (nb == 0) {
        if (opt.beforeResults) opt.beforeResults();
        select::decodeKeys(nullptr, nq, 0, k, decode, nullptr, distances, labels, stream);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }

    const PreparedQueries pq(res_, device_, metric_, d_, queries, nq, opt.queriesPrepared, stream);
    const float* q = pq.q;

    if (isBoundedPrecision(opt.precision)) {
        if (searchBounded_(c, q, nq, k, distances, labels, opt, stream)) return;
        // The FP32 path below answers every query of this search.
        if (opt.boundedStats) opt.boundedStats->fallbackQueries += nq;
    }
    if (searchSpecialPath_(c, q, l2 ? pq.norms->data() : nullptr, nq, k, distances, labels, opt,
                           stream)) {
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }

    if (opt.beforeResults) opt.beforeResults();
    // Tile plan from the temporary memory budget (90% of what is left).
    const size_t budget = res_->getTempMemoryAvailable(device_) / 10 * 9;
    const TilePlan p =
            planSearch(budget, nb, nq, k, kk, d_, c.onHost, l2, {opt.algo, opt.group, opt.thFactor});

    // One distance tile: GEMM and selection both fill the GPU, so a second
    // tile for overlapping them bought nothing when measured (H100), while
    // its memory buys wider tiles.
    const int64_t ldMax = (p.cols + 3) / 4 * 4;
    TempBuffer<float> dist(res_, device_, size_t(p.rows) * ldMax, stream);
    RowSelector sel(res_, device_, stream, opt.algo, p.rows, p.cols, p.colTiles, nb, kk, opt.group,
                    opt.thFactor);
    const float alpha = l2 ? -2.f : -1.f;
    cublasHandle_t blas = res_->getBlasHandle(device_);

    std::unique_ptr<HostTileStream> host;
    if (c.onHost) {
        host.reset(new HostTileStream(res_, device_, stream, copyStream_, c.vectors, c.norms, nb, d_,
                                      p, l2));
    }
    const int64_t rowBlocks = (nq + p.rows - 1) / p.rows;
    const int64_t totalTiles = rowBlocks * p.colTiles;
    if (host) host->issueCopy(0);

    int64_t t = 0;
    for (int64_t q0 = 0; q0 < nq; q0 += p.rows) {
        const int64_t rows = std::min(p.rows, nq - q0);
        sel.begin(rows);
        for (int64_t c0 = 0; c0 < nb; c0 += p.cols, ++t) {
            const int64_t w = std::min(p.cols, nb - c0);
            const int64_t ld = (w + 3) / 4 * 4;
            const float* xb = c.vectors + size_t(c0) * d_;
            const float* xn = l2 ? c.norms + c0 : nullptr;
            if (host) {
                if (t + 1 < totalTiles) host->issueCopy(t + 1);
                host->await(t, &xb, &xn);
            }
            gemmDotProducts(blas, q + size_t(q0) * d_, rows, xb, w, d_, alpha, dist.data(), ld);
            if (opt.selfBase >= 0) {
                maskSelfPairs(dist.data(), ld, rows, w, opt.selfBase + q0, c0, stream);
            }
            if (c.keepBits) maskExcludedColumns(dist.data(), ld, rows, w, c0, c.keepBits, stream);
            sel.addTile(dist.data(), ld, xn, uint32_t(c0), w);
            if (host) host->release(t);
        }
        const uint64_t* keys = sel.finish();
        select::decodeKeys(keys, rows, kk, k, decode, l2 ? pq.norms->data() + q0 : nullptr,
                           distances + size_t(q0) * k, labels + size_t(q0) * k, stream);
        if (c.keepBits) {
            padExcludedResults(distances + size_t(q0) * k, labels + size_t(q0) * k, rows * k, !l2,
                               stream);
        }
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

bool FlatStorage::searchSpecialPath_(const CorpusView& c, const float* q, const float* qNorms, int64_t nq, int64_t k,
                                     float* distances, int64_t* labels,
                                     const FlatSearchOptions& opt, cudaStream_t stream) const {
    // A masked search runs the tiled path: the mask applies to its tiles.
    if (c.keepBits) return false;
    const int64_t kk = std::min(k, c.nb);
    // As the tile planner: 90% of the temporary memory left.
    const size_t budget = res_->getTempMemoryAvailable(device_) / 10 * 9;
    FlatSearchShape shape;
    shape.nq = nq;
    shape.nb = c.nb;
    shape.kk = kk;
    shape.d = d_;
    shape.onDevice = !c.onHost;
    shape.selfExcluded = opt.selfBase >= 0;
    // Sizing the radix tile asks CUB: only where the path may be taken.
    const bool radixCandidate = opt.path == FlatSearchPath::RadixLargeK ||
                                (opt.path == FlatSearchPath::Auto && kk >= kRadixMinK &&
                                 nq <= kRadixMaxQueries);
    if (radixCandidate && shape.onDevice && !shape.selfExcluded) {
        shape.radixRowsFit = radixRowsFit(budget, c.nb, kk, nq);
    }
    const FlatSearchPath path = resolveFlatSearchPath(opt.path, shape);
    if (path == FlatSearchPath::Tiled) return false;
    DeviceCorpus corpus;
    corpus.vectors = c.vectors;
    corpus.sqNorms = metric_ == FlatMetric::L2 ? c.norms : nullptr;
    corpus.nb = c.nb;
    corpus.d = d_;
    const select::KeyDecode decode =
            metric_ == FlatMetric::L2 ? select::KeyDecode::L2 : select::KeyDecode::Negated;
    if (path == FlatSearchPath::RadixLargeK) {
        radixLargeKSearch(res_, device_, stream, corpus, q, nq, k, decode, qNorms, distances,
                          labels, budget, opt.beforeResults);
        return true;
    }
    TempBuffer<uint64_t> keys(res_, device_, size_t(nq) * kk, stream);
    fusedFewQuerySelect(res_, device_, stream, corpus, q, nq, kk, keys.data());
    if (opt.beforeResults) opt.beforeResults();  // while the fused kernel runs
    select::decodeKeys(keys.data(), nq, kk, k, decode, qNorms, distances, labels, stream);
    return true;
}

void FlatStorage::knnGraph(int64_t k, bool excludeSelf, float* distances, int64_t* labels,
                           const FlatSearchOptions& opt) const {
    const int64_t n = ntotal_;
    if (n == 0) return;
    DeviceScope scope(device_);
    cudaStream_t stream = res_->getDefaultStream(device_);
    const bool dDev = distances && isDevicePointer(distances);
    const bool lDev = isDevicePointer(labels);
    // Query blocks: the stored vectors themselves (staged when on the host),
    // results through device buffers when the outputs are on the host.
    int64_t chunk = n;
    if (onHost_ || !dDev || !lDev) {
        const size_t rowBytes = (onHost_ ? sizeof(float) * d_ : 0) +
                                (dDev ? 0 : sizeof(float) * k) + (lDev ? 0 : sizeof(int64_t) * k);
        // Staging within a quarter of the temporary memory: the search needs the rest.
        const size_t room = std::min<size_t>(size_t(256) << 20, res_->getTempMemoryAvailable(device_) / 4);
        chunk = std::max<int64_t>(1, std::min<int64_t>(n, int64_t(room / rowBytes)));
    }
    TempBuffer<float> qBuf(res_, device_, onHost_ ? size_t(chunk) * d_ : 0, stream);
    TempBuffer<float> dBuf(res_, device_, dDev ? 0 : size_t(chunk) * k, stream);
    TempBuffer<int64_t> lBuf(res_, device_, lDev ? 0 : size_t(chunk) * k, stream);
    FlatSearchOptions o = opt;
    o.queriesPrepared = true;
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const int64_t m = std::min(chunk, n - i0);
        const float* q = vectors_ + size_t(i0) * d_;
        if (onHost_) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(qBuf.data(), q, sizeof(float) * size_t(m) * d_,
                                                 cudaMemcpyHostToDevice, stream));
            q = qBuf.data();
        }
        float* dOut = dDev ? distances + size_t(i0) * k : dBuf.data();
        int64_t* lOut = lDev ? labels + size_t(i0) * k : lBuf.data();
        o.selfBase = excludeSelf ? i0 : -1;
        search(q, m, k, dOut, lOut, o);
        if (distances && !dDev) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(distances + size_t(i0) * k, dOut,
                                                 sizeof(float) * size_t(m) * k,
                                                 cudaMemcpyDeviceToHost, stream));
        }
        if (!lDev) {
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels + size_t(i0) * k, lOut,
                                                 sizeof(int64_t) * size_t(m) * k,
                                                 cudaMemcpyDeviceToHost, stream));
        }
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
}

}  // namespace gpu
}  // namespace faiss_ext
