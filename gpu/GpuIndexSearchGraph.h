// GpuIndexSearchGraph: approximate k-NN search over a graph, all on the GPU.
//
// add() builds the k-NN graph of the vectors with GNND (GpuKnnGraphGNND, at
// degree knnDegree), then turns it into a search graph of degree
// graphDegree by CAGRA's optimisation: rank-based detour pruning and
// reverse edges (Ootomo et al., "CAGRA: Highly Parallel Graph Construction
// and Approximate Nearest Neighbor Search for GPUs", ICDE 2024,
// arXiv 2308.15136; docs/references.md). search() is a beam search, one
// thread block per query: a sorted candidate buffer of itopk entries,
// searchWidth parents expanded per iteration, a visited hash table per query,
// random entry points. A later add() merges the new vectors into the k-NN
// graph (GGM) and rebuilds the search graph.
//
// The CPU twin is a faiss::IndexHNSWFlat whose level 0 is the same search
// graph (efSearch = itopk) and whose level 1 is a complete graph over 1,024
// sampled nodes, so that FAISS's own greedy descent picks the entry point:
// faiss::write_index and FAISS's CPU search work on it, without a GPU.
// copyFrom any IndexHNSWFlat (ours or FAISS's) takes its level-0 graph as
// the search graph and rebuilds the k-NN graph from the vectors on the GPU.
//
// Usage:
//   faiss_ext::gpu::StandardGpuResources res;
//   faiss_ext::gpu::GpuIndexSearchGraph index(&res, 128);   // d = 128
//   index.add(n, x);                                        // builds both graphs
//   index.search(nq, q, 10, D, I);
#pragma once

#include <faiss/IndexHNSW.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOptions.h"
#include "faiss_ext/gpu/GpuIndex.h"

namespace faiss_ext {
namespace gpu {

class GpuKnnGraphGNND;
class FlatStorage;
class IdSelection;
class RemovalMapping;
namespace graph {
struct SelectionCorpus;
class EntrySample;
class TraversalCopy;
class ProbeLists;
}

/// Build options and search defaults of GpuIndexSearchGraph.
struct GpuIndexSearchGraphConfig : GpuIndexConfig {
    /// Out-degree of the search graph (1..128; <= knnDegree). 64 (CAGRA's
    /// default) holds recall on data of many clusters; 32 searches faster
    /// where the data is easy (see docs/search-graph.md).
    int graphDegree = 64;
    /// Degree of the GNND k-NN graph it is pruned from (graphDegree..256).
    /// CAGRA prunes from twice the final degree.
    int knnDegree = 128;
    /// Build parameters of the k-NN graph (samples, iterations, seed, ...);
    /// its device is ignored (this config's device is used). By default
    /// GNND's with maxIterations = 0: iterations by size
    /// (knnBuildIterationsFor). Below kKnnBuildScaleRows vectors, 6: the
    /// optimisation keeps graphDegree of the knnDegree neighbours by detour
    /// counts, and the last NN-Descent iterations, which refine the tails of
    /// the lists, barely change the search graph (1M x 128: build 2.6 s ->
    /// 1.3 s, recall@10 within 0.003; docs/search-graph.md). From there, 9:
    /// on a hard 10M x 96 set (H200, 2026-12-04, cuVS CAGRA in the same
    /// sitting) 6 iterations reach recall@10 0.99 only at itopk 160 (713k
    /// q/s, 1.11x CAGRA's 643k), 9 at itopk 128 (947k q/s) for a build of
    /// 14.1 s instead of 10.8 s.
    GpuKnnGraphGNNDConfig knnBuild = defaultKnnBuild();
    /// Iterations of the default k-NN graph build below kKnnBuildScaleRows
    /// vectors, and from there.
    static constexpr int kKnnBuildIterations = 6;
    static constexpr int kKnnBuildIterationsAtScale = 9;
    static constexpr int64_t kKnnBuildScaleRows = 4000000;
    static GpuKnnGraphGNNDConfig defaultKnnBuild() {
        GpuKnnGraphGNNDConfig c;
        c.maxIterations = 0;  // by size
        return c;
    }
    /// The default build's iterations for an index of `rows` vectors.
    static int knnBuildIterationsFor(int64_t rows) {
        return rows >= kKnnBuildScaleRows ? kKnnBuildIterationsAtScale : kKnnBuildIterations;
    }
    /// Default candidate buffer of search(): any size in [16, 512] (raised
    /// to >= k at search time). The buffer holds the next power of two >=
    /// max(itopk, 32) entries (its bitonic sort), of which only the first
    /// itopk are expanded, so a size between powers of two costs and finds
    /// in between.
    int itopk = 64;
    /// Default parents expanded per iteration (1..31; searchWidth x
    /// graphDegree <= 1024).
    int searchWidth = 1;
    /// Default iteration limit (0: itopk / searchWidth + 16).
    int maxIterations = 0;
    /// Rounds of random entry points (each scores as many random nodes as
    /// one iteration scores neighbours).
    int seedRounds = 1;
    /// Seed of the random entry points and of the entry-point sample.
    uint64_t seed = 1234;
    /// Size of the entry-point sample (0: random entry points only). Each
    /// query starts from its nearest sampled nodes (found by TF32 products
    /// with the sample: approximate, as starting points need only be near),
    /// which keeps the search out of the wrong cluster on data of many
    /// separated clusters. Larger samples help queries unlike the data
    /// (docs/search-graph.md, Limits) at the cost of one GEMM of the batch
    /// with the sample.
    int entryPoints = 4096;
    /// Sampled nodes each query starts from (0..128; 0: random only).
    int entrySeeds = 8;
    /// Score candidates on an FP16 copy of the vectors while searching
    /// (half the memory traffic; n x d x 2 more bytes on the device), then
    /// re-score the final candidate buffer in FP32: returned distances are
    /// exact FP32 values either way.
    bool fp16Traversal = true;
    /// Thread blocks searching each query (0..32; 0: chosen per search).
    /// Several blocks search a query independently from different entry
    /// points and their results are merged: lower latency and higher
    /// recall for small batches, where one block per query leaves most of
    /// the GPU idle (CAGRA's multi-CTA search). Auto (0) uses one block per
    /// query when the batch has at least as many queries as the GPU has
    /// SMs, and up to 16 for smaller batches, so results can depend on the
    /// batch size; set 1 for results that do not.
    int blocksPerQuery = 0;
    /// Queries unlike the data (drawn around other centres than the
    /// vectors, as in cross-modal search) defeat a graph search. A query is
    /// flagged when its squared distance to its nearest result passes
    /// unlikeQueryRatio times that result's squared distance to its own
    /// 10th k-NN neighbour (graph/UnlikeQueryRule.h), and answered again:
    /// by probing (unlikeQueryProbes > 0 and k <= 64): the k nearest of its
    /// graph answers and the vectors of the unlikeQueryProbes k-means lists
    /// nearest to it, in FP32, as an inverted file scans them
    /// (graph/ProbeSearch.h; the lists, 4 bytes a vector
    /// and about 4 sqrt(n) centres, are made by the first such search and
    /// kept until the vectors change); else, when at least unlikeQueryShare
    /// of a batch is flagged, by exact search over a copy of the vectors
    /// (4 (d + 1) bytes each, made and kept likewise). What does not fit in
    /// the free device memory (less an eighth) is not made, and the graph's
    /// answers stay (UnlikeQueryCounts::leftForLackOfMemory). A filtered
    /// search probes only the selected rows where the selection holds at
    /// least half the vectors, else answers exactly over the selection. L2,
    /// Cosine and Pearson (inner products of raw vectors have no distance
    /// to compare: a ratio is refused there).
    /// 0 (the default): no detection. 3 (graph::kSuggestedUnlikeQueryRatio)
    /// flags 99.7% of the queries of a hard set drawn around other centres
    /// and under 1% of held-out Fashion-MNIST or SIFT queries (exact
    /// neighbours, bench/ood_probe.py). Off by default because it also flags
    /// queries the graph serves well (tight clusters queried from afar)
    /// and answers them at the probe's or the exact search's q/s
    /// (docs/search-graph.md, Queries unlike the data).
    float unlikeQueryRatio = 0.f;
    /// Share of a batch (0..1) that must be flagged before the flagged
    /// queries are searched exactly (the exact search costs about one scan
    /// of the vectors however few queries it takes; the probe, whose cost
    /// follows the queries, answers any flagged query). 0: any flagged query.
    float unlikeQueryShare = 0.02f;
    /// Lists a flagged query probes (0: exact search instead). 64 of the
    /// 4,000 lists of a hard 1M x 100 set (1.7% of its vectors) gave its
    /// queries from other centres recall@10 0.98 in a CPU emulation
    /// (graph/ProbePlan.h, bench/probe_emulation.py).
    int unlikeQueryProbes = 64;
};

/// How many queries GpuIndexSearchGraph's searches flagged as unlike the
/// data, and how they were answered (counted since construction or
/// resetUnlikeQueryCounts).
struct UnlikeQueryCounts {
    int64_t searched = 0;         ///< queries searched with detection on
    int64_t flagged = 0;          ///< of those, flagged as unlike the data
    int64_t answeredExactly = 0;  ///< of those, answered by exact search
    int64_t answeredByProbe = 0;  ///< of those, answered by probing the nearest lists
    /// Of those flagged (in batches past unlikeQueryShare for the exact
    /// search), kept with the graph's answers because the probe lists or
    /// the copy of the vectors did not fit in the device's free memory
    /// (less an eighth).
    int64_t leftForLackOfMemory = 0;
};

/// Per-search knobs of GpuIndexSearchGraph (0: the index's default).
struct SearchParametersSearchGraph : faiss::SearchParameters {
    int itopk = 0;           ///< candidate buffer (16..512; raised to >= k; only the
                             ///< first itopk entries of a power-of-two buffer are expanded)
    int searchWidth = 0;     ///< parents per iteration
    int maxIterations = 0;   ///< iteration limit
    int minIterations = 0;   ///< iterations before stopping when nothing is left to expand
    int seedRounds = 0;      ///< rounds of random entry points
    int entrySeeds = -1;     ///< sampled entry points per query (-1: the index's; 0: none)
    int fp16 = -1;           ///< 0: score on FP32 vectors; 1: on the FP16 copy (needs
                             ///< fp16Traversal); -1: the index's setting
    int blocksPerQuery = 0;  ///< blocks searching each query (0..32; 0: the index's
                             ///< setting, whose 0 chooses by batch size)
    int64_t seed = -1;       ///< seed of the random entry points (-1: the index's)
    /// Ratio flagging queries unlike the data (-1: the index's; 0: no
    /// detection; see GpuIndexSearchGraphConfig::unlikeQueryRatio).
    float unlikeQueryRatio = -1.f;
    /// Lists a flagged query probes (-1: the index's; 0: exact search; see
    /// GpuIndexSearchGraphConfig::unlikeQueryProbes).
    int unlikeQueryProbes = -1;
};

/// Graph-based approximate k-NN index (GNND k-NN graph, CAGRA-style search
/// graph, GPU beam search).
class GpuIndexSearchGraph : public GpuIndex {
  public:
    /// An empty index of dimension dims (> 0). metric: L2, InnerProduct,
    /// Cosine or Pearson (the last two store prepared vectors, as
    /// GpuKnnGraphGNND does).
    GpuIndexSearchGraph(GpuResourcesProvider* provider, int dims,
                        FlatMetric metric = FlatMetric::L2, GpuIndexSearchGraphConfig config = {});

    /// A copy of a faiss::IndexHNSWFlat (see copyFrom); graphDegree becomes
    /// its level-0 degree.
    GpuIndexSearchGraph(GpuResourcesProvider* provider, const faiss::IndexHNSWFlat* index,
                        GpuIndexSearchGraphConfig config = {});

    ~GpuIndexSearchGraph() override;

    /// The configuration.
    const GpuIndexSearchGraphConfig& getConfig() const { return sConfig_; }
    /// The flat metric.
    FlatMetric getFlatMetric() const { return flatMetric_; }
    /// Out-degree of the search graph.
    int getGraphDegree() const { return sConfig_.graphDegree; }

    /// The search graph: ntotal x graphDegree ids on the host (-1: empty
    /// slot, only when ntotal <= graphDegree).
    std::vector<int> getSearchGraph() const;

    /// The entry-point sample (sorted node ids; empty when entryPoints is 0).
    std::vector<int> getEntryPoints() const;

    /// The GNND k-NN graph under the search graph (ntotal x knnDegree ids,
    /// sorted nearest first).
    std::vector<int> getKnnGraph() const;

    /// Seconds the last add() spent in the k-NN graph build and in the
    /// search-graph optimisation (after a remove_ids: its k-NN compaction
    /// and the patch or pruning of the search graph).
    double getKnnBuildSeconds() const { return knnSeconds_; }
    /// Iterations the last k-NN graph build was allowed (knnBuild's, or by
    /// size where it is 0).
    int getKnnBuildIterations() const;
    double getOptimizeSeconds() const { return optimizeSeconds_; }
    /// Nodes removed since the search graph was last pruned from the k-NN
    /// lists (0 after an add, a pruning remove_ids, a copyFrom or a reset;
    /// remove_ids patches the graph while this stays within 5% of the nodes
    /// of that pruning).
    int64_t getRemovedSincePrune() const;
    /// How the last add() built the k-NN lists: OneShot or Partitioned
    /// (Auto before any add). knnBuild.addBuild's Auto means one-shot where
    /// it fits in device memory (GnndAddBuild::OneShotWhereItFits).
    GnndAddBuild getLastKnnAddBuild() const;

    /// Replaces the contents with a faiss::IndexHNSWFlat's vectors and its
    /// level-0 graph, whose degree must be graphDegree (the k-NN graph is
    /// rebuilt by GNND). The twin needs an IndexFlat storage of our d and
    /// metric. Throws with this index unchanged on anything else.
    void copyFrom(const faiss::IndexHNSWFlat* index);

    /// Writes vectors (prepared) and the search graph into a
    /// faiss::IndexHNSWFlat (level 0: the search graph; level 1: a complete
    /// graph over 1,024 sampled nodes; efSearch = itopk). The index must
    /// have our d and metric and an IndexFlat storage; its contents are
    /// replaced.
    void copyTo(faiss::IndexHNSWFlat* index) const;

    /// The CPU twin (a faiss::IndexHNSWFlat; Cosine / Pearson wrapped in an
    /// IndexPreTransform that prepares the queries).
    faiss::Index* copyToCpuIndex() const override;

    /// Removes all vectors and both graphs.
    void reset() override;

    /// Removes the vectors `sel` selects and renumbers the rest in order, as
    /// faiss::IndexFlat does (wrap in faiss::IndexIDMap2 for stable ids):
    /// the k-NN lists drop the removed nodes (GpuKnnGraphGNND::remove_ids),
    /// so searches never reach a removed node. While the nodes removed since
    /// the graph was last pruned stay within 5% of it, the search graph is
    /// patched (each survivor's edges to removed nodes replaced by its
    /// nearest k-NN neighbours not yet in its row); past that, and when a
    /// row runs out of neighbours, it is pruned again from the k-NN lists.
    /// Returns how many were removed; throws, removing nothing, when more
    /// than 0 and at most knnDegree vectors would stay. Recall and times
    /// after removals: docs/filters.md.
    size_t remove_ids(const faiss::IDSelector& sel) override;

    /// Copies stored (prepared) vector `key` to recons.
    void reconstruct(idx_t key, float* recons) const override;

    /// Queries flagged as unlike the data and answered exactly, since
    /// construction or the last resetUnlikeQueryCounts().
    UnlikeQueryCounts getUnlikeQueryCounts() const;
    void resetUnlikeQueryCounts();

  protected:
    void checkAddCount_(idx_t n) const override;
    void addImpl_(idx_t n, const float* x) override;
    bool addImplAcceptsHost_() const override { return true; }
    void searchImpl_(idx_t n, const float* x, int64_t k, float* distances, idx_t* labels,
                     const faiss::SearchParameters* params) const override;
    /// params->sel: the search returns selected vectors only (docs/filters.md).
    bool honoursSelector_() const override { return true; }
    /// The beam search (and the answers to queries unlike the data) write
    /// each result once; a filtered search may re-sort them.
    bool writesResultsOnce_(const faiss::SearchParameters* params) const override {
        return !params || !params->sel;
    }
    /// range_search: an exact scan of the stored vectors (recall 1).
    bool supportsRangeSearch_() const override { return true; }
    void checkRangeSearchParams_(const faiss::SearchParameters* params) const override;
    void rangeSearchImpl_(idx_t n, const float* x, float radius,
                          const faiss::SearchParameters* params, RangeHits* hits,
                          idx_t row0) const override;

  private:
    struct SearchGraphState;

    void checkConfig_(const GpuIndexSearchGraphConfig& c) const;
    void rebuildEntryPoints_();
    /// Throws, naming the parts, unless the device can hold `total` vectors,
    /// their k-NN lists and the search graph's optimisation buffers.
    void checkFirstAddFits_(int64_t total) const;
    /// The GNND build (or GGM merge) of an add's n vectors into the k-NN
    /// graph of `total` (iterations by size unless configured); timed.
    void buildKnnLists_(idx_t n, const float* x, int64_t total);
    /// The search graph of the first `total` vectors pruned from the k-NN
    /// graph into next (total x graphDegree), with scratch
    /// (graph::optimizeScratchInts); timed.
    void optimizeInto_(int* next, int* scratch, int64_t total);
    /// Makes the traversal copy (fp16Traversal) of the stored vectors again.
    void fillTraversalCopy_();
    /// Makes t the traversal copy of the first `total` stored vectors
    /// (allocated here unless it already has that size).
    void makeTraversalCopy_(graph::TraversalCopy& t, int64_t total) const;
    /// The entry-point sample of the first `total` stored vectors (null
    /// when entryPoints is 0).
    std::unique_ptr<graph::EntrySample> makeEntryPoints_(int64_t total) const;
    /// The search graph of mapping's survivors patched from the current one
    /// into next (survivors x graphDegree device; shortRows: one device
    /// counter); false when a row ran out of neighbours (then next must be
    /// pruned from the k-NN lists).
    bool patchGraph_(const RemovalMapping& mapping, int* next,
                     unsigned long long* shortRows) const;
    /// The beam search of n prepared device queries at k (params: ours,
    /// FAISS's base class, or null; its selector is not read here).
    void beamSearch_(idx_t n, const float* q, int64_t k, const faiss::SearchParameters* params,
                     float* distances, idx_t* labels) const;
    /// The search restricted to params->sel: an unfiltered beam search over
    /// a candidate list widened by the selectivity, traversing excluded
    /// nodes and keeping the selected ones; exact search over the selection
    /// where that costs less or where a query kept fewer than k; queries
    /// unlike the data at unlikeRatio, probing unlikeProbes lists (both
    /// resolved by the caller; ratio 0: none) answered over the selection.
    void searchFiltered_(idx_t n, const float* q, int64_t k, const faiss::SearchParameters* params,
                         float unlikeRatio, int unlikeProbes, float* distances,
                         idx_t* labels) const;
    /// The stored vectors as the exact searches over a selection read them.
    graph::SelectionCorpus selectionCorpus_() const;
    /// k-NN of n prepared device queries into device outputs (an exact
    /// search or the probe; graph::RowSearch's type, which this installed
    /// header cannot include).
    using RowSearchFn =
        std::function<void(int64_t n, const float* q, int64_t k, float* D, int64_t* I)>;
    /// After a beam search of n prepared device queries (restricted to
    /// `selection` when given): flags those unlike the data at `ratio`
    /// (> 0; L2 or unit vectors) and answers them again in distances /
    /// labels: by probing `probes` lists (> 0, k small enough, a selection
    /// of at least half the vectors), else (when enough are flagged) by
    /// exact search over the selection or the copy of all vectors.
    void answerUnlikeQueries_(idx_t n, const float* q, int64_t k, float ratio, int probes,
                              float* distances, idx_t* labels,
                              const IdSelection* selection = nullptr) const;
    /// The search answering them: by the probe lists (keepBits: the
    /// selection's device bitmap, or null) or by the exact copy (made on
    /// first use; empty where that does not fit), or exactly over a
    /// selection.
    RowSearchFn probeSearch_(int probes, const uint32_t* keepBits) const;
    RowSearchFn exactCopySearch_() const;
    RowSearchFn selectionSearch_(const IdSelection& selection) const;
    /// Drops the probe lists and the copy (the vectors changed).
    void dropUnlikeAnswerData_();

    FlatMetric flatMetric_;
    GpuIndexSearchGraphConfig sConfig_;
    std::unique_ptr<GpuKnnGraphGNND> knn_;
    std::unique_ptr<SearchGraphState> graph_;
    std::unique_ptr<graph::EntrySample> entries_;  ///< the entry-point sample (null: none)
    double knnSeconds_ = 0, optimizeSeconds_ = 0;
    /// What answers queries unlike the data (null: none yet): the probe
    /// lists over the stored vectors, or a copy of them for exact search.
    mutable std::unique_ptr<graph::ProbeLists> probeLists_;
    mutable std::unique_ptr<FlatStorage> exactCopyStorage_;
    mutable UnlikeQueryCounts unlikeCounts_;
};

}  // namespace gpu
}  // namespace faiss_ext
