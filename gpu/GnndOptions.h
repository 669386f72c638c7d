// Options and reports of the GNND graph builds: the build configuration of
// GpuKnnGraphGNND (and of gnndBuildFromFile), per-iteration statistics and
// the memory estimate, in a header of their own so that the engine
// (impl/gnnd/Gnnd.h) needs no public index header.
#pragma once

#include "faiss_ext/gpu/IndexOptions.h"

#include <cstddef>
#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// How GpuKnnGraphGNND::add builds the lists of the vectors it adds.
enum class GnndAddBuild {
    /// Partitioned past kAutoPartitionedAddAbove vectors added at once,
    /// OneShot below.
    Auto,
    /// One GNND build of all the added vectors on the index's device (split
    /// over the build devices, if any): the paper's algorithm, fastest, but
    /// its recall falls on large sets of high intrinsic dimension (0.86 at
    /// 10M x 128 on the bench's clustered generator, docs/gnnd.md).
    OneShot,
    /// The partitioned schedule of gnndBuildFromFile with exact clusters
    /// (GnndClusterBuild::Exact), reading the vectors from memory: k-means
    /// clusters of about kExactClusterRows vectors with SPANN's closure
    /// assignment, exact lists inside each; slower, recall about 1 on the
    /// same data (docs/gnnd.md, "Exact clusters").
    Partitioned,
    /// OneShot where the one GNND build (its lists, iteration buffers and
    /// the GGM with earlier vectors) fits in the free device and temporary
    /// memory, Partitioned otherwise. What
    /// GpuIndexSearchGraph's Auto means: a search graph pruned from
    /// partitioned lists lacks the edges between partitions, and its recall
    /// stops short whatever the search effort (0.87 on a hard 10M x 96 set
    /// at itopk 512, issue 38), while the one-shot lists, though of lower
    /// k-NN recall, give a navigable graph.
    OneShotWhereItFits,
};

/// Auto's crossover: adds of more vectors than this build partitioned.
/// Measured on the bench's clustered generator (H200, docs/gnnd.md "Large
/// adds"): one GNND build reaches recall@10 0.999 at 1M, 0.970 at 2M, 0.941
/// at 4M; the partitioned add 0.9999 at 2M, at 7-11x the time.
constexpr int64_t kAutoPartitionedAddAbove = 2000000;

/// Build options of GpuKnnGraphGNND (the paper's parameters).
struct GpuKnnGraphGNNDConfig : GpuIndexConfig {
    /// Samples per list and kind, p (1..32): p NEW and p OLD samples per list
    /// and iteration, plus up to p reverse samples of each kind.
    int samples = 32;
    /// Maximum number of iterations (>= 1).
    int maxIterations = 20;
    /// Stop when fewer than terminationThreshold * n * K list entries changed
    /// in an iteration (NN-Descent's delta), in [0, 1).
    float terminationThreshold = 0.001f;
    /// Length of the lists while building: 0 = the graph degree rounded up to
    /// a multiple of 32 (at least 32); else a multiple of 32 >= the degree.
    /// Longer lists give better recall at the head of each list.
    int buildDegree = 0;
    /// Seed of the random initial graph and of GGM's random samples.
    uint64_t seed = 1234;
    /// Candidate pool size of search() (0: max(k, 128, 2 * graph degree)).
    /// copyTo writes the resolved value into the twin's nndescent.search_L.
    int searchL = 0;
    /// How add() builds (GnndAddBuild; ignored by gnndBuildFromFile).
    GnndAddBuild addBuild = GnndAddBuild::Auto;
};

/// "auto", "one-shot", "partitioned", "one-shot-where-it-fits".
const char* addBuildName(GnndAddBuild b);

/// Statistics of one GNND / GGM iteration (see getBuildLog()).
struct GnndIterationStats {
    int iteration = 0;       ///< 1-based
    int64_t updates = 0;     ///< list entries replaced in this iteration
    double seconds = 0;      ///< wall time of this iteration
    bool merge = false;      ///< part of a GGM merge (else a GNND build)
};

/// Bytes a build needs, from GpuKnnGraphGNND::estimateMemory.
struct GnndMemoryEstimate {
    size_t vectors = 0;     ///< resident vectors and norms
    size_t graph = 0;       ///< resident graph (ids and distances)
    size_t buildTemp = 0;   ///< temporary memory of the build / merge
    size_t total() const { return vectors + graph + buildTemp; }
};

}  // namespace gpu
}  // namespace faiss_ext
