// k-way merge of per-shard k-NN results (see ShardResultMerge.h).
//
// Why a merge and not a heap: every shard's row is sorted already, so the
// next result of a query is always one of the nshards rows' current heads.
// Taking the best head gives each output in O(nshards) (O(k * nshards) a
// query), reads each row front to back once and writes the outputs in order;
// a heap of the k best (FAISS's ResultHeap) instead takes all k * nshards
// candidates in O(log k) each and then sorts its k survivors again. For the
// few shards of a sharded index a linear scan over the heads also beats a
// tournament tree over them.
//
// How it is made fast: the heads are compared as integer keys (rank of the
// distance, then shard), so the best one is a branch-free minimum; and since
// one query's merge is a chain of dependent loads and minimums, kLanes
// queries are merged interleaved, so that the core runs one chain while the
// others wait (4 shards x 10,000 queries x k = 10: 1.3 ms one query at a
// time, 0.57 ms 8 at a time, on one core of the development machine).
#include "faiss_ext/ShardResultMerge.h"

#include <faiss/impl/FaissAssert.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace faiss_ext {

namespace {

/// Below this many input entries (nq * k * nshards) the merge runs on the
/// calling thread: starting a thread team costs more than it saves.
constexpr int64_t kParallelMinEntries = int64_t(1) << 15;

/// Queries merged interleaved by one thread (see the top of the file).
constexpr int kLanes = 8;

/// A shard's used-up row: larger than every head key.
constexpr uint64_t kExhausted = ~uint64_t(0);

/// The rank of distance d as a uint32, smaller first: ascending distances
/// (descending when kKeepMax), equal distances equal (-0 is +0), every NaN
/// last. Comparing these keys instead of floats makes the choice of the best
/// head a branch-free minimum.
template <bool kKeepMax>
inline uint32_t rankKey(float d) {
    if (d != d) return ~uint32_t(0);
    d += 0.f;  // -0 -> +0
    uint32_t bits;
    std::memcpy(&bits, &d, sizeof(bits));
    // IEEE order as unsigned order: negatives flipped, positives above them
    const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    // similarities descending; no number's key reaches NaN's (+-inf: 0xFF800000)
    return kKeepMax ? ~ascending : ascending;
}

/// The first position >= p of the row `labels` (k entries) whose label is
/// not -1, or k.
inline int64_t nextPresent(const int64_t* labels, int64_t p, int64_t k) {
    while (p < k && labels[p] == -1) ++p;
    return p;
}

/// The head key of shard s at position p of its row (distance row d):
/// (rank << 32) | s, so that equal ranks go to the lower shard; kExhausted
/// when p == k.
template <bool kKeepMax>
inline uint64_t headKey(const float* d, int64_t p, int64_t k, int s) {
    return p == k ? kExhausted : (uint64_t(rankKey<kKeepMax>(d[p])) << 32) | uint32_t(s);
}

/// Merges kQueries consecutive queries, the first at row offset `offset` of
/// every shard, into outD / outI (kQueries * k entries), one output of each in
/// turn; pos, heads: kQueries * nshards entries of scratch. Outputs past a
/// query's last present entry get the padding.
template <bool kKeepMax, int kQueries>
void mergeRows(int64_t k, int nshards, const float* const* distances, const int64_t* const* labels,
               int64_t offset, int64_t* pos, uint64_t* heads, float* outD, int64_t* outI) {
    for (int l = 0; l < kQueries; ++l) {
        const int64_t o = offset + l * k;
        for (int s = 0; s < nshards; ++s) {
            const int64_t p = nextPresent(labels[s] + o, 0, k);
            pos[l * nshards + s] = p;
            heads[l * nshards + s] = headKey<kKeepMax>(distances[s] + o, p, k, s);
        }
    }
    const float pad =
        kKeepMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < k; ++j) {
        for (int l = 0; l < kQueries; ++l) {
            // The best head is the smallest key; a shard's own ties leave in
            // row order since only its head competes.
            const uint64_t* h = heads + l * nshards;
            uint64_t best = h[0];
            for (int s = 1; s < nshards; ++s) best = std::min(best, h[s]);
            const int64_t out = l * k + j;
            if (best == kExhausted) {
                outD[out] = pad;
                outI[out] = -1;
                continue;
            }
            const int s = int(uint32_t(best));
            const int64_t o = offset + l * k;
            const float* dRow = distances[s] + o;
            const int64_t* iRow = labels[s] + o;
            const int64_t p = pos[l * nshards + s];
            outD[out] = dRow[p];
            outI[out] = iRow[p];
            const int64_t next = nextPresent(iRow, p + 1, k);
            pos[l * nshards + s] = next;
            heads[l * nshards + s] = headKey<kKeepMax>(dRow, next, k, s);
        }
    }
}

template <bool kKeepMax>
void mergeAll(int64_t nq, int64_t k, int nshards, const float* const* distances,
              const int64_t* const* labels, float* outDistances, int64_t* outLabels,
              int maxThreads) {
    // An explicit count is honoured even under OMP_NUM_THREADS=1, which a
    // Ray driver beside GPU actors often runs with (the merge's threads are
    // the caller's choice, not the process's default).
    const int allowed = maxThreads > 0 ? maxThreads : omp_get_max_threads();
    const bool parallel = allowed > 1 && nq * k > kParallelMinEntries / nshards;
    const int nthreads = parallel ? allowed : 1;
    // Each thread's read positions and head keys, with a cache line (8
    // entries) between threads; allocated here so that nothing in the
    // parallel region can throw.
    const size_t stride = (size_t(kLanes) * size_t(nshards) + 7) / 8 * 8 + 8;
    std::vector<int64_t> positions(stride * size_t(nthreads));
    std::vector<uint64_t> heads(stride * size_t(nthreads));
    const int64_t groups = nq / kLanes;

#pragma omp parallel num_threads(nthreads) if (parallel)
    {
        const size_t t = stride * size_t(omp_get_thread_num());
        int64_t* pos = positions.data() + t;
        uint64_t* head = heads.data() + t;
#pragma omp for schedule(static)
        for (int64_t g = 0; g < groups; ++g) {
            const int64_t offset = g * kLanes * k;
            mergeRows<kKeepMax, kLanes>(k, nshards, distances, labels, offset, pos, head,
                                        outDistances + offset, outLabels + offset);
        }
        // the last nq % kLanes queries one at a time
#pragma omp for schedule(static)
        for (int64_t q = groups * kLanes; q < nq; ++q) {
            const int64_t offset = q * k;
            mergeRows<kKeepMax, 1>(k, nshards, distances, labels, offset, pos, head,
                                   outDistances + offset, outLabels + offset);
        }
    }
}

}  // namespace

void mergeShardResults(int64_t nq, int64_t k, int nshards, const float* const* distances,
                       const int64_t* const* labels, bool keepMax, float* outDistances,
                       int64_t* outLabels, int maxThreads) {
    FAISS_THROW_IF_NOT_FMT(maxThreads >= 0, "mergeShardResults: maxThreads = %d must be >= 0",
                           maxThreads);
    FAISS_THROW_IF_NOT_FMT(nq >= 0, "mergeShardResults: nq = %lld must be >= 0", (long long)nq);
    FAISS_THROW_IF_NOT_FMT(k > 0, "mergeShardResults: k = %lld must be > 0", (long long)k);
    FAISS_THROW_IF_NOT_FMT(nshards > 0, "mergeShardResults: nshards = %d must be > 0", nshards);
    FAISS_THROW_IF_NOT_FMT(nq <= std::numeric_limits<int64_t>::max() / k,
                           "mergeShardResults: nq = %lld rows of k = %lld results overflow int64",
                           (long long)nq, (long long)k);
    FAISS_THROW_IF_NOT_MSG(distances && labels,
                           "mergeShardResults: null array of shard distances or labels");
    if (nq == 0) return;
    for (int s = 0; s < nshards; ++s) {
        FAISS_THROW_IF_NOT_FMT(distances[s] && labels[s],
                               "mergeShardResults: shard %d of %d has null distances or labels", s,
                               nshards);
    }
    FAISS_THROW_IF_NOT_MSG(outDistances && outLabels,
                           "mergeShardResults: null output distances or labels");

    if (keepMax) {
        mergeAll<true>(nq, k, nshards, distances, labels, outDistances, outLabels, maxThreads);
    } else {
        mergeAll<false>(nq, k, nshards, distances, labels, outDistances, outLabels, maxThreads);
    }
}

}  // namespace faiss_ext
