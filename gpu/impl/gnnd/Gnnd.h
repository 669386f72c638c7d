// Device-level GNND and GGM (Wang, Zhao & Zeng 2021; docs/references.md) on raw
// device buffers, shared by GpuKnnGraphGNND and the out-of-core / multi-GPU
// builder.
//
// A "canonical" graph is n x K entries per node, sorted by distance
// ascending (for inner product the distance is the negated product), ids as
// int32 global ids, empty entries (id -1, distance +inf) last.
#pragma once

#include "faiss_ext/gpu/GnndOptions.h"
#include "faiss_ext/gpu/GpuResources.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// Entries per list segment (one warp, one spinlock).
constexpr int kSegment = 32;
/// Largest p (samples per kind and list).
constexpr int kMaxSamples = 32;
/// Largest list length K.
constexpr int kMaxBuildDegree = 1024;

/// Parameters of one build or merge.
struct Params {
    int K = 64;               ///< list length, a multiple of 32
    int p = 32;               ///< samples per kind (<= kMaxSamples)
    int maxIter = 20;
    float delta = 0.001f;
    uint64_t seed = 1234;
    bool innerProduct = false;  ///< distance = -<x, y> (else squared L2)
    bool verbose = false;
};

/// The list length for graph degree k: buildDegree, or (0) k rounded up to a
/// multiple of 32, at least 32.
int resolveBuildDegree(int k, int buildDegree);

/// Throws "<who>: ..." unless k and the build fields of c (samples,
/// maxIterations, terminationThreshold, buildDegree) are valid.
void checkBuildConfig(const GpuKnnGraphGNNDConfig& c, int k, const char* who);

/// Params of a build / merge at list length K from a configuration.
Params makeParams(const GpuKnnGraphGNNDConfig& c, int K, bool innerProduct, bool verbose);

/// Called after each iteration.
using IterationCallback = std::function<void(const GnndIterationStats&)>;

/// Bytes of temporary device memory build() needs for n nodes.
size_t buildTempBytes(int64_t n, const Params& p);
/// Bytes of temporary device memory merge() needs for nA + nB nodes.
size_t mergeTempBytes(int64_t nAB, const Params& p);

/// Builds the canonical graph of x (n x d device, row major; norms: |x_i|^2
/// for L2, may be null for inner product). Ids written are idOffset + local.
/// ids / dists: n x K device, outputs; they hold the raw lists during the
/// build (finalised in place), so buildTempBytes counts no lists. Works for
/// any n >= 1 (lists hold min(K, n - 1) real entries).
void build(GpuResources* res, int device, cudaStream_t stream, const float* x,
           const float* norms, int64_t n, int d, const Params& params, int64_t idOffset,
           int* ids, float* dists, const IterationCallback& cb);

/// Peer access between every ordered pair of these devices where the
/// hardware has it: cudaDeviceEnablePeerAccess (cudaMalloc memory) and
/// access to each device's default memory pool (stream-ordered
/// allocations), so that peer copies go over NVLink / PCIe directly instead
/// of through the host. Idempotent; process-wide, as CUDA's peer access is.
/// Returns whether every pair has it (kernels may then read and write the
/// other devices' memory).
bool enablePeerAccess(const std::vector<int>& devices);

/// Testing hook: enablePeerAccess reports no peer access (the split build
/// then takes its path for machines without it: staged copies). Process-wide.
void setPeerAccessIgnoredForTesting(bool ignored);

/// One build split over several devices (data parallel; devices distinct,
/// devices[0] first). Every device holds all the vectors (x[g], norms[g]
/// on devices[g]) and a copy of the raw lists. Per iteration every device
/// samples its copy (the same samples: the copies are equal then) and runs
/// the local joins of its nodes [g n / G, (g + 1) n / G) into its copy. Then
/// device g merges rows [g n / G, (g + 1) n / G) of every other copy into
/// its own (launchMergeCopies, reading the other copies in place where
/// peer access exists) and the merged rows go to every other device (with
/// two devices and peer access, written there by the same kernel; else
/// peer copies, both directions of a link at once). The updates
/// of all devices count for the termination test. ids / dists: n x K on
/// devices[0], the canonical output as build() writes it. One device, or
/// n <= 2K: build() on devices[0].

void buildSplit(const std::vector<GpuResources*>& res, const std::vector<int>& devices,
                const std::vector<cudaStream_t>& streams, const std::vector<const float*>& x,
                const std::vector<const float*>& norms, int64_t n, int d, const Params& params,
                int64_t idOffset, int* ids, float* dists, const IterationCallback& cb);

/// GGM (Algorithm 3). x: the nA + nB vectors of sets A then B (device),
/// norms likewise. ids / dists: (nA + nB) x K canonical lists (global ids)
/// of A's nodes then B's, replaced by the merged lists. Global ids of A are
/// [offA, offA + nA), of B [offB, offB + nB); ids outside both are kept as
/// they are (their distances too) and compete with the new entries.
/// headIds / headDists (optional, same shape): the lists whose first K/2
/// own-set entries seed each node's work list (the shards' own graphs in
/// out-of-core builds, whose global lists hold few own-set entries after
/// many merges); null: the canonical lists themselves.
void merge(GpuResources* res, int device, cudaStream_t stream, const float* x,
           const float* norms, int64_t nA, int64_t nB, int d, int64_t offA, int64_t offB,
           const Params& params, int* ids, float* dists, const IterationCallback& cb,
           const int* headIds = nullptr, const float* headDists = nullptr);

/// Exact canonical lists of a small set (n <= 2 K): brute force. build()
/// uses it when n <= 2 K, where K entries split into segments by id % (K /
/// 32) could not hold every neighbour.
void launchExactSmall(cudaStream_t stream, const float* x, int64_t n, int d, int K, bool ip,
                      int64_t idOffset, int* cIds, float* cDists);

/// Recomputes exact distances of canonical lists whose ids are
/// [idOffset, idOffset + n) (local to x) and re-sorts them. Used after
/// importing a graph.
void refreshDistances(cudaStream_t stream, const float* x, const float* norms, int64_t n, int d,
                      int K, bool innerProduct, int64_t idOffset, int* ids, float* dists);

/// Greedy graph search (one warp per query): queries q (nq x d device),
/// graph ids (n x K canonical, only the first `degree` of each list are
/// followed), pool size L >= k. outD / outI: nq x k device (distances as
/// stored: L2 squared, or negated products), -1 padded.
void search(GpuResources* res, int device, cudaStream_t stream, const float* x,
            const float* norms, int64_t n, int d, const int* ids, int K, int degree,
            bool innerProduct, const float* q, int64_t nq, int k, int L, uint64_t seed,
            float* outD, int64_t* outI);

// ---- kernels (GnndInit.cu, GnndSample.cu, GnndJoin.cu) ----

/// Random initial lists in segments (entries id % nseg go to segment
/// id % nseg), exact distances, segments sorted, all NEW. Raw list format:
/// uint32 ids with bit 31 = NEW, 0x7FFFFFFF = empty.
void launchRandomInit(cudaStream_t stream, const float* x, const float* norms, int64_t n, int d,
                      int K, bool ip, uint64_t seed, uint32_t* gIds, float* gDists);

/// GGM initialisation: from canonical lists (global ids) builds the raw
/// work lists: the first K/2 entries of each list whose ids lie in the
/// node's own set (OLD) plus K/2 random nodes of the other set (NEW); the
/// canonical arrays keep every other entry (the set-aside part), the taken
/// ones become empty there.
void launchMergeInit(cudaStream_t stream, const float* x, const float* norms, int64_t nA,
                     int64_t nB, int d, int64_t offA, int64_t offB, int K, bool ip, uint64_t seed,
                     int* cIds, float* cDists, const int* hIds, const float* hDists,
                     uint32_t* gIds, float* gDists);

/// Sampling: per node up to p NEW (marked OLD in the graph afterwards) and
/// p OLD entries, then reverse appends (capped at 2p) and de-duplication.
/// newList / oldList: n x 2p; counts: 4n ints (new count, old count, and
/// the forward counts); after the call counts[0..n) / [n..2n) hold the list
/// sizes.
void launchSample(cudaStream_t stream, int64_t n, int K, int p, uint32_t* gIds, int* newList,
                  int* oldList, int* counts);

/// Local join + selective update + segmented spinlock insertion. crossBoundary
/// >= 0: only pairs on different sides of it are compared (GGM). Adds the
/// number of accepted insertions to *updates. Only the nodes s in
/// [nodeBegin, nodeEnd) (nodeEnd < 0: n) do their joins; their updates go
/// to any node's list (the data-parallel build splits the nodes).
void launchJoin(cudaStream_t stream, const float* x, const float* norms, int64_t n, int d, int K,
                int p, bool ip, int64_t crossBoundary, const int* newList, const int* oldList,
                const int* counts, uint32_t* gIds, float* gDists, int* locks,
                unsigned long long* updates, int64_t nodeBegin = 0, int64_t nodeEnd = -1);

/// Data-parallel builds: merges another device's copy of the raw lists
/// (oIds / oDists, same shape, copied here) into gIds / gDists, segment by
/// segment: the union of the two segments, one entry per id (the smaller
/// distance; NEW when NEW in either), the 32 best kept in order.
/// With writeBack, the merged lists are also written over oIds / oDists
/// (which may then be another device's memory, read and written in place
/// over peer access).
void launchMergeCopies(cudaStream_t stream, int64_t n, int K, uint32_t* gIds, float* gDists,
                       uint32_t* oIds, float* oDists, bool writeBack = false);

/// Final lists: merges the raw segments (recomputing their exact distances)
/// with the canonical set-aside entries (if cIn != null) into sorted
/// canonical lists; raw local id j becomes global idOf(j) (j < nA: offA + j,
/// else offB + j - nA).
void launchFinalize(cudaStream_t stream, const float* x, const float* norms, int64_t n, int d,
                    int K, bool ip, const uint32_t* gIds, int64_t nA, int64_t offA, int64_t offB,
                    int* cIds, float* cDists, bool haveSetAside);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
