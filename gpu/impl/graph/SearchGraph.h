// Search graphs on the GPU: a k-NN graph (from GNND) turned into a graph
// that a beam search can navigate, and the beam search over it. The design
// follows CAGRA (Ootomo et al., "CAGRA: Highly Parallel Graph Construction
// and Approximate Nearest Neighbor Search for GPUs", ICDE 2024,
// arXiv 2308.15136; docs/references.md): rank-based detour pruning, reverse
// edges, and a single-block beam search with a fixed-size candidate buffer
// ("itopk") and a visited hash table per query.
//
// Graphs here are n x degree int32 node ids, row major, on the device; -1
// marks an empty slot (only when n <= degree).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace graph {

/// Largest k-NN list length optimizeGraph takes.
constexpr int kMaxKnnDegree = 256;
/// Largest search graph degree.
constexpr int kMaxSearchDegree = 128;
/// Largest number of parents expanded per beam-search iteration.
constexpr int kMaxSearchWidth = 31;
/// Largest candidate buffer (itopk) of the beam search.
constexpr int kMaxItopk = 512;
/// Largest number of blocks searching one query.
constexpr int kMaxBlocksPerQuery = 32;
/// Largest blocksPerQuery x nextPow2(max(k, 32)): the results one block
/// merges in shared memory.
constexpr int kMaxMergedResults = 4096;

/// Scratch ints optimizeGraph needs for n nodes at degree `degree`.
size_t optimizeScratchInts(int64_t n, int degree);

/// Search graph of degree `degree` (<= K) from a k-NN graph (knn: n lists
/// of `stride` >= K device ids, each sorted nearest first, -1 padded; the
/// first K of each are used). Per node, every
/// edge X -> A_j is ranked by its number of detours X -> A_i -> A_j with
/// max(i, rank of A_j in A_i's list) < j (CAGRA, section IV-B "rank-based
/// reordering"); the `degree` edges with fewest detours (ties: nearer first)
/// are kept. Then reverse edges are added: each node keeps the first half
/// of its pruned list and fills the rest with nodes that point to it (lowest
/// ranks first), then with the rest of its pruned list. No self loops, no
/// duplicates. out: n x degree device; scratch: optimizeScratchInts device
/// ints. Allocates nothing, so it cannot run out of memory.
void optimizeGraph(cudaStream_t stream, const int* knn, int64_t n, int stride, int K, int degree,
                   int* out, int* scratch);

/// The search graph of the n survivors of a removal, without pruning again
/// (GraphRepair.cu): survivor j (old node kept[j], device) keeps its edges of
/// oldGraph (old nodes x degree) to survivors, renumbered by newId (old node
/// -> new id, -1 removed; device) and in order, then fills the freed slots
/// with the nearest nodes of its k-NN list (knn: n lists of `stride` >= K new
/// ids, nearest first, -1 padded) not yet in its row. A row that runs out of
/// distinct nodes is -1 padded and counted in *shortRows (one device
/// counter, zeroed here). out: n x degree device. Allocates nothing.
void repairGraphAfterRemoval(cudaStream_t stream, const int* oldGraph, int degree,
                             const uint32_t* kept, int64_t n, const int* newId, const int* knn,
                             int stride, int K, int* out, unsigned long long* shortRows);

/// `count` distinct node ids of [0, n) (all when count >= n), sorted, from
/// a seeded generator: the entry-point sample.
std::vector<int> sampleEntryPoints(int64_t n, int count, uint64_t seed);

/// out (count x d device) = rows `rows` (count device ids) of x (n x d).
void gatherRows(cudaStream_t stream, const float* x, int d, const int* rows, int count, float* out);

/// Per-query entry points for beamSearch: for query i, the nodes
/// entryIds[rank[i * perQuery + j]], j < perQuery (rank < 0 is skipped).
struct EntrySeeds {
    const int* entryIds = nullptr;  ///< the entry-point sample (device)
    const int64_t* rank = nullptr;  ///< nq x perQuery positions in it (device)
    int perQuery = 0;
};

/// The power of two s with max |x - mean| * s in [2^13, 2^14) (1 when that
/// is 0), so that (x - mean) * s fits FP16's range with room for sums
/// (x: n x d device; mean: d device floats per dimension, or null for none).
float halfScaleFor(cudaStream_t stream, const float* x, int64_t n, int d, const float* mean);

/// out (FP16 bits) = (x - mean) * scale, rounded to nearest (n x d values,
/// device; mean as for halfScaleFor).
void toHalf(cudaStream_t stream, const float* x, int64_t n, int d, const float* mean, float scale,
            uint16_t* out);

/// The vectors a beam search reads: FP32 (n x d) always; optionally a copy
/// the traversal scores candidates on (the final buffer is re-scored in
/// FP32): FP16 of (x - mean16) * scale16 (mean16 null: of x * scale16).
struct SearchVectors {
    const float* x = nullptr;
    const uint16_t* x16 = nullptr;
    float scale16 = 1.f;
    const float* mean16 = nullptr;
};

/// Knobs of one beam search (all resolved: no zeros).
struct BeamSearchParams {
    int itopk = 64;          ///< candidate buffer: power of two in [32, kMaxItopk], >= k
    int expandLimit = 0;     ///< 0: all of the buffer; else only its first expandLimit
                             ///< entries are expanded (a beam narrower than the buffer)
    int searchWidth = 1;     ///< parents expanded per iteration (>= 1)
    int minIterations = 0;   ///< iterations before the "no parent left" stop
    int maxIterations = 64;  ///< hard stop (>= 1)
    int seedRounds = 1;      ///< rounds of random entry points (each fills the buffer)
    uint64_t seed = 1234;    ///< random entry points
    int blocksPerQuery = 1;  ///< blocks searching each query independently (each with
                             ///< its own buffer, visited table, share of the entry
                             ///< points and random stream), their results merged: for
                             ///< small batches, where one block per query leaves the
                             ///< GPU idle (CAGRA's multi-CTA search, section V-B)
};

/// Per-block results of a search with blocksPerQuery > 1: nq x
/// blocksPerQuery x k keys (squared L2 or negated products) and ids.
struct BeamScratch {
    float* keys = nullptr;
    int64_t* ids = nullptr;
};

/// Visited-table slots the beam search uses for these parameters.
int beamHashSlots(const BeamSearchParams& p, int degree);

/// Bytes of shared memory one query's block needs.
size_t beamSharedBytes(const BeamSearchParams& p, int degree, int d);

/// Beam search of nq queries (q: nq x d device) over the graph (n x degree
/// device) of `vectors` (n x d device), starting from the entry points
/// `seeds` (if any) and random nodes; with p.blocksPerQuery > 1, by that
/// many blocks per query, whose results (in `scratch`) are merged. Distances: squared L2, or the
/// negated inner product when innerProduct. outD / outI: nq x k device,
/// sorted nearest first (inner product: products, largest first), -1 and
/// +inf (inner product: -inf) padded when fewer than k nodes were reached.
void beamSearch(cudaStream_t stream, const SearchVectors& vectors, int64_t n, int d,
                const int* graph, int degree, bool innerProduct, const float* q, int64_t nq, int k,
                const BeamSearchParams& p, const EntrySeeds& seeds, float* outD, int64_t* outI,
                const BeamScratch& scratch = {});

/// The k best distinct results of each query from `blocks` lists per query
/// (keys, ids: nq x blocks x k device, each list sorted, -1 / +inf padded;
/// a node found by several blocks has the same key in each, as every
/// block scores the final buffer in FP32 the same way). outD / outI as
/// beamSearch gives them (inner product: keys negated back). blocks x
/// nextPow2(max(k, 32)) <= kMaxMergedResults.
void mergeBlockResults(cudaStream_t stream, const float* keys, const int64_t* ids, int64_t nq,
                       int blocks, int k, bool innerProduct, float* outD, int64_t* outI);

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
