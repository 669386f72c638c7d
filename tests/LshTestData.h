// Shared by the Bi-level LSH tests (test_cpu_lsh.cpp, test_gpu_lsh.cpp): the
// real data sets of ../shared/data with their stored exact query ground
// truth, recall@10 scored by distance against it, and the settings at which
// each set is measured (found by experiment with the CPU twin; the numbers
// in the comments of test_cpu_lsh.cpp are what they gave).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/BiLevelLSHModel.h"

namespace faiss_ext {
namespace lshtest {

/// A real data set with queries and their exact neighbours' distances.
struct RealSet {
    std::string name;
    int64_t nb = 0;
    int64_t nq = 0;
    int d = 0;
    std::vector<float> base;   ///< nb x d
    std::vector<float> query;  ///< nq x d (a subset of the set's queries, evenly spaced)
    std::vector<float>
        gtDist;  ///< nq x kGt squared L2 distances of the exact neighbours, ascending
    int kGt = 0;
    std::string missing;  ///< why the set is unavailable ("" when loaded)
};

/// The names of the real sets: "siftsmall", "fashion-mnist", "pointcloud-rs".
const std::vector<std::string>& realSetNames();

/// Loads (once per process) the named set from FAISS_EXT_DATA_DIR /
/// ../shared/data with at most maxQueries queries spread evenly over its
/// query file (the stored ground-truth rows of the same queries). When a
/// file is absent, `missing` says which (the caller skips visibly); a file
/// that is present but unreadable is a test failure.
const RealSet& realSet(const std::string& name, int64_t maxQueries);

/// Base vectors and queries of a real set without its ground truth (for
/// comparisons of two indexes): the first maxBase base rows and the first
/// maxQueries query rows (0: all). Fashion-MNIST takes its queries from the
/// base rows after the first maxBase when its query file is absent (the GPU
/// machine's staged copy holds 20k base rows only). `missing` as realSet.
const RealSet& realVectors(const std::string& name, int64_t maxBase, int64_t maxQueries);

/// Recall@10 of labels (nq x k, k >= 10; the first 10 columns scored): a
/// returned id counts when it is valid, not repeated, and its exact
/// distance (recomputed in double) is at most the true 10th distance
/// (relative tolerance 1e-6 for the float32 rounding of the stored
/// distances). nq may be below set.nq (the first nq queries).
double recallAt10(const RealSet& set, int64_t nq, const int64_t* labels, int64_t k);

/// "" when the two models are identical bit for bit (sizes, tree rules,
/// directions, thresholds, leaves, projections); else the fields that
/// differ, with the first differing position of each.
std::string modelDifference(const BiLevelLSHModel& a, const BiLevelLSHModel& b);

/// The autotuner's options of the tests: target recall@10 `target` over a
/// small search space (depths 0 and 2, L x M 8 x 8 and 12 x 10, widths 2-4,
/// nprobe 1, 4, 16, one group or four within margin 0.05), so that a tuning
/// takes seconds on two cores.
BiLevelAutoTuneOptions smallTuneOptions(double target);

/// True when a and b hold the same tuned settings: tree depth, L, M,
/// bucket width, lattice and the four default search settings.
bool sameTunedSettings(const BiLevelLSHConfig& a, const BiLevelLSHConfig& b);

/// n x d clustered vectors whose RP-tree uses both split rules: a tight
/// Gaussian core (97%) and six small far clusters (3%), so the diameter is
/// large against the average spread at the top of the tree (distance
/// splits) while the core splits by projections.
std::vector<float> coreAndOutliers(int64_t n, int d, uint64_t seed);

/// n distinct random 64-bit keys (0 and ~0 among them when n >= 2).
std::vector<uint64_t> distinctKeys(size_t n, uint64_t seed);

/// Build and search settings of the recall tests on one real set.
struct RecallPlan {
    BiLevelLSHConfig config;
    /// groupProbes of every search of the plan.
    int groupProbes = 1;
    /// nprobe values swept with all tables (ascending).
    std::vector<int> nprobes;
    /// tables values swept at tablesNprobe (ascending, the last = L).
    std::vector<int> tables;
    int tablesNprobe = 1;
    /// Queries used (evenly spaced over the set's query file).
    int64_t queries = 0;
};

/// The plan of the named real set.
RecallPlan recallPlan(const std::string& name);

}  // namespace lshtest
}  // namespace faiss_ext
