// The Bi-level LSH autotuner (see BiLevelLSHAutoTune.h).
#include "faiss_ext/BiLevelLSHAutoTune.h"

#include "faiss_ext/IndexBiLevelLSH.h"

#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace faiss_ext {

double BiLevelCostModel::speedup(int64_t ntotal, int d, double candidatesPerQuery) const {
    const double exact = exactSecondsPerQuery + exactSecondsPerFloat * double(ntotal) * double(d);
    const double lsh = lshSecondsPerQuery + lshSecondsPerCandidateFloat * candidatesPerQuery * d;
    return exact / lsh;
}

void BiLevelAutoTuneOptions::check() const {
    const char* who = "BiLevelAutoTuneOptions";
    FAISS_THROW_IF_NOT_FMT(targetRecall > 0 && targetRecall <= 1,
                           "%s: targetRecall must be in (0, 1], got %g", who, targetRecall);
    FAISS_THROW_IF_NOT_FMT(k >= 1 && k <= 1024, "%s: k must be in [1, 1024], got %d", who, k);
    FAISS_THROW_IF_NOT_FMT(validationFraction > 0 && validationFraction < 1,
                           "%s: validationFraction must be in (0, 1), got %g", who,
                           validationFraction);
    FAISS_THROW_IF_NOT_FMT(selectionMargin >= 0 && selectionMargin < 1,
                           "%s: selectionMargin must be in [0, 1), got %g", who, selectionMargin);
    FAISS_THROW_IF_NOT_FMT(!treeDepths.empty() && !tablesProjections.empty() &&
                               !bucketWidths.empty() && !nprobes.empty() &&
                               !groupSettings.empty() && !minCandidates.empty(),
                           "%s: every list of settings to try must be non-empty", who);
    for (int t : treeDepths)
        FAISS_THROW_IF_NOT_FMT(t >= 0 && t <= lsh::kMaxTreeDepth,
                               "%s: treeDepths: %d is not in [0, %d]", who, t, lsh::kMaxTreeDepth);
    for (const auto& lm : tablesProjections)
        FAISS_THROW_IF_NOT_FMT(lm.first >= 1 && lm.first <= lsh::kMaxTables && lm.second >= 1 &&
                                   lm.second <= lsh::kMaxProjections,
                               "%s: tablesProjections: (%d, %d) is not in [1, %d] x [1, %d]", who,
                               lm.first, lm.second, lsh::kMaxTables, lsh::kMaxProjections);
    for (float w : bucketWidths)
        FAISS_THROW_IF_NOT_FMT(std::isfinite(w) && w > 0, "%s: bucketWidths: %g is not > 0", who,
                               double(w));
    for (int p : nprobes)
        FAISS_THROW_IF_NOT_FMT(p >= 1 && p <= lsh::kMaxProbes, "%s: nprobes: %d is not in [1, %d]",
                               who, p, lsh::kMaxProbes);
    for (const auto& g : groupSettings)
        FAISS_THROW_IF_NOT_FMT(g.first >= 1 && g.first <= lsh::kMaxGroupProbes &&
                                   std::isfinite(g.second) && g.second >= 0,
                               "%s: groupSettings: (%d, %g) needs groupProbes in [1, %d] and a "
                               "finite margin >= 0",
                               who, g.first, double(g.second), lsh::kMaxGroupProbes);
    for (int64_t m : minCandidates)
        FAISS_THROW_IF_NOT_FMT(m >= 0, "%s: minCandidates: %lld is not >= 0", who, (long long)m);
    FAISS_THROW_IF_NOT_FMT(!lattices.empty(), "%s: lattices must not be empty", who);
    for (int l : lattices)
        FAISS_THROW_IF_NOT_FMT(l == lsh::kLatticeZM || l == lsh::kLatticeE8,
                               "%s: lattices: %d is neither kLatticeZM (0) nor kLatticeE8 (1)", who,
                               l);
    FAISS_THROW_IF_NOT_FMT(costNtotal >= 0, "%s: costNtotal must be >= 0, got %lld", who,
                           (long long)costNtotal);
    FAISS_THROW_IF_NOT_FMT(cost.exactSecondsPerQuery >= 0 && cost.exactSecondsPerFloat > 0 &&
                               cost.lshSecondsPerQuery > 0 && cost.lshSecondsPerCandidateFloat > 0,
                           "%s: the cost model's constants must be > 0 (exactSecondsPerQuery "
                           ">= 0)",
                           who);
    base.check();
}

double recallAgainstExact(int64_t nq, int k, const int64_t* labels, const int64_t* exact) {
    if (nq <= 0) return 0;
    int64_t found = 0;
    for (int64_t i = 0; i < nq; ++i) {
        const int64_t* e = exact + size_t(i) * k;
        const int64_t* l = labels + size_t(i) * k;
        for (int a = 0; a < k; ++a) {
            if (e[a] < 0) continue;
            for (int b = 0; b < k; ++b)
                if (l[b] == e[a]) {
                    ++found;
                    break;
                }
        }
    }
    return double(found) / (double(nq) * k);
}

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
    std::vector<float> D(size_t(nq) * k);
    index_->search(nq, q, k, D.data(), labels, &params);
    const int64_t nc = std::min(nq, kTuneCandidateQueries);
    std::vector<int64_t> lims, ids;
    index_->getCandidates(nc, q, k, &lims, &ids, &params);
    *meanCandidates = nc > 0 ? double(lims[nc]) / double(nc) : 0;
}

void BiLevelTuneEvaluatorCpu::exactSearch(int d, int64_t n, const float* x, int64_t nq,
                                          const float* q, int k, int64_t* labels) {
    faiss::IndexFlatL2 flat(d);
    flat.add(n, x);
    std::vector<float> D(size_t(nq) * k);
    flat.search(nq, q, k, D.data(), labels);
}

namespace {

SearchParametersBiLevelLSH searchOf(const BiLevelLSHConfig& c) {
    SearchParametersBiLevelLSH p;
    p.nprobe = c.defaultNprobe;
    p.groupProbes = c.defaultGroupProbes;
    p.groupMargin = c.defaultGroupMargin;
    p.minCandidates = c.defaultMinCandidates;
    return p;
}

std::string describe(const BiLevelLSHConfig& c) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "depth %d, L %d, M %d%s, W %g x k-th neighbour distance, nprobe %d, "
                  "groupProbes %d, groupMargin %g, minCandidates %lld",
                  c.treeDepth, c.nTables, c.nProjections, c.lattice == lsh::kLatticeE8 ? " (E8)" : "",
                  double(c.bucketWidth), c.defaultNprobe,
                  c.defaultGroupProbes, double(c.defaultGroupMargin),
                  (long long)c.defaultMinCandidates);
    return buf;
}

}  // namespace

BiLevelAutoTuneResult autoTuneBiLevelLSH(int d, int64_t n, const float* x, int64_t nq,
                                         const float* q, const BiLevelAutoTuneOptions& options,
                                         BiLevelTuneEvaluator* evaluator,
                                         const std::vector<BiLevelTunePoint>* measured) {
    const char* who = "autoTuneBiLevelLSH";
    options.check();
    FAISS_THROW_IF_NOT_FMT(d > 0, "%s: d must be > 0, got %d", who, d);
    FAISS_THROW_IF_NOT_FMT(n >= 64, "%s: needs a database of at least 64 vectors, got %lld", who,
                           (long long)n);
    FAISS_THROW_IF_NOT_FMT(n >= options.k, "%s: the database (%lld) is smaller than k = %d", who,
                           (long long)n, options.k);
    FAISS_THROW_IF_NOT_FMT(nq >= 10, "%s: needs at least 10 held-out queries, got %lld", who,
                           (long long)nq);
    FAISS_THROW_IF_NOT_MSG(x && q && evaluator, "autoTuneBiLevelLSH: null argument");
    checkFiniteVectors(who, n, d, x);
    checkFiniteVectors(who, nq, d, q);

    const int k = options.k;
    const int64_t nVal = std::max<int64_t>(
        1, std::min<int64_t>(nq - 1, int64_t(std::llround(double(nq) * options.validationFraction))));
    const int64_t nSel = nq - nVal;
    const float* qVal = q + size_t(nSel) * d;
    std::vector<int64_t> exact(size_t(nq) * k);
    evaluator->exactSearch(d, n, x, nq, q, k, exact.data());
    const int64_t costN = options.costNtotal > 0 ? options.costNtotal : n;
    const double goal = std::min(1.0, options.targetRecall + options.selectionMargin);

    BiLevelAutoTuneResult res;
    std::vector<int64_t> labels(size_t(nSel) * k);
    if (measured) res.points = *measured;
    for (int depth : options.treeDepths) {
        if (measured) break;
        if ((int64_t(64) << depth) > n) continue;
        for (int lattice : options.lattices)
        for (const auto& lm : options.tablesProjections) {
            if (lattice == lsh::kLatticeE8 && lm.second % 8 != 0) continue;
            std::vector<float> widths = options.bucketWidths;
            std::sort(widths.begin(), widths.end());
            for (float w : widths) {
                BiLevelLSHConfig cfg = options.base;
                cfg.treeDepth = depth;
                cfg.nTables = lm.first;
                cfg.nProjections = lm.second;
                cfg.bucketWidth = w;
                cfg.lattice = lattice;
                cfg.widthRule = BiLevelWidthRule::NeighbourDistance;
                cfg.widthNeighbours = k;
                cfg.autotuneRecall = 0.f;  // the candidates do not tune again
                const double t0 = lshWallSeconds();
                evaluator->build(cfg, d, n, x);
                ++res.builds;
                if (options.verbose)
                    std::printf("[autotune] build depth %d, L %d, M %d, W %g%s: %.2f s\n", depth,
                                lm.first, lm.second, double(w),
                                lattice == lsh::kLatticeE8 ? ", E8" : "", lshWallSeconds() - t0);
                const int maxProbe =
                    lattice == lsh::kLatticeE8
                        ? 1
                        : std::min(lsh::kMaxProbes, 1 + lsh::maxPerturbations(cfg.nProjections));
                bool reachedAtFirstProbe = false;
                for (const auto& gs : options.groupSettings) {
                    if (depth == 0 && (gs.first != 1 || gs.second != 0.f)) continue;
                    if (gs.first > (1 << depth)) continue;
                    for (int64_t minC : options.minCandidates) {
                        bool first = true;
                        for (int np : options.nprobes) {
                            if (np > maxProbe) continue;
                            BiLevelTunePoint pt;
                            pt.config = cfg;
                            pt.config.defaultNprobe = np;
                            pt.config.defaultGroupProbes = gs.first;
                            pt.config.defaultGroupMargin = gs.second;
                            pt.config.defaultMinCandidates = minC;
                            evaluator->search(nSel, q, k, searchOf(pt.config), labels.data(),
                                              &pt.candidates);
                            pt.recall = recallAgainstExact(nSel, k, labels.data(), exact.data());
                            pt.predictedSpeedup = options.cost.speedup(costN, d, pt.candidates);
                            res.points.push_back(pt);
                            if (options.verbose)
                                std::printf("[autotune]   %s: recall %.4f, %.0f candidates, "
                                            "predicted %.2fx exact\n",
                                            describe(pt.config).c_str(), pt.recall, pt.candidates,
                                            pt.predictedSpeedup);
                            const bool reached = pt.recall >= goal;
                            if (reached && first && gs.first == 1) reachedAtFirstProbe = true;
                            first = false;
                            if (reached) break;  // further probes only cost more
                        }
                    }
                }
                // a wider bucket only adds candidates to a width that reached
                // the target with the cheapest search
                if (reachedAtFirstProbe) break;
            }
        }
    }
    FAISS_THROW_IF_NOT_FMT(!res.points.empty(),
                           "%s: no build setting fits a database of %lld vectors (tree depths "
                           "need 64 x 2^depth)",
                           who, (long long)n);

    int chosen = -1;
    for (size_t i = 0; i < res.points.size(); ++i) {
        const BiLevelTunePoint& p = res.points[i];
        if (p.recall >= goal &&
            (chosen < 0 || p.predictedSpeedup > res.points[chosen].predictedSpeedup))
            chosen = int(i);
    }
    res.reachedTarget = chosen >= 0;
    if (!res.reachedTarget) {
        for (size_t i = 0; i < res.points.size(); ++i) {
            const BiLevelTunePoint& p = res.points[i];
            if (chosen < 0 || p.recall > res.points[chosen].recall ||
                (p.recall == res.points[chosen].recall &&
                 p.predictedSpeedup > res.points[chosen].predictedSpeedup))
                chosen = int(i);
        }
    }
    const BiLevelTunePoint& best = res.points[chosen];
    res.config = best.config;
    res.selectionRecall = best.recall;

    // the reported recall: queries that took no part in the choice
    evaluator->build(res.config, d, n, x);
    ++res.builds;
    std::vector<int64_t> valLabels(size_t(nVal) * k);
    evaluator->search(nVal, qVal, k, searchOf(res.config), valLabels.data(), &res.candidates);
    res.recall = recallAgainstExact(nVal, k, valLabels.data(), exact.data() + size_t(nSel) * k);
    res.predictedSpeedup = options.cost.speedup(costN, d, res.candidates);
    res.beatsExact = res.reachedTarget && res.predictedSpeedup > 1.0;

    char buf[1024];
    if (!res.reachedTarget) {
        std::snprintf(buf, sizeof(buf),
                      "Bi-level LSH cannot reach recall@%d %.3g on these data with the settings "
                      "tried: the best reached %.4f (%s), at a predicted %.2fx the throughput of "
                      "exact search; use exact search (GpuIndexQuickSelectFlat) or a graph index",
                      k, options.targetRecall, res.recall, describe(res.config).c_str(),
                      res.predictedSpeedup);
    } else if (!res.beatsExact) {
        std::snprintf(buf, sizeof(buf),
                      "Bi-level LSH cannot beat exact search on these data: recall@%d %.4f "
                      "(%s) is predicted at %.2fx the throughput of exact search; use exact "
                      "search (GpuIndexQuickSelectFlat)",
                      k, res.recall, describe(res.config).c_str(), res.predictedSpeedup);
    } else {
        std::snprintf(buf, sizeof(buf),
                      "Bi-level LSH reaches recall@%d %.4f on held-out queries (target %.3g) at a "
                      "predicted %.2fx the throughput of exact search, %.0f candidates per "
                      "query: %s",
                      k, res.recall, options.targetRecall, res.predictedSpeedup, res.candidates,
                      describe(res.config).c_str());
    }
    res.verdict = buf;
    if (options.verbose) std::printf("[autotune] %s (%d builds)\n", buf, res.builds);
    return res;
}

BiLevelAutoTuneResult autoTuneForTraining(const BiLevelLSHConfig& config, int d, int64_t n,
                                          const float* x, bool verbose,
                                          BiLevelTuneEvaluator* evaluator) {
    FAISS_THROW_IF_NOT_FMT(n >= kMinAutoTuneTrainingVectors,
                           "BiLevelLSH autotuning needs at least %lld training vectors, got %lld",
                           (long long)kMinAutoTuneTrainingVectors, (long long)n);
    const int64_t held = std::min<int64_t>(1000, n / 5);
    BiLevelAutoTuneOptions opt;
    opt.targetRecall = config.autotuneRecall;
    opt.k = config.widthNeighbours;
    opt.base = config;
    opt.base.autotuneRecall = 0.f;
    opt.verbose = verbose;
    BiLevelAutoTuneResult r =
        autoTuneBiLevelLSH(d, n - held, x, held, x + size_t(n - held) * d, opt, evaluator);
    r.config.autotuneRecall = config.autotuneRecall;
    return r;
}

}  // namespace faiss_ext
