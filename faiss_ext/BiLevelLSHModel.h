// Bi-level LSH (Pan & Manocha, GIS 2011; docs/references.md): build
// parameters, search parameters and the trained model (the RP-tree of level
// one and the p-stable projections of level two), shared by the CPU twin
// faiss_ext::IndexBiLevelLSH and faiss_ext::gpu::GpuIndexBiLevelLSH. The
// host-side decisions of training (split rule, thresholds, bucket widths)
// live here so both indexes take them from the same code.
#pragma once

#include "faiss_ext/BiLevelLSHCommon.h"

#include <faiss/Index.h>

#include <cstdint>
#include <vector>

namespace faiss_ext {

/// How train() sets the bucket width W_g of each RP-tree group.
enum class BiLevelWidthRule : int {
    /// W_g = bucketWidth x the RMS distance of the group's training vectors
    /// to their mean (the only rule before issue 22). The right bucketWidth
    /// then depends on the data: the radius of a group says little about how
    /// far its points' neighbours are.
    RmsRadius = 0,
    /// W_g = bucketWidth x the median, over sampled training vectors of the
    /// group, of the distance to their widthNeighbours-th nearest neighbour
    /// in the group (estimated from a sample: lsh::neighbourDistanceWidths),
    /// so that a bucket is a fixed multiple of the neighbourhood scale at any
    /// scale, dimension and density of the data.
    NeighbourDistance = 1,
};

/// Build parameters of a Bi-level LSH index.
struct BiLevelLSHConfig {
    /// RP-tree depth: the data is split into 2^treeDepth groups, in [0, 14].
    int treeDepth = 4;
    /// Hash tables L, in [1, 64].
    int nTables = 10;
    /// Projections per table M, in [1, 32].
    int nProjections = 8;
    /// Bucket width of group g: W_g = bucketWidth x the group's scale set by
    /// widthRule (> 0).
    float bucketWidth = kDefaultNeighbourBucketWidth;
    /// What W_g is a multiple of (see BiLevelWidthRule).
    BiLevelWidthRule widthRule = BiLevelWidthRule::NeighbourDistance;
    /// Second-level lattice: lsh::kLatticeZM (the grid, default) or
    /// lsh::kLatticeE8 (nProjections a multiple of 8; searches take nprobe 1:
    /// multi-probe is defined on the grid only, the Morton widening of
    /// minCandidates works on both).
    int lattice = lsh::kLatticeZM;
    /// k of the k-th neighbour distance of BiLevelWidthRule::NeighbourDistance,
    /// in [1, 1024]: the k the index is mostly searched with.
    int widthNeighbours = 10;
    /// RP-tree mean rule: a group splits by a random projection at its median
    /// when diameter^2 <= meanRuleC x average squared interpoint distance,
    /// else by the median distance to its mean (> 0; Dasgupta & Freund use 10).
    float meanRuleC = 10.f;
    /// Iterations of Egecioglu & Kalantari's diameter approximation (>= 1).
    int diameterIterations = 8;
    /// Cuckoo hash sub-tables f, in [2, 8].
    int cuckooSubTables = 4;
    /// Largest cuckoo load (keys / slots), in (0, 0.95].
    float cuckooMaxLoad = 0.8f;
    /// Seed of every random choice (projections, directions, hash functions).
    uint64_t seed = 1234;
    /// Search settings used when search() gets no SearchParametersBiLevelLSH
    /// (the autotuner writes its choice here; a SearchParametersBiLevelLSH
    /// passed to search() replaces all of them): nprobe in [1, 128] and
    /// groupProbes in [1, 16] (both lowered at search time to what M and the
    /// tree allow), minCandidates >= 0 (0 = k). The defaults search the
    /// query's own group and the neighbouring groups within 0.05 W of it (of
    /// the 4 nearest): with one group, neighbours across the RP-tree splits
    /// are lost (recall@10 0.43-0.61 at depth 4 on clustered, Fashion-MNIST
    /// and full-rank sets of 60k-100k vectors, 0.79-0.91 with these).
    int defaultNprobe = 1;
    int defaultGroupProbes = 4;
    int64_t defaultMinCandidates = 0;
    /// Default SearchParametersBiLevelLSH::groupMargin (finite, >= 0).
    float defaultGroupMargin = 0.05f;
    /// When > 0 (at most 1), train(n, x) first runs the autotuner
    /// (faiss_ext/BiLevelLSHAutoTune.h) for recall@widthNeighbours of this
    /// value, with the last min(1000, n / 5) training vectors as held-out
    /// queries and the others as the database, then trains with the build
    /// parameters and default search settings it chose (the factory's
    /// "BiLSHauto_r0.9"). 0 = train with the parameters as they are.
    float autotuneRecall = 0.f;

    /// bucketWidth's default with BiLevelWidthRule::NeighbourDistance: with
    /// the other defaults (depth 4, L 10, M 8, nprobe 1, 4 group probes
    /// within margin 0.05) it gave recall@10 0.91 on a clustered 100k x 128
    /// set, 0.79 on Fashion-MNIST 60k and 0.84 on a full-rank mixture 100k x
    /// 100 (CPU twin, 300 queries; docs/bilevel-lsh.md).
    static constexpr float kDefaultNeighbourBucketWidth = 4.f;

    /// Throws (naming the field) unless every field is in range.
    void check() const;
};

/// How the short list is searched on the GPU (the CPU twin uses a heap).
enum class BiLevelShortList : int {
    Auto = 0,       ///< per-query heap for small k, work queue otherwise
    Heap = 1,       ///< one warp per query keeps its k best
    WorkQueue = 2,  ///< clustered sort of all (query, candidate) pairs, then compact
};

/// Per-search knobs of the Bi-level LSH indexes.
struct SearchParametersBiLevelLSH : faiss::SearchParameters {
    /// Buckets probed per table, the query's own included (multi-probe), in
    /// [1, 128] and at most 1 + 2M + 2M(M-1).
    int nprobe = 1;
    /// Per table, when the probed buckets hold fewer items than this, the
    /// query's bucket widens along the Morton hierarchy until it holds this
    /// many (or is the whole group). 0 = k. >= 0.
    int64_t minCandidates = 0;
    /// Tables searched, 0 = all; else in [1, L].
    int tables = 0;
    /// RP-tree groups searched per query, in [1, 16]: 1 is the paper's
    /// search (the query's own leaf); more adds the next nearest leaves by
    /// best-first descent (lsh::bestGroups), for data whose neighbours
    /// straddle the splits.
    int groupProbes = 1;
    /// When > 0, a group beyond the query's own is searched only when the
    /// query is within groupMargin x W_h of it (W_h the bucket width of the
    /// query's group; the distance summed over the splits between them:
    /// lsh::bestGroups), at most groupProbes groups in all: the cost of
    /// crossing a split falls on the queries near it. 0 = every one of the
    /// groupProbes nearest groups. Finite, >= 0.
    float groupMargin = 0.f;
    /// Short-list algorithm (GPU).
    BiLevelShortList shortList = BiLevelShortList::Auto;
};

/// Resolved search settings.
struct BiLevelSearchSettings {
    int nprobe = 1;
    int64_t minCandidates = 1;
    int tables = 1;
    int groupProbes = 1;
    float groupMargin = 0.f;
    BiLevelShortList shortList = BiLevelShortList::Auto;
};

/// The trained model: RP-tree nodes in heap order (node i has children
/// 2i + 1 and 2i + 2; leaf / group g is node 2^depth - 1 + g) and the
/// p-stable projections.
struct BiLevelLSHModel {
    int d = 0;
    int depth = 0;
    int nTables = 0;
    int nProjections = 0;
    /// lsh::LatticeKind of the codes (the configuration's lattice).
    int lattice = lsh::kLatticeZM;
    /// Bits per code coordinate in the Morton key (lsh::bitsPerCoordinate).
    int bits = 0;
    /// Per internal node: lsh::NodeRule.
    std::vector<uint8_t> nodeRule;
    /// Per internal node, d floats: the unit direction (projection rule) or
    /// the group mean (distance rule).
    std::vector<float> nodeVec;
    /// Per internal node: go left when the key is <= this.
    std::vector<float> nodeThreshold;
    /// Per group, d floats: the mean of its training vectors.
    std::vector<float> leafMean;
    /// Per group: bucket width W_g.
    std::vector<float> leafWidth;
    /// Per group, L x M floats: <a_j, mean_g>, so codes are centred.
    std::vector<float> leafOffset;
    /// Training vectors per group (the RP-tree's own balanced split).
    std::vector<int64_t> leafTrainCount;
    /// (L x M) x d projection directions a_j, entries N(0, 1).
    std::vector<float> proj;
    /// L x M offsets b_j in [0, 1) (in bucket widths).
    std::vector<float> projBias;

    int groups() const { return 1 << depth; }
    int internalNodes() const { return (1 << depth) - 1; }
    bool empty() const { return d == 0; }

    /// Fresh model for dimension d: sizes, random projections and biases,
    /// and a random unit direction for every internal node (all from
    /// config.seed); the tree's rules and the leaves still to be set.
    static BiLevelLSHModel initRandom(int d, const BiLevelLSHConfig& config);

    /// Position (0 .. count - 1) of the starting point of the diameter
    /// iteration of group g at `level`.
    static int64_t diameterStart(uint64_t seed, int level, int group, int64_t count);

    /// The RP-tree mean rule: projection split when diameter^2 <= c x
    /// 2 x avgSqToMean, else distance split.
    static lsh::NodeRule splitRule(float diameter, double avgSqToMean, float c);

    /// Sets the leaves from per-group means (groups x d), mean squared
    /// distances to the mean and counts: widths and centred offsets.
    void setLeaves(const std::vector<float>& means, const std::vector<double>& avgSq,
                   const std::vector<int64_t>& counts, float bucketWidth);

    /// Group of vector x (d floats) by the tree.
    int leafOf(const float* x) const;

    /// Throws unless the sizes are consistent (after reading from a file).
    void checkConsistent() const;
};

/// The configuration's default search settings (defaultNprobe,
/// defaultGroupProbes, defaultGroupMargin, defaultMinCandidates) as search
/// parameters, as given (resolveBiLevelSearch lowers them to a model).
SearchParametersBiLevelLSH searchParametersOf(const BiLevelLSHConfig& config);

/// Resolves params for k: null means the configuration's default search
/// settings (defaultNprobe, defaultGroupProbes, defaultMinCandidates);
/// another type throws.
BiLevelSearchSettings resolveBiLevelSearch(const faiss::SearchParameters* params, int64_t k,
                                           const BiLevelLSHModel& model,
                                           const BiLevelLSHConfig& config);

/// Seconds on a steady clock (the verbose build logs of both indexes).
double lshWallSeconds();

/// Throws unless all n x d values are finite (name: the calling function).
void checkFiniteVectors(const char* name, int64_t n, int d, const float* x);

}  // namespace faiss_ext
