#include "faiss_ext/gpu/impl/gnnd/PartitionPlan.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

size_t clusterResidentBytes(int64_t rows, int d, int K) {
    return size_t(rows) * (sizeof(float) * (size_t(d) + 1) + (sizeof(int) + sizeof(float)) * K);
}

size_t clusterTempBytes(int64_t rows, const Params& p) {
    return buildTempBytes(rows, p) + (size_t(1) << 20);
}

namespace {

/// The largest m in [minRows, maxRows] with fits(m) (fits is monotone); 0
/// when not even minRows fits.
template <typename Fits>
int64_t largestThatFits(int64_t minRows, int64_t maxRows, Fits fits) {
    if (maxRows < minRows || !fits(minRows)) return 0;
    int64_t lo = minRows, hi = maxRows;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

}  // namespace

int64_t largestBuildThatFits(int64_t minRows, int64_t maxRows, int d, const Params& p,
                             size_t resident, size_t temp) {
    return largestThatFits(minRows, maxRows, [&](int64_t m) {
        return clusterResidentBytes(m, d, p.K) <= resident && clusterTempBytes(m, p) <= temp;
    });
}

size_t mergeTempBytesOf(int64_t rows, const Params& p) {
    return size_t(rows) * p.K * (sizeof(uint32_t) + sizeof(float)) + mergeTempBytes(rows, p) +
           (size_t(1) << 20);
}

int64_t largestMergeThatFits(int64_t minRows, int64_t maxRows, int d, const Params& p,
                             size_t resident, size_t temp) {
    return largestThatFits(minRows, maxRows, [&](int64_t m) {
        return clusterResidentBytes(m, d, p.K) <= resident && mergeTempBytesOf(m, p) <= temp;
    });
}

int clusterCount(int64_t n, int overlap, int64_t capacity, int shards) {
    FAISS_THROW_IF_NOT_FMT(n > 0 && overlap > 0 && capacity > 0,
                           "clusterCount: n = %lld, overlap = %d, capacity = %lld",
                           (long long)n, overlap, (long long)capacity);
    int64_t c = shards > 0 ? shards
                           : int64_t(std::ceil(double(n) * overlap / (capacity * kClusterFill)));
    if (n <= capacity && shards <= 0) c = 1;  // one build holds everything
    return int(std::max<int64_t>(1, std::min<int64_t>(c, n)));
}

namespace {

/// Lists past maxRows cut into equal contiguous pieces.
std::vector<std::vector<int>> splitLarge(std::vector<std::vector<int>> lists, int64_t maxRows) {
    std::vector<std::vector<int>> out;
    for (auto& l : lists) {
        const int64_t m = int64_t(l.size());
        if (m == 0) continue;
        if (m <= maxRows) {
            out.push_back(std::move(l));
            continue;
        }
        const int64_t pieces = (m + maxRows - 1) / maxRows;
        for (int64_t p = 0; p < pieces; ++p)
            out.emplace_back(l.begin() + p * m / pieces, l.begin() + (p + 1) * m / pieces);
    }
    return out;
}

std::vector<int> unite(const std::vector<int>& a, const std::vector<int>& b) {
    std::vector<int> u;
    u.reserve(a.size() + b.size());
    std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(u));
    return u;
}

}  // namespace

std::vector<std::vector<int>> packAndSplit(std::vector<std::vector<int>> lists, int64_t minRows,
                                           int64_t maxRows) {
    FAISS_THROW_IF_NOT_FMT(minRows >= 1 && minRows <= maxRows,
                           "packAndSplit: minRows = %lld, maxRows = %lld", (long long)minRows,
                           (long long)maxRows);
    std::vector<std::vector<int>> big, out;
    std::vector<int> pack;
    for (auto& l : splitLarge(std::move(lists), maxRows)) {
        if (int64_t(l.size()) >= minRows) {
            out.push_back(std::move(l));
            continue;
        }
        std::vector<int> u = unite(pack, l);
        if (int64_t(u.size()) > maxRows) {  // full: start a new pack
            out.push_back(std::move(pack));
            u = std::move(l);
        }
        pack = std::move(u);
        if (int64_t(pack.size()) >= minRows) out.push_back(std::move(pack)), pack.clear();
    }
    if (pack.empty()) return out;
    // a short last pack joins the smallest list that has room for it
    int best = -1;
    for (int i = 0; i < int(out.size()); ++i) {
        if (int64_t(out[i].size() + pack.size()) > maxRows) continue;
        if (best < 0 || out[i].size() < out[best].size()) best = i;
    }
    if (best >= 0) out[best] = unite(out[best], pack);
    else out.push_back(std::move(pack));
    return out;
}

void foldRow(int* gIds, float* gDists, int kOut, const int* ids, const float* dists, int kIn) {
    FAISS_THROW_IF_NOT_FMT(kOut >= 1 && kOut <= kMaxBuildDegree && kIn >= 0,
                           "foldRow: kOut = %d, kIn = %d", kOut, kIn);
    // the ids already in the global list, sorted for binary search; an id
    // found there keeps its global entry (a pair's distance is the same in
    // every cluster: final distances are recomputed exactly in FP32)
    int own[kMaxBuildDegree], outIds[kMaxBuildDegree];
    float outD[kMaxBuildDegree];
    int nOwn = 0;
    for (int j = 0; j < kOut && gIds[j] >= 0; ++j) own[nOwn++] = gIds[j];
    const int nGlobal = nOwn;
    std::sort(own, own + nOwn);
    auto skip = [&](int b) { return ids[b] < 0 || std::binary_search(own, own + nOwn, ids[b]); };
    int a = 0, b = 0, o = 0;
    while (o < kOut) {
        while (b < kIn && skip(b)) ++b;
        const bool haveA = a < nGlobal, haveB = b < kIn;
        if (!haveA && !haveB) break;
        // by (distance, id), so the result does not depend on the fold order
        const bool takeA = haveA && (!haveB || gDists[a] < dists[b] ||
                                     (gDists[a] == dists[b] && gIds[a] < ids[b]));
        if (takeA) {
            outIds[o] = gIds[a];
            outD[o++] = gDists[a++];
        } else {
            outIds[o] = ids[b];
            outD[o++] = dists[b++];
        }
    }
    for (int j = 0; j < kOut; ++j) {
        gIds[j] = j < o ? outIds[j] : -1;
        gDists[j] = j < o ? outD[j] : std::numeric_limits<float>::infinity();
    }
}

void foldCluster(int* globalIds, float* globalDists, int kOut, const std::vector<int>& members,
                 const int* localIds, const float* localDists, int kIn) {
    const int64_t m = int64_t(members.size());
#pragma omp parallel
    {
        std::vector<int> ids(kIn);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < m; ++r) {
            for (int j = 0; j < kIn; ++j) {
                const int l = localIds[size_t(r) * kIn + j];
                ids[j] = l >= 0 && l < m ? members[l] : -1;
            }
            const size_t g = size_t(members[r]) * kOut;
            foldRow(globalIds + g, globalDists + g, kOut, ids.data(), localDists + size_t(r) * kIn,
                    kIn);
        }
    }
}

std::vector<int> rowClusters(const std::vector<std::vector<int>>& lists, int64_t n, int overlap) {
    std::vector<int> out(size_t(n) * overlap, -1);
    std::vector<int> count(size_t(n), 0);
    for (int c = 0; c < int(lists.size()); ++c) {
        for (int r : lists[c]) {
            FAISS_THROW_IF_NOT_FMT(r >= 0 && r < n && count[r] < overlap,
                                   "gnndBuildFromFile: internal error: vector %d in more than %d "
                                   "clusters or out of range",
                                   r, overlap);
            out[size_t(r) * overlap + count[r]++] = c;
        }
    }
    return out;
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
