// Bucket widths from sampled k-th neighbour distances (see BiLevelLSHWidths.h).
// Only host code calls this, for the CPU twin and the GPU index alike, so the
// arithmetic need not be the canonical one of BiLevelLSHCommon.h: it only has
// to be deterministic (no dependence on the thread count).
#include "faiss_ext/BiLevelLSHWidths.h"

#include <faiss/impl/FaissAssert.h>
#include <faiss/utils/distances.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace faiss_ext {
namespace lsh {

namespace {

/// Fewest sampled rows of a group for its own estimate.
constexpr int64_t kMinRowsPerGroup = 8;
/// Sampled neighbours used by the intrinsic-dimension estimate.
constexpr int kDimensionNeighbours = 10;

/// One measured row: its distance at the wanted rank (or the nearest
/// sampled distance and the log ratios for the extrapolation).
struct RowMeasure {
    bool valid = false;
    double atRank = 0;        ///< distance at rank k (m - 1) / (count - 1), when >= 1
    double nearest = 0;       ///< distance to the nearest sampled neighbour
    double meanLogRatio = 0;  ///< (1 / (K - 1)) sum_j<K log(r_K / r_j)
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<int64_t> widthSampleRows(int64_t n, int groups, uint64_t seed) {
    FAISS_THROW_IF_NOT_FMT(n >= 0 && groups >= 1, "widthSampleRows: n %lld, groups %d",
                           (long long)n, groups);
    const int64_t want =
        std::min(kWidthSampleMax, std::max<int64_t>(8192, kWidthSamplePerGroup * groups));
    std::vector<int64_t> rows;
    if (n <= want) {
        rows.resize(n);
        for (int64_t i = 0; i < n; ++i) rows[i] = i;
        return rows;
    }
    // Floyd's sampling of `want` distinct rows, then sorted (reads in order)
    std::mt19937_64 rng(mix64(seed ^ 0x7769647468ULL));
    std::vector<int64_t> chosen;
    chosen.reserve(want);
    std::vector<bool> taken(n, false);
    for (int64_t j = n - want; j < n; ++j) {
        const int64_t t = int64_t(rng() % uint64_t(j + 1));
        const int64_t pick = taken[t] ? j : t;
        taken[pick] = true;
        chosen.push_back(pick);
    }
    std::sort(chosen.begin(), chosen.end());
    return chosen;
}

void neighbourDistanceWidths(BiLevelLSHModel* model, const BiLevelLSHConfig& config,
                             int64_t nSample, const float* sample) {
    FAISS_THROW_IF_NOT_MSG(model && !model->empty(), "neighbourDistanceWidths: no model");
    FAISS_THROW_IF_NOT_FMT(nSample >= 0 && (nSample == 0 || sample),
                           "neighbourDistanceWidths: bad sample (%lld rows)", (long long)nSample);
    const int d = model->d, G = model->groups();
    std::vector<std::vector<int64_t>> members(G);
    for (int64_t i = 0; i < nSample; ++i)
        members[model->leafOf(sample + size_t(i) * d)].push_back(i);

    std::vector<double> scale(G, -1.0);  // k-th neighbour distance, < 0: none
    for (int g = 0; g < G; ++g) {
        const std::vector<int64_t>& mem = members[g];
        const int64_t m = int64_t(mem.size());
        if (m < kMinRowsPerGroup) continue;
        const int64_t count = std::max<int64_t>(model->leafTrainCount[g], m);
        // rank in the sample of the group's k-th neighbour
        const double rank =
            count > 1 ? double(config.widthNeighbours) * double(m - 1) / double(count - 1) : 1.0;
        const int nq = int(std::min<int64_t>(m, kWidthQueriesPerGroup));
        const int K = int(std::min<int64_t>(
            m - 1, std::max<int64_t>(kDimensionNeighbours, int64_t(std::ceil(rank)) + 1)));
        std::vector<RowMeasure> rows(nq);
#pragma omp parallel for schedule(dynamic)
        for (int qi = 0; qi < nq; ++qi) {
            const int64_t self = int64_t(qi) * m / nq;  // spread over the group
            const float* q = sample + size_t(mem[self]) * d;
            std::vector<float> dist;
            dist.reserve(m - 1);
            for (int64_t j = 0; j < m; ++j)
                if (j != self) dist.push_back(faiss::fvec_L2sqr(q, sample + size_t(mem[j]) * d, d));
            std::partial_sort(dist.begin(), dist.begin() + K, dist.end());
            RowMeasure& r = rows[qi];
            auto at = [&](int rank1) { return std::sqrt(double(dist[rank1 - 1])); };  // 1-based
            r.nearest = at(1);
            if (rank >= 1.0) {
                const int lo = std::min(K, int(std::floor(rank)));
                const int hi = std::min(K, lo + 1);
                const double f = std::min(1.0, rank - double(lo));
                r.atRank = at(lo) + f * (at(hi) - at(lo));
                r.valid = r.atRank > 0;
            } else if (r.nearest > 0 && K >= 2) {
                double s = 0;
                for (int j = 1; j < K; ++j) s += std::log(at(K) / at(j));
                r.meanLogRatio = s / double(K - 1);
                r.valid = r.meanLogRatio > 0;
            }
        }
        std::vector<double> values;
        if (rank >= 1.0) {
            for (const RowMeasure& r : rows)
                if (r.valid) values.push_back(r.atRank);
        } else {
            // MacKay & Ghahramani's pooling of Levina & Bickel's estimate:
            // average the inverse dimensions, then invert
            double inv = 0;
            int used = 0;
            for (const RowMeasure& r : rows)
                if (r.valid) {
                    inv += r.meanLogRatio;
                    ++used;
                }
            if (used == 0) continue;
            double dim = double(used) / inv;
            dim = std::min(double(d), std::max(1.0, dim));
            const double shrink = std::pow(rank, 1.0 / dim);
            for (const RowMeasure& r : rows)
                if (r.valid) values.push_back(r.nearest * shrink);
        }
        if (values.size() * 2 < rows.size()) continue;  // mostly duplicates
        scale[g] = median(values);
    }
    std::vector<double> known;
    for (int g = 0; g < G; ++g)
        if (scale[g] > 0) known.push_back(scale[g]);
    if (known.empty()) return;  // the RMS widths setLeaves set stay
    const double fallback = median(known);
    for (int g = 0; g < G; ++g) {
        const double s = scale[g] > 0 ? scale[g] : fallback;
        const float w = float(double(config.bucketWidth) * s);
        if (w > 0.f && std::isfinite(w)) model->leafWidth[g] = w;
    }
}

void widthsFromHostData(BiLevelLSHModel* model, const BiLevelLSHConfig& config, int64_t n,
                        const float* x) {
    if (config.widthRule != BiLevelWidthRule::NeighbourDistance) return;
    const std::vector<int64_t> rows = widthSampleRows(n, model->groups(), config.seed);
    const int d = model->d;
    std::vector<float> sample(rows.size() * size_t(d));
    for (size_t i = 0; i < rows.size(); ++i)
        std::copy(x + size_t(rows[i]) * d, x + size_t(rows[i] + 1) * d,
                  sample.begin() + i * size_t(d));
    neighbourDistanceWidths(model, config, int64_t(rows.size()), sample.data());
}

}  // namespace lsh
}  // namespace faiss_ext
