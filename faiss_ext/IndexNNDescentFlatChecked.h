// The CPU twin of GpuKnnGraphGNND: faiss::IndexNNDescentFlat with the
// searches FAISS 1.7.3 cannot answer refused instead of crashing.
#pragma once

#include <faiss/IndexNNDescent.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace faiss_ext {

/// faiss::IndexNNDescentFlat (same fields, file format "INNf", FAISS's own
/// build and search) whose search, reconstruct and reconstruct_n check first
/// and throw faiss::FaissException where FAISS 1.7.3 would crash:
///   - add that leaves 100 vectors or fewer: FAISS's build draws 100
///     evaluation points modulo ntotal - 100 (SIGFPE at 100, garbage below);
///     refused before anything is stored;
///   - search of an index whose graph is not built (empty, reset, or fewer
///     than 101 vectors added): FAISS throws inside an OpenMP region
///     (std::terminate);
///   - search with a candidate pool max(nndescent.search_L, k) >= ntotal:
///     FAISS draws the pool's start nodes modulo ntotal - pool (SIGFPE when
///     0, out-of-range ids and then SIGSEGV when negative);
///   - search of a graph holding -1 entries (lists of a graph with fewer than
///     K + 1 nodes, as GpuKnnGraphGNND writes them): FAISS follows them
///     unchecked;
///   - reconstruct / reconstruct_n of keys outside [0, ntotal): FAISS's
///     IndexFlat copies from any offset.
/// faiss_ext::index_factory ("GNND<k>"), read_index ("INNf") and the cloner
/// return this class.
class IndexNNDescentFlatChecked : public faiss::IndexNNDescentFlat {
  public:
    /// FAISS 1.7.3's NN-Descent builds graphs of more than this many vectors.
    static constexpr int64_t kMinBuildVectors = 100;

    /// No storage yet, like faiss::IndexNNDescentFlat() (for readers).
    IndexNNDescentFlatChecked();
    /// An empty index: d, graph degree K, metric (L2 or inner product).
    IndexNNDescentFlatChecked(int d, int K, faiss::MetricType metric = faiss::METRIC_L2);

    /// FAISS's add (which rebuilds the graph over all vectors), refused
    /// before anything changes unless more than 100 vectors result.
    void add(int64_t n, const float* x) override;

    /// FAISS's NN-Descent search after the checks above.
    void search(int64_t n, const float* x, int64_t k, float* distances, int64_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;

    /// Copies vector `key` (in [0, ntotal)) into recons.
    void reconstruct(int64_t key, float* recons) const override;

    /// Copies vectors [i0, i0 + ni) (inside [0, ntotal)) into recons.
    void reconstruct_n(int64_t i0, int64_t ni, float* recons) const override;

    /// Throws unless search(n, x, k) is one FAISS 1.7.3 answers safely
    /// (`who` names the caller in the message).
    void checkSearchable(int64_t k, const char* who) const;

  private:
    /// Whether final_graph holds an entry outside [0, ntotal), remembered for
    /// the graph's buffer and size (a search does not rescan it).
    bool graphHasInvalidEntry_() const;
    struct Cache {
        Cache() = default;
        Cache(const Cache&) {}
        Cache& operator=(const Cache&) { return *this; }
        std::mutex m;
        const void* data = nullptr;
        size_t size = 0;
        int64_t ntotal = -1;
        bool invalid = false;
    };
    mutable Cache cache_;
};

}  // namespace faiss_ext
