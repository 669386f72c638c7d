// Options, steps and report of gnndBuildFromFile (GnndOutOfCore.h): the
// vector file's layout, the schedules and their constants, the build options
// and what a build reports, in a header of their own so that the engine
// (impl/gnnd/) needs no public index header. GnndOutOfCore.h includes it.
#pragma once

#include "faiss_ext/gpu/GnndOptions.h"

#include <cstdint>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gpu {

/// Layout of a vector file.
enum class VectorFileFormat : int {
    Fvecs = 0,    ///< per vector: int32 d, then d float32 (the TEXMEX format)
    RawFloat32 = 1,  ///< n x d float32, row major, no header (d given)
};

/// How gnndBuildFromFile covers the pairs of vectors that may be neighbours
/// (docs/gnnd.md, "Schedules").
enum class GnndFileSchedule : int {
    /// AllPairs up to kAutoAllPairsMaxShards shards and kAutoPartitionAbove
    /// vectors, Partitioned past either.
    Auto = 0,
    /// Contiguous shards; GGM merges every pair of shards once: exact
    /// coverage, time growing with the square of the shard count.
    AllPairs = 1,
    /// Data-aware partition (DiskANN, Subramanya et al., NeurIPS 2019;
    /// SPANN, Chen et al., NeurIPS 2021, arXiv 2111.08566): k-means
    /// centroids of a sample; each vector joins its `overlap` nearest
    /// clusters; one GNND build per cluster; a vector's lists from its
    /// clusters are folded into its final list. Time grows about linearly
    /// with the number of clusters.
    Partitioned = 2,
};

/// Auto runs AllPairs up to this many shards (at most 6 merges, each a
/// two-shard join, and the measured recall of 4 shards is 0.9997 on 1M x
/// 128), Partitioned past it (8 shards all-pairs already cost 28 merges,
/// 1.9x the time of 4).
constexpr int kAutoAllPairsMaxShards = 4;

/// GNND's recall falls with the size of one build, and a partition's
/// recall falls with the number of clusters (H200, the bench's clustered
/// 10M x 128, k 32, recall@10 on 2,000 rows: one build 0.866 at degree 32
/// and 0.945 at degree 64; overlap 2 in 8 clusters of 2.9M vectors 0.976,
/// in 39 clusters of at most 1M 0.966). The partitioned schedule's
/// automatic cluster size therefore stays at most this many vectors,
/// whatever the device could hold.
constexpr int64_t kMaxAutoClusterRows = 3000000;

/// Auto runs Partitioned past this many vectors even when AllPairs would
/// need few shards: one build of that size is past the quality of
/// kMaxAutoClusterRows-sized clusters.
constexpr int64_t kAutoPartitionAbove = 4 * kMaxAutoClusterRows;

/// Most clusters a vector may join (GnndFileBuildOptions::overlap).
constexpr int kMaxOverlap = 8;

/// Most neighbour merges per cluster (GnndFileBuildOptions::neighbourMerges).
constexpr int kMaxNeighbourMerges = 16;

/// Auto neighbour merges: none for exact clusters (GnndClusterBuild); for
/// GNND clusters m = kAutoNeighbourMerges per cluster when the partitioned
/// build has more than kAutoMergeAboveClusters clusters, none below. Why (H200, the bench's clustered sets, k 32, recall@10): up to 18
/// clusters the partition alone reached 0.982 (10M x 128), so merges would
/// only add time there; the loss grows with the cluster count (39 clusters
/// 0.966 at overlap 2, 102 clusters 0.927 at 50M), as more boundaries cut
/// the natural clusters. Two merges per cluster cover the two boundaries
/// with the most shared members (of a k-means cluster's several touching
/// clusters) for at most 2 x clusters merges, each about the work of
/// building both clusters: up to about 4 times the cluster builds' time
/// added, growing linearly with the clusters (docs/gnnd.md, "Neighbour
/// merges"). Not yet measured: set neighbourMerges explicitly to compare.
constexpr int kAutoNeighbourMerges = 2;
constexpr int kAutoMergeAboveClusters = 24;

/// How the partitioned schedule builds the lists within each cluster
/// (GnndFileBuildOptions::clusterBuild; docs/gnnd.md, "Exact clusters").
enum class GnndClusterBuild : int {
    /// Exact when the build sizes the clusters (shardSize 0), NNDescent
    /// when shardSize fixes their count (docs/gnnd.md, "Exact clusters").
    Auto = 0,
    /// One GNND build per cluster (clusters of up to kMaxAutoClusterRows).
    NNDescent = 1,
    /// Exact k-NN among each cluster's vectors (our flat engine, the bounded
    /// TF32 path where Auto picks it); clusters of at most exactClusterRows.
    /// A vector's list is then exact among the vectors it shares a cluster
    /// with: the only loss is the partition's coverage. Work per vector
    /// grows with the cluster size (overlap x cluster rows distances).
    Exact = 2,
};

/// Exact clusters: k-means aims at clusters of this many vectors (each
/// counted once) when exactClusterRows is 0.
constexpr int64_t kExactClusterRows = 131072;

/// Exact clusters: a list past its target is cut into contiguous pieces
/// (which split neighbourhoods at random) only past this many times it.
constexpr int64_t kExactCutFactor = 4;

/// Exact clusters: a vector joins its 2nd .. overlap-th nearest centroid
/// only when the squared distance is at most this times the nearest's
/// (distance ratio 1.1; SPANN's closure assignment, Chen et al., NeurIPS
/// 2021, arXiv 2111.08566): vectors deep inside a cluster are searched
/// once, those near a boundary in the clusters across it.
constexpr double kExactClosure = 1.21;

/// "auto", "nn-descent", "exact".
const char* clusterBuildName(GnndClusterBuild b);

/// "auto", "all-pairs", "partitioned".
const char* fileScheduleName(GnndFileSchedule s);

/// Options of gnndBuildFromFile.
struct GnndFileBuildOptions {
    /// Build parameters (samples, iterations, threshold, buildDegree, seed).
    /// config.device is ignored: see devices. buildDegree 0 here means
    /// twice k rounded up to a multiple of 32 (at most 1024), not k rounded
    /// up as in memory: every GGM merge starts its cross-shard search from
    /// random samples, and the longer lists keep the candidates that later
    /// merges would otherwise have to find again (the GNND paper builds with
    /// a larger pool than it keeps). Measured on an H100, 1M x 128, k 32,
    /// recall@10: 8 shards 0.985 at degree 32, 1.000 at 64, in 1.7x the time
    /// (docs/gnnd.md).
    GpuKnnGraphGNNDConfig config;
    /// Devices to use (empty: {0}). A device may be listed twice (two workers).
    std::vector<int> devices;
    /// Vectors per shard (0: automatic). The automatic size is the largest S
    /// for which two shards' vectors, norms, global lists and own graphs
    /// (2 S x (4 (d + 1) + 16 K) bytes, K the build degree) fit
    /// min(GpuResources::getDeviceMemoryLimit, free memory / 2) divided by the
    /// workers sharing the device, and a merge's temporary memory fits the
    /// temporary memory limit; the shards are then balanced to equal sizes.
    int64_t shardSize = 0;
    /// Directory for shard graph files (empty: next to the output file).
    std::string workDir;
    /// Host memory (bytes) the build may use to keep every shard in RAM
    /// between merges: its vectors, global lists and own graph, n x (4 (d +
    /// 1) + 16 K) bytes in all. When they fit, no shard file is written and
    /// the vector file is read once; otherwise shard graphs go to files under
    /// workDir. -1 (default): half of the host memory available when the
    /// build starts (MemAvailable in /proc/meminfo); 0: always files.
    int64_t hostMemoryBytes = -1;
    /// When the set is one shard (shardSize >= n, or the automatic size)
    /// and `devices` names several distinct GPUs, split that one GNND build
    /// over them (data parallel: every device holds all the vectors and a
    /// copy of the lists; each iteration every device samples, joins its
    /// share of the nodes, and the copies are merged; gnnd::buildSplit, as
    /// GpuKnnGraphGNND::setBuildDevices). Off: one shard is built on the
    /// first device while the others wait. 10M x 128 on two H200: 1.55x the
    /// one-GPU file build (docs/benchmarks.md).
    bool splitOneShard = true;
    /// Print progress: each shard built and each pair merged, its time, the
    /// time elapsed and an estimate of the time left (also in the report).
    bool verbose = false;
    /// Also write the distances as an fvecs file (empty: none).
    std::string distancesPath;
    /// The schedule (Auto: by the shard count, kAutoAllPairsMaxShards).
    GnndFileSchedule schedule = GnndFileSchedule::Auto;
    /// Partitioned: clusters each vector joins (1..kMaxOverlap). Vectors near a
    /// cluster boundary find their neighbours across it only through a
    /// second cluster (SPANN's closure assignment); each extra cluster adds
    /// one build's worth of work per vector. 3: on the H200, 10M x 128 in
    /// clusters of at most 3M vectors, overlap 3 reached recall@10 0.982 in
    /// 60 s, overlap 2 0.976 in 102 s (8 clusters; partitioning on the CPU
    /// then) and 0.966 (39 clusters of 1M).
    int overlap = 3;
    /// Partitioned: rows of the file sampled for k-means (0: automatic,
    /// min(n, max(256 x clusters, 262144))). Read in evenly spread blocks.
    int64_t sampleRows = 0;
    /// Partitioned: after the cluster builds, GGM merges (the all-pairs
    /// schedule's pair merge, GNND paper Algorithm 3) of neighbouring
    /// cluster pairs only: for each cluster the m clusters sharing the most
    /// members with it (m = neighbourMerges; at most m x clusters merges, a
    /// number linear in the clusters). Each merge compares the two clusters'
    /// members across the pair, starting from their current lists, and the
    /// improved lists are folded into the global lists: it finds the
    /// neighbours a vector's `overlap` clusters do not hold. A pair whose
    /// rows do not fit one device merge is merged in pieces (every piece of
    /// one cluster with every piece of the other). 0: off; -1 (default):
    /// Auto, kAutoNeighbourMerges past kAutoMergeAboveClusters clusters;
    /// 1..kMaxNeighbourMerges. Ignored by the all-pairs schedule (which
    /// merges every pair).
    int neighbourMerges = -1;
    /// Partitioned: how each cluster's lists are built (Auto: Exact unless
    /// shardSize fixes the cluster count).
    GnndClusterBuild clusterBuild = GnndClusterBuild::Auto;
    /// Partitioned with exact clusters: the most vectors in one cluster (0:
    /// kExactClusterRows). The clusters' count follows from it (n x overlap
    /// memberships in clusters filled to about 70%).
    int64_t exactClusterRows = 0;
};

/// One step of a file build: a shard built, or two shards merged.
struct GnndFileBuildStep {
    enum Kind : int {
        ShardBuild = 0,    ///< a shard's GNND build (AllPairs)
        Merge = 1,         ///< a GGM merge of two shards (AllPairs) or clusters (Partitioned)
        ClusterBuild = 2,  ///< a cluster's GNND build and fold (Partitioned)
    };
    Kind kind = ShardBuild;
    int shardA = -1;           ///< the shard or cluster built, or the first of the pair
    int shardB = -1;           ///< the second of the pair (merges)
    int device = 0;            ///< where it ran
    double seconds = 0;        ///< how long it took
    double finishedAt = 0;     ///< seconds from the start of the build to its end
    double secondsLeft = 0;    ///< the estimate, then, of the time left
};

/// What a file build did.
struct GnndFileBuildReport {
    int64_t n = 0;            ///< vectors in the file
    int d = 0;                ///< dimension
    int64_t shardSize = 0;    ///< vectors per shard
    int shards = 0;           ///< number of shards (Partitioned: those a given shardSize makes, else 0)
    int merges = 0;           ///< GGM merges run (shards * (shards - 1) / 2; Partitioned: neighbour merges, pieces counted)
    double buildSeconds = 0;  ///< GNND of the shards (Partitioned: of the clusters, folds included)
    double mergeSeconds = 0;  ///< all merges (Partitioned: neighbour merges, gathers and folds included)
    double totalSeconds = 0;  ///< the whole build, I/O included
    bool inHostMemory = false;  ///< shards kept in host memory (else shard files)
    int buildDevices = 1;       ///< devices one shard's build was split over (splitOneShard)
    int buildDegree = 0;        ///< list length while building and merging
    GnndFileSchedule schedule = GnndFileSchedule::AllPairs;  ///< the schedule that ran
    int clusters = 0;           ///< Partitioned: clusters built (after splits and packing)
    int overlap = 0;            ///< Partitioned: clusters each vector joined
    int64_t largestCluster = 0;  ///< Partitioned: vectors of the largest cluster
    double partitionSeconds = 0;  ///< Partitioned: sampling, k-means and assignment
    int neighbourMerges = 0;      ///< Partitioned: merges per cluster that ran (0: none)
    int mergePairs = 0;           ///< Partitioned: cluster pairs merged (merges counts pieces)
    /// Partitioned: how the clusters were built (NNDescent or Exact).
    GnndClusterBuild clusterBuild = GnndClusterBuild::NNDescent;
    std::vector<GnndFileBuildStep> steps;  ///< every build and merge, in the order they ended
};

}  // namespace gpu
}  // namespace faiss_ext
