// GpuKnnGraphGNND: approximate k-NN graphs on the GPU by GNND, the GPU
// NN-Descent of Wang, Zhao & Zeng (CIKM 2021, arXiv 2103.15386; docs/references.md), and
// GGM, their merge of two graphs, for incremental adds.
//
// add(n, x) builds the k-NN graph of everything added (Algorithm 1): random
// initial lists; per iteration p NEW and p OLD samples per list plus reverse
// samples (atomic appends, capped at 2p), de-duplicated per list; a local
// join per node (NEW-NEW pairs indexed by the triangle of eq. 1-2, NEW-OLD
// pairs by tiles; the products run on tensor cores in TF32); the selective
// update (each sample gets only its nearest partner, by a warp-shuffle
// minimum, Algorithm 2); k-NN lists split into segments of 32 under their own
// spinlocks. It stops when fewer than `terminationThreshold` x n x K list
// entries changed in an iteration, or after maxIterations. Final distances are
// recomputed exactly in FP32 and each list is sorted.
//
// A second add() builds the graph of the new vectors and merges it into the
// existing graph with GGM (Algorithm 3). setBuildDevices spreads the builds
// over several GPUs. Graphs of data sets larger than GPU memory come from
// gnndBuildFromFile (gpu/GnndOutOfCore.h).
//
// search() answers queries by the greedy graph search of
// faiss::IndexNNDescent (a candidate pool of searchL nodes, started from
// random nodes, expanding the nearest unexpanded node until none is left),
// one warp per query on the GPU.
//
// The CPU twin is faiss::IndexNNDescentFlat (its nndescent.final_graph takes
// our graph), so faiss::write_index and FAISS's CPU search work on it.
//
// Usage:
//   faiss_ext::gpu::StandardGpuResources res;
//   faiss_ext::gpu::GpuKnnGraphGNND index(&res, 128, 64);   // d = 128, k = 64
//   index.add(n, x);                                        // builds the graph
//   std::vector<int64_t> I(n * 64);  index.getGraph(I.data());
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOptions.h"
#include "faiss_ext/gpu/GpuIndex.h"

#include <faiss/IndexNNDescent.h>
#include <faiss/IndexNSG.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {

/// Per-search knobs of GpuKnnGraphGNND.
struct SearchParametersGNND : faiss::SearchParameters {
    /// Candidate pool size (0: the index's searchL); must be >= k when set.
    int searchL = 0;
};

class RemovalMapping;

namespace gnnd {
class GraphState;
struct PartitionedLists;
struct Params;
}

/// k-NN graph of the added vectors, built by GNND on the GPU.
class GpuKnnGraphGNND : public GpuIndex {
public:
    /// An empty index of dimension dims (> 0) whose graph has degree k
    /// (1..1024). metric: L2, InnerProduct, Cosine (inner product of
    /// normalised vectors) or Pearson.
    GpuKnnGraphGNND(GpuResourcesProvider* provider, int dims, int k,
                    FlatMetric metric = FlatMetric::L2, GpuKnnGraphGNNDConfig config = {});

    /// Same with a FAISS metric (L2 or inner product).
    GpuKnnGraphGNND(GpuResourcesProvider* provider, int dims, int k, faiss::MetricType metric,
                    GpuKnnGraphGNNDConfig config = {});

    /// A copy of a faiss::IndexNNDescentFlat (see copyFrom).
    GpuKnnGraphGNND(GpuResourcesProvider* provider, const faiss::IndexNNDescentFlat* index,
                    GpuKnnGraphGNNDConfig config = {});

    ~GpuKnnGraphGNND() override;

    /// Graph degree k.
    int getGraphDegree() const { return k_; }
    /// List length while building (multiple of 32, >= k).
    int getBuildDegree() const { return buildK_; }
    /// The flat metric.
    FlatMetric getFlatMetric() const { return flatMetric_; }
    /// The configuration.
    const GpuKnnGraphGNNDConfig& getConfig() const { return gConfig_; }

    /// Changes the build parameters used by later adds (same checks as the
    /// constructor; buildDegree only while the index is empty).
    void setConfig(const GpuKnnGraphGNNDConfig& config);

    /// More GPUs for the GNND builds of later adds (data parallel: this
    /// index's device and devices[i] (served by providers[i]) each hold a
    /// copy of the added vectors and of the lists, join their share of the
    /// nodes, and merge the copies after every iteration by peer copies).
    /// Only the build of each add's new vectors is split; the GGM merge of a
    /// second add runs on this index's device. devices: distinct, valid, not
    /// this index's device; each needs room for the vectors and the build
    /// lists of an add (estimateMemory's vectors + buildTemp). Empty: one
    /// GPU (the default). A runtime setting: not saved, not copied.
    void setBuildDevices(const std::vector<GpuResourcesProvider*>& providers,
                         const std::vector<int>& devices);
    /// The extra build devices (setBuildDevices), without this index's own.
    std::vector<int> getBuildDevices() const;

    /// The graph: for each vector i < ntotal its k neighbours, sorted
    /// closest first (labels n x k; distances n x k may be null). Host or
    /// device pointers. Distances follow the metric (L2: squared distance;
    /// inner product / cosine / Pearson: similarity, largest first).
    void getGraph(idx_t* labels, float* distances = nullptr) const;

    /// The graph as 32-bit ids, ntotal x k, on the host.
    std::vector<int> getGraphInt() const;

    /// Per-iteration statistics of all GNND builds and merges so far (a
    /// partitioned add has none of its own; its merge with earlier vectors
    /// has).
    const std::vector<GnndIterationStats>& getBuildLog() const { return log_; }

    /// How the last add built its lists (OneShot or Partitioned; Auto
    /// before the first add). config.addBuild chooses it.
    GnndAddBuild getLastAddBuild() const { return lastAddBuild_; }

    /// Replaces the contents with a faiss::IndexNNDescentFlat (vectors and,
    /// when built, its final_graph). Its K becomes our degree. Throws with
    /// this index unchanged on anything else.
    void copyFrom(const faiss::IndexNNDescentFlat* index);

    /// Writes vectors and graph into a faiss::IndexNNDescentFlat (K = our
    /// degree, has_built set, S / iter / search_L (resolved) / random_seed =
    /// seed & 0x7fffffff from our configuration) so FAISS's search and
    /// write_index use it. The index must have our d and metric and an
    /// IndexFlat storage, e.g. faiss::IndexNNDescentFlat(d, k, metric); its
    /// contents are replaced.
    void copyTo(faiss::IndexNNDescentFlat* index) const;

    /// The CPU twin (a faiss::IndexNNDescentFlat; Cosine / Pearson wrapped in
    /// an IndexPreTransform that prepares the queries).
    faiss::Index* copyToCpuIndex() const override;

    /// A faiss::IndexNSGFlat with R neighbours per node built from our graph
    /// (IndexNSG::build with GK = our degree k). The caller owns it.
    faiss::IndexNSGFlat* toIndexNSG(int R = 32) const;

    /// Removes all vectors and the graph.
    void reset() override;

    /// Removes the vectors `sel` selects and renumbers the rest in order, as
    /// faiss::IndexFlat does (wrap in faiss::IndexIDMap2 for stable ids).
    /// Each survivor's list loses its removed neighbours and keeps the rest
    /// in order (shorter lists, -1 padded: no distances are recomputed; a
    /// later add() refines them). Returns how many were removed; throws,
    /// removing nothing, when more than 0 and at most k vectors would stay.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    /// remove_ids by a renumbering already on the device (made by the caller
    /// from the selection, for ntotal vectors: GpuIndexSearchGraph patches
    /// its search graph with the same mapping). Same checks and results.
    size_t removeMapped(const RemovalMapping& mapping);

    /// Copies stored (prepared) vector `key` to recons.
    void reconstruct(idx_t key, float* recons) const override;

    /// Device pointer to the stored (prepared) vectors, ntotal x d.
    const float* getVectorsDevice() const;

    /// Device pointer to the graph as the build keeps it: ntotal lists of
    /// getBuildDegree() int32 ids each, sorted nearest first, -1 padded; the
    /// first getGraphDegree() of each list are the graph. Valid until the
    /// next add / reset / copyFrom.
    const int* getGraphIdsDevice() const;

    /// Device pointer to the distances of those lists (same layout):
    /// squared L2, or minus the inner product; +inf on -1 entries. Valid
    /// as getGraphIdsDevice().
    const float* getGraphDistancesDevice() const;

    /// Memory a build of n vectors of dimension d at degree k needs on one
    /// device (resident plus temporary), with these parameters.
    static GnndMemoryEstimate estimateMemory(int64_t n, int d, int k,
                                             const GpuKnnGraphGNNDConfig& config = {});

    /// Whether adding n more vectors fits this index's device: the estimate
    /// against free device memory and the resources' limits.
    bool addFits(int64_t n) const;

protected:
    void checkAddCount_(idx_t n) const override;
    void addImpl_(idx_t n, const float* x) override;
    /// The whole add is one build (or one merge), never paged in chunks.
    bool addImplAcceptsHost_() const override { return true; }
    void searchImpl_(idx_t n, const float* x, int64_t k, float* distances, idx_t* labels,
                     const faiss::SearchParameters* params) const override;

    bool honoursSelector_() const override { return true; }

private:
    void checkConfig_(const GpuKnnGraphGNNDConfig& c, int k) const;
    /// The candidate pool of a search of k (params checked first).
    int resolveSearchL_(int64_t k, const faiss::SearchParameters* params) const;
    /// The greedy search over the k-NN graph of n prepared device queries.
    void greedySearch_(idx_t n, const float* q, int64_t k, int L, float* distances,
                       idx_t* labels) const;
    /// Only vectors `sel` keeps returned (impl/graph/FilteredGraphSearch.h).
    void searchFiltered_(idx_t n, const float* q, int64_t k, int L, const faiss::IDSelector& sel,
                         float* distances, idx_t* labels) const;
    /// OneShot or Partitioned for an add of n vectors (config.addBuild; Auto
    /// by size and host memory, OneShotWhereItFits by device memory).
    GnndAddBuild resolveAddBuild_(idx_t n) const;
    /// Whether a one-shot add of n vectors (new lists, GNND temporaries,
    /// GGM with the old graph) fits in free device and temporary memory.
    bool oneShotFits_(idx_t n) const;
    /// The K-wide lists of the n new vectors by the partitioned build (ids 0..n-1).
    void buildListsPartitioned_(idx_t n, const float* x, gnnd::PartitionedLists* lists) const;
    /// lists (ids shifted by offset) into the device lists ids / dists.
    void uploadLists_(const gnnd::PartitionedLists& lists, int64_t offset, int* ids,
                      float* dists, cudaStream_t stream) const;
    /// One GNND build of the n new vectors of next (after the old ones), on
    /// this device or split over the build devices.
    void buildOneShot_(gnnd::GraphState& next, idx_t n, int64_t old, const gnnd::Params& params,
                       const std::function<void(const GnndIterationStats&)>& cb);
    /// Throws (nothing removed) unless `survivors` > k.
    void checkRemovalLeaves_(int64_t survivors) const;
    /// The vectors and lists compacted by `mapping` (checked, lock held).
    void removeMapped_(const RemovalMapping& mapping);

    int k_;
    int buildK_;
    FlatMetric flatMetric_;
    GpuKnnGraphGNNDConfig gConfig_;
    std::unique_ptr<gnnd::GraphState> state_;
    std::vector<std::shared_ptr<GpuResources>> buildRes_;  ///< setBuildDevices
    std::vector<int> buildDevices_;
    std::vector<GnndIterationStats> log_;
    GnndAddBuild lastAddBuild_ = GnndAddBuild::Auto;
};

}  // namespace gpu
}  // namespace faiss_ext
