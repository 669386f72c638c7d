// Bi-level LSH model and parameters (see BiLevelLSHModel.h). Built with
// -ffp-contract=off: the canonical arithmetic of BiLevelLSHCommon.h.
#include "faiss_ext/BiLevelLSHModel.h"
#include "faiss_ext/Metric.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <typeinfo>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

namespace faiss_ext {

void BiLevelLSHConfig::check() const {
    FAISS_THROW_IF_NOT_FMT(treeDepth >= 0 && treeDepth <= lsh::kMaxTreeDepth,
                           "BiLevelLSH: treeDepth must be in [0, %d], got %d", lsh::kMaxTreeDepth,
                           treeDepth);
    FAISS_THROW_IF_NOT_FMT(nTables >= 1 && nTables <= lsh::kMaxTables,
                           "BiLevelLSH: nTables (L) must be in [1, %d], got %d", lsh::kMaxTables,
                           nTables);
    FAISS_THROW_IF_NOT_FMT(nProjections >= 1 && nProjections <= lsh::kMaxProjections,
                           "BiLevelLSH: nProjections (M) must be in [1, %d], got %d",
                           lsh::kMaxProjections, nProjections);
    FAISS_THROW_IF_NOT_FMT(std::isfinite(bucketWidth) && bucketWidth > 0.f,
                           "BiLevelLSH: bucketWidth must be a finite value > 0, got %g",
                           double(bucketWidth));
    FAISS_THROW_IF_NOT_FMT(std::isfinite(meanRuleC) && meanRuleC > 0.f,
                           "BiLevelLSH: meanRuleC must be a finite value > 0, got %g",
                           double(meanRuleC));
    FAISS_THROW_IF_NOT_FMT(diameterIterations >= 1 && diameterIterations <= 1000,
                           "BiLevelLSH: diameterIterations must be in [1, 1000], got %d",
                           diameterIterations);
    FAISS_THROW_IF_NOT_FMT(cuckooSubTables >= 2 && cuckooSubTables <= lsh::kMaxCuckooSubTables,
                           "BiLevelLSH: cuckooSubTables must be in [2, %d], got %d",
                           lsh::kMaxCuckooSubTables, cuckooSubTables);
    FAISS_THROW_IF_NOT_FMT(cuckooMaxLoad > 0.f && cuckooMaxLoad <= 0.95f,
                           "BiLevelLSH: cuckooMaxLoad must be in (0, 0.95], got %g",
                           double(cuckooMaxLoad));
    FAISS_THROW_IF_NOT_FMT(lattice == lsh::kLatticeZM || lattice == lsh::kLatticeE8,
                           "BiLevelLSH: lattice must be kLatticeZM (0) or kLatticeE8 (1), got %d",
                           lattice);
    FAISS_THROW_IF_NOT_FMT(lattice != lsh::kLatticeE8 || nProjections % 8 == 0,
                           "BiLevelLSH: the E8 lattice needs nProjections a multiple of 8, got %d",
                           nProjections);
    const int rule = int(widthRule);
    FAISS_THROW_IF_NOT_FMT(rule == int(BiLevelWidthRule::RmsRadius) ||
                               rule == int(BiLevelWidthRule::NeighbourDistance),
                           "BiLevelLSH: widthRule must be RmsRadius (0) or NeighbourDistance "
                           "(1), got %d",
                           rule);
    FAISS_THROW_IF_NOT_FMT(widthNeighbours >= 1 && widthNeighbours <= 1024,
                           "BiLevelLSH: widthNeighbours must be in [1, 1024], got %d",
                           widthNeighbours);
    FAISS_THROW_IF_NOT_FMT(defaultNprobe >= 1 && defaultNprobe <= lsh::kMaxProbes,
                           "BiLevelLSH: defaultNprobe must be in [1, %d], got %d", lsh::kMaxProbes,
                           defaultNprobe);
    FAISS_THROW_IF_NOT_FMT(defaultGroupProbes >= 1 && defaultGroupProbes <= lsh::kMaxGroupProbes,
                           "BiLevelLSH: defaultGroupProbes must be in [1, %d], got %d",
                           lsh::kMaxGroupProbes, defaultGroupProbes);
    FAISS_THROW_IF_NOT_FMT(std::isfinite(defaultGroupMargin) && defaultGroupMargin >= 0.f,
                           "BiLevelLSH: defaultGroupMargin must be a finite value >= 0, got %g",
                           double(defaultGroupMargin));
    FAISS_THROW_IF_NOT_FMT(autotuneRecall >= 0.f && autotuneRecall <= 1.f,
                           "BiLevelLSH: autotuneRecall must be in [0, 1] (0 = off), got %g",
                           double(autotuneRecall));
    FAISS_THROW_IF_NOT_FMT(defaultMinCandidates >= 0,
                           "BiLevelLSH: defaultMinCandidates must be >= 0, got %lld",
                           (long long)defaultMinCandidates);
}

BiLevelLSHModel BiLevelLSHModel::initRandom(int d, const BiLevelLSHConfig& config) {
    config.check();
    FAISS_THROW_IF_NOT_FMT(d > 0, "BiLevelLSH: d must be > 0, got %d", d);
    BiLevelLSHModel m;
    m.d = d;
    m.depth = config.treeDepth;
    m.nTables = config.nTables;
    m.nProjections = config.nProjections;
    m.lattice = config.lattice;
    m.bits = lsh::bitsPerCoordinate(config.nProjections);
    const int nodes = m.internalNodes();
    const int G = m.groups();
    const int LM = m.nTables * m.nProjections;
    m.nodeRule.assign(nodes, lsh::kRuleProjection);
    m.nodeVec.assign(size_t(nodes) * d, 0.f);
    m.nodeThreshold.assign(nodes, std::numeric_limits<float>::infinity());
    m.leafMean.assign(size_t(G) * d, 0.f);
    m.leafWidth.assign(G, 1.f);
    m.leafOffset.assign(size_t(G) * LM, 0.f);
    m.leafTrainCount.assign(G, 0);
    m.proj.resize(size_t(LM) * d);
    m.projBias.resize(LM);

    std::mt19937_64 rng(lsh::mix64(config.seed ^ 0x70726f6aULL));
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (auto& a : m.proj) a = float(normal(rng));
    for (auto& b : m.projBias) {
        float v = float(uniform(rng));
        b = v >= 1.f ? 0.f : v;
    }
    for (int node = 0; node < nodes; ++node) {
        std::mt19937_64 r(lsh::mix64(config.seed ^ lsh::mix64(0x6e6f6465ULL + uint64_t(node))));
        double norm = 0;
        std::vector<double> v(d);
        for (;;) {
            norm = 0;
            for (int j = 0; j < d; ++j) {
                v[j] = normal(r);
                norm += v[j] * v[j];
            }
            if (norm > 1e-30) break;
        }
        norm = std::sqrt(norm);
        for (int j = 0; j < d; ++j) m.nodeVec[size_t(node) * d + j] = float(v[j] / norm);
    }
    return m;
}

int64_t BiLevelLSHModel::diameterStart(uint64_t seed, int level, int group, int64_t count) {
    if (count <= 0) return 0;
    const uint64_t h =
        lsh::mix64(seed ^ lsh::mix64(0x6469616dULL + uint64_t(level) * 1000003ULL + uint64_t(group)));
    return int64_t(h % uint64_t(count));
}

lsh::NodeRule BiLevelLSHModel::splitRule(float diameter, double avgSqToMean, float c) {
    const double diam2 = double(diameter) * double(diameter);
    return diam2 <= double(c) * 2.0 * avgSqToMean ? lsh::kRuleProjection : lsh::kRuleDistance;
}

void BiLevelLSHModel::setLeaves(const std::vector<float>& means, const std::vector<double>& avgSq,
                                const std::vector<int64_t>& counts, float bucketWidth) {
    const int G = groups();
    const int LM = nTables * nProjections;
    FAISS_THROW_IF_NOT(int(means.size()) == G * d && int(avgSq.size()) == G &&
                       int(counts.size()) == G);
    leafMean = means;
    leafTrainCount = counts;
    for (int g = 0; g < G; ++g) {
        const float rms = lsh::sqrtRn(float(avgSq[g]));
        float w = lsh::mulRn(bucketWidth, rms);
        if (!(w > 0.f) || !std::isfinite(w)) w = 1.f;  // empty group or identical vectors
        leafWidth[g] = w;
        for (int j = 0; j < LM; ++j)
            leafOffset[size_t(g) * LM + j] =
                lsh::canonicalDot(proj.data() + size_t(j) * d, leafMean.data() + size_t(g) * d, d);
    }
}

int BiLevelLSHModel::leafOf(const float* x) const {
    return lsh::leafOfTree(nodeRule.data(), nodeVec.data(), nodeThreshold.data(), depth, d, x);
}

void BiLevelLSHModel::checkConsistent() const {
    FAISS_THROW_IF_NOT_FMT(d > 0 && depth >= 0 && depth <= lsh::kMaxTreeDepth && nTables >= 1 &&
                               nTables <= lsh::kMaxTables && nProjections >= 1 &&
                               nProjections <= lsh::kMaxProjections &&
                               bits == lsh::bitsPerCoordinate(nProjections),
                           "BiLevelLSH model: bad sizes (d %d, depth %d, L %d, M %d, bits %d)", d,
                           depth, nTables, nProjections, bits);
    FAISS_THROW_IF_NOT_FMT((lattice == lsh::kLatticeZM ||
                            (lattice == lsh::kLatticeE8 && nProjections % 8 == 0)),
                           "BiLevelLSH model: lattice %d does not fit M = %d", lattice,
                           nProjections);
    const size_t nodes = size_t(internalNodes()), G = size_t(groups());
    const size_t LM = size_t(nTables) * nProjections;
    FAISS_THROW_IF_NOT_MSG(nodeRule.size() == nodes && nodeVec.size() == nodes * d &&
                               nodeThreshold.size() == nodes && leafMean.size() == G * d &&
                               leafWidth.size() == G && leafOffset.size() == G * LM &&
                               leafTrainCount.size() == G && proj.size() == LM * d &&
                               projBias.size() == LM,
                           "BiLevelLSH model: array sizes do not match its dimensions");
    for (uint8_t r : nodeRule)
        FAISS_THROW_IF_NOT_FMT(r == lsh::kRuleProjection || r == lsh::kRuleDistance,
                               "BiLevelLSH model: unknown node rule %d", int(r));
    for (float w : leafWidth)
        FAISS_THROW_IF_NOT_FMT(std::isfinite(w) && w > 0.f,
                               "BiLevelLSH model: bucket width %g is not > 0", double(w));
}

SearchParametersBiLevelLSH searchParametersOf(const BiLevelLSHConfig& config) {
    SearchParametersBiLevelLSH p;
    p.nprobe = config.defaultNprobe;
    p.groupProbes = config.defaultGroupProbes;
    p.groupMargin = config.defaultGroupMargin;
    p.minCandidates = config.defaultMinCandidates;
    return p;
}

BiLevelSearchSettings resolveBiLevelSearch(const faiss::SearchParameters* params, int64_t k,
                                           const BiLevelLSHModel& model,
                                           const BiLevelLSHConfig& config) {
    BiLevelSearchSettings s;
    // the configuration's defaults hold for any tree and M: clamped to what
    // this model has (explicit parameters are checked instead)
    SearchParametersBiLevelLSH def = searchParametersOf(config);
    def.nprobe = std::min(def.nprobe,
                          std::min(lsh::kMaxProbes, 1 + lsh::maxPerturbations(model.nProjections)));
    def.groupProbes = std::min(def.groupProbes, model.groups());
    if (model.lattice == lsh::kLatticeE8) def.nprobe = 1;
    const SearchParametersBiLevelLSH* p = &def;
    // FAISS's base class carries only a selector (applied by the searches
    // to the candidates): the defaults then hold
    if (params && typeid(*params) != typeid(faiss::SearchParameters)) {
        p = dynamic_cast<const SearchParametersBiLevelLSH*>(params);
        FAISS_THROW_IF_NOT_MSG(p, "BiLevelLSH search: params must be faiss::SearchParameters or "
                               "SearchParametersBiLevelLSH");
    }
    const int M = model.nProjections;
    const int maxProbe = std::min(lsh::kMaxProbes, 1 + lsh::maxPerturbations(M));
    FAISS_THROW_IF_NOT_FMT(p->nprobe >= 1 && p->nprobe <= maxProbe,
                           "BiLevelLSH search: nprobe must be in [1, %d] for M = %d, got %d",
                           maxProbe, M, p->nprobe);
    FAISS_THROW_IF_NOT_FMT(model.lattice != lsh::kLatticeE8 || p->nprobe == 1,
                           "BiLevelLSH search: nprobe must be 1 with the E8 lattice (multi-probe "
                           "is defined on the Z^M grid; minCandidates widens along the Morton "
                           "curve on both), got %d",
                           p->nprobe);
    FAISS_THROW_IF_NOT_FMT(p->minCandidates >= 0,
                           "BiLevelLSH search: minCandidates must be >= 0, got %lld",
                           (long long)p->minCandidates);
    FAISS_THROW_IF_NOT_FMT(p->tables >= 0 && p->tables <= model.nTables,
                           "BiLevelLSH search: tables must be in [0, %d] (0 = all), got %d",
                           model.nTables, p->tables);
    FAISS_THROW_IF_NOT_FMT(p->groupProbes >= 1 && p->groupProbes <= lsh::kMaxGroupProbes &&
                               p->groupProbes <= model.groups(),
                           "BiLevelLSH search: groupProbes must be in [1, %d], got %d",
                           std::min(lsh::kMaxGroupProbes, model.groups()), p->groupProbes);
    FAISS_THROW_IF_NOT_FMT(std::isfinite(p->groupMargin) && p->groupMargin >= 0.f,
                           "BiLevelLSH search: groupMargin must be a finite value >= 0, got %g",
                           double(p->groupMargin));
    const int sl = int(p->shortList);
    FAISS_THROW_IF_NOT_FMT(sl >= 0 && sl <= 2, "BiLevelLSH search: unknown shortList %d", sl);
    s.nprobe = p->nprobe;
    s.minCandidates = p->minCandidates == 0 ? k : p->minCandidates;
    s.tables = p->tables == 0 ? model.nTables : p->tables;
    s.groupProbes = p->groupProbes;
    s.groupMargin = p->groupMargin;
    s.shortList = p->shortList;
    return s;
}

double lshWallSeconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void checkFiniteVectors(const char* name, int64_t n, int d, const float* x) {
    const int64_t bad = firstNonFiniteRow(n, d, x);
    FAISS_THROW_IF_NOT_FMT(bad < 0,
                           "%s: vector %lld has a NaN or infinite component (Bi-level LSH needs "
                           "finite vectors)",
                           name, (long long)bad);
}

}  // namespace faiss_ext
