// IndexBiLevelLSH: Bi-level LSH (Pan & Manocha, GIS 2011, docs/references.md,
// and their Bi-level LSH report) on the CPU with OpenMP: the twin of
// faiss_ext::gpu::GpuIndexBiLevelLSH and its test oracle. Both give every
// vector the same group and bucket and every query the same candidates
// (BiLevelLSHCommon.h says how).
//
// train(n, x) builds level one, a random projection tree of depth D (section
// 5.1, Algorithm 2): each group is split at a median, by the RP-tree mean
// rule: along a random unit direction when its squared diameter (Egecioglu &
// Kalantari's approximation, Algorithm 1) is at most c times its average
// squared interpoint distance, else by the distance to its mean. It also
// draws level two's p-stable projections: L tables of M projections
// h(v) = floor((<a, v - mean_g> / W_g) + b), with a per-group bucket width
// W_g = bucketWidth x (RMS radius of group g).
//
// add(n, x) stores the vectors and rebuilds the tables over everything added:
// each vector's group (tree traversal) and codes; per table the vectors
// sorted by (group, Morton code of the M coordinates); each bucket (run of
// equal codes) becomes a 64-bit key whose value is its interval in the
// sorted array; the keys of all tables live in one cuckoo hash table
// (section 5.2). The sorted codes are the Morton hierarchy: every cell of
// the curve (level s: codes equal but for their lowest s bits) is a
// contiguous run of them.
//
// search(): the query's group (or its groupProbes nearest groups), its code
// in each table, its bucket and its best nprobe - 1 multi-probe neighbours;
// when they hold fewer than minCandidates items, the smallest Morton cell
// around the query's code that holds enough (binary searches); the
// union of the candidates over the tables is ranked by exact L2 distance
// (short-list search). Knobs: SearchParametersBiLevelLSH.
//
// Metric: L2 only (p-stable LSH is an L2 scheme). Vectors must be finite.
#pragma once

#include "faiss_ext/BiLevelLSHModel.h"
#include "faiss_ext/CuckooHashTable.h"

#include <faiss/Index.h>

#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace faiss_ext {

/// The hash tables of a Bi-level LSH index over ntotal vectors.
struct BiLevelLSHTables {
    /// L x ntotal vector ids: table t's vectors sorted by (group, Morton
    /// code, id) in [t * ntotal, (t + 1) * ntotal).
    std::vector<int32_t> sortedIds;
    /// L x ntotal Morton codes in the order of sortedIds.
    std::vector<uint64_t> sortedCodes;
    /// groups + 1 offsets: group g occupies [groupStart[g], groupStart[g+1])
    /// of every table.
    std::vector<int64_t> groupStart;
    /// One key per bucket (lsh::bucketKey), distinct.
    std::vector<uint64_t> bucketKeys;
    /// Interval of each key in sortedIds.
    std::vector<lsh::BucketRange> bucketRanges;
    /// Salt of lsh::bucketKey (changed only if two buckets' keys collide).
    uint64_t keySalt = 0;
};

/// Bi-level LSH on the CPU (OpenMP), the twin of GpuIndexBiLevelLSH.
class IndexBiLevelLSH : public faiss::Index {
public:
    /// An untrained index of dimension d (> 0; 0 only for readers). metric
    /// must be METRIC_L2.
    explicit IndexBiLevelLSH(int d = 0, BiLevelLSHConfig config = {},
                             faiss::MetricType metric = faiss::METRIC_L2);

    /// Builds the RP-tree and the projections from n >= 2^treeDepth finite
    /// vectors. Only while the index is empty (reset() first). With
    /// config.autotuneRecall > 0 it first tunes the configuration on the
    /// training vectors (n >= kMinAutoTuneTrainingVectors; see
    /// BiLevelLSHConfig::autotuneRecall), getConfig() then returns the
    /// choice and getAutoTuneVerdict() the tuner's verdict.
    void train(int64_t n, const float* x) override;

    /// The autotuner's verdict at the last train() (empty when it did not
    /// tune): the recall reached on held-out training vectors and the
    /// predicted throughput against exact search, or why Bi-level LSH does
    /// not pay on these data.
    const std::string& getAutoTuneVerdict() const { return autoTuneVerdict_; }

    /// Adds n finite vectors (ids ntotal ..) and rebuilds the tables. Needs
    /// train(). On error nothing changes.
    void add(int64_t n, const float* x) override;

    /// Approximate k-NN: squared L2 distances, sorted, padded with -1 /
    /// +inf when fewer than k candidates are found. params: null or
    /// SearchParametersBiLevelLSH.
    void search(int64_t n, const float* x, int64_t k, float* distances, int64_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;

    /// Removes the vectors, keeps the training.
    void reset() override;

    /// Removes the vectors whose ids `sel` selects and rebuilds the tables
    /// over the rest; the later ids move down to close the gaps (as
    /// faiss::IndexFlat::remove_ids does). Returns how many were removed.
    /// On error nothing changes.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    /// Copies vector `key` into recons.
    void reconstruct(int64_t key, float* recons) const override;

    /// Copies vectors [i0, i0 + ni) into recons; throws when the range is
    /// not inside [0, ntotal) (FAISS's default threw inside an OpenMP loop:
    /// std::terminate).
    void reconstruct_n(int64_t i0, int64_t ni, float* recons) const override;

    /// The candidate sets search() would rank: query i's distinct candidate
    /// ids, ascending, are ids[lims[i] .. lims[i + 1]). k resolves
    /// minCandidates = 0.
    void getCandidates(int64_t n, const float* x, int64_t k, std::vector<int64_t>* lims,
                       std::vector<int64_t>* ids,
                       const faiss::SearchParameters* params = nullptr) const;

    /// Vectors added per group (the tree's split of the data).
    std::vector<int64_t> groupSizes() const;

    /// Runs f() holding the index's reader lock and returns what it returns:
    /// what f reads through getConfig / getModel / getVectors / getTables
    /// (and ntotal) stays consistent while other threads train, add, reset
    /// (they wait). The getters alone take no lock. f must not call the
    /// index's own locking methods (search, add, reconstruct, ...).
    template <typename F>
    decltype(auto) readLocked(F&& f) const {
        auto lock = readLock_();
        return f();
    }

    /// A copy of the stored vectors (ntotal x d floats) taken under the
    /// reader lock.
    std::vector<float> copyVectors() const {
        return readLocked([&] { return vectors_; });
    }

    const BiLevelLSHConfig& getConfig() const { return config_; }
    const BiLevelLSHModel& getModel() const { return model_; }
    /// ntotal x d stored vectors.
    const std::vector<float>& getVectors() const { return vectors_; }
    const BiLevelLSHTables& getTables() const { return tables_; }
    const CuckooHashTable& getCuckooTable() const { return cuckoo_; }

    /// Replaces everything: configuration, model (empty = untrained, then
    /// vectors must be empty) and vectors (ntotal x d); rebuilds the tables.
    /// Used by the reader and by GpuIndexBiLevelLSH::copyTo. Checks first;
    /// on error nothing changes.
    void setContents(const BiLevelLSHConfig& config, BiLevelLSHModel model,
                     std::vector<float> vectors);

private:
    void checkQueryArgs_(const char* name, int64_t n, const float* x, int64_t k) const;

    /// Readers (search, getCandidates, reconstruct, groupSizes) share it,
    /// writers (train, add, reset, setContents) hold it alone: searches from
    /// several threads run at once, an add waits for them. A copy of the
    /// index gets a fresh, unlocked one.
    /// Writers first pass `gate` and hold it, so that a stream of searches
    /// cannot starve an add (glibc's rwlock prefers readers).
    struct RwLock {
        RwLock() = default;
        RwLock(const RwLock&) {}
        RwLock& operator=(const RwLock&) { return *this; }
        mutable std::shared_mutex m;
        mutable std::mutex gate;
    };
    struct WriteGuard {
        std::unique_lock<std::mutex> gate;
        std::unique_lock<std::shared_mutex> lock;
    };
    std::shared_lock<std::shared_mutex> readLock_() const {
        { std::lock_guard<std::mutex> g(rw_.gate); }
        return std::shared_lock<std::shared_mutex>(rw_.m);
    }
    WriteGuard writeLock_() const {
        WriteGuard g{std::unique_lock<std::mutex>(rw_.gate), {}};
        g.lock = std::unique_lock<std::shared_mutex>(rw_.m);
        return g;
    }
    RwLock rw_;

    BiLevelLSHConfig config_;
    BiLevelLSHModel model_;
    std::vector<float> vectors_;
    BiLevelLSHTables tables_;
    CuckooHashTable cuckoo_;
    std::string autoTuneVerdict_;
};

namespace lsh {

/// Builds level one on the CPU: the RP-tree (rules, vectors, thresholds) and
/// the leaves of `model` (from BiLevelLSHModel::initRandom) from n training
/// vectors. verbose: one line per level.
void trainTreeCpu(BiLevelLSHModel* model, const BiLevelLSHConfig& config, int64_t n,
                  const float* x, bool verbose);

/// Builds the tables over n vectors (host) with `model`.
void buildTablesCpu(const BiLevelLSHModel& model, const BiLevelLSHConfig& config, int64_t n,
                    const float* x, BiLevelLSHTables* tables, CuckooHashTable* cuckoo,
                    bool verbose);

/// Bucket keys and intervals of tables whose sortedIds and sortedCodes are
/// set, given each vector's group.
void bucketKeysFromSorted(const BiLevelLSHModel& model, int64_t n, const int32_t* groupOf,
                          BiLevelLSHTables* tables);

}  // namespace lsh
}  // namespace faiss_ext
