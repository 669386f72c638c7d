// IndexBiLevelLSH: Bi-level LSH on the CPU (see IndexBiLevelLSH.h). Built
// with -ffp-contract=off: every leaf and code uses the canonical arithmetic
// of BiLevelLSHCommon.h so that GpuIndexBiLevelLSH reproduces them.
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/BiLevelLSHWidths.h"
#include "faiss_ext/Metric.h"

#include <faiss/impl/IDSelector.h>
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/utils/Heap.h>
#include <faiss/utils/distances.h>

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>

namespace faiss_ext {

namespace lsh {

namespace {

/// Clustered mean (section 4.2) of the groups of perm: per group and
/// dimension, double sums over chunks of kClusteredChunk positions in
/// order, then over the chunks in order.
void clusteredMeans(const float* x, int d, const std::vector<int64_t>& perm,
                    const std::vector<int64_t>& starts, std::vector<float>* means) {
    const int G = int(starts.size()) - 1;
    means->assign(size_t(G) * d, 0.f);
#pragma omp parallel for schedule(dynamic)
    for (int g = 0; g < G; ++g) {
        const int64_t b = starts[g], e = starts[g + 1];
        if (e <= b) continue;
        std::vector<double> total(d, 0.0), part(d);
        for (int64_t c0 = b; c0 < e; c0 += kClusteredChunk) {
            const int64_t c1 = std::min<int64_t>(e, c0 + kClusteredChunk);
            std::fill(part.begin(), part.end(), 0.0);
            for (int64_t r = c0; r < c1; ++r) {
                const float* row = x + size_t(perm[r]) * d;
                for (int j = 0; j < d; ++j) part[j] += double(row[j]);
            }
            for (int j = 0; j < d; ++j) total[j] += part[j];
        }
        for (int j = 0; j < d; ++j) (*means)[size_t(g) * d + j] = float(total[j] / double(e - b));
    }
}

/// Clustered sum of a per-position scalar, same chunking, divided by count.
std::vector<double> clusteredAverage(const std::vector<float>& v,
                                     const std::vector<int64_t>& starts) {
    const int G = int(starts.size()) - 1;
    std::vector<double> out(G, 0.0);
#pragma omp parallel for schedule(dynamic)
    for (int g = 0; g < G; ++g) {
        const int64_t b = starts[g], e = starts[g + 1];
        if (e <= b) continue;
        double total = 0.0;
        for (int64_t c0 = b; c0 < e; c0 += kClusteredChunk) {
            const int64_t c1 = std::min<int64_t>(e, c0 + kClusteredChunk);
            double part = 0.0;
            for (int64_t r = c0; r < c1; ++r) part += double(v[r]);
            total += part;
        }
        out[g] = total / double(e - b);
    }
    return out;
}

/// Farthest position of [b, e) from ref (ties: the first); returns the
/// squared distance.
float farthest(const float* x, int d, const std::vector<int64_t>& perm, int64_t b, int64_t e,
               const float* ref, int64_t* pos) {
    float best = -1.f;
    int64_t bestPos = b;
    for (int64_t r = b; r < e; ++r) {
        const float dist = canonicalL2Sq(x + size_t(perm[r]) * d, ref, d);
        if (dist > best) {
            best = dist;
            bestPos = r;
        }
    }
    *pos = bestPos;
    return best;
}

/// Egecioglu & Kalantari's diameter approximation (Algorithm 1) of [b, e).
float approxDiameter(const float* x, int d, const std::vector<int64_t>& perm, int64_t b,
                     int64_t e, int64_t startPos, int iterations) {
    if (e - b < 2) return 0.f;
    std::vector<float> P(x + size_t(perm[b + startPos]) * d, x + size_t(perm[b + startPos]) * d + d);
    float best = 0.f;
    for (int it = 0; it < iterations; ++it) {
        int64_t q1 = 0, q2 = 0;
        const float psi = sqrtRn(farthest(x, d, perm, b, e, P.data(), &q1));
        const float* Q = x + size_t(perm[q1]) * d;
        const float psi2 = sqrtRn(farthest(x, d, perm, b, e, Q, &q2));
        if (!(psi2 > best)) break;
        best = psi2;
        const float ratio = divRn(psi, psi2);
        for (int j = 0; j < d; ++j) P[j] = addRn(Q[j], mulRn(ratio, subRn(P[j], Q[j])));
    }
    return best;
}

}  // namespace

void trainTreeCpu(BiLevelLSHModel* model, const BiLevelLSHConfig& config, int64_t n,
                  const float* x, bool verbose) {
    const int d = model->d;
    const int depth = model->depth;
    std::vector<int64_t> perm(n);
    std::iota(perm.begin(), perm.end(), int64_t(0));
    std::vector<int64_t> starts = {0, n};
    std::vector<float> means, sqd(n), keys(n);
    for (int level = 0; level <= depth; ++level) {
        const double t0 = lshWallSeconds();
        const int G = 1 << level;
        clusteredMeans(x, d, perm, starts, &means);
#pragma omp parallel for schedule(static)
        for (int g = 0; g < G; ++g)
            for (int64_t r = starts[g]; r < starts[g + 1]; ++r)
                sqd[r] = canonicalL2Sq(x + size_t(perm[r]) * d, means.data() + size_t(g) * d, d);
        const std::vector<double> avgSq = clusteredAverage(sqd, starts);
        std::vector<int64_t> counts(G);
        for (int g = 0; g < G; ++g) counts[g] = starts[g + 1] - starts[g];
        if (level == depth) {
            model->setLeaves(means, avgSq, counts, config.bucketWidth);
            break;
        }
        std::vector<int64_t> next(2 * G + 1);
        int projectionSplits = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : projectionSplits)
        for (int g = 0; g < G; ++g) {
            const int node = G - 1 + g;
            const int64_t b = starts[g], e = starts[g + 1], cnt = e - b;
            next[2 * g] = b;
            if (cnt < 2) {
                model->nodeRule[node] = kRuleProjection;
                model->nodeThreshold[node] = std::numeric_limits<float>::infinity();
                next[2 * g + 1] = e;
                continue;
            }
            const float diam = approxDiameter(
                x, d, perm, b, e, BiLevelLSHModel::diameterStart(config.seed, level, g, cnt),
                config.diameterIterations);
            const NodeRule rule = BiLevelLSHModel::splitRule(diam, avgSq[g], config.meanRuleC);
            model->nodeRule[node] = rule;
            float* vec = model->nodeVec.data() + size_t(node) * d;
            if (rule == kRuleProjection) {
                ++projectionSplits;
                for (int64_t r = b; r < e; ++r) keys[r] = canonicalDot(vec, x + size_t(perm[r]) * d, d);
            } else {
                std::copy(means.begin() + size_t(g) * d, means.begin() + size_t(g + 1) * d, vec);
                for (int64_t r = b; r < e; ++r) keys[r] = sqd[r];
            }
            // clustered sort of the group by key, stable
            std::vector<int64_t> idx(cnt);
            std::iota(idx.begin(), idx.end(), b);
            std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t c) {
                return orderedFloatBits(keys[a]) < orderedFloatBits(keys[c]);
            });
            std::vector<int64_t> newPerm(cnt);
            std::vector<float> newKeys(cnt);
            for (int64_t i = 0; i < cnt; ++i) {
                newPerm[i] = perm[idx[i]];
                newKeys[i] = keys[idx[i]];
            }
            std::copy(newPerm.begin(), newPerm.end(), perm.begin() + b);
            const int64_t mid = cnt / 2;
            model->nodeThreshold[node] = splitThreshold(newKeys[mid - 1], newKeys[mid]);
            next[2 * g + 1] = b + mid;
        }
        next[2 * G] = n;
        starts.swap(next);
        if (verbose)
            std::printf("BiLevelLSH train: level %d: %d groups split (%d by projection, %d by "
                        "distance to the mean) in %.3f s\n",
                        level, G, projectionSplits, G - projectionSplits, lshWallSeconds() - t0);
    }
}

void bucketKeysFromSorted(const BiLevelLSHModel& model, int64_t n, const int32_t* groupOf,
                          BiLevelLSHTables* tables) {
    const int L = model.nTables;
    uint64_t salt = 0;
    for (int round = 0;; ++round) {
        FAISS_THROW_IF_NOT_MSG(round < 64, "BiLevelLSH: bucket keys keep colliding");
        std::vector<uint64_t> keys;
        std::vector<BucketRange> ranges;
        for (int t = 0; t < L; ++t) {
            const int32_t* ids = tables->sortedIds.data() + size_t(t) * n;
            const uint64_t* codes = tables->sortedCodes.data() + size_t(t) * n;
            int64_t runStart = 0;
            for (int64_t r = 1; r <= n; ++r) {
                if (r < n && groupOf[ids[r - 1]] == groupOf[ids[r]] && codes[r - 1] == codes[r])
                    continue;
                keys.push_back(bucketKey(t, groupOf[ids[runStart]], codes[runStart], salt));
                ranges.push_back({int64_t(t) * n + runStart, r - runStart});
                runStart = r;
            }
        }
        if (!CuckooHashTable::hasRepeatedKeys(keys.data(), keys.size())) {
            tables->bucketKeys.swap(keys);
            tables->bucketRanges.swap(ranges);
            tables->keySalt = salt;
            return;
        }
        salt = mix64(salt + 0x73616c74ULL);
    }
}

void buildTablesCpu(const BiLevelLSHModel& model, const BiLevelLSHConfig& config, int64_t n,
                    const float* x, BiLevelLSHTables* tables, CuckooHashTable* cuckoo,
                    bool verbose) {
    const double t0 = lshWallSeconds();
    const int d = model.d, L = model.nTables, M = model.nProjections, bits = model.bits;
    const int LM = L * M;
    std::vector<int32_t> groupOf(n);
    std::vector<uint64_t> mortons(size_t(L) * n);
#pragma omp parallel
    {
        std::vector<float> p(LM);
        uint32_t u[kMaxProjections];
        float frac[kMaxProjections];
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            const float* xi = x + size_t(i) * d;
            const int g = model.leafOf(xi);
            groupOf[i] = g;
            for (int j = 0; j < LM; ++j) p[j] = canonicalDot(model.proj.data() + size_t(j) * d, xi, d);
            for (int t = 0; t < L; ++t) {
                latticeCoordinates(model.lattice, p.data() + size_t(t) * M,
                                   model.leafOffset.data() + size_t(g) * LM + size_t(t) * M,
                                   model.leafWidth[g], model.projBias.data() + size_t(t) * M, M,
                                   bits, u, frac);
                mortons[size_t(t) * n + i] = mortonCode(u, M, bits);
            }
        }
    }
    BiLevelLSHTables out;
    out.sortedIds.resize(size_t(L) * n);
    out.sortedCodes.resize(size_t(L) * n);
#pragma omp parallel for schedule(dynamic)
    for (int t = 0; t < L; ++t) {
        int32_t* ids = out.sortedIds.data() + size_t(t) * n;
        std::iota(ids, ids + n, 0);
        const uint64_t* mt = mortons.data() + size_t(t) * n;
        std::sort(ids, ids + n, [&](int32_t a, int32_t b) {
            if (groupOf[a] != groupOf[b]) return groupOf[a] < groupOf[b];
            if (mt[a] != mt[b]) return mt[a] < mt[b];
            return a < b;
        });
        uint64_t* codes = out.sortedCodes.data() + size_t(t) * n;
        for (int64_t r = 0; r < n; ++r) codes[r] = mt[ids[r]];
    }
    const int G = model.groups();
    out.groupStart.assign(G + 1, 0);
    for (int64_t i = 0; i < n; ++i) ++out.groupStart[groupOf[i] + 1];
    for (int g = 0; g < G; ++g) out.groupStart[g + 1] += out.groupStart[g];
    bucketKeysFromSorted(model, n, groupOf.data(), &out);
    CuckooHashTable table;
    table.build(out.bucketKeys.data(), out.bucketKeys.size(), config.cuckooSubTables,
                config.cuckooMaxLoad, config.seed ^ 0x637563ULL);
    if (verbose)
        std::printf("BiLevelLSH tables: %lld vectors, %d tables, %zu bucket keys, cuckoo load "
                    "%.3f (%d attempts, %d growths), %.3f s\n",
                    (long long)n, L, out.bucketKeys.size(), table.load(), table.attempts(),
                    table.growths(), lshWallSeconds() - t0);
    *tables = std::move(out);
    *cuckoo = std::move(table);
}

}  // namespace lsh

IndexBiLevelLSH::IndexBiLevelLSH(int d, BiLevelLSHConfig config, faiss::MetricType metric)
        : faiss::Index(d, metric), config_(config) {
    FAISS_THROW_IF_NOT_FMT(d >= 0, "IndexBiLevelLSH: d must be > 0, got %d", d);
    FAISS_THROW_IF_NOT_FMT(metric == faiss::METRIC_L2,
                           "IndexBiLevelLSH: only METRIC_L2 is supported (p-stable LSH), got %d",
                           int(metric));
    config_.check();
    is_trained = false;
}

void IndexBiLevelLSH::train(int64_t n, const float* x) {
    auto lock = writeLock_();
    FAISS_THROW_IF_NOT_FMT(d > 0, "IndexBiLevelLSH::train: the index has dimension %d", d);
    FAISS_THROW_IF_NOT_FMT(ntotal == 0,
                           "IndexBiLevelLSH::train: the index holds %lld vectors; reset() first",
                           (long long)ntotal);
    const bool tune = config_.autotuneRecall > 0.f;
    const int64_t groups = int64_t(1) << config_.treeDepth;
    FAISS_THROW_IF_NOT_FMT(tune || n >= groups,
                           "IndexBiLevelLSH::train: needs at least 2^treeDepth = %lld training "
                           "vectors, got %lld",
                           (long long)groups, (long long)n);
    FAISS_THROW_IF_NOT_FMT(!tune || n >= kMinAutoTuneTrainingVectors,
                           "IndexBiLevelLSH::train: autotuning (autotuneRecall %g) needs at least "
                           "%lld training vectors, got %lld",
                           double(config_.autotuneRecall), (long long)kMinAutoTuneTrainingVectors,
                           (long long)n);
    FAISS_THROW_IF_NOT_MSG(x, "IndexBiLevelLSH::train: x is null");
    checkVectorCount("IndexBiLevelLSH::train", n, d);
    checkFiniteVectors("IndexBiLevelLSH::train", n, d, x);
    BiLevelLSHConfig config = config_;
    std::string verdict;
    if (tune) {
        BiLevelTuneEvaluatorCpu evaluator;
        const BiLevelAutoTuneResult r = autoTuneForTraining(config_, d, n, x, verbose, &evaluator);
        config = r.config;
        verdict = r.verdict;
    }
    BiLevelLSHModel model = BiLevelLSHModel::initRandom(d, config);
    lsh::trainTreeCpu(&model, config, n, x, verbose);
    lsh::widthsFromHostData(&model, config, n, x);
    config_ = config;
    model_ = std::move(model);
    autoTuneVerdict_ = verdict;
    is_trained = true;
}

void IndexBiLevelLSH::add(int64_t n, const float* x) {
    auto lock = writeLock_();
    FAISS_THROW_IF_NOT_MSG(is_trained, "IndexBiLevelLSH::add: train() the index first");
    FAISS_THROW_IF_NOT_FMT(n >= 0, "IndexBiLevelLSH::add: n must be >= 0, got %lld", (long long)n);
    if (n == 0) return;
    FAISS_THROW_IF_NOT_MSG(x, "IndexBiLevelLSH::add: x is null");
    FAISS_THROW_IF_NOT_FMT(n < (int64_t(1) << 31) - 1 - ntotal,
                           "IndexBiLevelLSH::add: at most 2^31 - 2 vectors in all, got %lld + %lld",
                           (long long)ntotal, (long long)n);
    checkVectorCount("IndexBiLevelLSH::add", n, d);
    checkFiniteVectors("IndexBiLevelLSH::add", n, d, x);
    std::vector<float> all;
    all.reserve(vectors_.size() + size_t(n) * d);
    all = vectors_;
    all.insert(all.end(), x, x + size_t(n) * d);
    BiLevelLSHTables tables;
    CuckooHashTable cuckoo;
    lsh::buildTablesCpu(model_, config_, ntotal + n, all.data(), &tables, &cuckoo, verbose);
    vectors_.swap(all);
    tables_ = std::move(tables);
    cuckoo_ = std::move(cuckoo);
    ntotal += n;
}

void IndexBiLevelLSH::reset() {
    auto lock = writeLock_();
    vectors_.clear();
    tables_ = BiLevelLSHTables();
    cuckoo_.clear();
    ntotal = 0;
}

size_t IndexBiLevelLSH::remove_ids(const faiss::IDSelector& sel) {
    auto lock = writeLock_();
    std::vector<float> kept;
    kept.reserve(vectors_.size());
    int64_t n = 0;
    for (int64_t i = 0; i < ntotal; ++i) {
        if (sel.is_member(i)) continue;
        const float* row = vectors_.data() + size_t(i) * d;
        kept.insert(kept.end(), row, row + d);
        ++n;
    }
    const size_t removed = size_t(ntotal - n);
    if (removed == 0) return 0;
    // the new tables first: on error the index stays as it was
    BiLevelLSHTables tables;
    CuckooHashTable cuckoo;
    if (n > 0) lsh::buildTablesCpu(model_, config_, n, kept.data(), &tables, &cuckoo, verbose);
    vectors_.swap(kept);
    tables_ = std::move(tables);
    cuckoo_ = std::move(cuckoo);
    ntotal = n;
    return removed;
}

void IndexBiLevelLSH::reconstruct(int64_t key, float* recons) const {
    auto lock = readLock_();
    FAISS_THROW_IF_NOT_FMT(key >= 0 && key < ntotal,
                           "IndexBiLevelLSH::reconstruct: key %lld out of [0, %lld)",
                           (long long)key, (long long)ntotal);
    std::memcpy(recons, vectors_.data() + size_t(key) * d, sizeof(float) * d);
}

void IndexBiLevelLSH::reconstruct_n(int64_t i0, int64_t ni, float* recons) const {
    auto lock = readLock_();
    FAISS_THROW_IF_NOT_FMT(i0 >= 0 && ni >= 0 && ni <= ntotal - i0,
                           "IndexBiLevelLSH::reconstruct_n: range [%lld, %lld + %lld) out of "
                           "[0, %lld)",
                           (long long)i0, (long long)i0, (long long)ni, (long long)ntotal);
    if (ni == 0) return;
    FAISS_THROW_IF_NOT_MSG(recons, "IndexBiLevelLSH::reconstruct_n: recons is null");
    std::memcpy(recons, vectors_.data() + size_t(i0) * d, sizeof(float) * size_t(ni) * d);
}

void IndexBiLevelLSH::checkQueryArgs_(const char* name, int64_t n, const float* x,
                                      int64_t k) const {
    FAISS_THROW_IF_NOT_FMT(n >= 0, "%s: n must be >= 0, got %lld", name, (long long)n);
    FAISS_THROW_IF_NOT_FMT(k > 0, "%s: k must be > 0, got %lld", name, (long long)k);
    FAISS_THROW_IF_NOT_FMT(is_trained, "%s: the index is not trained", name);
    FAISS_THROW_IF_NOT_FMT(n == 0 || x, "%s: x is null", name);
    checkVectorCount(name, n, d);
    FAISS_THROW_IF_NOT_FMT(uint64_t(n) <= uint64_t(SIZE_MAX / 16) / uint64_t(k),
                           "%s: n x k = %lld x %lld results overflow the address space", name,
                           (long long)n, (long long)k);
    if (n > 0) checkFiniteVectors(name, n, d, x);
}

namespace {

/// Distinct candidate ids of query q (sorted) into out.
void collectCandidates(const BiLevelLSHModel& model, const BiLevelLSHTables& tables,
                       const CuckooHashTable& cuckoo, int64_t ntotal, const float* q,
                       const BiLevelSearchSettings& s, std::vector<int32_t>* out) {
    out->clear();
    if (ntotal == 0) return;
    const int d = model.d, M = model.nProjections, LM = model.nTables * M;
    int groups[lsh::kMaxGroupProbes];
    const int ng = lsh::bestGroups(model.nodeRule.data(), model.nodeVec.data(),
                                   model.nodeThreshold.data(), model.depth, d, q, s.groupProbes,
                                   groups, model.leafWidth.data(), s.groupMargin);
    const lsh::CuckooView view = cuckoo.view();
    uint32_t u[lsh::kMaxProjections];
    float frac[lsh::kMaxProjections];
    float p[lsh::kMaxProjections];
    lsh::Interval iv[lsh::kMaxProbes + 1];
    for (int t = 0; t < s.tables; ++t) {
        for (int m = 0; m < M; ++m)
            p[m] = lsh::canonicalDot(model.proj.data() + size_t(t * M + m) * d, q, d);
        for (int gi = 0; gi < ng; ++gi) {
            const int g = groups[gi];
            lsh::latticeCoordinates(model.lattice, p,
                                    model.leafOffset.data() + size_t(g) * LM + size_t(t) * M,
                                    model.leafWidth[g], model.projBias.data() + size_t(t) * M, M,
                                    model.bits, u, frac);
            const int ni = lsh::collectIntervals(
                t, g, u, frac, M, model.bits, s.nprobe, s.minCandidates, tables.keySalt, view,
                tables.bucketRanges.data(), tables.sortedCodes.data() + size_t(t) * ntotal,
                tables.groupStart[g], tables.groupStart[g + 1], int64_t(t) * ntotal, iv);
            for (int i = 0; i < ni; ++i)
                out->insert(out->end(), tables.sortedIds.begin() + iv[i].start,
                            tables.sortedIds.begin() + iv[i].start + iv[i].count);
        }
    }
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
}

}  // namespace

void IndexBiLevelLSH::search(int64_t n, const float* x, int64_t k, float* distances,
                             int64_t* labels, const faiss::SearchParameters* params) const {
    auto lock = readLock_();
    checkQueryArgs_("IndexBiLevelLSH::search", n, x, k);
    FAISS_THROW_IF_NOT_MSG(n == 0 || (distances && labels),
                           "IndexBiLevelLSH::search: distances and labels must not be null");
    const BiLevelSearchSettings s = resolveBiLevelSearch(params, k, model_, config_);
    // a selector drops candidates before scoring: only selected vectors are returned
    const faiss::IDSelector* sel = params ? params->sel : nullptr;
#pragma omp parallel if (n > 1)
    {
        std::vector<int32_t> cand;
#pragma omp for schedule(dynamic, 4)
        for (int64_t i = 0; i < n; ++i) {
            const float* q = x + size_t(i) * d;
            float* D = distances + size_t(i) * k;
            int64_t* I = labels + size_t(i) * k;
            collectCandidates(model_, tables_, cuckoo_, ntotal, q, s, &cand);
            faiss::maxheap_heapify(k, D, I);
            for (int32_t c : cand) {
                if (sel && !sel->is_member(c)) continue;
                const float dist = faiss::fvec_L2sqr(q, vectors_.data() + size_t(c) * d, d);
                if (dist < D[0] || (dist == D[0] && c < I[0]))
                    faiss::maxheap_replace_top(k, D, I, dist, int64_t(c));
            }
            faiss::maxheap_reorder(k, D, I);
            for (int64_t j = 0; j < k; ++j)
                if (I[j] < 0) D[j] = std::numeric_limits<float>::infinity();
        }
    }
}

void IndexBiLevelLSH::getCandidates(int64_t n, const float* x, int64_t k,
                                    std::vector<int64_t>* lims, std::vector<int64_t>* ids,
                                    const faiss::SearchParameters* params) const {
    auto lock = readLock_();
    checkQueryArgs_("IndexBiLevelLSH::getCandidates", n, x, k);
    FAISS_THROW_IF_NOT_MSG(lims && ids, "IndexBiLevelLSH::getCandidates: null output");
    FAISS_THROW_IF_NOT_MSG(!params || !params->sel, "IndexBiLevelLSH::getCandidates: lists "
                           "every candidate; an IDSelector is not applied here (search applies it)");
    const BiLevelSearchSettings s = resolveBiLevelSearch(params, k, model_, config_);
    std::vector<std::vector<int32_t>> per(n);
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t i = 0; i < n; ++i)
        collectCandidates(model_, tables_, cuckoo_, ntotal, x + size_t(i) * d, s, &per[i]);
    lims->assign(n + 1, 0);
    for (int64_t i = 0; i < n; ++i) (*lims)[i + 1] = (*lims)[i] + int64_t(per[i].size());
    ids->resize((*lims)[n]);
    for (int64_t i = 0; i < n; ++i)
        std::copy(per[i].begin(), per[i].end(), ids->begin() + (*lims)[i]);
}

std::vector<int64_t> IndexBiLevelLSH::groupSizes() const {
    auto lock = readLock_();
    std::vector<int64_t> sizes(is_trained ? model_.groups() : 0, 0);
    if (!is_trained || ntotal == 0) return sizes;
    for (size_t g = 0; g < sizes.size(); ++g)
        sizes[g] = tables_.groupStart[g + 1] - tables_.groupStart[g];
    return sizes;
}

void IndexBiLevelLSH::setContents(const BiLevelLSHConfig& config, BiLevelLSHModel model,
                                  std::vector<float> vectors) {
    auto lock = writeLock_();
    config.check();
    const bool trained = !model.empty();
    if (trained) {
        model.checkConsistent();
        FAISS_THROW_IF_NOT_FMT(model.d == d, "IndexBiLevelLSH::setContents: model d %d != index d %d",
                               model.d, d);
        FAISS_THROW_IF_NOT_MSG(model.depth == config.treeDepth &&
                                   model.nTables == config.nTables &&
                                   model.nProjections == config.nProjections,
                               "IndexBiLevelLSH::setContents: model and configuration disagree");
    }
    FAISS_THROW_IF_NOT_FMT(d > 0 && vectors.size() % size_t(d) == 0,
                           "IndexBiLevelLSH::setContents: %zu floats is not a multiple of d = %d",
                           vectors.size(), d);
    const int64_t n = d > 0 ? int64_t(vectors.size() / d) : 0;
    FAISS_THROW_IF_NOT_MSG(trained || n == 0,
                           "IndexBiLevelLSH::setContents: vectors need a trained model");
    FAISS_THROW_IF_NOT_FMT(n < (int64_t(1) << 31) - 1,
                           "IndexBiLevelLSH::setContents: too many vectors (%lld)", (long long)n);
    if (n > 0) checkFiniteVectors("IndexBiLevelLSH::setContents", n, d, vectors.data());
    BiLevelLSHTables tables;
    CuckooHashTable cuckoo;
    if (n > 0) lsh::buildTablesCpu(model, config, n, vectors.data(), &tables, &cuckoo, verbose);
    config_ = config;
    model_ = std::move(model);
    vectors_.swap(vectors);
    tables_ = std::move(tables);
    cuckoo_ = std::move(cuckoo);
    ntotal = n;
    is_trained = trained;
}

// The CPU evaluator of the tuner (BiLevelLSHAutoTune.h) is defined here,
// with the index it builds, so that the tuner itself needs no index: this
// file includes the tuner's header, the tuner's file not this one's.

BiLevelTuneEvaluatorCpu::BiLevelTuneEvaluatorCpu() = default;
BiLevelTuneEvaluatorCpu::~BiLevelTuneEvaluatorCpu() = default;

void BiLevelTuneEvaluatorCpu::build(const BiLevelLSHConfig& config, int d, int64_t n,
                                    const float* x) {
    auto index = std::make_unique<IndexBiLevelLSH>(d, config);
    index->train(n, x);
    index->add(n, x);
    index_ = std::move(index);
}

void BiLevelTuneEvaluatorCpu::search(int64_t nq, const float* q, int k,
                                     const SearchParametersBiLevelLSH& params, int64_t* labels,
                                     double* meanCandidates) {
    FAISS_THROW_IF_NOT_MSG(index_, "BiLevelTuneEvaluatorCpu::search: build() first");
    searchAndCountCandidates(*index_, nq, q, k, params, labels, meanCandidates);
}

void BiLevelTuneEvaluatorCpu::exactSearch(int d, int64_t n, const float* x, int64_t nq,
                                          const float* q, int k, int64_t* labels) {
    faiss::IndexFlatL2 flat(d);
    flat.add(n, x);
    std::vector<float> D(size_t(nq) * k);
    flat.search(nq, q, k, D.data(), labels);
}

}  // namespace faiss_ext
