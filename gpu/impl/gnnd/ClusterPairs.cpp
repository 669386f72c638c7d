#include "faiss_ext/gpu/impl/gnnd/ClusterPairs.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <limits>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

/// The m clusters (other than a) sharing the most members with cluster a,
/// most shared first, ties to the smaller index. cnt: one zeroed counter
/// per cluster, zeroed again on return.
std::vector<int> closestClusters(int a, const std::vector<std::vector<int>>& groups,
                                 const std::vector<int>& rowGroups, int overlap, int m,
                                 std::vector<int64_t>& cnt) {
    std::vector<int> touched;
    for (int row : groups[a]) {
        for (int j = 0; j < overlap; ++j) {
            const int b = rowGroups[size_t(row) * overlap + j];
            if (b < 0 || b == a) continue;
            if (cnt[b]++ == 0) touched.push_back(b);
        }
    }
    const size_t keep = std::min(touched.size(), size_t(m));
    std::partial_sort(touched.begin(), touched.begin() + keep, touched.end(),
                      [&cnt](int x, int y) { return cnt[x] > cnt[y] || (cnt[x] == cnt[y] && x < y); });
    for (int b : touched) cnt[b] = 0;
    touched.resize(keep);
    return touched;
}

}  // namespace

std::vector<std::pair<int, int>> neighbourPairs(const std::vector<std::vector<int>>& groups,
                                                const std::vector<int>& rowGroups, int overlap,
                                                int m) {
    FAISS_THROW_IF_NOT_FMT(m >= 1 && overlap >= 1, "neighbourPairs: m = %d, overlap = %d", m,
                           overlap);
    const int C = int(groups.size());
    std::vector<std::vector<int>> picks(groups.size());
#pragma omp parallel
    {
        std::vector<int64_t> cnt(size_t(C), 0);
#pragma omp for schedule(dynamic)
        for (int a = 0; a < C; ++a) picks[a] = closestClusters(a, groups, rowGroups, overlap, m, cnt);
    }
    std::vector<std::pair<int, int>> out;
    for (int a = 0; a < C; ++a)
        for (int b : picks[a]) out.emplace_back(std::min(a, b), std::max(a, b));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<MergePiece> mergePieces(int64_t nA, int64_t nB, int64_t capacity) {
    FAISS_THROW_IF_NOT_FMT(capacity >= 2 && nA >= 0 && nB >= 0,
                           "mergePieces: nA = %lld, nB = %lld, capacity = %lld", (long long)nA,
                           (long long)nB, (long long)capacity);
    std::vector<MergePiece> out;
    if (nA == 0 || nB == 0) return out;
    if (nA + nB <= capacity) {
        out.push_back({0, nA, 0, nB});
        return out;
    }
    const int64_t half = capacity / 2;
    const int64_t pa = (nA + half - 1) / half, pb = (nB + half - 1) / half;
    for (int64_t i = 0; i < pa; ++i)
        for (int64_t j = 0; j < pb; ++j)
            out.push_back({i * nA / pa, (i + 1) * nA / pa, j * nB / pb, (j + 1) * nB / pb});
    return out;
}

std::vector<int64_t> positionsNotIn(const std::vector<int>& b, const std::vector<int>& a) {
    std::vector<int64_t> out;
    out.reserve(b.size());
    size_t i = 0;
    for (size_t j = 0; j < b.size(); ++j) {
        while (i < a.size() && a[i] < b[j]) ++i;
        if (i == a.size() || a[i] != b[j]) out.push_back(int64_t(j));
    }
    return out;
}

void pairLocalLists(const int* globalIds, const float* globalDists, int kIn,
                    const std::vector<int>& rows, const std::vector<int>& localOf, int kOut,
                    int* outIds, float* outDists) {
    FAISS_THROW_IF_NOT_FMT(kIn >= 1 && kOut >= kIn, "pairLocalLists: kIn = %d, kOut = %d", kIn,
                           kOut);
    const int64_t m = int64_t(rows.size());
    const int64_t n = int64_t(localOf.size());
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
        const int* gi = globalIds + size_t(rows[r]) * kIn;
        const float* gd = globalDists + size_t(rows[r]) * kIn;
        int* oi = outIds + size_t(r) * kOut;
        float* od = outDists + size_t(r) * kOut;
        int o = 0;
        for (int j = 0; j < kIn; ++j) {
            const int g = gi[j];
            const int l = g >= 0 && g < n ? localOf[g] : -1;
            if (l < 0) continue;
            oi[o] = l;
            od[o++] = gd[j];
        }
        for (; o < kOut; ++o) {
            oi[o] = -1;
            od[o] = std::numeric_limits<float>::infinity();
        }
    }
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
