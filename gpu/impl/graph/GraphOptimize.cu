// CAGRA's graph optimisation (Ootomo et al., ICDE 2024, arXiv 2308.15136,
// section IV-B): rank-based detour pruning, then reverse-edge addition.
// See SearchGraph.h for the contract.
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <climits>

#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr int kPruneWarps = 4;

__host__ __device__ int hashSlotsFor(int K) {
    int s = 64;
    while (s < 2 * K) s <<= 1;
    return s;
}

__device__ __forceinline__ uint32_t slotOf(int id, int slots) {
    return (uint32_t(id) * 0x9E3779B1u) & uint32_t(slots - 1);
}

/// Position of id's first occurrence in the node's list, or -1.
__device__ int listPosition(const int* keys, const int* vals, int slots, int id) {
    uint32_t h = slotOf(id, slots);
    for (int probe = 0; probe < slots; ++probe) {
        int k = keys[h];
        if (k == id) return vals[h];
        if (k == -1) return -1;
        h = (h + 1) & uint32_t(slots - 1);
    }
    return -1;
}

/// Records id at list position j unless it is already there (one lane).
__device__ void listInsert(int* keys, int* vals, int slots, int id, int j) {
    uint32_t h = slotOf(id, slots);
    for (;;) {
        int old = atomicCAS(&keys[h], -1, id);
        if (old == -1) {
            atomicMin(&vals[h], j);
            return;
        }
        if (old == id) {
            atomicMin(&vals[h], j);
            return;
        }
        h = (h + 1) & uint32_t(slots - 1);
    }
}

/// One warp per node: loads its list into a position table, counts the
/// detours of each edge, keeps the `degree` edges with fewest detours.
__global__ void detourPruneKernel(const int* knn, int64_t n, int stride, int K, int degree,
                                  int* pruned) {
    extern __shared__ int smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int64_t node = int64_t(blockIdx.x) * kPruneWarps + warp;
    if (node >= n) return;
    int slots = hashSlotsFor(K);
    int* ids = smem + size_t(warp) * (2 * K + 2 * slots);
    int* detours = ids + K;
    int* keys = detours + K;
    int* vals = keys + slots;
    for (int s = lane; s < slots; s += 32) {
        keys[s] = -1;
        vals[s] = K;
    }
    __syncwarp();
    const int* row = knn + node * stride;
    for (int j = lane; j < K; j += 32) {
        int id = row[j];
        ids[j] = id;
        detours[j] = 0;
        if (id >= 0 && id != node) listInsert(keys, vals, slots, id, j);
    }
    __syncwarp();
    // Edge X -> A_j has a detour through A_i when A_j is in A_i's list at a
    // rank r with max(i, r) < j.
    for (int i = 0; i + 1 < K; ++i) {
        int a = ids[i];
        if (a < 0 || a == node) continue;
        const int* arow = knn + int64_t(a) * stride;
        for (int r = lane; r + 1 < K; r += 32) {
            int b = arow[r];
            if (b < 0) continue;
            int j = listPosition(keys, vals, slots, b);
            if (j > max(i, r)) atomicAdd(&detours[j], 1);
        }
    }
    __syncwarp();
    // Empty, self and repeated entries rank after every real edge.
    int kept = 0;
    for (int j = lane; j < K; j += 32) {
        int id = ids[j];
        bool valid = id >= 0 && id != node && listPosition(keys, vals, slots, id) == j;
        if (!valid) detours[j] = INT_MAX;
        kept += valid;
    }
    for (int o = 16; o > 0; o >>= 1) kept += __shfl_xor_sync(0xFFFFFFFFu, kept, o);
    __syncwarp();
    for (int j = lane; j < K; j += 32) {
        int dj = detours[j];
        if (dj == INT_MAX) continue;
        int rank = 0;
        for (int t = 0; t < K; ++t) rank += detours[t] < dj || (detours[t] == dj && t < j);
        if (rank < degree) pruned[node * degree + rank] = ids[j];
    }
    for (int r = kept + lane; r < degree; r += 32) pruned[node * degree + r] = -1;
}

/// Appends X to the reverse list of its rank-`rank` neighbour. Launched once
/// per rank, lowest first, so reverse lists fill with the strongest edges.
__global__ void reverseEdgesKernel(const int* pruned, int64_t n, int degree, int rank, int* reverse,
                                   int* reverseCount) {
    int64_t node = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (node >= n) return;
    int y = pruned[node * degree + rank];
    if (y < 0) return;
    int pos = atomicAdd(&reverseCount[y], 1);
    if (pos < degree) reverse[int64_t(y) * degree + pos] = int(node);
}

__device__ bool contains(const int* row, int m, int id) {
    for (int t = 0; t < m; ++t)
        if (row[t] == id) return true;
    return false;
}

/// Final list: the first half of the pruned list, then reverse edges, then
/// the rest of the pruned list, without repeats, -1 padded. In place: `list`
/// holds the node's pruned list and receives the final one (each thread
/// touches its own row only; the second half, which the reverse edges may
/// overwrite, is read out first), so the optimisation needs no second
/// n x degree buffer (about 24 GiB at 100M nodes of degree 64).
__global__ void mergeReverseKernel(int* list, const int* reverse, const int* reverseCount,
                                   int64_t n, int degree) {
    int64_t node = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (node >= n) return;
    int* o = list + node * degree;
    const int* rv = reverse + node * degree;
    const int half = degree / 2;
    int rest[kMaxSearchDegree - kMaxSearchDegree / 2];
    for (int r = half; r < degree; ++r) rest[r - half] = o[r];
    int m = 0;
    for (int r = 0; r < half; ++r)
        if (o[r] >= 0) o[m++] = o[r];
    int nr = min(reverseCount[node], degree);
    for (int t = 0; t < nr && m < degree; ++t)
        if (rv[t] != node && !contains(o, m, rv[t])) o[m++] = rv[t];
    for (int r = 0; r < degree - half && m < degree; ++r)
        if (rest[r] >= 0 && !contains(o, m, rest[r])) o[m++] = rest[r];
    for (; m < degree; ++m) o[m] = -1;
}

}  // namespace

size_t optimizeScratchInts(int64_t n, int degree) { return size_t(n) * (size_t(degree) + 1); }

void optimizeGraph(cudaStream_t stream, const int* knn, int64_t n, int stride, int K, int degree,
                   int* out, int* scratch) {
    FAISS_THROW_IF_NOT_FMT(K >= 1 && K <= kMaxKnnDegree && stride >= K,
                           "optimizeGraph: K = %d not in [1, %d] or past the stride %d", K,
                           kMaxKnnDegree, stride);
    FAISS_THROW_IF_NOT_FMT(degree >= 1 && degree <= std::min(K, kMaxSearchDegree),
                           "optimizeGraph: degree %d not in [1, min(K = %d, %d)]", degree, K,
                           kMaxSearchDegree);
    if (n == 0) return;
    // the pruned lists are written to out and merged there in place
    int* pruned = out;
    int* reverse = scratch;
    int* reverseCount = reverse + size_t(n) * degree;
    size_t smem = size_t(kPruneWarps) * (2 * K + 2 * hashSlotsFor(K)) * sizeof(int);
    detourPruneKernel<<<blocksFor(n, kPruneWarps), 32 * kPruneWarps, smem, stream>>>(
        knn, n, stride, K, degree, pruned);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(reverseCount, 0, sizeof(int) * n, stream));
    for (int rank = 0; rank < degree; ++rank) {
        reverseEdgesKernel<<<blocksFor(n, 256), 256, 0, stream>>>(pruned, n, degree, rank, reverse,
                                                                  reverseCount);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
    mergeReverseKernel<<<blocksFor(n, 128), 128, 0, stream>>>(out, reverse, reverseCount, n,
                                                              degree);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
