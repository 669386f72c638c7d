#include "faiss_ext/gpu/impl/flat/RowSelector.h"

#include "faiss_ext/gpu/impl/select/MergeQueue.h"
#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"
#include "faiss_ext/gpu/impl/select/THHeap.h"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <map>
#include <mutex>

namespace faiss_ext {
namespace gpu {

namespace {

/// Pinned host blocks kept for reuse across searches (cudaHostAlloc is slow),
/// for TH-heap's host-side lists. Kept apart from the resources' pinned
/// staging buffer on purpose (utils/DeviceVector.h tells the whole story): a
/// search with host queries holds that buffer's mutex while the selection
/// runs inside it, so taking it here would deadlock and sharing the buffer
/// would overwrite the staged queries; TH-heap needs up to six growing,
/// double-buffered blocks at once, not one fixed block that may be disabled;
/// and one mutex would serialise concurrent searches sharing the resources.
class PinnedCache {
public:
    static PinnedCache& get() {
        static PinnedCache* c = new PinnedCache();  // never destroyed: outlives users at exit
        return *c;
    }
    void* acquire(size_t bytes) {
        bytes = std::max<size_t>(align256(bytes), 4096);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = free_.lower_bound(bytes);
            if (it != free_.end() && it->first <= 4 * bytes) {
                void* p = it->second;
                sizes_[p] = it->first;
                free_.erase(it);
                return p;
            }
        }
        void* p = nullptr;
        cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
        if (err != cudaSuccess) {
            cudaGetLastError();
            FAISS_THROW_FMT("cannot allocate %zu bytes of pinned host memory: %s", bytes,
                            cudaGetErrorString(err));
        }
        std::lock_guard<std::mutex> lock(mutex_);
        sizes_[p] = bytes;
        return p;
    }
    void release(void* p) {
        if (!p) return;
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = sizes_.find(p);
        if (it == sizes_.end()) return;
        free_.emplace(it->second, p);
        sizes_.erase(it);
        // Keep at most 8 idle blocks; free the smallest beyond that.
        while (free_.size() > 8) {
            cudaFreeHost(free_.begin()->second);
            free_.erase(free_.begin());
        }
    }

private:
    std::mutex mutex_;
    std::multimap<size_t, void*> free_;
    std::map<void*, size_t> sizes_;
};

/// A pinned host buffer from the cache, grown on demand (contents dropped).
struct PinnedBuffer {
    void* p = nullptr;
    size_t bytes = 0;
    ~PinnedBuffer() { PinnedCache::get().release(p); }
    template <typename T>
    T* ensure(size_t count) {
        size_t need = sizeof(T) * std::max<size_t>(count, 1);
        if (need > bytes) {
            PinnedCache::get().release(p);
            p = nullptr;
            p = PinnedCache::get().acquire(need);
            bytes = need;
        }
        return static_cast<T*>(p);
    }
    template <typename T>
    T* as() const { return static_cast<T*>(p); }
};

struct QmsSizes {
    int64_t mergeWidth = 0;
    int64_t auxCap = 0;
};

QmsSizes qmsSizes(int64_t cols, int64_t colTiles, int64_t nTotal, int64_t kk) {
    QmsSizes s;
    if (colTiles > 1) {
        int64_t last = nTotal - (colTiles - 1) * cols;
        s.mergeWidth = (colTiles - 1) * std::min(kk, cols) + std::min(kk, std::max<int64_t>(last, 1));
    }
    s.auxCap = std::max(cols, s.mergeWidth);
    return s;
}

int64_t thSamples(int64_t kk, int thFactor) { return kk * int64_t(thFactor); }

/// Device CSR capacity (keys) per row for TH-heap tiles of `cols` columns.
int64_t thCsrPerRow(int64_t cols, int64_t kk, int thFactor) {
    int64_t nS = thSamples(kk, thFactor);
    if (2 * nS > cols) return cols;
    return std::min<int64_t>(cols, 2 * kk * (cols / nS + 1) + 256);
}

}  // namespace

struct RowSelector::Impl {
    GpuResources* res;
    int device;
    cudaStream_t stream;
    SelectAlgo algo;
    int64_t maxRows, cols, colTiles, nTotal, kk;
    int group, thFactor;

    int64_t rows = 0;
    int64_t tile = 0;  // tiles added in this block
    int64_t mergeOffset = 0;
    QmsSizes qs;

    std::unique_ptr<TempBuffer<uint64_t>> finalKeys;
    // Quick multi-select
    std::unique_ptr<TempBuffer<uint64_t>> aux1, aux2, merge, pivots;
    std::unique_ptr<TempBuffer<unsigned long long>> counts;
    std::unique_ptr<TempBuffer<char>> sortTemp;
    size_t sortBytes = 0;
    // Merge queue
    std::unique_ptr<TempBuffer<char>> mqScratch;
    size_t mqBytes = 0;
    // TH-heap
    std::unique_ptr<TempBuffer<uint32_t>> thresholds;
    std::unique_ptr<TempBuffer<int64_t>> dOffsets;
    std::unique_ptr<TempBuffer<unsigned long long>> cursor;
    std::unique_ptr<TempBuffer<char>> sampleScratch;
    size_t sampleBytes = 0;
    std::unique_ptr<TempBuffer<uint64_t>> csr;
    int64_t csrCap = 0;
    std::vector<MinMaxKHeap> heaps;
    PinnedBuffer hCounts, hOffsets[2], hCsr[2], hSorted;
    cudaEvent_t evCounts = nullptr, evCopied[2] = {nullptr, nullptr};
    bool pending = false;
    int pendingSlot = 0;
    uint32_t seed = 0x9E3779B9u;

    void feedPending() {
        if (!pending) return;
        FAISS_EXT_CUDA_CHECK(cudaEventSynchronize(evCopied[pendingSlot]));
        minMaxHeapFeedRows(heaps.data(), size_t(rows), hCsr[pendingSlot].as<uint64_t>(),
                           hOffsets[pendingSlot].as<int64_t>());
        pending = false;
    }

    void addTileTH(const float* dist, int64_t ld, const float* colAdd, uint32_t colBase, int64_t w) {
        const int64_t nS = thSamples(kk, thFactor);
        if (2 * nS <= w) {
            select::thSampleThresholds(dist, ld, colAdd, rows, w, kk, nS, seed ^ uint32_t(tile),
                                       thresholds->data(), sampleScratch->data(), sampleBytes,
                                       stream);
        } else {
            FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(thresholds->data(), 0xFF,
                                                 sizeof(uint32_t) * rows, stream));
        }
        select::thCountRows(dist, ld, colAdd, rows, w, thresholds->data(), counts->data(), stream);
        unsigned long long* hc = hCounts.ensure<unsigned long long>(rows);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hc, counts->data(), sizeof(unsigned long long) * rows,
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(evCounts, stream));
        // The host sorts the previous tile while the GPU counts this one.
        feedPending();
        FAISS_EXT_CUDA_CHECK(cudaEventSynchronize(evCounts));
        const int slot = int(tile & 1);
        int64_t* off = hOffsets[slot].ensure<int64_t>(rows + 1);
        off[0] = 0;
        for (int64_t r = 0; r < rows; ++r) off[r + 1] = off[r] + int64_t(hc[r]);
        uint64_t* hk = hCsr[slot].ensure<uint64_t>(size_t(off[rows]));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dOffsets->data(), off, sizeof(int64_t) * (rows + 1),
                                             cudaMemcpyHostToDevice, stream));
        // Compact and ship in row groups that fit the device CSR buffer.
        for (int64_t r0 = 0; r0 < rows;) {
            int64_t r1 = r0 + 1;
            while (r1 < rows && off[r1 + 1] - off[r0] <= csrCap) ++r1;
            FAISS_THROW_IF_NOT_FMT(off[r1] - off[r0] <= csrCap,
                                   "TH-heap: a row keeps %lld entries, more than the %lld planned",
                                   (long long)(off[r1] - off[r0]), (long long)csrCap);
            select::thCompactRows(dist, ld, colAdd, colBase, r0, r1, w, thresholds->data(),
                                  dOffsets->data(), csr->data(), cursor->data(), stream);
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hk + off[r0], csr->data(),
                                                 sizeof(uint64_t) * (off[r1] - off[r0]),
                                                 cudaMemcpyDeviceToHost, stream));
            r0 = r1;
        }
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(evCopied[slot], stream));
        pending = true;
        pendingSlot = slot;
    }
};

size_t RowSelector::bytesPerRow(SelectAlgo algo, int64_t cols, int64_t colTiles, int64_t nTotal,
                                int64_t kk, int group, int thFactor) {
    size_t b = sizeof(uint64_t) * kk;  // the block's final keys
    switch (algo) {
        case SelectAlgo::MergeQueue:
            b += select::mergeQueueScratchBytes(1, cols, kk, group);
            break;
        case SelectAlgo::THHeap: {
            int64_t nS = thSamples(kk, thFactor);
            b += sizeof(uint32_t) + 3 * sizeof(int64_t) + sizeof(uint64_t) * thCsrPerRow(cols, kk, thFactor);
            if (2 * nS <= cols) b += select::thSampleScratchBytes(1, nS, kk);
            break;
        }
        default: {
            QmsSizes s = qmsSizes(cols, colTiles, nTotal, kk);
            b += 2 * sizeof(uint64_t) * s.auxCap + sizeof(uint64_t) * s.mergeWidth +
                 2 * sizeof(uint64_t) + select::sortKeyRowsTempBytes(1, kk) + 2 * sizeof(uint64_t) * kk;
        }
    }
    return b + 64;
}

RowSelector::RowSelector(GpuResources* res, int device, cudaStream_t stream, SelectAlgo algo,
                         int64_t maxRows, int64_t cols, int64_t colTiles, int64_t nTotal,
                         int64_t kk, int group, int thFactor)
        : impl_(new Impl) {
    FAISS_THROW_IF_NOT_FMT(kk >= 1 && kk <= nTotal && maxRows >= 1 && cols >= 1,
                           "RowSelector: bad shape (k %lld, n %lld, rows %lld, cols %lld)",
                           (long long)kk, (long long)nTotal, (long long)maxRows, (long long)cols);
    Impl& s = *impl_;
    s.res = res;
    s.device = device;
    s.stream = stream;
    s.algo = algo;
    s.maxRows = maxRows;
    s.cols = cols;
    s.colTiles = colTiles;
    s.nTotal = nTotal;
    s.kk = kk;
    s.group = group;
    s.thFactor = thFactor;
    s.finalKeys.reset(new TempBuffer<uint64_t>(res, device, size_t(maxRows) * kk, stream));
    switch (algo) {
        case SelectAlgo::QuickMultiSelect: {
            s.qs = qmsSizes(cols, colTiles, nTotal, kk);
            s.aux1.reset(new TempBuffer<uint64_t>(res, device, size_t(maxRows) * s.qs.auxCap, stream));
            s.aux2.reset(new TempBuffer<uint64_t>(res, device, size_t(maxRows) * s.qs.auxCap, stream));
            s.merge.reset(new TempBuffer<uint64_t>(res, device, size_t(maxRows) * s.qs.mergeWidth, stream));
            s.pivots.reset(new TempBuffer<uint64_t>(res, device, size_t(maxRows), stream));
            s.counts.reset(new TempBuffer<unsigned long long>(res, device, size_t(maxRows), stream));
            s.sortBytes = select::sortKeyRowsTempBytes(maxRows, kk);
            s.sortTemp.reset(new TempBuffer<char>(res, device, s.sortBytes, stream));
            break;
        }
        case SelectAlgo::MergeQueue: {
            FAISS_THROW_IF_NOT_FMT(kk <= select::kMergeQueueMaxK,
                                   "the merge queue selects at most k = %lld (asked for %lld); use "
                                   "QuickMultiSelect or Auto", (long long)select::kMergeQueueMaxK,
                                   (long long)kk);
            s.mqBytes = select::mergeQueueScratchBytes(maxRows, cols, kk, group);
            s.mqScratch.reset(new TempBuffer<char>(res, device, s.mqBytes, stream));
            break;
        }
        case SelectAlgo::THHeap: {
            const int64_t nS = thSamples(kk, thFactor);
            s.thresholds.reset(new TempBuffer<uint32_t>(res, device, size_t(maxRows), stream));
            s.counts.reset(new TempBuffer<unsigned long long>(res, device, size_t(maxRows), stream));
            s.cursor.reset(new TempBuffer<unsigned long long>(res, device, size_t(maxRows), stream));
            s.dOffsets.reset(new TempBuffer<int64_t>(res, device, size_t(maxRows) + 1, stream));
            if (2 * nS <= cols) {
                s.sampleBytes = select::thSampleScratchBytes(maxRows, nS, kk);
                s.sampleScratch.reset(new TempBuffer<char>(res, device, s.sampleBytes, stream));
            }
            s.csrCap = std::max<int64_t>(cols, maxRows * thCsrPerRow(cols, kk, thFactor));
            s.csr.reset(new TempBuffer<uint64_t>(res, device, size_t(s.csrCap), stream));
            s.heaps.resize(size_t(maxRows));
            FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&s.evCounts, cudaEventDisableTiming));
            for (auto& e : s.evCopied) {
                FAISS_EXT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            }
            break;
        }
        default:
            FAISS_THROW_FMT("RowSelector: selection algorithm %d not resolved", int(algo));
    }
}

RowSelector::~RowSelector() {
    Impl& s = *impl_;
    if (s.evCounts) {
        // Pending copies target our pinned buffers: let them land first.
        cudaStreamSynchronize(s.stream);
        cudaEventDestroy(s.evCounts);
        for (auto e : s.evCopied) cudaEventDestroy(e);
    }
}

void RowSelector::begin(int64_t rows) {
    Impl& s = *impl_;
    FAISS_THROW_IF_NOT_FMT(rows >= 1 && rows <= s.maxRows, "RowSelector: %lld rows (max %lld)",
                           (long long)rows, (long long)s.maxRows);
    s.rows = rows;
    s.tile = 0;
    s.mergeOffset = 0;
    if (s.algo == SelectAlgo::THHeap) {
        s.pending = false;
        for (int64_t r = 0; r < rows; ++r) s.heaps[size_t(r)].reset(size_t(s.kk));
    }
}

void RowSelector::addTile(const float* dist, int64_t ld, const float* colAdd, uint32_t colBase,
                          int64_t w) {
    Impl& s = *impl_;
    FAISS_THROW_IF_NOT_FMT(w >= 1 && w <= s.cols && s.tile < s.colTiles,
                           "RowSelector: tile %lld of width %lld (max %lld x %lld)",
                           (long long)s.tile, (long long)w, (long long)s.colTiles, (long long)s.cols);
    switch (s.algo) {
        case SelectAlgo::QuickMultiSelect: {
            select::SelectArgs a;
            a.dist = dist;
            a.ld = ld;
            a.colAdd = colAdd;
            a.colBase = colBase;
            a.n = w;
            a.rows = s.rows;
            a.k = std::min(s.kk, w);
            if (s.colTiles > 1) {
                a.out = s.merge->data();
                a.outStride = s.qs.mergeWidth;
                a.outOffset = s.mergeOffset;
            } else {
                a.out = s.finalKeys->data();
                a.outStride = s.kk;
            }
            a.aux1 = s.aux1->data();
            a.aux2 = s.aux2->data();
            a.auxStride = s.qs.auxCap;
            select::filterFloatRows(a, s.pivots->data(), s.counts->data(), s.stream);
            a.prefilteredCount = s.counts->data();
            select::quickMultiSelect(a, s.stream);
            s.mergeOffset += a.k;
            break;
        }
        case SelectAlgo::MergeQueue: {
            select::MergeQueueArgs a;
            a.dist = dist;
            a.ld = ld;
            a.colAdd = colAdd;
            a.colBase = colBase;
            a.n = w;
            a.rows = s.rows;
            a.k = s.kk;
            a.run = s.finalKeys->data();
            a.runStride = s.kk;
            a.hasInit = s.tile > 0;
            a.group = s.group;
            a.scratch = s.mqScratch->data();
            a.scratchBytes = s.mqBytes;
            select::mergeQueueSelect(a, s.stream);
            break;
        }
        default:
            s.addTileTH(dist, ld, colAdd, colBase, w);
    }
    ++s.tile;
}

const uint64_t* RowSelector::finish() {
    Impl& s = *impl_;
    FAISS_THROW_IF_NOT_MSG(s.tile >= 1, "RowSelector::finish: no tile was added");
    switch (s.algo) {
        case SelectAlgo::QuickMultiSelect: {
            if (s.colTiles > 1) {
                FAISS_THROW_IF_NOT_FMT(s.mergeOffset >= s.kk,
                                       "RowSelector: %lld candidates for k = %lld",
                                       (long long)s.mergeOffset, (long long)s.kk);
                select::SelectArgs a;
                a.keys = s.merge->data();
                a.keyStride = s.qs.mergeWidth;
                a.n = s.mergeOffset;
                a.rows = s.rows;
                a.k = s.kk;
                a.out = s.finalKeys->data();
                a.outStride = s.kk;
                a.aux1 = s.aux1->data();
                a.aux2 = s.aux2->data();
                a.auxStride = s.qs.auxCap;
                select::quickMultiSelect(a, s.stream);
            }
            select::sortKeyRows(s.finalKeys->data(), s.rows, s.kk, s.sortTemp->data(), s.sortBytes,
                                s.stream);
            break;
        }
        case SelectAlgo::MergeQueue:
            break;  // the running list is sorted
        default: {
            s.feedPending();
            uint64_t* out = s.hSorted.ensure<uint64_t>(size_t(s.rows) * s.kk);
            // Rows hold exactly kk keys (every tile keeps at least min(kk, w)).
            for (int64_t r = 0; r < s.rows; ++r) {
                FAISS_THROW_IF_NOT_FMT(s.heaps[size_t(r)].size() == size_t(s.kk),
                                       "TH-heap: row %lld kept %zu keys, %lld expected",
                                       (long long)r, s.heaps[size_t(r)].size(), (long long)s.kk);
            }
            minMaxHeapPopRows(s.heaps.data(), size_t(s.rows), out, size_t(s.kk));
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(s.finalKeys->data(), out,
                                                 sizeof(uint64_t) * s.rows * s.kk,
                                                 cudaMemcpyHostToDevice, s.stream));
            // hSorted is reused by the next block: wait for the copy.
            FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
        }
    }
    return s.finalKeys->data();
}

}  // namespace gpu
}  // namespace faiss_ext
