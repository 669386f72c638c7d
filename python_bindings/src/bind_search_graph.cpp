// GpuIndexSearchGraph (GNND k-NN graph -> CAGRA-style search graph -> GPU
// beam search), its config and search parameters. Its CPU twin
// (faiss.IndexHNSWFlat) is the FAISS object of `import faiss` itself
// (swig_bridge.h).
#include <faiss/IndexHNSW.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/index_io.h"

namespace faiss_ext {
namespace python {

namespace {

using gpu::GpuIndexSearchGraph;
using gpu::GpuIndexSearchGraphConfig;
using gpu::SearchParametersSearchGraph;

// Limits of the C++ index (gpu/impl/graph/SearchGraph.h): search-graph and
// k-NN degrees, parents per iteration, candidate buffer, entry seeds.
constexpr int kMaxGraphDegree = 128;
constexpr int kMaxKnnDegree = 256;
constexpr int kMaxSearchWidth = 31;
constexpr int kMaxItopk = 512;
constexpr int kMaxEntrySeeds = 128;
constexpr int kMaxBlocksPerQuery = 32;  // graph::kMaxBlocksPerQuery

// ---- argument checks (ValueError at the assignment; the C++ constructor and
// search check them again, with the combinations: knnDegree >= graphDegree,
// searchWidth x graphDegree <= 1024)

int checkIn(const char* what, int v, int lo, int hi) {
    if (v < lo || v > hi) {
        throw py::value_error(std::string(what) + " must be in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "], got " + std::to_string(v));
    }
    return v;
}

int checkAtLeast(const char* what, int v, int lo) {
    if (v < lo) {
        throw py::value_error(std::string(what) + " must be >= " + std::to_string(lo) + ", got " +
                              std::to_string(v));
    }
    return v;
}

int checkGraphDegree(int r) { return checkIn("graph_degree", r, 1, kMaxGraphDegree); }
int checkKnnDegree(int k) { return checkIn("knn_degree", k, 1, kMaxKnnDegree); }
int checkSearchWidth(int w) { return checkIn("search_width", w, 1, kMaxSearchWidth); }
int checkMaxIterations(int it) { return checkAtLeast("max_iterations (0: automatic)", it, 0); }
int checkSeedRounds(int r) { return checkAtLeast("seed_rounds", r, 1); }
int checkEntryPoints(int e) { return checkAtLeast("entry_points (0: none)", e, 0); }
int checkEntrySeeds(int e) { return checkIn("entry_seeds", e, 0, kMaxEntrySeeds); }
int checkBlocksPerQuery(int b) {
    return checkIn("blocks_per_query (0: by batch size)", b, 0, kMaxBlocksPerQuery);
}

int checkItopk(int t) { return checkIn("itopk", t, 16, kMaxItopk); }

// Search parameters: 0 (or -1) means the index's value.
int checkParamItopk(int t) { return checkIn("itopk (0: the index's)", t, 0, kMaxItopk); }
int checkParamSearchWidth(int w) {
    return checkIn("search_width (0: the index's)", w, 0, kMaxSearchWidth);
}
int checkParamMaxIterations(int it) {
    return checkAtLeast("max_iterations (0: the index's)", it, 0);
}
int checkParamMinIterations(int it) { return checkAtLeast("min_iterations", it, 0); }
int checkParamSeedRounds(int r) { return checkAtLeast("seed_rounds (0: the index's)", r, 0); }
int checkParamEntrySeeds(int e) {
    return checkIn("entry_seeds (-1: the index's, 0: none)", e, -1, kMaxEntrySeeds);
}
int checkParamBlocksPerQuery(int b) {
    return checkIn("blocks_per_query (0: the index's)", b, 0, kMaxBlocksPerQuery);
}
int64_t checkParamSeed(int64_t s) {
    if (s < -1)
        throw py::value_error("seed must be >= 0 (-1: the index's), got " + std::to_string(s));
    return s;
}
int checkParamFp16(int f) { return checkIn("fp16 (-1: the index's, 0: FP32, 1: FP16)", f, -1, 1); }

float checkUnlikeRatio(float r) {
    if (!(r >= 0.f) || !std::isfinite(r))
        throw py::value_error("unlike_query_ratio must be finite and >= 0 (0: no detection), got " +
                              std::to_string(r));
    return r;
}
float checkUnlikeShare(float s) {
    if (!(s >= 0.f && s <= 1.f))
        throw py::value_error("unlike_query_share must be in [0, 1], got " + std::to_string(s));
    return s;
}
float checkParamUnlikeRatio(float r) {
    if (!(r == -1.f || (r >= 0.f && std::isfinite(r))))
        throw py::value_error("unlike_query_ratio must be -1 (the index's), 0 (no detection) or "
                              "a finite ratio > 0, got " + std::to_string(r));
    return r;
}

int checkUnlikeProbes(int p) {
    return checkIn("unlike_query_probes (0: exact search)", p, 0, INT32_MAX);
}
int checkParamUnlikeProbes(int p) {
    return checkIn("unlike_query_probes (-1: the index's, 0: exact search)", p, -1, INT32_MAX);
}

std::string configRepr(const GpuIndexSearchGraphConfig& c) {
    return "GpuIndexSearchGraphConfig(device=" + std::to_string(c.device) +
           ", graph_degree=" + std::to_string(c.graphDegree) +
           ", knn_degree=" + std::to_string(c.knnDegree) + ", itopk=" + std::to_string(c.itopk) +
           ", search_width=" + std::to_string(c.searchWidth) +
           ", max_iterations=" + std::to_string(c.maxIterations) +
           ", seed_rounds=" + std::to_string(c.seedRounds) + ", seed=" + std::to_string(c.seed) +
           ", entry_points=" + std::to_string(c.entryPoints) +
           ", entry_seeds=" + std::to_string(c.entrySeeds) +
           ", fp16_traversal=" + (c.fp16Traversal ? "True" : "False") +
           ", blocks_per_query=" + std::to_string(c.blocksPerQuery) +
           ", unlike_query_ratio=" + py::repr(py::float_(c.unlikeQueryRatio)).cast<std::string>() +
           ", unlike_query_share=" + py::repr(py::float_(c.unlikeQueryShare)).cast<std::string>() +
           ", unlike_query_probes=" + std::to_string(c.unlikeQueryProbes) + ")";
}

void bindConfig(py::module_& m) {
    using namespace pybind11::literals;
    using Config = GpuIndexSearchGraphConfig;
    const Config defaults;
    py::class_<Config, gpu::GpuIndexConfig> cfg(m, "GpuIndexSearchGraphConfig", R"doc(
Build options and search defaults of GpuIndexSearchGraph.

    cfg = faiss_ext.GpuIndexSearchGraphConfig(graph_degree=64, knn_degree=128)

graph_degree: out-degree of the search graph (1..128, default 64);
knn_degree: degree of the GNND k-NN graph it is pruned from (graph_degree..256,
default 128); knn_build: a GpuKnnGraphGNNDConfig for that build (its device is
ignored; default: GNND's with max_iterations 0, meaning by size: 6 below 4M
vectors, 9 from there; its add_build 'auto' means one GNND build where it fits in
device memory, which keeps the search graph navigable at 10M vectors); itopk: default candidate buffer of search ([16, 512],
default 64; the first itopk entries of a power-of-two buffer are expanded); search_width: parents expanded per iteration (1..31,
search_width x graph_degree <= 1024); max_iterations: iteration limit (0:
itopk / search_width + 16); seed_rounds: rounds of random entry points (>= 1);
seed: of the random entry points and the entry-point sample; entry_points:
size of the entry-point sample (0: random entry points only); entry_seeds:
sampled nodes each query starts from (0..128); fp16_traversal: score on an
FP16 copy of the vectors while searching (distances returned are FP32 either
way); blocks_per_query: thread blocks searching each query independently,
results merged (0..32; 0: one for batches of at least one query per SM, up
to 16 for smaller ones, so results can depend on the batch size; 1: never);
unlike_query_ratio: queries unlike the data (drawn around other centres, as in
cross-modal search) defeat a graph search; a query is flagged when its squared
distance to its nearest result passes this ratio times that result's squared
distance to its own 10th k-NN neighbour (default 0: no detection; 3.0 is the
measured suggestion; L2, Cosine and Pearson only); the flagged queries are
answered again by probing the unlike_query_probes (default 64; 0: exact
search instead) k-means lists nearest to each, in FP32, where k <= 64 (the
lists, 4 bytes a vector and about 4 sqrt(n) centres, are made by the first
such search); otherwise, when at least unlike_query_share of a batch is
flagged (default 0.02; 0: any), by exact search over a copy of the vectors
(4 (d + 1) bytes each, made by the first such search);
get_unlike_query_counts() tells how many were;
device: the GPU. The C++ spellings (graphDegree, knnDegree, ...) are
aliases.
)doc");
    cfg.def(py::init([](int device, int graphDegree, int knnDegree,
                        std::optional<gpu::GpuKnnGraphGNNDConfig> knnBuild, int itopk,
                        int searchWidth, int maxIterations, int seedRounds, uint64_t seed,
                        int entryPoints, int entrySeeds, bool fp16, int blocksPerQuery,
                        float unlikeRatio, float unlikeShare, int unlikeProbes) {
                Config c;
                c.device = device;
                c.graphDegree = checkGraphDegree(graphDegree);
                c.knnDegree = checkKnnDegree(knnDegree);
                if (knnBuild) c.knnBuild = *knnBuild;
                c.itopk = checkItopk(itopk);
                c.searchWidth = checkSearchWidth(searchWidth);
                c.maxIterations = checkMaxIterations(maxIterations);
                c.seedRounds = checkSeedRounds(seedRounds);
                c.seed = seed;
                c.entryPoints = checkEntryPoints(entryPoints);
                c.entrySeeds = checkEntrySeeds(entrySeeds);
                c.fp16Traversal = fp16;
                c.blocksPerQuery = checkBlocksPerQuery(blocksPerQuery);
                c.unlikeQueryRatio = checkUnlikeRatio(unlikeRatio);
                c.unlikeQueryShare = checkUnlikeShare(unlikeShare);
                c.unlikeQueryProbes = checkUnlikeProbes(unlikeProbes);
                return c;
            }),
            "device"_a = 0, "graph_degree"_a = defaults.graphDegree,
            "knn_degree"_a = defaults.knnDegree, "knn_build"_a = py::none(),
            "itopk"_a = defaults.itopk, "search_width"_a = defaults.searchWidth,
            "max_iterations"_a = defaults.maxIterations, "seed_rounds"_a = defaults.seedRounds,
            "seed"_a = defaults.seed, "entry_points"_a = defaults.entryPoints,
            "entry_seeds"_a = defaults.entrySeeds, "fp16_traversal"_a = defaults.fp16Traversal,
            "blocks_per_query"_a = defaults.blocksPerQuery,
            "unlike_query_ratio"_a = defaults.unlikeQueryRatio,
            "unlike_query_share"_a = defaults.unlikeQueryShare,
            "unlike_query_probes"_a = defaults.unlikeQueryProbes);

    defCheckedInt(cfg, "graph_degree", "graphDegree", &Config::graphDegree, &checkGraphDegree,
                  "Out-degree of the search graph (1..128; <= knn_degree).");
    defCheckedInt(cfg, "knn_degree", "knnDegree", &Config::knnDegree, &checkKnnDegree,
                  "Degree of the GNND k-NN graph (graph_degree..256).");
    defCheckedInt(cfg, "itopk", nullptr, &Config::itopk, &checkItopk,
                  "Default candidate buffer of search (a power of two in [16, 512]).");
    defCheckedInt(cfg, "search_width", "searchWidth", &Config::searchWidth, &checkSearchWidth,
                  "Default parents expanded per iteration (1..31; x graph_degree <= 1024).");
    defCheckedInt(cfg, "max_iterations", "maxIterations", &Config::maxIterations,
                  &checkMaxIterations, "Default iteration limit (0: itopk / search_width + 16).");
    defCheckedInt(cfg, "seed_rounds", "seedRounds", &Config::seedRounds, &checkSeedRounds,
                  "Rounds of random entry points (>= 1).");
    defCheckedInt(cfg, "entry_points", "entryPoints", &Config::entryPoints, &checkEntryPoints,
                  "Size of the entry-point sample (0: random entry points only).");
    defCheckedInt(cfg, "entry_seeds", "entrySeeds", &Config::entrySeeds, &checkEntrySeeds,
                  "Sampled nodes each query starts from (0..128; 0: random only).");
    defCheckedInt(cfg, "blocks_per_query", "blocksPerQuery", &Config::blocksPerQuery,
                  &checkBlocksPerQuery,
                  "Blocks searching each query (0..32; 0: chosen by batch size).");
    cfg.def_readwrite("knn_build", &Config::knnBuild,
                      "GpuKnnGraphGNNDConfig of the k-NN graph build (its device is ignored).")
        .def_readwrite("knnBuild", &Config::knnBuild, "C++ spelling of knn_build.")
        .def_readwrite("seed", &Config::seed,
                       "Seed of the random entry points and of the entry-point sample.")
        .def_readwrite("fp16_traversal", &Config::fp16Traversal,
                       "Score on an FP16 copy of the vectors while searching (FP32 re-scoring).")
        .def_readwrite("fp16Traversal", &Config::fp16Traversal, "C++ spelling of fp16_traversal.")
        .def("__repr__", &configRepr);
    for (const char* name : {"unlike_query_ratio", "unlikeQueryRatio"}) {
        cfg.def_property(
            name, [](const Config& c) { return c.unlikeQueryRatio; },
            [](Config& c, float r) { c.unlikeQueryRatio = checkUnlikeRatio(r); },
            "Ratio past which a query is flagged as unlike the data (0: no detection).");
    }
    for (const char* name : {"unlike_query_share", "unlikeQueryShare"}) {
        cfg.def_property(
            name, [](const Config& c) { return c.unlikeQueryShare; },
            [](Config& c, float s) { c.unlikeQueryShare = checkUnlikeShare(s); },
            "Share of a batch flagged before the flagged queries are searched exactly.");
    }
    defCheckedInt(cfg, "unlike_query_probes", "unlikeQueryProbes", &Config::unlikeQueryProbes,
                  &checkUnlikeProbes,
                  "Lists a query unlike the data probes (0: exact search instead).");

    using Params = SearchParametersSearchGraph;
    py::class_<Params, faiss::SearchParameters> params(m, "SearchParametersSearchGraph", R"doc(
Per-search knobs of GpuIndexSearchGraph (search(x, k, params)); 0 (-1 for
entry_seeds and fp16) keeps the index's value.

    p = faiss_ext.SearchParametersSearchGraph(itopk=128, search_width=2)
    D, I = index.search(xq, 10, params=p)

itopk: candidate buffer (0..512, raised to >= k; the first itopk entries of a
power-of-two buffer are expanded);
search_width: parents per iteration (0..31, x degree <= 1024);
max_iterations: iteration limit; min_iterations: iterations before stopping
when nothing is left to expand; seed_rounds: rounds of random entry points;
entry_seeds: sampled entry points per query (-1: the index's, 0: none);
fp16: 1 scores on the FP16 copy (needs fp16_traversal), 0 on FP32 vectors,
-1 the index's setting; blocks_per_query: blocks searching each query (0: the
index's setting); seed: of the random entry points (-1: the index's);
unlike_query_ratio: the ratio flagging queries unlike the data (-1: the
index's, 0: no detection); unlike_query_probes: lists such a query probes
(-1: the index's, 0: exact search). The C++ spellings (searchWidth, ...) are
aliases.
)doc");
    params
        .def(py::init([](int itopk, int searchWidth, int maxIterations, int minIterations,
                         int seedRounds, int entrySeeds, int fp16, int blocksPerQuery,
                         int64_t seed, float unlikeRatio, int unlikeProbes) {
                 Params p;
                 p.itopk = checkParamItopk(itopk);
                 p.searchWidth = checkParamSearchWidth(searchWidth);
                 p.maxIterations = checkParamMaxIterations(maxIterations);
                 p.minIterations = checkParamMinIterations(minIterations);
                 p.seedRounds = checkParamSeedRounds(seedRounds);
                 p.entrySeeds = checkParamEntrySeeds(entrySeeds);
                 p.fp16 = checkParamFp16(fp16);
                 p.blocksPerQuery = checkParamBlocksPerQuery(blocksPerQuery);
                 p.seed = checkParamSeed(seed);
                 p.unlikeQueryRatio = checkParamUnlikeRatio(unlikeRatio);
                 p.unlikeQueryProbes = checkParamUnlikeProbes(unlikeProbes);
                 return p;
             }),
             "itopk"_a = 0, "search_width"_a = 0, "max_iterations"_a = 0, "min_iterations"_a = 0,
             "seed_rounds"_a = 0, "entry_seeds"_a = -1, "fp16"_a = -1, "blocks_per_query"_a = 0,
             "seed"_a = -1, "unlike_query_ratio"_a = -1.f, "unlike_query_probes"_a = -1)
        .def("__repr__", [](const Params& p) {
            return "SearchParametersSearchGraph(itopk=" + std::to_string(p.itopk) +
                   ", search_width=" + std::to_string(p.searchWidth) +
                   ", max_iterations=" + std::to_string(p.maxIterations) +
                   ", min_iterations=" + std::to_string(p.minIterations) +
                   ", seed_rounds=" + std::to_string(p.seedRounds) +
                   ", entry_seeds=" + std::to_string(p.entrySeeds) +
                   ", fp16=" + std::to_string(p.fp16) +
                   ", blocks_per_query=" + std::to_string(p.blocksPerQuery) +
                   ", seed=" + std::to_string(p.seed) + ", unlike_query_ratio=" +
                   py::repr(py::float_(p.unlikeQueryRatio)).cast<std::string>() +
                   ", unlike_query_probes=" + std::to_string(p.unlikeQueryProbes) + ")";
        });
    defCheckedInt(params, "itopk", nullptr, &Params::itopk, &checkParamItopk,
                  "Candidate buffer (0: the index's).");
    defCheckedInt(params, "search_width", "searchWidth", &Params::searchWidth,
                  &checkParamSearchWidth, "Parents per iteration (0: the index's).");
    defCheckedInt(params, "max_iterations", "maxIterations", &Params::maxIterations,
                  &checkParamMaxIterations, "Iteration limit (0: the index's).");
    defCheckedInt(params, "min_iterations", "minIterations", &Params::minIterations,
                  &checkParamMinIterations,
                  "Iterations before stopping when nothing is left to expand.");
    defCheckedInt(params, "seed_rounds", "seedRounds", &Params::seedRounds, &checkParamSeedRounds,
                  "Rounds of random entry points (0: the index's).");
    defCheckedInt(params, "entry_seeds", "entrySeeds", &Params::entrySeeds, &checkParamEntrySeeds,
                  "Sampled entry points per query (-1: the index's; 0: none).");
    defCheckedInt(params, "fp16", nullptr, &Params::fp16, &checkParamFp16,
                  "1: score on the FP16 copy; 0: on FP32 vectors; -1: the index's setting.");
    defCheckedInt(params, "blocks_per_query", "blocksPerQuery", &Params::blocksPerQuery,
                  &checkParamBlocksPerQuery, "Blocks searching each query (0: the index's).");
    params.def_property(
        "seed", [](const Params& p) { return p.seed; },
        [](Params& p, int64_t s) { p.seed = checkParamSeed(s); },
        "Seed of the random entry points (-1: the index's).");
    for (const char* name : {"unlike_query_ratio", "unlikeQueryRatio"}) {
        params.def_property(
            name, [](const Params& p) { return p.unlikeQueryRatio; },
            [](Params& p, float r) { p.unlikeQueryRatio = checkParamUnlikeRatio(r); },
            "Ratio flagging queries unlike the data (-1: the index's; 0: no detection).");
    }
    defCheckedInt(params, "unlike_query_probes", "unlikeQueryProbes", &Params::unlikeQueryProbes,
                  &checkParamUnlikeProbes,
                  "Lists a query unlike the data probes (-1: the index's; 0: exact search).");
}

/// A graph of the index (getSearchGraph or getKnnGraph, called without the
/// GIL) as an (ntotal, cols) int32 array; `what` names it in the error when
/// its size is not ntotal x cols.
py::array_t<int32_t> graphArray(const GpuIndexSearchGraph& self,
                                std::vector<int> (GpuIndexSearchGraph::*get)() const, int64_t cols,
                                const char* what) {
    const int64_t n = self.ntotal;
    std::vector<int> g;
    if (n > 0) {
        py::gil_scoped_release release;
        g = (self.*get)();
    }
    if (g.size() != size_t(n) * size_t(cols)) {
        throw std::runtime_error(
            std::string(what) + ": the graph holds " + std::to_string(g.size()) +
            " ids for ntotal = " + std::to_string(n) + " x " + std::to_string(cols));
    }
    return vectorToNumpy(std::move(g), {n, cols});
}

py::array_t<int32_t> getSearchGraph(const GpuIndexSearchGraph& self) {
    return graphArray(self, &GpuIndexSearchGraph::getSearchGraph, self.getGraphDegree(),
                      "get_search_graph");
}

py::array_t<int32_t> getKnnGraph(const GpuIndexSearchGraph& self) {
    return graphArray(self, &GpuIndexSearchGraph::getKnnGraph, self.getConfig().knnDegree,
                      "get_knn_graph");
}

py::array_t<int32_t> getEntryPoints(const GpuIndexSearchGraph& self) {
    std::vector<int> e;
    {
        py::gil_scoped_release release;
        e = self.getEntryPoints();
    }
    const auto n = static_cast<py::ssize_t>(e.size());
    return vectorToNumpy(std::move(e), {n});
}

/// getUnlikeQueryCounts as a dict.
py::dict unlikeQueryCounts(const GpuIndexSearchGraph& g) {
    const gpu::UnlikeQueryCounts c = g.getUnlikeQueryCounts();
    py::dict out;
    out["searched"] = c.searched;
    out["flagged"] = c.flagged;
    out["answered_exactly"] = c.answeredExactly;
    out["answered_by_probe"] = c.answeredByProbe;
    out["left_for_lack_of_memory"] = c.leftForLackOfMemory;
    return out;
}

void bindIndexClass(py::module_& m) {
    using namespace pybind11::literals;
    using Config = std::optional<GpuIndexSearchGraphConfig>;
    py::class_<GpuIndexSearchGraph, faiss::Index> cls(m, "GpuIndexSearchGraph", R"doc(
Graph-based approximate k-NN search on the GPU: add() builds the k-NN graph
of the vectors with GNND, prunes it into a search graph (CAGRA's rank-based
detour pruning and reverse edges), and search() is a GPU beam search over it
(one thread block per query, itopk candidates). A later add() merges the new
vectors into the k-NN graph and rebuilds the search graph.

    res = faiss_ext.StandardGpuResources()
    cfg = faiss_ext.GpuIndexSearchGraphConfig(graph_degree=32, knn_degree=64)
    index = faiss_ext.GpuIndexSearchGraph(res, d, faiss.METRIC_L2, cfg)
    index.add(xb)                                  # builds both graphs
    D, I = index.search(xq, 10)                    # k <= 512
    D, I = index.search(xq, 10, params=faiss_ext.SearchParametersSearchGraph(itopk=128))
    G = index.get_search_graph()                   # (ntotal, graph_degree) int32
    cpu = index.copy_to()                          # a faiss.IndexHNSWFlat

`metric`: a FlatMetric (L2, InnerProduct, Cosine, Pearson), a FAISS metric
int or a metric name ('L2', 'IP', 'Cosine', 'Pearson'). `config`: a
GpuIndexSearchGraphConfig. An add needs more than knn_degree vectors in all.
The CPU twin is a faiss.IndexHNSWFlat whose level 0 is the search graph
(efSearch = itopk): faiss.write_index and FAISS's CPU search work on it.
)doc");
    cls.def(py::init(
                [](gpu::GpuResourcesProvider* res, int d, const py::object& metric, Config config) {
                    const FlatMetric fm = toFlatMetric(metric);
                    return std::make_unique<GpuIndexSearchGraph>(
                        res, d, fm, config.value_or(GpuIndexSearchGraphConfig()));
                }),
            "res"_a, "d"_a, "metric"_a = FlatMetric::L2, "config"_a = py::none(),
            py::keep_alive<1, 2>())
        .def_property_readonly("graph_degree", &GpuIndexSearchGraph::getGraphDegree,
                               "Out-degree of the search graph.")
        .def("get_graph_degree", &GpuIndexSearchGraph::getGraphDegree,
             "Out-degree of the search graph.")
        .def("getGraphDegree", &GpuIndexSearchGraph::getGraphDegree,
             "C++ spelling of get_graph_degree.")
        .def("get_flat_metric", &GpuIndexSearchGraph::getFlatMetric,
             "The FlatMetric (L2, InnerProduct, Cosine, Pearson).")
        .def("getFlatMetric", &GpuIndexSearchGraph::getFlatMetric,
             "C++ spelling of get_flat_metric.")
        .def("getDevice", &GpuIndexSearchGraph::getDevice, "The device of this index.")
        .def_property_readonly("device", &GpuIndexSearchGraph::getDevice,
                               "The device of this index.")
        .def("get_config", &GpuIndexSearchGraph::getConfig, "A copy of the configuration.")
        .def("getConfig", &GpuIndexSearchGraph::getConfig, "C++ spelling of get_config.")
        .def("get_search_graph", &getSearchGraph, R"doc(
The search graph: an (ntotal, graph_degree) int32 array, row i holding the
out-neighbours of node i (-1: an empty slot, only when ntotal <= graph_degree).
)doc")
        .def("getSearchGraph", &getSearchGraph, "C++ spelling of get_search_graph.")
        .def("get_knn_graph", &getKnnGraph,
             "The GNND k-NN graph under the search graph: an (ntotal, knn_degree) int32 "
             "array, closest first.")
        .def("getKnnGraph", &getKnnGraph, "C++ spelling of get_knn_graph.")
        .def("get_entry_points", &getEntryPoints,
             "The entry-point sample: a 1-D int32 array of sorted node ids (empty when "
             "entry_points is 0).")
        .def("getEntryPoints", &getEntryPoints, "C++ spelling of get_entry_points.")
        .def_property_readonly("knn_build_seconds", &GpuIndexSearchGraph::getKnnBuildSeconds,
                               "Seconds the last add spent building the k-NN graph.")
        .def_property_readonly("optimize_seconds", &GpuIndexSearchGraph::getOptimizeSeconds,
                               "Seconds the last add spent turning it into the search graph "
                               "(after remove_ids: its compaction and the graph's patch or "
                               "pruning).")
        .def_property_readonly("removed_since_prune", &GpuIndexSearchGraph::getRemovedSincePrune,
                               "Nodes removed since the search graph was last pruned from the "
                               "k-NN lists: remove_ids patches the graph while this stays within "
                               "5% of the nodes of that pruning, and prunes again past it.")
        .def_property_readonly(
                "last_knn_add_build",
                [](const GpuIndexSearchGraph& g) {
                    return std::string(gpu::addBuildName(g.getLastKnnAddBuild()));
                },
                "How the last add built the k-NN lists: 'one-shot' or 'partitioned' ('auto' "
                "before any add); 'auto' in knn_build means one-shot where it fits in device "
                "memory.")
        .def("getKnnBuildSeconds", &GpuIndexSearchGraph::getKnnBuildSeconds,
             "C++ spelling of knn_build_seconds.")
        .def("getOptimizeSeconds", &GpuIndexSearchGraph::getOptimizeSeconds,
             "C++ spelling of optimize_seconds.")
        .def("getRemovedSincePrune", &GpuIndexSearchGraph::getRemovedSincePrune,
             "C++ spelling of removed_since_prune.")
        .def("get_unlike_query_counts", &unlikeQueryCounts,
             "Queries searched with detection on, flagged as unlike the data, answered "
             "by exact search, answered by probing the nearest lists, and kept with the "
             "graph's answers for lack of device memory for the lists or the exact copy, "
             "since construction or reset_unlike_query_counts() (a dict).")
        .def("getUnlikeQueryCounts", &unlikeQueryCounts,
             "C++ spelling of get_unlike_query_counts.")
        .def("reset_unlike_query_counts", &GpuIndexSearchGraph::resetUnlikeQueryCounts,
             "Sets get_unlike_query_counts() back to zero.")
        .def("resetUnlikeQueryCounts", &GpuIndexSearchGraph::resetUnlikeQueryCounts,
             "C++ spelling of reset_unlike_query_counts.");
    defTwinCopies<faiss::IndexHNSWFlat>(cls, "IndexHNSWFlat", [](const GpuIndexSearchGraph& self) {
        return std::make_unique<faiss::IndexHNSWFlat>(
            self.d, std::max(1, self.getGraphDegree() / 2), self.metric_type);
    });
}

}  // namespace

void bindSearchGraph(py::module_& m) {
    bindConfig(m);
    bindIndexClass(m);
}

}  // namespace python
}  // namespace faiss_ext
