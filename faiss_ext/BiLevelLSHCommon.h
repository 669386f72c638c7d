// Bi-level LSH (Pan & Manocha, GIS 2011; docs/references.md): the parts
// shared by the CPU twin (faiss_ext::IndexBiLevelLSH) and the GPU index
// (faiss_ext::gpu::GpuIndexBiLevelLSH), compiled for both host and device.
//
// Both implementations must put every vector into the same RP-tree leaf and
// the same bucket and give every query the same candidates. Everything that
// decides a leaf, a code or a probe is therefore computed here, or in the
// "canonical" arithmetic defined here: float sums accumulated one term at a
// time in index order, with every product and sum rounded separately (no
// fused multiply-add: the device functions use the _rn intrinsics, which nvcc
// never contracts, and the host sources are built with -ffp-contract=off).
// Sums over many vectors (group means, section 4.2's clustered sum) run in
// double over fixed chunks of kClusteredChunk positions, then over the
// chunks in order, so they do not depend on how the work is split.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FEXT_HD __host__ __device__ __forceinline__
#else
#define FEXT_HD inline
#endif

namespace faiss_ext {
namespace lsh {

/// Positions summed together, in order, by the clustered sums.
constexpr int kClusteredChunk = 256;
/// Largest RP-tree depth (2^depth groups).
constexpr int kMaxTreeDepth = 14;
/// Largest number of projections per table (M).
constexpr int kMaxProjections = 32;
/// Largest number of tables (L).
constexpr int kMaxTables = 64;
/// Largest number of cuckoo sub-tables (f).
constexpr int kMaxCuckooSubTables = 8;
/// Largest number of probes per table (the query's bucket included).
constexpr int kMaxProbes = 128;

/// Rule of an RP-tree node (Dasgupta & Freund's RP-tree mean rule).
enum NodeRule : uint8_t {
    /// x goes left when <v, x> <= threshold (v a random unit direction).
    kRuleProjection = 0,
    /// x goes left when ||x - mean||^2 <= threshold.
    kRuleDistance = 1,
};

// ---- canonical float arithmetic ----

FEXT_HD float mulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
FEXT_HD float addRn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
FEXT_HD float subRn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
FEXT_HD float divRn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
FEXT_HD float sqrtRn(float a) {
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(a);
#else
    return std::sqrt(a);
#endif
}

/// Canonical <a, b>: sum of a[j] * b[j] for j = 0 .. d-1, in order.
FEXT_HD float canonicalDot(const float* a, const float* b, int d) {
    float s = 0.f;
    for (int j = 0; j < d; ++j) s = addRn(s, mulRn(a[j], b[j]));
    return s;
}

/// Canonical ||a - b||^2, in the same order.
FEXT_HD float canonicalL2Sq(const float* a, const float* b, int d) {
    float s = 0.f;
    for (int j = 0; j < d; ++j) {
        const float t = subRn(a[j], b[j]);
        s = addRn(s, mulRn(t, t));
    }
    return s;
}

/// RP-tree split point between the largest left key a and the smallest
/// right key b (a <= b): a/2 + b/2, which lies in [a, b] and cannot overflow.
FEXT_HD float splitThreshold(float a, float b) {
    return addRn(mulRn(a, 0.5f), mulRn(b, 0.5f));
}

/// Float bits mapped to an unsigned key with the same order (radix sorts).
FEXT_HD uint32_t orderedFloatBits(float f) {
    uint32_t u;
#if defined(__CUDA_ARCH__)
    u = __float_as_uint(f);
#else
    __builtin_memcpy(&u, &f, 4);
#endif
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Inverse of orderedFloatBits.
FEXT_HD float floatFromOrderedBits(uint32_t o) {
    const uint32_t u = (o & 0x80000000u) ? (o & 0x7fffffffu) : ~o;
    float f;
#if defined(__CUDA_ARCH__)
    f = __uint_as_float(u);
#else
    __builtin_memcpy(&f, &u, 4);
#endif
    return f;
}

// ---- hashing ----

/// splitmix64 finaliser: a 64-bit mixing bijection.
FEXT_HD uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/// The 64-bit key of a Bi-level bucket: table t, RP-tree group g and the
/// bucket's Morton code. salt changes the key function if two buckets ever
/// collide.
FEXT_HD uint64_t bucketKey(int table, int group, uint64_t code, uint64_t salt) {
    const uint64_t head = (uint64_t(uint32_t(table)) << 32) ^ uint64_t(uint32_t(group));
    return mix64(mix64(code ^ salt) ^ (head + 0x9e3779b97f4a7c15ULL));
}

/// Slot of `key` in cuckoo sub-table s (sub-tables of subSize slots).
FEXT_HD uint32_t cuckooSlot(uint64_t key, uint64_t subSeed, uint32_t subSize) {
    return uint32_t(mix64(key ^ subSeed) % uint64_t(subSize));
}

/// Read-only view of a cuckoo hash table (host or device memory): f
/// sub-tables of subSize slots; a slot holds 0 (empty) or 1 + the index of
/// its key in keys[].
struct CuckooView {
    const uint32_t* slots = nullptr;
    const uint64_t* keys = nullptr;
    uint32_t subSize = 0;
    int subTables = 0;
    uint64_t seeds[kMaxCuckooSubTables] = {};

    /// Index of `key` in keys[], or -1.
    FEXT_HD int64_t find(uint64_t key) const {
        if (subSize == 0) return -1;
        for (int s = 0; s < subTables; ++s) {
            const uint32_t e = slots[size_t(s) * subSize + cuckooSlot(key, seeds[s], subSize)];
            if (e != 0 && keys[e - 1] == key) return int64_t(e) - 1;
        }
        return -1;
    }
};

/// Seed of sub-table s for build attempt `attempt`.
FEXT_HD uint64_t cuckooSubSeed(uint64_t seed, int attempt, int s) {
    return mix64(seed ^ mix64(0x6375636b6f6fULL + uint64_t(attempt) * 131 + uint64_t(s)));
}

// ---- LSH codes and the Morton curve ----

/// Bits per code coordinate in the Morton key: floor(64 / M), at most 16.
FEXT_HD int bitsPerCoordinate(int nProj) {
    const int b = 64 / nProj;
    return b > 16 ? 16 : b;
}

/// p-stable code of one projection, h = floor((<a, x> - <a, mean_g>) / W_g + b),
/// clamped to [-2^(bits-1), 2^(bits-1) - 1] and shifted to [0, 2^bits).
/// frac receives the position inside the cell, in [0, 1) (multi-probe).
FEXT_HD uint32_t lshCoordinate(float proj, float offset, float width, float bias, int bits,
                               float* frac) {
    const float f = addRn(divRn(subRn(proj, offset), width), bias);
    const float fl = floorf(f);
    *frac = subRn(f, fl);
    const float half = float(1 << (bits - 1));
    float c = fl < -half ? -half : fl;
    c = c > half - 1.f ? half - 1.f : c;
    if (!(c == c)) c = 0.f;  // NaN cannot happen for finite input; keep defined
    return uint32_t(int32_t(c) + (1 << (bits - 1)));
}

/// Second-level lattice of the LSH codes (Pan & Manocha use both).
enum LatticeKind : int {
    /// The Z^M grid: one floor per projection (lshCoordinate).
    kLatticeZM = 0,
    /// The E8 lattice on each block of 8 projections (M a multiple of 8):
    /// the nearest lattice point, whose cells are closer to spheres than
    /// Z^8's cubes (Conway & Sloane, "Sphere Packings, Lattices and Groups").
    kLatticeE8 = 1,
};

/// Nearest point of D8 (integer vectors of even sum) to x: round every
/// coordinate, and when the sum is odd round the coordinate farthest from
/// its integer the other way (Conway & Sloane, "Fast quantizing and decoding
/// algorithms for lattice quantizers and codes", IEEE Trans. Inf. Theory
/// 28(2), 1982, doi:10.1109/TIT.1982.1056484). z receives the point.
FEXT_HD void nearestD8(const float* x, float* z) {
    int parity = 0, worst = 0;
    float worstGap = -1.f;
    for (int i = 0; i < 8; ++i) {
        const float r = floorf(addRn(x[i], 0.5f));
        z[i] = r;
        const float gap = fabsf(subRn(x[i], r));
        if (gap > worstGap) {
            worstGap = gap;
            worst = i;
        }
        parity ^= int(r) & 1;
    }
    if (parity) z[worst] = x[worst] > z[worst] ? addRn(z[worst], 1.f) : subRn(z[worst], 1.f);
}

/// Nearest point of E8 = D8 u (D8 + 1/2) to x (Conway & Sloane 1982): the
/// closer of the nearest D8 point and the nearest point of the shifted
/// coset (ties to D8). Writes its doubled coordinates (integers, all even
/// or all odd) into c.
FEXT_HD void nearestE8(const float* x, int32_t* c) {
    float z0[8], z1[8], xh[8];
    nearestD8(x, z0);
    for (int i = 0; i < 8; ++i) xh[i] = subRn(x[i], 0.5f);
    nearestD8(xh, z1);
    float d0 = 0.f, d1 = 0.f;
    for (int i = 0; i < 8; ++i) {
        const float a = subRn(x[i], z0[i]);
        const float b = subRn(xh[i], z1[i]);
        d0 = addRn(d0, mulRn(a, a));
        d1 = addRn(d1, mulRn(b, b));
    }
    for (int i = 0; i < 8; ++i) c[i] = d0 <= d1 ? 2 * int32_t(z0[i]) : 2 * int32_t(z1[i]) + 1;
}

/// The M code coordinates of one table (u, shifted to [0, 2^bits)) from
/// its projections proj[0..M-1], the group's offsets and width, and the
/// table's biases, on `lattice`. Z^M: lshCoordinate per projection, frac
/// the positions inside the cells (multi-probe). E8: per block of 8 the
/// doubled coordinates of the nearest E8 point of the scaled projections,
/// clamped like lshCoordinate's; frac is 0 (no multi-probe on E8).
FEXT_HD void latticeCoordinates(int lattice, const float* proj, const float* offset, float width,
                                const float* bias, int M, int bits, uint32_t* u, float* frac) {
    if (lattice != kLatticeE8) {
        for (int m = 0; m < M; ++m)
            u[m] = lshCoordinate(proj[m], offset[m], width, bias[m], bits, &frac[m]);
        return;
    }
    const int32_t half = 1 << (bits - 1);
    for (int b0 = 0; b0 + 8 <= M; b0 += 8) {
        float x[8];
        int32_t c[8];
        for (int i = 0; i < 8; ++i) {
            const float f = addRn(divRn(subRn(proj[b0 + i], offset[b0 + i]), width), bias[b0 + i]);
            // keep the doubled coordinates inside int32 before the clamp
            x[i] = f < -1.0e9f ? -1.0e9f : (f > 1.0e9f ? 1.0e9f : (f == f ? f : 0.f));
        }
        nearestE8(x, c);
        for (int i = 0; i < 8; ++i) {
            int32_t v = c[i] < -half ? -half : c[i];
            v = v > half - 1 ? half - 1 : v;
            u[b0 + i] = uint32_t(v + half);
            frac[b0 + i] = 0.f;
        }
    }
}

/// Morton (Z-order) interleave of M coordinates of `bits` bits: bit b of
/// coordinate i goes to position b * M + i.
FEXT_HD uint64_t mortonCode(const uint32_t* u, int M, int bits) {
    uint64_t code = 0;
    for (int b = 0; b < bits; ++b)
        for (int i = 0; i < M; ++i) code |= uint64_t((u[i] >> b) & 1u) << (b * M + i);
    return code;
}

/// First and one-past-last Morton codes of the hierarchy cell of `code` at
/// level s: the codes sharing all but the lowest s bits (level 1 merges two
/// neighbouring cells along one projection, level 2 four, ...: the cube
/// halving of the Morton curve). Level s >= 64 is everything.
FEXT_HD void mortonCell(uint64_t code, int s, uint64_t* lo, uint64_t* hi) {
    if (s >= 64) {
        *lo = 0;
        *hi = ~uint64_t(0);
        return;
    }
    *lo = (code >> s) << s;
    *hi = *lo + ((uint64_t(1) << s) - 1);  // inclusive
}

/// First position p in [b, e) with codes[p] >= v (codes sorted ascending).
FEXT_HD int64_t lowerBound(const uint64_t* codes, int64_t b, int64_t e, uint64_t v) {
    while (b < e) {
        const int64_t m = b + (e - b) / 2;
        if (codes[m] < v) b = m + 1; else e = m;
    }
    return b;
}

/// First position p in [b, e) with codes[p] > v.
FEXT_HD int64_t upperBound(const uint64_t* codes, int64_t b, int64_t e, uint64_t v) {
    while (b < e) {
        const int64_t m = b + (e - b) / 2;
        if (codes[m] <= v) b = m + 1; else e = m;
    }
    return b;
}

// ---- multi-probe (Lv et al.): perturbation sets of one or two coordinates ----

/// Perturbation of a probe: up to two (coordinate, direction) steps.
struct Perturbation {
    int8_t coord[2];  ///< -1 = unused
    int8_t dir[2];    ///< -1 or +1
};

/// Number of distinct perturbation sets of size 1 or 2 for M coordinates.
FEXT_HD int maxPerturbations(int M) { return 2 * M + 2 * M * (M - 1); }

/// The `count` best perturbation sets for a query whose positions inside its
/// cells are frac[0..M-1]: a step of coordinate i down costs frac_i^2, up
/// costs (1 - frac_i)^2 (squared distance to that cell boundary, in cell
/// widths); a set costs the sum of its steps. Sets are ranked by (cost, rank
/// of the first step, rank of the second step) with steps ranked by (cost,
/// index), a total order, so every correct implementation picks the same
/// sets; this one merges the 2M + 1 sorted lists (single steps, and pairs
/// starting with each step). count <= maxPerturbations(M).
FEXT_HD int bestPerturbations(const float* frac, int M, int count, Perturbation* out) {
    const int S = 2 * M;
    float cost[2 * kMaxProjections];
    int order[2 * kMaxProjections];
    for (int e = 0; e < S; ++e) {
        const float x = (e & 1) ? subRn(1.f, frac[e >> 1]) : frac[e >> 1];
        cost[e] = mulRn(x, x);
        order[e] = e;
    }
    // insertion sort of the single steps by (cost, index)
    for (int i = 1; i < S; ++i) {
        const int v = order[i];
        int j = i - 1;
        while (j >= 0 && (cost[order[j]] > cost[v] || (cost[order[j]] == cost[v] && order[j] > v))) {
            order[j + 1] = order[j];
            --j;
        }
        order[j + 1] = v;
    }
    // head of each list: list 0 singles (next rank), list 1 + r pairs (r, next partner rank)
    int nextSingle = 0;
    int partner[2 * kMaxProjections];
    for (int r = 0; r < S; ++r) partner[r] = r + 1;
    auto sameCoord = [&](int r1, int r2) { return (order[r1] >> 1) == (order[r2] >> 1); };
    int produced = 0;
    while (produced < count) {
        // skip partners on the same coordinate
        int bestList = -1;
        float bestCost = 0.f;
        int bestR1 = 0, bestR2 = 0;
        if (nextSingle < S) {
            bestList = 0;
            bestCost = cost[order[nextSingle]];
            bestR1 = nextSingle;
            bestR2 = -1;
        }
        for (int r = 0; r < S; ++r) {
            while (partner[r] < S && sameCoord(r, partner[r])) ++partner[r];
            if (partner[r] >= S) continue;
            const float c = addRn(cost[order[r]], cost[order[partner[r]]]);
            const int r2 = partner[r];
            bool better = bestList < 0 || c < bestCost ||
                          (c == bestCost && (r < bestR1 || (r == bestR1 && r2 < bestR2)));
            if (better) {
                bestList = 1 + r;
                bestCost = c;
                bestR1 = r;
                bestR2 = r2;
            }
        }
        if (bestList < 0) break;
        Perturbation p;
        const int e1 = order[bestR1];
        p.coord[0] = int8_t(e1 >> 1);
        p.dir[0] = int8_t((e1 & 1) ? 1 : -1);
        if (bestR2 >= 0) {
            const int e2 = order[bestR2];
            p.coord[1] = int8_t(e2 >> 1);
            p.dir[1] = int8_t((e2 & 1) ? 1 : -1);
        } else {
            p.coord[1] = -1;
            p.dir[1] = 0;
        }
        out[produced++] = p;
        if (bestList == 0)
            ++nextSingle;
        else
            ++partner[bestR1];
    }
    return produced;
}

/// A run of the sorted item array: positions [start, start + count).
struct Interval {
    int64_t start;
    int64_t count;
};

/// Value stored per bucket key: its interval in the sorted array of all
/// tables (table t's items occupy [t * ntotal, (t + 1) * ntotal)).
struct BucketRange {
    int64_t start;
    int64_t count;
};

/// Candidate intervals of one query in one table and group (section 5.2
/// with the Morton hierarchy): the query's bucket and its best nprobe - 1
/// perturbed buckets, looked up in the cuckoo table; when they hold fewer
/// than minCandidates items, the smallest Morton cell around the query's
/// code (level 1, 2, ... bits, found by binary search in the table's sorted
/// codes) that holds at least minCandidates items, or the whole group, is
/// added and the probed intervals inside it are dropped.
/// u / frac: the query's code coordinates and in-cell positions for this
/// table and group. sortedCodes: this table's Morton codes in sorted order;
/// [groupBegin, groupEnd): the group's positions in them; base: position of
/// the table in the global sorted array. out must hold nprobe + 1 entries
/// (nprobe <= kMaxProbes); returns the number written.
FEXT_HD int collectIntervals(int table, int group, const uint32_t* u, const float* frac, int M,
                             int bits, int nprobe, int64_t minCandidates, uint64_t salt,
                             const CuckooView& cuckoo, const BucketRange* ranges,
                             const uint64_t* sortedCodes, int64_t groupBegin, int64_t groupEnd,
                             int64_t base, Interval* out) {
    int n = 0;
    int64_t total = 0;
    const uint64_t home = mortonCode(u, M, bits);
    const uint32_t maxU = (1u << bits) - 1u;
    auto probe = [&](uint64_t code) {
        const int64_t e = cuckoo.find(bucketKey(table, group, code, salt));
        if (e >= 0) {
            out[n].start = ranges[e].start;
            out[n].count = ranges[e].count;
            total += ranges[e].count;
            ++n;
        }
    };
    probe(home);
    if (nprobe > 1) {
        Perturbation pert[kMaxProbes];
        const int np = bestPerturbations(frac, M, nprobe - 1, pert);
        uint32_t v[kMaxProjections];
        for (int p = 0; p < np; ++p) {
            for (int i = 0; i < M; ++i) v[i] = u[i];
            bool valid = true;
            for (int s = 0; s < 2; ++s) {
                const int c = pert[p].coord[s];
                if (c < 0) continue;
                if (pert[p].dir[s] < 0) {
                    if (v[c] == 0) valid = false; else v[c] -= 1;
                } else {
                    if (v[c] == maxU) valid = false; else v[c] += 1;
                }
            }
            if (valid) probe(mortonCode(v, M, bits));
        }
    }
    if (total < minCandidates && groupEnd > groupBegin) {
        // smallest level s in [1, M * bits] whose cell holds >= minCandidates
        const int top = M * bits;
        auto cellRange = [&](int s, int64_t* b, int64_t* e) {
            if (s >= top) {
                *b = groupBegin;
                *e = groupEnd;
                return;
            }
            uint64_t lo, hi;
            mortonCell(home, s, &lo, &hi);
            *b = lowerBound(sortedCodes, groupBegin, groupEnd, lo);
            *e = upperBound(sortedCodes, *b, groupEnd, hi);
        };
        int lo = 1, hi = top;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            int64_t b, e;
            cellRange(mid, &b, &e);
            if (e - b >= minCandidates) hi = mid; else lo = mid + 1;
        }
        int64_t b, e;
        cellRange(lo, &b, &e);
        const int64_t s = base + b, c = e - b;
        int kept = 0;
        for (int i = 0; i < n; ++i)
            if (!(out[i].start >= s && out[i].start + out[i].count <= s + c)) out[kept++] = out[i];
        n = kept;
        if (c > 0) {
            out[n].start = s;
            out[n].count = c;
            ++n;
        }
    }
    return n;
}

/// Group (leaf) of x by the RP-tree: at each node go left when the key
/// (<v, x> or ||x - v||^2) is <= the node's threshold. Tree arrays as in
/// BiLevelLSHModel.
FEXT_HD int leafOfTree(const uint8_t* rule, const float* vec, const float* thr, int depth, int d,
                       const float* x) {
    int node = 0;
    for (int l = 0; l < depth; ++l) {
        const float* v = vec + size_t(node) * d;
        const float key =
            rule[node] == kRuleProjection ? canonicalDot(v, x, d) : canonicalL2Sq(x, v, d);
        node = 2 * node + (key <= thr[node] ? 1 : 2);
    }
    return node - ((1 << depth) - 1);
}

/// Largest number of groups (RP-tree leaves) searched per query.
constexpr int kMaxGroupProbes = 16;

/// The `count` groups nearest to q by best-first descent of the RP-tree
/// (count = 1 is the plain traversal): a leaf's score is the sum of squared
/// margins (distance of q to the split hyperplane, or to the split sphere
/// of a distance node) of the nodes where its path leaves q's side. Ties go
/// to the most recently pushed node, the near child being pushed after the
/// far one. Tree arrays as in BiLevelLSHModel. Returns the number written.
/// margin > 0 (with leafWidth, the groups' bucket widths) stops early: a
/// further leaf is taken only when its score is at most (margin x W_h)^2,
/// h the first (the query's own) leaf. Scores are sums of squared
/// distances to splits, so a leaf farther than that from q can only hold
/// neighbours farther than margin x W_h: the query pays for the groups
/// across the splits it is close to, not for every groupProbes (the
/// proportionate crossing of RP-tree leaves of issue 22). Leaves come out
/// in non-decreasing score, so the cut is a prefix of the count = all list.
FEXT_HD int bestGroups(const uint8_t* rule, const float* vec, const float* thr, int depth, int d,
                       const float* q, int count, int* groups, const float* leafWidth = nullptr,
                       float margin = 0.f) {
    if (depth == 0) {
        groups[0] = 0;
        return 1;
    }
    constexpr int kCap = kMaxGroupProbes * kMaxTreeDepth + 2;
    float score[kCap];
    int node[kCap];
    int seq[kCap];
    int size = 0, nextSeq = 0, found = 0;
    const int internal = (1 << depth) - 1;
    score[0] = 0.f;
    node[0] = 0;
    seq[0] = nextSeq++;
    size = 1;
    float maxScore = INFINITY;
    while (found < count && size > 0) {
        int best = 0;
        for (int i = 1; i < size; ++i)
            if (score[i] < score[best] || (score[i] == score[best] && seq[i] > seq[best])) best = i;
        const float sc = score[best];
        if (sc > maxScore) break;
        const int nd = node[best];
        --size;
        score[best] = score[size];
        node[best] = node[size];
        seq[best] = seq[size];
        if (nd >= internal) {
            groups[found++] = nd - internal;
            if (found == 1 && margin > 0.f && leafWidth) {
                const float r = mulRn(margin, leafWidth[nd - internal]);
                maxScore = mulRn(r, r);
            }
            continue;
        }
        const float* v = vec + size_t(nd) * d;
        const float t = thr[nd];
        float key, margin;
        if (rule[nd] == kRuleProjection) {
            key = canonicalDot(v, q, d);
            margin = subRn(key, t);
        } else {
            key = canonicalL2Sq(q, v, d);
            margin = subRn(sqrtRn(key), sqrtRn(t > 0.f ? t : 0.f));
        }
        const bool left = key <= t;
        const float far = addRn(sc, mulRn(margin, margin));
        if (size + 2 > kCap) break;
        if (far == far && far < INFINITY) {  // the far child, unless unreachable
            score[size] = far;
            node[size] = left ? 2 * nd + 2 : 2 * nd + 1;
            seq[size] = nextSeq++;
            ++size;
        }
        score[size] = sc;
        node[size] = left ? 2 * nd + 1 : 2 * nd + 2;
        seq[size] = nextSeq++;
        ++size;
    }
    return found;
}

}  // namespace lsh
}  // namespace faiss_ext
