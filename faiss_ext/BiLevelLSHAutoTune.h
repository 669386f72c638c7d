// An autotuner for Bi-level LSH, in the spirit of FAISS's ParameterSpace /
// AutoTune (faiss/AutoTune.h): given a database, held-out queries of the same
// distribution and a target recall@k, it builds candidate indexes (tree
// depth, tables L, projections M, bucket width W), searches each with a
// ladder of search settings (nprobe, groupProbes, groupMargin,
// minCandidates), measures recall against exact search and predicts the
// throughput against exact search with a cost model, and picks the fastest
// setting that reaches the target. It says plainly when no setting reaches
// the target, or when the one that does is predicted slower than exact
// search.
//
// The held-out queries are split in two: the choice is made on the first
// part (selection) and the recall it reports is measured on the second
// (validation), which took no part in the choice, so the report is an
// unbiased estimate of the recall of further queries of the same
// distribution (the best of many settings measured on the same queries
// would overstate it).
//
// Candidates are evaluated through BiLevelTuneEvaluator: the CPU twin here
// (BiLevelTuneEvaluatorCpu), the GPU index in
// faiss_ext/gpu/GpuBiLevelLSHTuneEvaluator.h. Both give the same candidates
// (the twins are bit-identical), so the same choice; the GPU is faster.
//
// Usage:
//   faiss_ext::BiLevelAutoTuneOptions opt;  opt.targetRecall = 0.9;
//   faiss_ext::BiLevelTuneEvaluatorCpu eval;
//   auto r = faiss_ext::autoTuneBiLevelLSH(d, nb, xb, nq, xq, opt, &eval);
//   std::puts(r.verdict.c_str());
//   faiss_ext::IndexBiLevelLSH index(d, r.config);  // search defaults set
//   index.train(nb, xb); index.add(nb, xb); index.search(...);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "faiss_ext/BiLevelLSHModel.h"

namespace faiss_ext {

class IndexBiLevelLSH;

/// Predicted cost of one query (seconds) for the throughput estimate.
/// Exact search is GpuIndexQuickSelectFlat as Auto runs a batch (>= 1,000
/// queries, k <= 1,024: TF32 distances with a proven bound, re-scored in
/// FP32): a fixed cost, the TF32 products (n x d floats) and the selection
/// over the n distances; fitted to its H100 runs at nq 10,000, k 10 (1M x
/// 128: 272k q/s, 3.7 us/query; 100k x 960: 746k q/s, 1.34 us/query;
/// bench/results/flat_few_queries.jsonl). The FP32 path that the model was
/// first fitted to (8.3 us/query at 1M x 128) is 2.2x slower there and 3x
/// at d 960, so predictions made then flattered Bi-level LSH by as much.
/// Bi-level LSH pays a fixed cost per query and ranks its candidates
/// (random rows of d floats): 0.3 us + 3 ps per candidate float, fitted to
/// bench/results/lsh.jsonl (clustered 1M x 128, within 15% over 530 to
/// 12,000 candidates).
struct BiLevelCostModel {
    double exactSecondsPerQuery = 0.5e-6;
    double exactSecondsPerFloat = 6.3e-15;
    double exactSecondsPerVector = 2.4e-12;
    double lshSecondsPerQuery = 0.3e-6;
    double lshSecondsPerCandidateFloat = 3.0e-12;

    /// Predicted exact / Bi-level LSH time per query.
    double speedup(int64_t ntotal, int d, double candidatesPerQuery) const;
};

/// What autoTuneBiLevelLSH tries and aims at.
struct BiLevelAutoTuneOptions {
    /// Recall@k to reach, in (0, 1].
    double targetRecall = 0.9;
    /// k of recall@k, >= 1.
    int k = 10;
    /// Part of the held-out queries kept for the reported recall, in
    /// (0, 1); the rest chooses.
    double validationFraction = 0.5;
    /// A setting is chosen only when its selection recall is at least
    /// targetRecall + selectionMargin (>= 0): room for the difference
    /// between two samples of queries (recall@10 of 500 queries varies by
    /// about 0.005-0.01), so that the recall on further queries reaches the
    /// target.
    double selectionMargin = 0.01;
    /// Build settings tried: every combination (depths deeper than the
    /// database allows, 2^depth x 64 > n, are skipped).
    std::vector<int> treeDepths = {0, 3};
    std::vector<std::pair<int, int>> tablesProjections = {{10, 8}, {16, 12}, {24, 14}};
    /// Multipliers of the k-th neighbour distance (BiLevelWidthRule::
    /// NeighbourDistance, widthNeighbours = k).
    std::vector<float> bucketWidths = {1.5f, 2.f, 3.f, 4.f};
    /// Search settings tried on every build, cheapest first; a ladder stops
    /// once it reaches the target (more only costs more).
    std::vector<int> nprobes = {1, 2, 4, 8, 16, 32};
    /// groupProbes x groupMargin pairs tried on trees of depth > 0 (depth 0
    /// has one group); groupMargin 0 = all groupProbes groups.
    std::vector<std::pair<int, float>> groupSettings = {
        {1, 0.f}, {4, 0.02f}, {4, 0.05f}, {4, 0.f}, {8, 0.05f}};
    /// minCandidates tried (0 = k).
    std::vector<int64_t> minCandidates = {0};
    /// Second-level lattices tried (lsh::LatticeKind); E8 only where M is a
    /// multiple of 8, and with nprobe 1 (its searches have no multi-probe).
    std::vector<int> lattices = {lsh::kLatticeZM};
    /// Database size of the throughput prediction; 0 = the n tuned on.
    int64_t costNtotal = 0;
    BiLevelCostModel cost;
    /// Build parameters not tuned (seed, cuckoo settings, meanRuleC ...).
    BiLevelLSHConfig base;
    /// One line per build and per chosen point on stdout.
    bool verbose = false;

    /// Throws (naming the field) unless every field is in range.
    void check() const;
};

/// One measured setting.
struct BiLevelTunePoint {
    /// Build parameters, and the search settings as its defaults.
    BiLevelLSHConfig config;
    /// Recall@k on the selection queries.
    double recall = 0;
    /// Mean distinct candidates per selection query.
    double candidates = 0;
    /// Predicted throughput / exact search's (BiLevelCostModel).
    double predictedSpeedup = 0;
};

/// What autoTuneBiLevelLSH found.
struct BiLevelAutoTuneResult {
    /// Some setting reached targetRecall (+ selectionMargin) on the
    /// selection queries; else `config` is the most accurate one.
    bool reachedTarget = false;
    /// reachedTarget and the chosen setting's predicted speedup is > 1.
    bool beatsExact = false;
    /// The chosen build parameters with its search settings as defaults
    /// (defaultNprobe, defaultGroupProbes, defaultGroupMargin,
    /// defaultMinCandidates).
    BiLevelLSHConfig config;
    /// Recall@k of the chosen setting on the validation queries.
    double recall = 0;
    /// Its recall on the selection queries.
    double selectionRecall = 0;
    /// Its mean candidates per validation query.
    double candidates = 0;
    /// Its predicted throughput relative to exact search.
    double predictedSpeedup = 0;
    /// One plain sentence: what was reached at what predicted speed, or why
    /// Bi-level LSH should not be used on these data.
    std::string verdict;
    /// Every measured setting, in the order measured.
    std::vector<BiLevelTunePoint> points;
    /// Builds made.
    int builds = 0;
};

/// Queries whose candidates an evaluator counts (the first ones of a
/// search): the count only feeds the cost model, and counting means merging
/// every query's candidate lists on the host (for the GPU index, after
/// copying its tables). Both evaluators count the same queries, so that they
/// make the same choice.
constexpr int64_t kTuneCandidateQueries = 128;

/// How the tuner builds and searches one candidate index.
class BiLevelTuneEvaluator {
  public:
    virtual ~BiLevelTuneEvaluator() = default;
    /// Trains and fills an index with config on the database.
    virtual void build(const BiLevelLSHConfig& config, int d, int64_t n, const float* x) = 0;
    /// Searches the built index: labels (nq x k) and the mean number of
    /// distinct candidates per query (of the first kTuneCandidateQueries).
    virtual void search(int64_t nq, const float* q, int k, const SearchParametersBiLevelLSH& params,
                        int64_t* labels, double* meanCandidates) = 0;
    /// Exact k-NN ids of the queries in the database (the ground truth).
    virtual void exactSearch(int d, int64_t n, const float* x, int64_t nq, const float* q, int k,
                             int64_t* labels) = 0;
};

/// What both evaluators' search() does with their index (IndexBiLevelLSH
/// or GpuIndexBiLevelLSH): labels of the nq queries, and the mean distinct
/// candidates of the first kTuneCandidateQueries.
template <class IndexT>
void searchAndCountCandidates(const IndexT& index, int64_t nq, const float* q, int k,
                              const SearchParametersBiLevelLSH& params, int64_t* labels,
                              double* meanCandidates) {
    std::vector<float> distances(size_t(nq) * k);
    index.search(nq, q, k, distances.data(), labels, &params);
    const int64_t nc = nq < kTuneCandidateQueries ? nq : kTuneCandidateQueries;
    std::vector<int64_t> lims, ids;
    index.getCandidates(nc, q, k, &lims, &ids, &params);
    *meanCandidates = nc > 0 ? double(lims[nc]) / double(nc) : 0;
}

/// Evaluates with the CPU twin (IndexBiLevelLSH) and faiss::IndexFlatL2.
/// Defined in IndexBiLevelLSH.cpp, with the index it builds (whose train()
/// autotunes through it): the tuner's own code needs no index, so the two
/// files do not include each other.
class BiLevelTuneEvaluatorCpu : public BiLevelTuneEvaluator {
  public:
    BiLevelTuneEvaluatorCpu();
    ~BiLevelTuneEvaluatorCpu() override;
    void build(const BiLevelLSHConfig& config, int d, int64_t n, const float* x) override;
    void search(int64_t nq, const float* q, int k, const SearchParametersBiLevelLSH& params,
                int64_t* labels, double* meanCandidates) override;
    void exactSearch(int d, int64_t n, const float* x, int64_t nq, const float* q, int k,
                     int64_t* labels) override;

  private:
    std::unique_ptr<IndexBiLevelLSH> index_;
};

/// Tunes Bi-level LSH on a database (n x d, n >= 64) for held-out queries
/// (nq x d, nq >= 10, not in the database, same distribution as the queries
/// to come). Throws on bad arguments before any work. measured: when not
/// null, the points of an earlier call on the same data, options and
/// queries with a target at least this one's (its ladders went at least as
/// far): the sweep is skipped and only the choice and its validation are
/// made (one sweep at target 0.95 serves 0.9 too).
BiLevelAutoTuneResult autoTuneBiLevelLSH(int d, int64_t n, const float* x, int64_t nq,
                                         const float* q, const BiLevelAutoTuneOptions& options,
                                         BiLevelTuneEvaluator* evaluator,
                                         const std::vector<BiLevelTunePoint>* measured = nullptr);

/// Fewest training vectors of a train() that autotunes.
constexpr int64_t kMinAutoTuneTrainingVectors = 200;

/// The tuning train() runs when config.autotuneRecall > 0: the last
/// min(1000, n / 5) of the n training vectors are the held-out queries,
/// the others the database; target recall@widthNeighbours =
/// autotuneRecall; the other fields of config are the untuned base. The
/// result's config keeps autotuneRecall.
BiLevelAutoTuneResult autoTuneForTraining(const BiLevelLSHConfig& config, int d, int64_t n,
                                          const float* x, bool verbose,
                                          BiLevelTuneEvaluator* evaluator);

/// Recall@k of labels (nq x k) against exact ids (nq x k): the fraction of
/// the exact ids found (ties between equal distances aside).
double recallAgainstExact(int64_t nq, int k, const int64_t* labels, const int64_t* exact);

}  // namespace faiss_ext
