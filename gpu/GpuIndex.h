// Base class of the faiss_ext GPU indexes: the plumbing done once, as in
// FAISS's faiss/gpu/GpuIndex.h. It checks arguments before touching state or
// the GPU, sets the device, accepts host or device pointers for inputs and
// outputs, and pages large host inputs through the GPU in chunks.
// Subclasses implement addImpl_ / searchImpl_ on device-resident data.
#pragma once

#include "faiss_ext/CpuConvertible.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/IndexOptions.h"

#include <faiss/Index.h>

#include <cstdint>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace faiss_ext {
namespace gpu {

class DeferredFiniteCheck;  // impl/flat/VectorPrep.h
class HostQueryPipeline;    // utils/HostQueryPipeline.h
struct RangeHits;           // impl/flat/RangeSearch.h

/// A recursive mutex that serves waiting threads in arrival order, so that
/// a stream of searches cannot starve an add (std::mutex may let the
/// releasing thread take it again at once).
class FairRecursiveMutex {
public:
    void lock() {
        std::unique_lock<std::mutex> l(m_);
        const std::thread::id me = std::this_thread::get_id();
        if (depth_ > 0 && owner_ == me) {
            ++depth_;
            return;
        }
        const uint64_t ticket = next_++;
        cv_.wait(l, [&] { return serving_ == ticket; });
        owner_ = me;
        depth_ = 1;
    }
    void unlock() {
        std::lock_guard<std::mutex> l(m_);
        if (--depth_ == 0) {
            owner_ = std::thread::id();
            ++serving_;
            cv_.notify_all();
        }
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    uint64_t next_ = 0, serving_ = 0;
    std::thread::id owner_;
    int depth_ = 0;
};

/// A faiss::Index whose data lives on one GPU.
class GpuIndex : public faiss::Index, public faiss_ext::CpuConvertible {
public:
    using idx_t = int64_t;

    /// provider: resources (kept alive by the index); dims > 0.
    GpuIndex(GpuResourcesProvider* provider, int dims, faiss::MetricType metric,
             GpuIndexConfig config);
    ~GpuIndex() override;

    /// The device of this index.
    int getDevice() const { return config_.device; }

    /// The resources this index uses.
    std::shared_ptr<GpuResources> getResources() const { return resources_; }

    /// Adds n vectors (host or device pointer). n == 0 is a no-op.
    void add(idx_t n, const float* x) override;

    /// Not supported: wrap the index in faiss::IndexIDMap for custom ids.
    void add_with_ids(idx_t n, const float* x, const idx_t* ids) override;

    /// k-NN search: x, distances and labels may each be host or device
    /// pointers. n == 0 is allowed. Results are sorted, closest first; rows
    /// are padded with label -1 when k > ntotal.
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;

    /// Range search (subclasses that implement rangeSearchImpl_; others
    /// throw): every stored vector with squared L2 distance < radius, or
    /// similarity > radius for the other metrics, as faiss::IndexFlat
    /// answers. x: host or device; result: a fresh faiss::RangeSearchResult
    /// of n queries, filled on success only. params->sel is honoured where
    /// search honours it. Throws for a NaN radius, a negative L2 radius and
    /// parameters the index cannot apply, before touching the GPU.
    void range_search(idx_t n, const float* x, float radius, faiss::RangeSearchResult* result,
                      const faiss::SearchParameters* params = nullptr) const override;

    /// Host input larger than this many bytes is copied in chunks.
    /// Threads: every public operation of a GPU index (add, search, train,
    /// reset, copyFrom / copyTo, reconstruct, ...) holds the index's own
    /// lock, so several threads may search one index at once (the searches
    /// run one after another on the device's stream and give the results of
    /// serial calls), and an add / reset during a search waits for it.
    void setMinPagingSize(size_t bytes) { minPagingSize_ = bytes; }

protected:
    /// Adds n vectors; x is on this index's device, or on the host when
    /// addImplAcceptsHost_() is true.
    virtual void addImpl_(idx_t n, const float* x) = 0;

    /// Whether addImpl_ copies host vectors itself (no paging buffer).
    virtual bool addImplAcceptsHost_() const { return false; }

    /// Search with all data resident on our device; k >= 1, n >= 1.
    virtual void searchImpl_(idx_t n, const float* x, int64_t k, float* distances,
                             idx_t* labels, const faiss::SearchParameters* params) const = 0;

    /// Whether rangeSearchImpl_ is implemented.
    virtual bool supportsRangeSearch_() const { return false; }

    /// Throws unless range_search can honour params (called before the
    /// queries are read). Default: null or a plain faiss::SearchParameters.
    virtual void checkRangeSearchParams_(const faiss::SearchParameters* params) const;

    /// Range search of n >= 1 device queries; appends each query's hits to
    /// hits rows row0 ... (params checked by checkRangeSearchParams_).
    virtual void rangeSearchImpl_(idx_t n, const float* x, float radius,
                                  const faiss::SearchParameters* params, RangeHits* hits,
                                  idx_t row0) const;

    /// Throws unless this index's resources and device are usable.
    void checkUsable_() const;

    /// Whether p is device memory (of this index's device; another device
    /// throws naming `what`). For subclasses that take inputs themselves.
    bool onThisDevice_(const void* p, const char* what) const;

    /// Holds this index's lock for the caller's scope (recursive: a public
    /// method may call another). Every public method takes it first.
    std::unique_lock<FairRecursiveMutex> lockOps_() const {
        return std::unique_lock<FairRecursiveMutex>(opMutex_);
    }

    /// The results of a search of an empty index: labels -1, distances +inf
    /// (-inf for inner product); distances / labels on this device.
    void fillEmptyResults_(idx_t n, int64_t k, float* distances, idx_t* labels) const;
    /// Throws when adding n vectors would pass this index's own limits
    /// (called by add() before the vectors are read).
    virtual void checkAddCount_(idx_t /*n*/) const {}

    /// Whether searchImpl_ applies SearchParameters::sel (FAISS's
    /// IDSelector). search() refuses a selector, with a clear error, for an
    /// index that does not: a filter is never silently ignored.
    virtual bool honoursSelector_() const { return false; }

    /// Throws unless the n x d vectors at x (host or device) are all finite;
    /// `what` names the call and the rows ("add: vector", "search: query").
    void checkFinite_(idx_t n, const float* x, const char* what) const;

    /// Whether searchImpl_ calls finishDeferredFiniteCheck_() before it
    /// writes any result. Then search() only queues the check of a few
    /// device queries, and the search kernels queued before that call run
    /// while the host waits for the check (one synchronisation less).
    virtual bool defersFiniteCheck_() const { return false; }

    /// Whether searchImpl_, for these params, writes each result once from
    /// device code and never reads the results back except a few at a time:
    /// host queries may then have their results written by the GPU straight
    /// into pinned host memory (mapped, under unified addressing), with no
    /// copy to the host after the search (HostQueryPipeline).
    virtual bool writesResultsOnce_(const faiss::SearchParameters* /*params*/) const {
        return false;
    }

    /// Waits for the queued check of this search's queries, if any, and
    /// throws as checkFinite_ does (nothing written yet). Idempotent.
    void finishDeferredFiniteCheck_() const;

    std::shared_ptr<GpuResources> resources_;
    const GpuIndexConfig config_;
    size_t minPagingSize_;

private:
    mutable FairRecursiveMutex opMutex_;
    /// The NaN / Inf check of device rows (made on first use; used under
    /// the operation lock): checkFinite_ waits for it at once, a search
    /// whose subclass defers it (defersFiniteCheck_) before its first
    /// result; deferredRows_ counts the rows of a pending one (0: none).
    mutable std::unique_ptr<DeferredFiniteCheck> deferredCheck_;
    mutable idx_t deferredRows_ = 0;
    /// The pipeline of host queries (made on first use; used under the
    /// operation lock).
    mutable std::unique_ptr<HostQueryPipeline> hostQueries_;

    /// deferredCheck_, made on first use (on the index's device).
    DeferredFiniteCheck& deferredCheck() const;

    /// checkFinite_ for x whose place the caller has asked CUDA already.
    void checkFiniteAt_(idx_t n, const float* x, bool xOnDevice, const char* what) const;

    /// checkFinite_ for a search's device queries, queued only where the
    /// subclass defers it.
    void checkDeviceQueries_(idx_t n, const float* x) const;

    void searchDeviceInput_(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                            const faiss::SearchParameters* params) const;
    /// Host queries through pinned staging, pipelined with the search
    /// (GpuIndexHostSearch.cpp); checks them for NaN / Inf as it stages.
    void searchPagedHostInput_(idx_t n, const float* x, idx_t k, float* distances,
                               idx_t* labels, const faiss::SearchParameters* params) const;
    /// The same through pageable copies, where no pinned memory holds a row.
    void searchPageableHostInput_(idx_t n, const float* x, idx_t k, float* distances,
                                  idx_t* labels, const faiss::SearchParameters* params) const;
};

}  // namespace gpu
}  // namespace faiss_ext
