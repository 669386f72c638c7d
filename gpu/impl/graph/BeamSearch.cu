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
// maxIterations. See SearchGraph.h for the contract.
#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

constexpr int kBlockThreads = 128;
constexpr uint32_t kExpanded = 0x80000000u;
constexpr uint32_t kIdMask = 0x7FFFFFFFu;
constexpr uint32_t kNoId = 0x7FFFFFFFu;
constexpr int kMaxHashSlots = 16384;

__device__ __forceinline__ float infinity() { return __int_as_float(0x7f800000); }

__host__ __device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int nextPow2(int v) {
    int p = 1;
    while (p < v) p <<= 1;
    return p;
}

/// Candidates per iteration, a power of two.
int candidateSlots(const BeamSearchParams& p, int degree) {
    return nextPow2(std::max(32, p.searchWidth * degree));
}

/// Threads that score one candidate together.
int teamSize(int d) { return d <= 128 ? 8 : d <= 512 ? 16 : 32; }

struct Layout {
    int itopk, cand, slots, d4;
    size_t bytes() const {
        return size_t(d4) * 16 + size_t(itopk + cand) * 8 + size_t(slots) * 4 + 128;
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

__device__ __forceinline__ bool pairBefore(float da, uint32_t ia, float db, uint32_t ib) {
    return da < db || (da == db && (ia & kIdMask) < (ib & kIdMask));
}

__device__ __forceinline__ void compareSwap(float* key, uint32_t* id, int i, int j, bool up) {
    float ki = key[i], kj = key[j];
    uint32_t ii = id[i], ij = id[j];
    if (pairBefore(kj, ij, ki, ii) == up) {
        key[i] = kj;
        key[j] = ki;
        id[i] = ij;
        id[j] = ii;
    }
}

/// Bitonic sort of n (a power of two) pairs, ascending, by the whole block.
__device__ void blockBitonicSort(float* key, uint32_t* id, int n) {
    for (int size = 2; size <= n; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int t = threadIdx.x; t < n / 2; t += blockDim.x) {
                int i = 2 * t - (t & (stride - 1));
                compareSwap(key, id, i, i + stride, (i & size) == 0);
            }
            __syncthreads();
        }
    }
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
    for (int stride = L >> 1; stride > 0; stride >>= 1) {
        for (int t = threadIdx.x; t < L / 2; t += blockDim.x) {
            int i = 2 * t - (t & (stride - 1));
            compareSwap(topK, topI, i, i + stride, true);
        }
        __syncthreads();
    }
}

/// true when id was not visited yet (it is now). A full table counts as
/// visited, so a node is never scored twice.
__device__ bool visitOnce(int* table, int slots, uint32_t id) {
    uint32_t h = uint32_t(splitmix64(id)) & uint32_t(slots - 1);
    for (int probe = 0; probe < 32; ++probe) {
        int old = atomicCAS(&table[h], -1, int(id));
        if (old == -1) return true;
        if (old == int(id)) return false;
        h = (h + 1) & uint32_t(slots - 1);
    }
    return false;
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
    for (int o = team >> 1; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o, team);
    if (!active) return infinity();
    return ip ? -s : s;
}

/// Scores the candidates whose ids are set (others get +inf).
__device__ void scoreCandidates(const float* x, int d, bool vec4, const float* q, bool ip,
                                const uint32_t* cI, float* cK, int n, int team) {
    int teams = blockDim.x / team;
    int laneInTeam = threadIdx.x % team, teamId = threadIdx.x / team;
    for (int c0 = 0; c0 < n; c0 += teams) {
        int c = c0 + teamId;
        uint32_t id = c < n ? cI[c] : kNoId;
        float v = teamDistance(x, d, vec4, id != kNoId, id, q, ip, laneInTeam, team);
        if (c < n && laneInTeam == 0) cK[c] = v;
    }
}

struct Shared {
    float* q;
    float* topK;
    uint32_t* topI;
    float* cK;
    uint32_t* cI;
    int* table;
    int* parents;  // [searchWidth], then the count
};

__device__ Shared carve(unsigned char* smem, const Layout& l, int width) {
    Shared s;
    s.q = reinterpret_cast<float*>(smem);
    s.topK = s.q + size_t(l.d4) * 4;
    s.topI = reinterpret_cast<uint32_t*>(s.topK + l.itopk);
    s.cK = reinterpret_cast<float*>(s.topI + l.itopk);
    s.cI = reinterpret_cast<uint32_t*>(s.cK + l.cand);
    s.table = reinterpret_cast<int*>(s.cI + l.cand);
    s.parents = s.table + l.slots;
    return s;
}

/// Entry points into the candidate buffer: in round 0 the query's own
/// (nearest sampled nodes) first, then random nodes.
__device__ void gatherSeeds(Shared& s, int n, int64_t qi, int round, uint64_t seed, int64_t nb,
                            int slots, const EntrySeeds& es) {
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        uint32_t id;
        if (round == 0 && c < es.perQuery) {
            int64_t r = es.rank[qi * es.perQuery + c];
            id = r < 0 ? kNoId : uint32_t(es.entryIds[r]);
        } else {
            uint64_t r = splitmix64(seed ^ (uint64_t(qi) * 0xD1B54A32D192ED03ull) ^
                                    (uint64_t(round) << 40) ^ uint64_t(c));
            id = uint32_t(r % uint64_t(nb));
        }
        s.cI[c] = id != kNoId && visitOnce(s.table, slots, id) ? id : kNoId;
    }
}

/// Warp 0 picks up to `width` unexpanded entries of itopk, best first, and
/// marks them expanded; the count goes to parents[width].
__device__ void pickParents(Shared& s, int L, int width) {
    if (threadIdx.x >= 32) return;
    int lane = threadIdx.x, found = 0;
    for (int i0 = 0; i0 < L && found < width; i0 += 32) {
        uint32_t id = s.topI[i0 + lane];
        bool open = (id & kExpanded) == 0 && id != kNoId;
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
            if (v >= 0 && visitOnce(s.table, slots, uint32_t(v))) id = uint32_t(v);
        }
        s.cI[c] = id;
    }
}

__global__ void __launch_bounds__(kBlockThreads)
        beamSearchKernel(const float* x, int64_t nb, int d, const int* graph, int degree, bool ip,
                         const float* queries, int k, Layout l, BeamSearchParams p, int team,
                         EntrySeeds es, float* outD, int64_t* outI) {
    extern __shared__ __align__(16) unsigned char smem[];
    Shared s = carve(smem, l, p.searchWidth);
    int64_t qi = blockIdx.x;
    const float* qg = queries + qi * d;
    for (int j = threadIdx.x; j < l.d4 * 4; j += blockDim.x) s.q[j] = j < d ? qg[j] : 0.f;
    for (int i = threadIdx.x; i < l.slots; i += blockDim.x) s.table[i] = -1;
    for (int i = threadIdx.x; i < l.itopk; i += blockDim.x) {
        s.topK[i] = infinity();
        s.topI[i] = kNoId;
    }
    __syncthreads();
    bool vec4 = (d % 4) == 0;
    for (int round = 0; round < p.seedRounds; ++round) {
        gatherSeeds(s, l.cand, qi, round, p.seed, nb, l.slots, es);
        __syncthreads();
        scoreCandidates(x, d, vec4, s.q, ip, s.cI, s.cK, l.cand, team);
        __syncthreads();
        blockBitonicSort(s.cK, s.cI, l.cand);
        mergeIntoTop(s.topK, s.topI, s.cK, s.cI, l.itopk, l.cand);
    }
    int n = p.searchWidth * degree;
    for (int iter = 0; iter < p.maxIterations; ++iter) {
        pickParents(s, l.itopk, p.searchWidth);
        __syncthreads();
        if (s.parents[p.searchWidth] == 0 && iter >= p.minIterations) break;
        gatherNeighbours(s, graph, degree, n, l.slots, p.searchWidth);
        for (int c = n + threadIdx.x; c < l.cand; c += blockDim.x) s.cI[c] = kNoId;
        __syncthreads();
        scoreCandidates(x, d, vec4, s.q, ip, s.cI, s.cK, l.cand, team);
        __syncthreads();
        blockBitonicSort(s.cK, s.cI, l.cand);
        mergeIntoTop(s.topK, s.topI, s.cK, s.cI, l.itopk, l.cand);
    }
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        uint32_t id = s.topI[i] & kIdMask;
        bool ok = id != kNoId;
        // inner product: the stored key is the negated product
        float v = ok ? s.topK[i] : infinity();
        outD[qi * k + i] = ip ? -v : v;
        outI[qi * k + i] = ok ? int64_t(id) : -1;
    }
}

}  // namespace

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

void beamSearch(cudaStream_t stream, const float* x, int64_t n, int d, const int* graph,
                int degree, bool innerProduct, const float* q, int64_t nq, int k,
                const BeamSearchParams& p, const EntrySeeds& seeds, float* outD,
                int64_t* outI) {
    FAISS_THROW_IF_NOT_FMT(p.itopk >= 32 && p.itopk <= kMaxItopk && p.itopk % 32 == 0 &&
                                   (p.itopk & (p.itopk - 1)) == 0,
                           "beamSearch: itopk %d must be a power of two in [32, %d]", p.itopk,
                           kMaxItopk);
    FAISS_THROW_IF_NOT_FMT(k >= 1 && k <= p.itopk, "beamSearch: k = %d not in [1, itopk = %d]",
                           k, p.itopk);
    FAISS_THROW_IF_NOT_FMT(p.searchWidth >= 1 && p.searchWidth <= kMaxSearchWidth &&
                                   p.searchWidth * degree <= 1024,
                           "beamSearch: searchWidth %d not in [1, %d] or searchWidth x degree "
                           "%d over 1024",
                           p.searchWidth, kMaxSearchWidth, degree);
    FAISS_THROW_IF_NOT_FMT(p.maxIterations >= 1 && p.seedRounds >= 1,
                           "beamSearch: maxIterations %d and seedRounds %d must be >= 1",
                           p.maxIterations, p.seedRounds);
    if (nq == 0) return;
    FAISS_THROW_IF_NOT_MSG(n >= 1 && n <= int64_t(kIdMask) - 1,
                           "beamSearch: the graph must hold 1 .. 2^31 - 2 nodes");
    Layout l = layoutFor(p, degree, d);
    size_t smem = l.bytes();
    FAISS_THROW_IF_NOT_FMT(smem <= 200 * 1024,
                           "beamSearch: %zu bytes of shared memory per query (d %d, itopk %d) "
                           "is more than a block can have",
                           smem, d, p.itopk);
    if (smem > 48 * 1024)
        FAISS_EXT_CUDA_CHECK(cudaFuncSetAttribute(
                beamSearchKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int team = teamSize(d);
    FAISS_THROW_IF_NOT_FMT(seeds.perQuery >= 0 && seeds.perQuery <= l.cand &&
                                   (seeds.perQuery == 0 || (seeds.entryIds && seeds.rank)),
                           "beamSearch: %d entry points per query (at most %d, with their "
                           "arrays)",
                           seeds.perQuery, l.cand);
    for (int64_t q0 = 0; q0 < nq; q0 += 65535 * 1024) {
        int64_t cnt = std::min<int64_t>(nq - q0, 65535 * 1024);
        beamSearchKernel<<<unsigned(cnt), kBlockThreads, smem, stream>>>(
                x, n, d, graph, degree, innerProduct, q + q0 * d, k, l, p, team, shifted(seeds, q0),
                outD + q0 * k, outI + q0 * k);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
