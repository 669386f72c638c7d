// Beam search over a search graph, one thread block per query (CAGRA's
// single-CTA search: Ootomo et al., ICDE 2024, arXiv 2308.15136, section V).
// Shared memory holds the query, the candidate buffer ("itopk", sorted, a
// flag bit per entry marking nodes already expanded), the buffer of new
// candidates (searchWidth parents x degree neighbours) and a visited hash
// table, so every node is scored at most once per query. Each iteration:
//   1. pick the searchWidth best entries of itopk not yet expanded;
//   2. gather their neighbours, drop those already visited;
//   3. score them, a team of threads per candidate (float4 loads);
//   4. sort the new candidates (bitonic) and merge them into itopk: the
//      elementwise minimum of itopk and the reversed candidates holds the
//      itopk best of both and is bitonic, so one bitonic merge sorts it.
// It stops when no entry is left to expand (after minIterations) or after
// maxIterations. With an FP16 copy of the vectors (SearchVectors::x16) the
// candidates are scored on it (half the memory traffic of the search, which
// is bound by it), and the final buffer is re-scored in FP32 and sorted
// again, so returned distances are exact FP32 values. The visited table is
// small; when it is half full it is cleared and refilled with the buffer's
// nodes (CAGRA's "forgettable" hash), so a node can be scored again only
// after it has left the buffer, and then cannot re-enter it: the buffer
// never holds a node twice. See SearchGraph.h for the contract.
#include <cuda_fp16.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>

#include "faiss_ext/gpu/impl/flat/KernelLaunchCache.h"
#include "faiss_ext/gpu/impl/graph/BlockBitonic.cuh"
#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/QueryHash.cuh"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr int kBlockThreads = 128;
/// Threads of a block where the grid has no more blocks than the GPU has
/// SMs (one query or a few): every round of candidate scoring is a memory
/// latency, and four times the teams score a candidate set in a quarter
/// of the rounds. (A 784-d query took 0.49 ms with 128 threads a block,
/// H200; batches fill the SMs with blocks instead.)
constexpr int kWideBlockThreads = 512;
constexpr int kMaxHashSlots = 4096;

/// Candidates per iteration, a power of two.
int candidateSlots(const BeamSearchParams& p, int degree) {
    return nextPow2(std::max(32, p.searchWidth * degree));
}

/// Threads that score one candidate together.
int teamSize(int d) { return d <= 128 ? 8 : d <= 512 ? 16 : 32; }

/// What the traversal scores candidates on (SearchVectors).
enum class Traversal { Fp32, Fp16 };

struct Layout {
    int itopk, cand, slots, d4;
    size_t bytes() const {
        // the query and its traversal terms, the buffers, the table, then
        // the parents (kMaxSearchWidth + 1 ints) and the table's entry count
        return size_t(d4) * 32 + size_t(itopk + cand) * 8 + size_t(slots) * 4 +
               size_t(kMaxSearchWidth + 2) * 4;
    }
};

Layout layoutFor(const BeamSearchParams& p, int degree, int d) {
    Layout l;
    l.itopk = p.itopk;
    l.cand = candidateSlots(p, degree);
    l.slots = beamHashSlots(p, degree);
    l.d4 = (d + 3) / 4;
    return l;
}

/// Merges the sorted candidates (n of them) into the sorted itopk (L): the
/// L best of both, sorted.
__device__ void mergeIntoTop(float* topK, uint32_t* topI, const float* cK, const uint32_t* cI,
                             int L, int n) {
    int m = min(L, n);
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
        if (i < L - m) continue;  // the reversed candidates are +inf there
        int c = L - 1 - i;
        if (pairBefore(cK[c], cI[c], topK[i], topI[i])) {
            topK[i] = cK[c];
            topI[i] = cI[c];
        }
    }
    __syncthreads();
    // a bitonic sequence: one merge, ascending
    for (int stride = L >> 1; stride >= 32; stride >>= 1) {
        sharedStage(topK, topI, L, 0, stride);
        __syncthreads();
    }
    registerStages(topK, topI, L, 1, true);
    __syncthreads();
}

/// true when id was not visited yet (it is now; *count counts the
/// entries). A full probe sequence counts as visited, so a node is never
/// scored twice while the table holds it.
__device__ bool visitOnce(int* table, int slots, uint32_t id, int* count) {
    uint32_t h = uint32_t(mix64(id)) & uint32_t(slots - 1);
    for (int probe = 0; probe < 32; ++probe) {
        int old = atomicCAS(&table[h], -1, int(id));
        if (old == -1) {
            atomicAdd(count, 1);
            return true;
        }
        if (old == int(id)) return false;
        h = (h + 1) & uint32_t(slots - 1);
    }
    return false;
}

/// The key of a candidate from its team's partial sums s: their total
/// (shuffled to every lane of the team), negated for products; +inf for an
/// inactive team.
__device__ __forceinline__ float teamKey(float s, bool active, bool ip, int team) {
    for (int o = team >> 1; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o, team);
    if (!active) return infinity();
    return ip ? -s : s;
}

/// Distance of the query (shared) to row id, by a team of `team` lanes; the
/// team's lanes all get it. Every lane of the warp must call it (the
/// shuffles take the whole warp); inactive teams load nothing and get +inf.
__device__ float teamDistance(const float* x, int d, bool vec4, bool active, uint32_t id,
                              const float* q, bool ip, int laneInTeam, int team) {
    float s = 0.f;
    if (active) {
        const float* row = x + int64_t(id) * d;
        if (vec4) {
            const float4* r4 = reinterpret_cast<const float4*>(row);
            const float4* q4 = reinterpret_cast<const float4*>(q);
            for (int j = laneInTeam; j < d / 4; j += team) {
                float4 a = __ldg(r4 + j), b = q4[j];
                if (ip) {
                    s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
                } else {
                    float t0 = a.x - b.x, t1 = a.y - b.y, t2 = a.z - b.z, t3 = a.w - b.w;
                    s += t0 * t0 + t1 * t1 + t2 * t2 + t3 * t3;
                }
            }
        } else {
            for (int j = laneInTeam; j < d; j += team) {
                float a = __ldg(row + j);
                s += ip ? a * q[j] : (a - q[j]) * (a - q[j]);
            }
        }
    }
    return teamKey(s, active, ip, team);
}

/// Adds one load's worth (sizeof(Vec) / 2 FP16 values against q[0..)) of
/// squared differences or products to s.
template <typename Vec>
__device__ __forceinline__ void accumulateHalves(const Vec& v, const float* q, bool ip, float& s) {
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int t = 0; t < int(sizeof(Vec)) / 4; ++t) {
        float2 f = __half22float2(h[t]);
        if (ip) {
            s += f.x * q[2 * t] + f.y * q[2 * t + 1];
        } else {
            float a = f.x - q[2 * t], b = f.y - q[2 * t + 1];
            s += a * a + b * b;
        }
    }
}

/// This lane's part of a row's distance, in loads of Vec (d a multiple of
/// sizeof(Vec) / 2).
template <typename Vec>
__device__ float halfRowPart(const __half* row, int d, const float* q, bool ip, int laneInTeam,
                             int team) {
    constexpr int kPerLoad = int(sizeof(Vec)) / 2;
    const Vec* r = reinterpret_cast<const Vec*>(row);
    float s = 0.f;
    for (int j = laneInTeam; j < d / kPerLoad; j += team)
        accumulateHalves(__ldg(r + j), q + kPerLoad * j, ip, s);
    return s;
}

/// Same as teamDistance on the FP16 copy (q: the query, minus the copy's
/// mean under L2, times its scale; the result is the distance times
/// scale^2, or the product less a constant of the query, for ordering only).
__device__ float teamDistanceHalf(const __half* x, int d, bool active, uint32_t id, const float* q,
                                  bool ip, int laneInTeam, int team) {
    float s = 0.f;
    if (active) {
        const __half* row = x + int64_t(id) * d;
        if ((d & 7) == 0) {
            s = halfRowPart<uint4>(row, d, q, ip, laneInTeam, team);
        } else if ((d & 3) == 0) {
            s = halfRowPart<uint2>(row, d, q, ip, laneInTeam, team);
        } else {
            for (int j = laneInTeam; j < d; j += team) {
                float a = __half2float(row[j]);
                s += ip ? a * q[j] : (a - q[j]) * (a - q[j]);
            }
        }
    }
    return teamKey(s, active, ip, team);
}

/// Where the search reads vectors: FP32 always (the final re-scoring), FP16
/// (centred and scaled) for the traversal when present.
struct Vectors {
    const float* x;
    const __half* x16;
    const float* mean16;
};

/// Scores n candidates whose ids are set (others get +inf), on the FP16
/// copy (query terms qs) or the FP32 vectors (query q).
template <Traversal kT>
__device__ void scoreCandidates(const Vectors& v, int d, const float* q, const float* qs, bool ip,
                                const uint32_t* cI, float* cK, int n, int team) {
    int teams = blockDim.x / team;
    int laneInTeam = threadIdx.x % team, teamId = threadIdx.x / team;
    bool vec4 = (d & 3) == 0;
    for (int c0 = 0; c0 < n; c0 += teams) {
        int c = c0 + teamId;
        uint32_t id = c < n ? cI[c] & kIdMask : kNoId;
        bool active = id != kNoId;
        float dv;
        if constexpr (kT == Traversal::Fp16) {
            dv = teamDistanceHalf(v.x16, d, active, id, qs, ip, laneInTeam, team);
        } else {
            dv = teamDistance(v.x, d, vec4, active, id, q, ip, laneInTeam, team);
        }
        if (c < n && laneInTeam == 0) cK[c] = dv;
    }
}

struct Shared {
    float* q;
    float* qs;  // the query, centred under L2, times the FP16 copy's scale
    float* topK;
    uint32_t* topI;
    float* cK;
    uint32_t* cI;
    int* table;
    int* parents;    // [searchWidth], then the count
    int* hashCount;  // entries in the visited table
};

__device__ Shared carve(unsigned char* smem, const Layout& l, int width) {
    Shared s;
    s.q = reinterpret_cast<float*>(smem);
    s.qs = s.q + size_t(l.d4) * 4;
    s.topK = s.qs + size_t(l.d4) * 4;
    s.topI = reinterpret_cast<uint32_t*>(s.topK + l.itopk);
    s.cK = reinterpret_cast<float*>(s.topI + l.itopk);
    s.cI = reinterpret_cast<uint32_t*>(s.cK + l.cand);
    s.table = reinterpret_cast<int*>(s.cI + l.cand);
    s.parents = s.table + l.slots;
    s.hashCount = s.parents + kMaxSearchWidth + 1;
    return s;
}

/// Entry point j of `perQuery` for candidate c of block `b` of `blocks`
/// searching one query: the blocks split the query's entry points (block b
/// takes j = b, b + blocks, ...; one when there are fewer than blocks), so
/// that their searches start in different places. -1: none left.
__device__ __forceinline__ int entryFor(int c, int b, int blocks, int perQuery) {
    if (perQuery <= 0) return -1;
    if (b >= perQuery) return c == 0 ? b % perQuery : -1;
    int j = b + c * blocks;
    return j < perQuery ? j : -1;
}

/// Entry points into the candidate buffer: in round 0 this block's share
/// of the query's own (nearest sampled nodes) first, then random nodes
/// (a stream of its own per block).
__device__ void gatherSeeds(Shared& s, int n, int64_t qi, uint64_t qh, int b, int blocks,
                            int round, uint64_t seed, int64_t nb, int slots,
                            const EntrySeeds& es) {
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        uint32_t id;
        int j = round == 0 ? entryFor(c, b, blocks, es.perQuery) : -1;
        if (j >= 0) {
            int64_t r = es.rank[qi * es.perQuery + j];
            id = r < 0 ? kNoId : uint32_t(es.entryIds[r]);
        } else {
            // the seed and the query mixed first: seeds that differ only in
            // the bits the candidate index c reaches would otherwise draw the
            // same nodes, permuted
            uint64_t stream = mix64(mix64(seed) ^ (qh * 0xD1B54A32D192ED03ull));
            uint64_t r =
                mix64(stream ^ (uint64_t(b) << 52) ^ (uint64_t(round) << 40) ^ uint64_t(c));
            id = uint32_t(r % uint64_t(nb));
        }
        s.cI[c] = id != kNoId && visitOnce(s.table, slots, id, s.hashCount) ? id : kNoId;
    }
}

/// Warp 0 picks up to `width` unexpanded entries among the first `limit` of
/// itopk, best first, and marks them expanded; the count goes to
/// parents[width].
__device__ void pickParents(Shared& s, int limit, int width) {
    if (threadIdx.x >= 32) return;
    int lane = threadIdx.x, found = 0;
    for (int i0 = 0; i0 < limit && found < width; i0 += 32) {
        uint32_t id = s.topI[i0 + lane];
        bool open = i0 + lane < limit && (id & kExpanded) == 0 && id != kNoId;
        unsigned mask = __ballot_sync(0xFFFFFFFFu, open);
        int before = __popc(mask & ((1u << lane) - 1));
        if (open && found + before < width) {
            s.parents[found + before] = int(id);
            s.topI[i0 + lane] = id | kExpanded;
        }
        found = min(width, found + __popc(mask));
    }
    if (lane == 0) s.parents[width] = found;
}

/// Neighbours of the parents not visited yet into the candidate buffer.
__device__ void gatherNeighbours(Shared& s, const int* graph, int degree, int n, int slots,
                                 int width) {
    int np = s.parents[width];
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        int p = c / degree, e = c % degree;
        uint32_t id = kNoId;
        if (p < np) {
            int v = graph[int64_t(s.parents[p]) * degree + e];
            if (v >= 0 && visitOnce(s.table, slots, uint32_t(v), s.hashCount)) id = uint32_t(v);
        }
        s.cI[c] = id;
    }
}

/// Clears the visited table and refills it with the buffer's nodes.
__device__ void forgetVisited(Shared& s, const Layout& l) {
    for (int i = threadIdx.x; i < l.slots; i += blockDim.x) s.table[i] = -1;
    if (threadIdx.x == 0) *s.hashCount = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < l.itopk; i += blockDim.x) {
        uint32_t id = s.topI[i] & kIdMask;
        if (id != kNoId) visitOnce(s.table, l.slots, id, s.hashCount);
    }
    __syncthreads();
}

/// Query into shared memory with its traversal terms (the query, less the
/// FP16 copy's mean under L2, times the copy's scale), empty table and
/// buffer.
template <Traversal kT>
__device__ void initQuery(Shared& s, const Layout& l, const float* qg, int d, float scale,
                          const Vectors& v, bool ip) {
    for (int j = threadIdx.x; j < l.d4 * 4; j += blockDim.x) {
        float x = j < d ? qg[j] : 0.f;
        s.q[j] = x;
        // (products: q.(x - mean) orders as q.x; the padding has no mean)
        const float mean = kT == Traversal::Fp16 && v.mean16 && !ip && j < d
                                   ? __ldg(v.mean16 + j)
                                   : 0.f;
        s.qs[j] = (x - mean) * scale;
    }
    for (int i = threadIdx.x; i < l.slots; i += blockDim.x) s.table[i] = -1;
    for (int i = threadIdx.x; i < l.itopk; i += blockDim.x) {
        s.topK[i] = infinity();
        s.topI[i] = kNoId;
    }
    if (threadIdx.x == 0) *s.hashCount = 0;
    __syncthreads();
}

/// Scores the candidate buffer, sorts it and merges it into itopk.
template <Traversal kT>
__device__ void scoreAndMerge(Shared& s, const Layout& l, const Vectors& v, int d, bool ip,
                              int team) {
    scoreCandidates<kT>(v, d, s.q, s.qs, ip, s.cI, s.cK, l.cand, team);
    __syncthreads();
    blockBitonicSort(s.cK, s.cI, l.cand);
    mergeIntoTop(s.topK, s.topI, s.cK, s.cI, l.itopk, l.cand);
}

template <Traversal kT, int kThreads>
__global__ void __launch_bounds__(kThreads)
    beamSearchKernel(Vectors v, float scale, int64_t nb, int d, const int* graph, int degree,
                     bool ip, const float* queries, int k, Layout l, BeamSearchParams p, int team,
                     EntrySeeds es, float* outD, int64_t* outI) {
    extern __shared__ __align__(16) unsigned char smem[];
    Shared s = carve(smem, l, p.searchWidth);
    // blocksPerQuery blocks search each query, independently (each its own
    // buffer and visited table), and write their results to rows
    // blockIdx.x for mergeBlockResults
    int blocks = p.blocksPerQuery;
    int64_t qi = blockIdx.x / blocks;
    int b = int(blockIdx.x % blocks);
    initQuery<kT>(s, l, queries + qi * d, d, scale, v, ip);
    const uint64_t qh = warpQueryHash(s.q, d);  // the same in every warp
    for (int round = 0; round < p.seedRounds; ++round) {
        gatherSeeds(s, l.cand, qi, qh, b, blocks, round, p.seed, nb, l.slots, es);
        __syncthreads();
        scoreAndMerge<kT>(s, l, v, d, ip, team);
    }
    int n = p.searchWidth * degree;
    int expandable = p.expandLimit > 0 ? p.expandLimit : l.itopk;
    for (int iter = 0; iter < p.maxIterations; ++iter) {
        pickParents(s, expandable, p.searchWidth);
        // read before the barrier: nothing adds to the table until after it,
        // so every thread takes the same branch
        bool forget = *s.hashCount > l.slots / 2;
        __syncthreads();
        if (s.parents[p.searchWidth] == 0 && iter >= p.minIterations) break;
        if (forget) forgetVisited(s, l);
        gatherNeighbours(s, graph, degree, n, l.slots, p.searchWidth);
        for (int c = n + threadIdx.x; c < l.cand; c += blockDim.x) s.cI[c] = kNoId;
        __syncthreads();
        scoreAndMerge<kT>(s, l, v, d, ip, team);
    }
    if constexpr (kT != Traversal::Fp32) {
        // exact FP32 distances of the buffer, sorted again
        scoreCandidates<Traversal::Fp32>(v, d, s.q, s.qs, ip, s.topI, s.topK, l.itopk, team);
        __syncthreads();
        for (int i = threadIdx.x; i < l.itopk; i += blockDim.x) s.topI[i] &= kIdMask;
        __syncthreads();
        blockBitonicSort(s.topK, s.topI, l.itopk);
    }
    // one block per query: final results (inner product: the stored key is
    // the negated product); several: keys as they are, for the merge
    bool direct = blocks == 1;
    int64_t row = blockIdx.x;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        uint32_t id = s.topI[i] & kIdMask;
        bool ok = id != kNoId;
        float dv = ok ? s.topK[i] : infinity();
        outD[row * k + i] = direct && ip ? -dv : dv;
        outI[row * k + i] = ok ? int64_t(id) : -1;
    }
}

}  // namespace

/// kWideBlockThreads where the grid of gridBlocks blocks leaves SMs idle,
/// else kBlockThreads.
static int blockThreadsFor(int64_t gridBlocks) {
    return gridBlocks <= cachedSmCount(getCurrentDevice()) ? kWideBlockThreads : kBlockThreads;
}

/// The seeds of queries [q0, ...).
static EntrySeeds shifted(EntrySeeds s, int64_t q0) {
    if (s.rank) s.rank += q0 * s.perQuery;
    return s;
}

int beamHashSlots(const BeamSearchParams& p, int degree) {
    int64_t visits = int64_t(p.seedRounds) * candidateSlots(p, degree) +
                     int64_t(p.maxIterations) * p.searchWidth * degree;
    int slots = 256;
    while (slots < 2 * visits && slots < kMaxHashSlots) slots <<= 1;
    return slots;
}

size_t beamSharedBytes(const BeamSearchParams& p, int degree, int d) {
    return layoutFor(p, degree, d).bytes();
}

namespace {

template <Traversal kT>
auto beamKernelFor(int threads) {
    return threads == kWideBlockThreads ? beamSearchKernel<kT, kWideBlockThreads>
                                        : beamSearchKernel<kT, kBlockThreads>;
}

}  // namespace

void beamSearch(cudaStream_t stream, const SearchVectors& vectors, int64_t n, int d,
                const int* graph, int degree, bool innerProduct, const float* q, int64_t nq, int k,
                const BeamSearchParams& p, const EntrySeeds& seeds, float* outD, int64_t* outI,
                const BeamScratch& scratch) {
    FAISS_THROW_IF_NOT_FMT(p.itopk >= 32 && p.itopk <= kMaxItopk && p.itopk % 32 == 0 &&
                               (p.itopk & (p.itopk - 1)) == 0,
                           "beamSearch: itopk %d must be a power of two in [32, %d]", p.itopk,
                           kMaxItopk);
    FAISS_THROW_IF_NOT_FMT(k >= 1 && k <= p.itopk, "beamSearch: k = %d not in [1, itopk = %d]", k,
                           p.itopk);
    FAISS_THROW_IF_NOT_FMT(p.expandLimit >= 0 && p.expandLimit <= p.itopk,
                           "beamSearch: expandLimit %d not in [0, itopk = %d]", p.expandLimit,
                           p.itopk);
    FAISS_THROW_IF_NOT_FMT(
        p.searchWidth >= 1 && p.searchWidth <= kMaxSearchWidth && p.searchWidth * degree <= 1024,
        "beamSearch: searchWidth %d not in [1, %d] or searchWidth x degree "
        "%d over 1024",
        p.searchWidth, kMaxSearchWidth, degree);
    FAISS_THROW_IF_NOT_FMT(
        p.blocksPerQuery >= 1 && p.blocksPerQuery <= kMaxBlocksPerQuery &&
            int64_t(p.blocksPerQuery) * nextPow2(std::max(k, 32)) <= kMaxMergedResults,
        "beamSearch: blocksPerQuery %d not in [1, %d] or blocksPerQuery x "
        "k (%d) over %d",
        p.blocksPerQuery, kMaxBlocksPerQuery, k, kMaxMergedResults);
    FAISS_THROW_IF_NOT_MSG(p.blocksPerQuery == 1 || (scratch.keys && scratch.ids),
                           "beamSearch: several blocks per query need the scratch arrays");
    FAISS_THROW_IF_NOT_FMT(p.maxIterations >= 1 && p.seedRounds >= 1,
                           "beamSearch: maxIterations %d and seedRounds %d must be >= 1",
                           p.maxIterations, p.seedRounds);
    if (nq == 0) return;
    FAISS_THROW_IF_NOT_MSG(n >= 1 && n <= int64_t(kIdMask) - 1,
                           "beamSearch: the graph must hold 1 .. 2^31 - 2 nodes");
    const Traversal traversal = vectors.x16 ? Traversal::Fp16 : Traversal::Fp32;
    Layout l = layoutFor(p, degree, d);
    size_t smem = l.bytes();
    FAISS_THROW_IF_NOT_FMT(smem <= 200 * 1024,
                           "beamSearch: %zu bytes of shared memory per query (d %d, itopk %d) "
                           "is more than a block can have",
                           smem, d, p.itopk);
    const int threads = blockThreadsFor(nq * p.blocksPerQuery);
    auto kernel = traversal == Traversal::Fp16 ? beamKernelFor<Traversal::Fp16>(threads)
                                               : beamKernelFor<Traversal::Fp32>(threads);
    if (smem > 48 * 1024)
        FAISS_EXT_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int team = teamSize(d);
    FAISS_THROW_IF_NOT_FMT(seeds.perQuery >= 0 && seeds.perQuery <= l.cand &&
                               (seeds.perQuery == 0 || (seeds.entryIds && seeds.rank)),
                           "beamSearch: %d entry points per query (at most %d, with their "
                           "arrays)",
                           seeds.perQuery, l.cand);
    Vectors v{vectors.x, reinterpret_cast<const __half*>(vectors.x16), vectors.mean16};
    float scale = traversal == Traversal::Fp16 ? vectors.scale16 : 1.f;
    int blocks = p.blocksPerQuery;
    float* keys = blocks == 1 ? outD : scratch.keys;
    int64_t* ids = blocks == 1 ? outI : scratch.ids;
    int64_t perLaunch = (int64_t(65535) * 1024) / blocks;
    for (int64_t q0 = 0; q0 < nq; q0 += perLaunch) {
        int64_t cnt = std::min<int64_t>(nq - q0, perLaunch);
        kernel<<<unsigned(cnt * blocks), threads, smem, stream>>>(
            v, scale, n, d, graph, degree, innerProduct, q + q0 * d, k, l, p, team,
            shifted(seeds, q0), keys + q0 * blocks * k, ids + q0 * blocks * k);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
    if (blocks > 1) mergeBlockResults(stream, keys, ids, nq, blocks, k, innerProduct, outD, outI);
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
