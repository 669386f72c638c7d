// GpuIndexBiLevelLSH: approximate k-NN on the GPU by Bi-level LSH (Pan &
// Manocha, "Fast GPU-based LSH for k-NN", GIS 2011; docs/references.md).
//
// Level one (train): a random projection tree built on the GPU level by
// level (Algorithm 2) with the clustered primitives of section 4.2: clustered
// mean / sum (chunked, deterministic), Egecioglu & Kalantari's diameter
// (Algorithm 1) for all groups at once, the RP-tree mean rule, and a
// clustered sort (radix sort of (group, key)) whose median splits each group.
// Level two (add): p-stable codes of all vectors for L tables of M
// projections (one canonical projection kernel), per table a radix sort by
// (group, Morton code), the buckets and their Morton ancestors as 64-bit keys
// in one GPU cuckoo hash table (parallel insert with eviction, rebuilt with
// fresh seeds when a chain fails; gpu/GpuCuckooHashTable.h).
// Search: tree traversal, codes, multi-probe and Morton widening (the same
// host/device code as the CPU twin, faiss_ext/BiLevelLSHCommon.h), then the
// short-list search: a per-query heap (one warp per query) for small k, or
// the work queue (clustered sort of all (query, candidate distance) pairs,
// then compaction of each query's first k) for large k.
//
// The CPU twin is faiss_ext::IndexBiLevelLSH: for the same configuration and
// training data both build the same tree and tables and give every query the
// same candidates (copyFrom / copyTo move the trained model and the vectors).
//
// Usage:
//   faiss_ext::gpu::StandardGpuResources res;
//   faiss_ext::BiLevelLSHConfig cfg;          // L = 10, M = 8, depth 4, ...
//   faiss_ext::gpu::GpuIndexBiLevelLSH index(&res, 128, cfg);
//   index.train(n, x);  index.add(n, x);
//   faiss_ext::SearchParametersBiLevelLSH sp;  sp.nprobe = 8;
//   index.search(nq, q, 10, D, I, &sp);
#pragma once

#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuIndex.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gpu {

/// GPU options of GpuIndexBiLevelLSH.
struct GpuIndexBiLevelLSHConfig : GpuIndexConfig {
    /// BiLevelShortList::Auto uses the per-query heap when k <= heapMaxK
    /// (0..1024) and either d <= heapMaxDim or the queries hold at most
    /// heapMaxCandidates candidates each on average (duplicates across tables
    /// included); else the work queue. Measured on an H200 (bench suite lsh):
    /// with d = 3 (point cloud, ~15k candidates per query) the heap is 9x the
    /// work queue at k = 10 and 2.4x at k = 500 (a lane per candidate, no
    /// sort); with d = 128 / 784 the work queue is 2-4x the heap at every k
    /// from 1 to 500 (one warp per query waits on its rows; the queue keeps
    /// all of them in flight).
    int heapMaxK = 1024;
    int heapMaxDim = 16;
    double heapMaxCandidates = 256;
    /// Device memory for the work queue of one batch of queries (bytes).
    size_t workQueueBytes = size_t(1) << 30;
};

namespace lsh_impl {
struct DeviceState;
}

/// Bi-level LSH on one GPU, the twin of faiss_ext::IndexBiLevelLSH.
class GpuIndexBiLevelLSH : public GpuIndex {
public:
    /// An untrained index of dimension dims (> 0), metric L2.
    GpuIndexBiLevelLSH(GpuResourcesProvider* provider, int dims, BiLevelLSHConfig config = {},
                       GpuIndexBiLevelLSHConfig gpuConfig = {});

    /// A copy of a CPU twin (see copyFrom).
    GpuIndexBiLevelLSH(GpuResourcesProvider* provider, const IndexBiLevelLSH* index,
                       GpuIndexBiLevelLSHConfig gpuConfig = {});

    ~GpuIndexBiLevelLSH() override;

    /// Builds the RP-tree and projections on the GPU from n >= 2^treeDepth
    /// finite vectors (host or device pointer). Only while empty. With
    /// autotuneRecall > 0 it first tunes the configuration on the GPU
    /// (GpuBiLevelLSHTuneEvaluator; see BiLevelLSHConfig::autotuneRecall).
    void train(idx_t n, const float* x) override;

    /// The autotuner's verdict at the last train() (empty when it did not
    /// tune), as IndexBiLevelLSH::getAutoTuneVerdict.
    const std::string& getAutoTuneVerdict() const { return autoTuneVerdict_; }

    /// Removes the vectors, keeps the training.
    void reset() override;

    /// Removes the vectors whose ids `sel` selects and rebuilds the tables
    /// on the GPU over the rest; later ids move down to close the gaps, as
    /// on the CPU twin (IndexBiLevelLSH::remove_ids). Returns how many were
    /// removed; on error nothing changes.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    /// Replaces everything with the CPU twin's configuration, model and
    /// vectors (tables rebuilt on the GPU). Throws with this index unchanged
    /// when the dimension differs.
    void copyFrom(const IndexBiLevelLSH* index);

    /// Writes configuration, model and vectors into `index` (same d), which
    /// then rebuilds the same tables on the CPU.
    void copyTo(IndexBiLevelLSH* index) const;

    /// CpuConvertible: a new IndexBiLevelLSH (copyTo).
    faiss::Index* copyToCpuIndex() const override;

    /// Same as IndexBiLevelLSH::getCandidates (host pointers).
    void getCandidates(idx_t n, const float* x, idx_t k, std::vector<idx_t>* lims,
                       std::vector<idx_t>* ids,
                       const faiss::SearchParameters* params = nullptr) const;

    /// Vectors added per group.
    std::vector<int64_t> groupSizes() const;

    /// Training vectors per group at each split (the tree's balance).
    const BiLevelLSHModel& getModel() const { return model_; }
    const BiLevelLSHConfig& getBiLevelConfig() const { return lshConfig_; }
    const GpuIndexBiLevelLSHConfig& getGpuConfig() const { return gpuConfig_; }

    /// Bucket keys and cuckoo statistics of the current tables.
    size_t numBucketKeys() const;
    double cuckooLoad() const;
    int cuckooAttempts() const;

    /// The vectors (ntotal x d) copied to the host.
    std::vector<float> getVectorsHost() const;

    /// Copies stored vector `key` to recons (host or device pointer);
    /// throws for a key outside [0, ntotal), as the CPU twin does.
    void reconstruct(idx_t key, float* recons) const override;

    /// Copies stored vectors i0 .. i0 + ni - 1 to recons (one copy; throws
    /// before copying anything for a range outside [0, ntotal), so FAISS's
    /// default, whose exception inside an OpenMP loop would end the
    /// process, is never reached).
    void reconstruct_n(idx_t i0, idx_t ni, float* recons) const override;

    /// The short-list algorithm BiLevelShortList::Auto picks for k and a
    /// mean number of candidates per query.
    BiLevelShortList autoShortList(int64_t k, double meanCandidates) const;

protected:
    void checkAddCount_(idx_t n) const override;
    void addImpl_(idx_t n, const float* x) override;
    /// add() hands host vectors over whole: the tables are rebuilt once.
    bool addImplAcceptsHost_() const override { return true; }
    void searchImpl_(idx_t n, const float* x, int64_t k, float* distances, idx_t* labels,
                     const faiss::SearchParameters* params) const override;
    /// params->sel drops unselected candidates before scoring (as the CPU
    /// twin does): only selected vectors are returned; rows whose
    /// candidates hold fewer than k selected ones are padded (docs/filters.md).
    bool honoursSelector_() const override { return true; }

private:
    void rebuildTables_(std::unique_ptr<lsh_impl::DeviceState>* state) const;

    BiLevelLSHConfig lshConfig_;
    GpuIndexBiLevelLSHConfig gpuConfig_;
    BiLevelLSHModel model_;
    std::unique_ptr<lsh_impl::DeviceState> state_;
    std::string autoTuneVerdict_;
};

}  // namespace gpu
}  // namespace faiss_ext
