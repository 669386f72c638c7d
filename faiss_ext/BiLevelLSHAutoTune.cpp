// The Bi-level LSH autotuner (see BiLevelLSHAutoTune.h).
#include "faiss_ext/BiLevelLSHAutoTune.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace faiss_ext {

double BiLevelCostModel::speedup(int64_t ntotal, int d, double candidatesPerQuery) const {
    const double exact = exactSecondsPerQuery + exactSecondsPerFloat * double(ntotal) * double(d) +
                         exactSecondsPerVector * double(ntotal);
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
                               cost.exactSecondsPerVector >= 0 && cost.lshSecondsPerQuery > 0 &&
                               cost.lshSecondsPerCandidateFloat > 0,
                           "%s: the cost model's constants must be > 0 (exactSecondsPerQuery "
                           "and exactSecondsPerVector >= 0)",
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

namespace {

std::string describe(const BiLevelLSHConfig& c) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "depth %d, L %d, M %d%s, W %g x k-th neighbour distance, nprobe %d, "
                  "groupProbes %d, groupMargin %g, minCandidates %lld",
                  c.treeDepth, c.nTables, c.nProjections,
                  c.lattice == lsh::kLatticeE8 ? " (E8)" : "", double(c.bucketWidth),
                  c.defaultNprobe, c.defaultGroupProbes, double(c.defaultGroupMargin),
                  (long long)c.defaultMinCandidates);
    return buf;
}

/// What the sweep of one tuning shares: the database, the selection
/// queries and their exact neighbours, the goal and the cost model.
struct Sweep {
    int d;
    int64_t n;
    const float* x;
    int64_t nSel;
    const float* qSel;
    const int64_t* exact;  ///< nSel x k
    int64_t costN;
    double goal;
    const BiLevelAutoTuneOptions& options;
    BiLevelTuneEvaluator* evaluator;
};

/// Measures one search setting of the built index and records it.
const BiLevelTunePoint& measureSetting(const Sweep& sw, const BiLevelLSHConfig& config,
                                       BiLevelAutoTuneResult* res) {
    const int k = sw.options.k;
    std::vector<int64_t> labels(size_t(sw.nSel) * k);
    BiLevelTunePoint pt;
    pt.config = config;
    sw.evaluator->search(sw.nSel, sw.qSel, k, searchParametersOf(config), labels.data(),
                         &pt.candidates);
    pt.recall = recallAgainstExact(sw.nSel, k, labels.data(), sw.exact);
    pt.predictedSpeedup = sw.options.cost.speedup(sw.costN, sw.d, pt.candidates);
    if (sw.options.verbose)
        std::printf("[autotune]   %s: recall %.4f, %.0f candidates, predicted %.2fx exact\n",
                    describe(config).c_str(), pt.recall, pt.candidates, pt.predictedSpeedup);
    res->points.push_back(pt);
    return res->points.back();
}

/// Builds cfg and runs its ladders: per group setting and minCandidates,
/// nprobe rising until the goal is reached (further probes only cost
/// more). Returns whether the cheapest search (one group, the first
/// nprobe) already reached it.
bool measureBuild(const Sweep& sw, const BiLevelLSHConfig& cfg, BiLevelAutoTuneResult* res) {
    const double t0 = lshWallSeconds();
    sw.evaluator->build(cfg, sw.d, sw.n, sw.x);
    ++res->builds;
    if (sw.options.verbose)
        std::printf("[autotune] build depth %d, L %d, M %d, W %g%s: %.2f s\n", cfg.treeDepth,
                    cfg.nTables, cfg.nProjections, double(cfg.bucketWidth),
                    cfg.lattice == lsh::kLatticeE8 ? ", E8" : "", lshWallSeconds() - t0);
    const int maxProbe =
        cfg.lattice == lsh::kLatticeE8
            ? 1
            : std::min(lsh::kMaxProbes, 1 + lsh::maxPerturbations(cfg.nProjections));
    bool reachedAtFirstProbe = false;
    for (const auto& gs : sw.options.groupSettings) {
        if (cfg.treeDepth == 0 && (gs.first != 1 || gs.second != 0.f)) continue;
        if (gs.first > (1 << cfg.treeDepth)) continue;
        for (int64_t minC : sw.options.minCandidates) {
            bool first = true;
            for (int np : sw.options.nprobes) {
                if (np > maxProbe) continue;
                BiLevelLSHConfig c = cfg;
                c.defaultNprobe = np;
                c.defaultGroupProbes = gs.first;
                c.defaultGroupMargin = gs.second;
                c.defaultMinCandidates = minC;
                const bool reached = measureSetting(sw, c, res).recall >= sw.goal;
                if (reached && first && gs.first == 1) reachedAtFirstProbe = true;
                first = false;
                if (reached) break;
            }
        }
    }
    return reachedAtFirstProbe;
}

/// Every build of the search space (depths that fit n, lattices that fit
/// M), widths ascending: a wider bucket only adds candidates to a width
/// that reached the goal with the cheapest search, so the rest are skipped.
void sweepBuilds(const Sweep& sw, BiLevelAutoTuneResult* res) {
    const BiLevelAutoTuneOptions& o = sw.options;
    std::vector<float> widths = o.bucketWidths;
    std::sort(widths.begin(), widths.end());
    for (int depth : o.treeDepths) {
        if ((int64_t(64) << depth) > sw.n) continue;
        for (int lattice : o.lattices) {
            for (const auto& lm : o.tablesProjections) {
                if (lattice == lsh::kLatticeE8 && lm.second % 8 != 0) continue;
                for (float w : widths) {
                    BiLevelLSHConfig cfg = o.base;
                    cfg.treeDepth = depth;
                    cfg.nTables = lm.first;
                    cfg.nProjections = lm.second;
                    cfg.bucketWidth = w;
                    cfg.lattice = lattice;
                    cfg.widthRule = BiLevelWidthRule::NeighbourDistance;
                    cfg.widthNeighbours = o.k;
                    cfg.autotuneRecall = 0.f;  // the candidates do not tune again
                    if (measureBuild(sw, cfg, res)) break;
                }
            }
        }
    }
}

/// The fastest point reaching the goal, else the most accurate (ties: the
/// fastest); -1 when there are none.
int choosePoint(const std::vector<BiLevelTunePoint>& points, double goal) {
    int chosen = -1;
    for (size_t i = 0; i < points.size(); ++i)
        if (points[i].recall >= goal &&
            (chosen < 0 || points[i].predictedSpeedup > points[chosen].predictedSpeedup))
            chosen = int(i);
    if (chosen >= 0) return chosen;
    for (size_t i = 0; i < points.size(); ++i) {
        const BiLevelTunePoint& p = points[i];
        if (chosen < 0 || p.recall > points[chosen].recall ||
            (p.recall == points[chosen].recall &&
             p.predictedSpeedup > points[chosen].predictedSpeedup))
            chosen = int(i);
    }
    return chosen;
}

/// The plain sentence of a result.
std::string verdictOf(const BiLevelAutoTuneResult& res, const BiLevelAutoTuneOptions& options) {
    char buf[1024];
    const int k = options.k;
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

    // selection queries first, validation queries (the reported recall) last
    const int k = options.k;
    const int64_t nVal = std::max<int64_t>(
        1,
        std::min<int64_t>(nq - 1, int64_t(std::llround(double(nq) * options.validationFraction))));
    const int64_t nSel = nq - nVal;
    std::vector<int64_t> exact(size_t(nq) * k);
    evaluator->exactSearch(d, n, x, nq, q, k, exact.data());
    const Sweep sw{d,
                   n,
                   x,
                   nSel,
                   q,
                   exact.data(),
                   options.costNtotal > 0 ? options.costNtotal : n,
                   std::min(1.0, options.targetRecall + options.selectionMargin),
                   options,
                   evaluator};

    BiLevelAutoTuneResult res;
    if (measured)
        res.points = *measured;
    else
        sweepBuilds(sw, &res);
    FAISS_THROW_IF_NOT_FMT(!res.points.empty(),
                           "%s: no build setting fits a database of %lld vectors (tree depths "
                           "need 64 x 2^depth)",
                           who, (long long)n);
    const int chosen = choosePoint(res.points, sw.goal);
    res.reachedTarget = res.points[chosen].recall >= sw.goal;
    res.config = res.points[chosen].config;
    res.selectionRecall = res.points[chosen].recall;

    // the reported recall: queries that took no part in the choice
    evaluator->build(res.config, d, n, x);
    ++res.builds;
    std::vector<int64_t> valLabels(size_t(nVal) * k);
    evaluator->search(nVal, q + size_t(nSel) * d, k, searchParametersOf(res.config),
                      valLabels.data(), &res.candidates);
    res.recall = recallAgainstExact(nVal, k, valLabels.data(), exact.data() + size_t(nSel) * k);
    res.predictedSpeedup = options.cost.speedup(sw.costN, d, res.candidates);
    res.beatsExact = res.reachedTarget && res.predictedSpeedup > 1.0;
    res.verdict = verdictOf(res, options);
    if (options.verbose)
        std::printf("[autotune] %s (%d builds)\n", res.verdict.c_str(), res.builds);
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
