// Bi-level LSH (Pan & Manocha): the CPU twin faiss_ext::IndexBiLevelLSH,
// GpuIndexBiLevelLSH, their build configuration, the GPU options and the
// per-search parameters. The twin is our own type, a faiss.Index in Python
// (faiss_ext/__init__.py gives it its proxy class) that FAISS's wrappers
// take, but FAISS 1.7.3's writer does not know it: faiss_ext.write_index /
// serialize_index save it; faiss_ext/__init__.py adds to_index_flat() (the
// stored vectors as a faiss.IndexFlatL2).
#include <faiss/impl/FaissException.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuBiLevelLSHTuneEvaluator.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"

namespace faiss_ext {
namespace python {

namespace {

using gpu::GpuIndexBiLevelLSH;
using gpu::GpuIndexBiLevelLSHConfig;

/// A numpy array of shape `shape` that takes over v (no copy).
template <typename T>
py::array_t<T> vectorToNumpy(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
    auto* owned = new std::vector<T>(std::move(v));
    py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>(shape, owned->data(), owner);
}

template <typename T>
py::array_t<T> vectorToNumpy(std::vector<T>&& v) {
    const auto n = static_cast<py::ssize_t>(v.size());
    return vectorToNumpy(std::move(v), {n});
}

/// Stored vectors v (a whole number of rows of d floats) as an (n, d) array
/// that takes over v; the row count comes from v, not from an ntotal read
/// apart from the copy (another thread may have added since).
py::array_t<float> rowsToNumpy(std::vector<float>&& v, int d) {
    const auto cols = static_cast<py::ssize_t>(d);
    const auto rows = static_cast<py::ssize_t>(d > 0 ? v.size() / size_t(d) : 0);
    return vectorToNumpy(std::move(v), {rows, cols});
}

template <typename T>
py::array_t<T> copyToNumpy(const std::vector<T>& v) {
    return vectorToNumpy(std::vector<T>(v));
}

// ---- BiLevelLSHConfig: every assignment is checked by BiLevelLSHConfig::check
// on a copy (one rule for C++ and Python), a ValueError with its message.

void checkConfigOrValueError(const BiLevelLSHConfig& c) {
    try {
        c.check();
    } catch (const faiss::FaissException& e) {
        throw py::value_error(e.what());
    }
}

template <typename T>
void defConfigField(py::class_<BiLevelLSHConfig>& cls, const char* name, const char* alias,
                    T BiLevelLSHConfig::*field, const char* doc) {
    auto get = [field](const BiLevelLSHConfig& c) { return c.*field; };
    auto set = [field](BiLevelLSHConfig& c, T v) {
        BiLevelLSHConfig next = c;
        next.*field = v;
        checkConfigOrValueError(next);
        c = next;
    };
    cls.def_property(name, get, set, doc);
    if (alias) cls.def_property(alias, get, set, doc);
}

/// The shortest decimal text that reads back as the float f ("0.8", not
/// "0.800000011920929").
std::string floatText(float f) {
    char buf[32];
    for (int precision = 1; precision <= 9; ++precision) {
        std::snprintf(buf, sizeof(buf), "%.*g", precision, double(f));
        if (std::strtof(buf, nullptr) == f) break;
    }
    return buf;
}

std::string configRepr(const BiLevelLSHConfig& c) {
    return "BiLevelLSHConfig(tree_depth=" + std::to_string(c.treeDepth) +
           ", n_tables=" + std::to_string(c.nTables) +
           ", n_projections=" + std::to_string(c.nProjections) +
           ", bucket_width=" + floatText(c.bucketWidth) +
           ", mean_rule_c=" + floatText(c.meanRuleC) +
           ", diameter_iterations=" + std::to_string(c.diameterIterations) +
           ", cuckoo_sub_tables=" + std::to_string(c.cuckooSubTables) +
           ", cuckoo_max_load=" + floatText(c.cuckooMaxLoad) + ", seed=" + std::to_string(c.seed) +
           ", width_rule=" + std::string(py::str(py::cast(c.widthRule))) +
           ", width_neighbours=" + std::to_string(c.widthNeighbours) +
           ", default_nprobe=" + std::to_string(c.defaultNprobe) +
           ", default_group_probes=" + std::to_string(c.defaultGroupProbes) +
           ", default_group_margin=" + floatText(c.defaultGroupMargin) +
           ", default_min_candidates=" + std::to_string(c.defaultMinCandidates) +
           ", autotune_recall=" + floatText(c.autotuneRecall) +
           ", lattice=" + std::to_string(c.lattice) + ")";
}

void bindConfig(py::module_& m) {
    using namespace pybind11::literals;
    py::enum_<BiLevelWidthRule>(m, "BiLevelWidthRule", R"doc(
What BiLevelLSHConfig.bucket_width multiplies: NEIGHBOUR_DISTANCE (default:
each group's median distance to its width_neighbours-th nearest neighbour,
estimated from a sample of the training vectors) or RMS_RADIUS (each group's
RMS distance to its mean, the rule before issue 22). The C++ spellings
(NeighbourDistance, RmsRadius) are aliases.
)doc")
        .value("RMS_RADIUS", BiLevelWidthRule::RmsRadius)
        .value("NEIGHBOUR_DISTANCE", BiLevelWidthRule::NeighbourDistance)
        .value("RmsRadius", BiLevelWidthRule::RmsRadius)
        .value("NeighbourDistance", BiLevelWidthRule::NeighbourDistance);
    const BiLevelLSHConfig defaults;
    py::class_<BiLevelLSHConfig> cls(m, "BiLevelLSHConfig", R"doc(
Build parameters of Bi-level LSH (IndexBiLevelLSH and GpuIndexBiLevelLSH).

    cfg = faiss_ext.BiLevelLSHConfig(n_tables=10, n_projections=8, tree_depth=6)

tree_depth: RP-tree depth, 2^tree_depth groups ([0, 14], default 4);
n_tables: hash tables L ([1, 64], default 10); n_projections: projections
per table M ([1, 32], default 8); bucket_width: W_g = bucket_width x group
g's scale by width_rule (> 0, default 4: 4 x the median distance to the 10th
nearest neighbour); mean_rule_c: the RP-tree mean rule's c
(> 0, default 10); diameter_iterations: of the diameter approximation
([1, 1000], default 8); cuckoo_sub_tables: f ([2, 8], default 4);
cuckoo_max_load: largest keys / slots ((0, 0.95], default 0.8); seed: of
every random choice (default 1234). Properties only (not constructor
arguments): width_rule (a BiLevelWidthRule), width_neighbours ([1, 1024],
default 10); default_nprobe, default_group_probes, default_group_margin,
default_min_candidates: the search settings of a search without parameters
(defaults 1, 4, 0.05, 0; the autotuner writes its choice there);
autotune_recall: > 0 makes train() tune the configuration for that
recall@width_neighbours first ((0, 1], default 0: off; see
autotune_bilevel_lsh). Out-of-range values raise ValueError.
The C++ spellings (treeDepth, nTables, nProjections, bucketWidth, meanRuleC,
diameterIterations, cuckooSubTables, cuckooMaxLoad, widthRule,
widthNeighbours, defaultNprobe, defaultGroupProbes, defaultGroupMargin,
defaultMinCandidates, autotuneRecall) are aliases.
)doc");
    cls.def(py::init([](int treeDepth, int nTables, int nProjections, float bucketWidth,
                        float meanRuleC, int diameterIterations, int cuckooSubTables,
                        float cuckooMaxLoad, uint64_t seed) {
                BiLevelLSHConfig c;
                c.treeDepth = treeDepth;
                c.nTables = nTables;
                c.nProjections = nProjections;
                c.bucketWidth = bucketWidth;
                c.meanRuleC = meanRuleC;
                c.diameterIterations = diameterIterations;
                c.cuckooSubTables = cuckooSubTables;
                c.cuckooMaxLoad = cuckooMaxLoad;
                c.seed = seed;
                checkConfigOrValueError(c);
                return c;
            }),
            "tree_depth"_a = defaults.treeDepth, "n_tables"_a = defaults.nTables,
            "n_projections"_a = defaults.nProjections, "bucket_width"_a = defaults.bucketWidth,
            "mean_rule_c"_a = defaults.meanRuleC,
            "diameter_iterations"_a = defaults.diameterIterations,
            "cuckoo_sub_tables"_a = defaults.cuckooSubTables,
            "cuckoo_max_load"_a = defaults.cuckooMaxLoad, "seed"_a = defaults.seed);
    defConfigField(cls, "tree_depth", "treeDepth", &BiLevelLSHConfig::treeDepth,
                   "RP-tree depth: 2^tree_depth groups ([0, 14]).");
    defConfigField(cls, "n_tables", "nTables", &BiLevelLSHConfig::nTables,
                   "Hash tables L ([1, 64]).");
    defConfigField(cls, "n_projections", "nProjections", &BiLevelLSHConfig::nProjections,
                   "Projections per table M ([1, 32]).");
    defConfigField(cls, "bucket_width", "bucketWidth", &BiLevelLSHConfig::bucketWidth,
                   "Bucket width as a multiple of each group's scale by width_rule (> 0).");
    defConfigField(cls, "width_rule", "widthRule", &BiLevelLSHConfig::widthRule,
                   "What bucket_width multiplies (BiLevelWidthRule).");
    defConfigField(cls, "lattice", nullptr, &BiLevelLSHConfig::lattice,
                   "Second-level lattice: 0 the Z^M grid, 1 E8 (n_projections a multiple of 8; "
                   "searches take nprobe 1).");
    defConfigField(cls, "width_neighbours", "widthNeighbours", &BiLevelLSHConfig::widthNeighbours,
                   "k of the k-th neighbour distance of NEIGHBOUR_DISTANCE ([1, 1024]).");
    defConfigField(cls, "default_nprobe", "defaultNprobe", &BiLevelLSHConfig::defaultNprobe,
                   "nprobe of a search without parameters ([1, 128]).");
    defConfigField(cls, "default_group_probes", "defaultGroupProbes",
                   &BiLevelLSHConfig::defaultGroupProbes,
                   "group_probes of a search without parameters ([1, 16]).");
    defConfigField(cls, "default_group_margin", "defaultGroupMargin",
                   &BiLevelLSHConfig::defaultGroupMargin,
                   "group_margin of a search without parameters (>= 0).");
    defConfigField(cls, "default_min_candidates", "defaultMinCandidates",
                   &BiLevelLSHConfig::defaultMinCandidates,
                   "min_candidates of a search without parameters (>= 0, 0: k).");
    defConfigField(cls, "autotune_recall", "autotuneRecall", &BiLevelLSHConfig::autotuneRecall,
                   "> 0: train() first tunes the configuration for this recall ([0, 1]).");
    defConfigField(cls, "mean_rule_c", "meanRuleC", &BiLevelLSHConfig::meanRuleC,
                   "c of the RP-tree mean rule (> 0).");
    defConfigField(cls, "diameter_iterations", "diameterIterations",
                   &BiLevelLSHConfig::diameterIterations,
                   "Iterations of the diameter approximation ([1, 1000]).");
    defConfigField(cls, "cuckoo_sub_tables", "cuckooSubTables", &BiLevelLSHConfig::cuckooSubTables,
                   "Cuckoo hash sub-tables f ([2, 8]).");
    defConfigField(cls, "cuckoo_max_load", "cuckooMaxLoad", &BiLevelLSHConfig::cuckooMaxLoad,
                   "Largest cuckoo load, keys / slots ((0, 0.95]).");
    defConfigField(cls, "seed", nullptr, &BiLevelLSHConfig::seed,
                   "Seed of every random choice (projections, directions, hash functions).");
    cls.def("check", &checkConfigOrValueError, "Raises ValueError unless every field is in range.")
        .def("__repr__", &configRepr)
        .def(
            "__eq__",
            [](const BiLevelLSHConfig& a, const BiLevelLSHConfig& b) {
                return a.treeDepth == b.treeDepth && a.nTables == b.nTables &&
                       a.nProjections == b.nProjections && a.bucketWidth == b.bucketWidth &&
                       a.meanRuleC == b.meanRuleC && a.diameterIterations == b.diameterIterations &&
                       a.cuckooSubTables == b.cuckooSubTables &&
                       a.cuckooMaxLoad == b.cuckooMaxLoad && a.seed == b.seed &&
                       a.widthRule == b.widthRule && a.widthNeighbours == b.widthNeighbours &&
                       a.defaultNprobe == b.defaultNprobe &&
                       a.defaultGroupProbes == b.defaultGroupProbes &&
                       a.defaultGroupMargin == b.defaultGroupMargin &&
                       a.defaultMinCandidates == b.defaultMinCandidates &&
                       a.autotuneRecall == b.autotuneRecall && a.lattice == b.lattice;
            },
            py::is_operator());
}

// ---- search parameters

int checkNprobe(int v) {
    if (v < 1 || v > lsh::kMaxProbes) {
        throw py::value_error("nprobe must be in [1, " + std::to_string(lsh::kMaxProbes) +
                              "] (and at most 1 + 2M + 2M(M-1) for M projections), got " +
                              std::to_string(v));
    }
    return v;
}

int64_t checkMinCandidates(int64_t v) {
    if (v < 0) {
        throw py::value_error("min_candidates must be >= 0 (0: k), got " + std::to_string(v));
    }
    return v;
}

int checkTables(int v) {
    if (v < 0 || v > lsh::kMaxTables) {
        throw py::value_error("tables must be 0 (all) or in [1, L], got " + std::to_string(v));
    }
    return v;
}

float checkGroupMargin(float v) {
    if (!(v >= 0.f) || !std::isfinite(v)) {
        throw py::value_error("group_margin must be a finite value >= 0, got " + floatText(v));
    }
    return v;
}

int checkGroupProbes(int v) {
    if (v < 1 || v > 16) {
        throw py::value_error("group_probes must be in [1, 16], got " + std::to_string(v));
    }
    return v;
}

void bindSearchParameters(py::module_& m) {
    using namespace pybind11::literals;
    py::enum_<BiLevelShortList>(m, "BiLevelShortList", R"doc(
How GpuIndexBiLevelLSH searches the short list (the CPU twin always uses a
heap): AUTO (the per-query heap for k <= heap_max_k when the queries hold
at most heap_max_candidates candidates each on average, else the work queue),
HEAP (one warp per query keeps its k best), WORK_QUEUE (clustered sort of all
(query, candidate) pairs, then compaction). The C++ spellings (Auto, Heap,
WorkQueue) are aliases.
)doc")
        .value("AUTO", BiLevelShortList::Auto)
        .value("HEAP", BiLevelShortList::Heap)
        .value("WORK_QUEUE", BiLevelShortList::WorkQueue)
        .value("Auto", BiLevelShortList::Auto)
        .value("Heap", BiLevelShortList::Heap)
        .value("WorkQueue", BiLevelShortList::WorkQueue);

    const SearchParametersBiLevelLSH defaults;
    py::class_<SearchParametersBiLevelLSH, faiss::SearchParameters> cls(
        m, "SearchParametersBiLevelLSH", R"doc(
Per-search knobs of IndexBiLevelLSH and GpuIndexBiLevelLSH
(index.search(x, k, params), index.get_candidates(x, k, params)).

nprobe: buckets probed per table, the query's own included (multi-probe;
[1, 128] and at most 1 + 2M + 2M(M-1); default 1); min_candidates: per
table, when the probed buckets hold fewer items, the query's bucket widens
along the Morton hierarchy until it holds this many (0: k; default 0);
tables: tables searched (0: all, default); group_probes: RP-tree groups
searched per query ([1, 16], default 1: the query's own leaf); group_margin:
when > 0, a group beyond the query's own is searched only when the query is
within group_margin x its group's bucket width of it (default 0: all
group_probes groups); short_list:
a BiLevelShortList (GPU only). Values the index cannot take (nprobe past
1 + 2M + 2M(M-1), tables > L) raise RuntimeError at the search. The C++
spellings (minCandidates, groupProbes, groupMargin, shortList) are aliases.
A search without parameters uses the index configuration's default_*
settings instead.
)doc");
    cls.def(py::init([](int nprobe, int64_t minCandidates, int tables, int groupProbes,
                        BiLevelShortList shortList, float groupMargin) {
                SearchParametersBiLevelLSH p;
                p.nprobe = checkNprobe(nprobe);
                p.minCandidates = checkMinCandidates(minCandidates);
                p.tables = checkTables(tables);
                p.groupProbes = checkGroupProbes(groupProbes);
                p.shortList = shortList;
                p.groupMargin = checkGroupMargin(groupMargin);
                return p;
            }),
            "nprobe"_a = defaults.nprobe, "min_candidates"_a = defaults.minCandidates,
            "tables"_a = defaults.tables, "group_probes"_a = defaults.groupProbes,
            "short_list"_a = defaults.shortList, "group_margin"_a = defaults.groupMargin);
    auto marginGet = [](const SearchParametersBiLevelLSH& p) { return p.groupMargin; };
    auto marginSet = [](SearchParametersBiLevelLSH& p, float v) {
        p.groupMargin = checkGroupMargin(v);
    };
    cls.def_property("group_margin", marginGet, marginSet,
                     "Search a further group only within group_margin x W of it (0: all).")
        .def_property("groupMargin", marginGet, marginSet, "C++ spelling of group_margin.");
    auto nprobeGet = [](const SearchParametersBiLevelLSH& p) { return p.nprobe; };
    auto nprobeSet = [](SearchParametersBiLevelLSH& p, int v) { p.nprobe = checkNprobe(v); };
    auto minGet = [](const SearchParametersBiLevelLSH& p) { return p.minCandidates; };
    auto minSet = [](SearchParametersBiLevelLSH& p, int64_t v) {
        p.minCandidates = checkMinCandidates(v);
    };
    auto tablesGet = [](const SearchParametersBiLevelLSH& p) { return p.tables; };
    auto tablesSet = [](SearchParametersBiLevelLSH& p, int v) { p.tables = checkTables(v); };
    auto groupsGet = [](const SearchParametersBiLevelLSH& p) { return p.groupProbes; };
    auto groupsSet = [](SearchParametersBiLevelLSH& p, int v) {
        p.groupProbes = checkGroupProbes(v);
    };
    cls.def_property("nprobe", nprobeGet, nprobeSet, "Buckets probed per table (multi-probe).")
        .def_property("min_candidates", minGet, minSet,
                      "Per table, widen the bucket along the Morton hierarchy to at least "
                      "this many items (0: k).")
        .def_property("minCandidates", minGet, minSet, "C++ spelling of min_candidates.")
        .def_property("tables", tablesGet, tablesSet, "Tables searched (0: all).")
        .def_property("group_probes", groupsGet, groupsSet,
                      "RP-tree groups searched per query (1: the query's own).")
        .def_property("groupProbes", groupsGet, groupsSet, "C++ spelling of group_probes.")
        .def_readwrite("short_list", &SearchParametersBiLevelLSH::shortList,
                       "Short-list algorithm on the GPU (BiLevelShortList).")
        .def_readwrite("shortList", &SearchParametersBiLevelLSH::shortList,
                       "C++ spelling of short_list.")
        .def("__repr__", [](const SearchParametersBiLevelLSH& p) {
            return "SearchParametersBiLevelLSH(nprobe=" + std::to_string(p.nprobe) +
                   ", min_candidates=" + std::to_string(p.minCandidates) +
                   ", tables=" + std::to_string(p.tables) +
                   ", group_probes=" + std::to_string(p.groupProbes) +
                   ", group_margin=" + floatText(p.groupMargin) +
                   ", short_list=" + std::string(py::str(py::cast(p.shortList))) + ")";
        });
}

// ---- shared by the CPU twin and the GPU index

/// get_candidates: (lims, ids), int64 arrays of shapes (n + 1,) and (lims[n],).
template <class IndexT>
py::tuple getCandidates(const IndexT& self, const py::handle& x, int64_t k,
                        const faiss::SearchParameters* params) {
    FloatArray a = toFloatMatrix(x, self.d, "x");
    if (k <= 0) throw py::value_error("k must be > 0, got k=" + std::to_string(k));
    const int64_t n = a.shape(0);
    const float* xp = a.data();
    std::vector<int64_t> lims, ids;
    {
        py::gil_scoped_release release;
        self.getCandidates(n, xp, k, &lims, &ids, params);
    }
    if (lims.empty()) lims.assign(1, 0);  // n == 0
    return py::make_tuple(vectorToNumpy(std::move(lims)), vectorToNumpy(std::move(ids)));
}

/// group_sizes: vectors added per RP-tree group, int64.
template <class IndexT>
py::array_t<int64_t> groupSizes(const IndexT& self) {
    std::vector<int64_t> sizes;
    {
        py::gil_scoped_release release;
        sizes = self.groupSizes();
    }
    return vectorToNumpy(std::move(sizes));
}

const char* kGroupSizesDoc =
    "Vectors added per RP-tree group, an int64 array (empty when untrained).";

const char* kGetCandidatesDoc = R"doc(
The candidate sets search() ranks: returns (lims, ids), int64 arrays; query
i's distinct candidate ids, ascending, are ids[lims[i]:lims[i + 1]]
(lims has n + 1 entries, like faiss.RangeSearchResult). k resolves
min_candidates = 0; params: a SearchParametersBiLevelLSH or None. The GIL is
released meanwhile.
)doc";

/// The model as a dict of numpy arrays (empty dict when untrained).
py::dict modelToDict(const BiLevelLSHModel& m) {
    py::dict out;
    if (m.empty()) return out;
    const auto nodes = static_cast<py::ssize_t>(m.internalNodes());
    const auto G = static_cast<py::ssize_t>(m.groups());
    const auto LM = static_cast<py::ssize_t>(m.nTables) * m.nProjections;
    const auto d = static_cast<py::ssize_t>(m.d);
    out["d"] = m.d;
    out["depth"] = m.depth;
    out["n_tables"] = m.nTables;
    out["n_projections"] = m.nProjections;
    out["bits"] = m.bits;
    out["node_rule"] = vectorToNumpy(std::vector<uint8_t>(m.nodeRule), {nodes});
    out["node_vec"] = vectorToNumpy(std::vector<float>(m.nodeVec), {nodes, d});
    out["node_threshold"] = copyToNumpy(m.nodeThreshold);
    out["leaf_mean"] = vectorToNumpy(std::vector<float>(m.leafMean), {G, d});
    out["leaf_width"] = copyToNumpy(m.leafWidth);
    out["leaf_offset"] = vectorToNumpy(std::vector<float>(m.leafOffset), {G, LM});
    out["leaf_train_count"] = copyToNumpy(m.leafTrainCount);
    out["proj"] = vectorToNumpy(std::vector<float>(m.proj), {LM, d});
    out["proj_bias"] = copyToNumpy(m.projBias);
    return out;
}

const char* kModelDoc = R"doc(
The trained model as a dict of numpy arrays (a copy; {} when untrained): d,
depth, n_tables, n_projections, bits; node_rule (internal nodes, 0 =
projection split, 1 = distance to the mean), node_vec (nodes x d),
node_threshold; leaf_mean (groups x d), leaf_width, leaf_offset
(groups x L*M), leaf_train_count; proj (L*M x d), proj_bias (L*M).
)doc";

void bindCpuIndex(py::module_& m) {
    using namespace pybind11::literals;
    py::class_<IndexBiLevelLSH, faiss::Index> cls(m, "IndexBiLevelLSH", R"doc(
Bi-level LSH on the CPU (OpenMP), the twin of GpuIndexBiLevelLSH and its test
oracle: an RP-tree splits the data into 2^tree_depth groups (level one), then
per group L tables of M p-stable projections hash the vectors into
Morton-ordered buckets (level two); a query's candidates (its buckets,
multi-probe neighbours, Morton widening) are ranked by exact L2 distance.

    index = faiss_ext.IndexBiLevelLSH(d, faiss_ext.BiLevelLSHConfig(n_tables=10))
    index = faiss_ext.index_factory(d, "BiLSH10x8_t6_w0.75")   # the same, by name
    index.train(xt)                   # needs >= 2^tree_depth vectors
    index.add(xb)
    D, I = index.search(xq, 10, faiss_ext.SearchParametersBiLevelLSH(nprobe=8))
    lims, ids = index.get_candidates(xq, 10)

METRIC_L2 only; vectors must be finite. A faiss.Index that FAISS's wrappers
take, but FAISS 1.7.3's writer does not know it (faiss.write_index refuses
it): save it with faiss_ext.write_index / serialize_index, read it back with
faiss_ext.read_index. to_index_flat()
gives the stored vectors as a faiss.IndexFlatL2 (exact search, same ids).
)doc");
    cls.def(py::init([](int d, std::optional<BiLevelLSHConfig> config, int metric) {
                if (d <= 0) throw py::value_error("d must be > 0, got " + std::to_string(d));
                return std::make_unique<IndexBiLevelLSH>(d, config.value_or(BiLevelLSHConfig()),
                                                         static_cast<faiss::MetricType>(metric));
            }),
            "d"_a, "config"_a = py::none(), "metric"_a = static_cast<int>(faiss::METRIC_L2))
        .def_property_readonly(
            "config", [](const IndexBiLevelLSH& self) { return self.getConfig(); },
            "A copy of the build configuration (BiLevelLSHConfig).")
        .def_property_readonly(
            "autotune_verdict", [](const IndexBiLevelLSH& self) { return self.getAutoTuneVerdict(); },
            "The autotuner's verdict at the last train() ('' when it did not tune).")
        .def(
            "get_config", [](const IndexBiLevelLSH& self) { return self.getConfig(); },
            "A copy of the build configuration (BiLevelLSHConfig).")
        .def(
            "getConfig", [](const IndexBiLevelLSH& self) { return self.getConfig(); },
            "C++ spelling of get_config.")
        .def_property_readonly(
            "tree_depth", [](const IndexBiLevelLSH& s) { return s.getConfig().treeDepth; },
            "RP-tree depth.")
        .def_property_readonly(
            "n_tables", [](const IndexBiLevelLSH& s) { return s.getConfig().nTables; },
            "Hash tables L.")
        .def_property_readonly(
            "n_projections", [](const IndexBiLevelLSH& s) { return s.getConfig().nProjections; },
            "Projections per table M.")
        .def_property_readonly(
            "bucket_width", [](const IndexBiLevelLSH& s) { return s.getConfig().bucketWidth; },
            "Bucket width factor.")
        .def_property_readonly(
            "n_groups",
            [](const IndexBiLevelLSH& s) { return s.is_trained ? s.getModel().groups() : 0; },
            "RP-tree groups (2^tree_depth once trained, 0 before).")
        .def("get_candidates", &getCandidates<IndexBiLevelLSH>, "x"_a, "k"_a, "params"_a = nullptr,
             kGetCandidatesDoc)
        .def("getCandidates", &getCandidates<IndexBiLevelLSH>, "x"_a, "k"_a, "params"_a = nullptr,
             "C++ spelling of get_candidates.")
        .def("group_sizes", &groupSizes<IndexBiLevelLSH>, kGroupSizesDoc)
        .def("groupSizes", &groupSizes<IndexBiLevelLSH>, "C++ spelling of group_sizes.")
        .def(
            "get_vectors",
            [](const IndexBiLevelLSH& self) {
                // a copy under the index's reader lock (an add in another
                // thread changed the vectors while they were copied: heap
                // corruption); the shape from what was copied
                std::vector<float> v;
                {
                    py::gil_scoped_release release;
                    v = self.copyVectors();
                }
                return rowsToNumpy(std::move(v), self.d);
            },
            "The stored vectors, an (ntotal, d) float32 array (a consistent copy, also while "
            "other threads add).")
        .def(
            "get_model",
            [](const IndexBiLevelLSH& self) {
                BiLevelLSHModel m = self.readLocked([&] { return self.getModel(); });
                return modelToDict(m);
            },
            kModelDoc)
        .def_property_readonly(
            "num_bucket_keys",
            [](const IndexBiLevelLSH& self) { return self.getTables().bucketKeys.size(); },
            "Buckets (keys in the cuckoo hash table) over all tables.")
        .def_property_readonly(
            "cuckoo_load", [](const IndexBiLevelLSH& self) { return self.getCuckooTable().load(); },
            "Load of the cuckoo hash table (keys / slots).");
}

// ---- GPU

int checkHeapMaxK(int v) {
    if (v < 0 || v > 1024) {
        throw py::value_error("heap_max_k must be in [0, 1024], got " + std::to_string(v));
    }
    return v;
}

double checkHeapMaxCandidates(double v) {
    if (!(v >= 0)) {
        throw py::value_error("heap_max_candidates must be >= 0, got " + std::to_string(v));
    }
    return v;
}

size_t checkWorkQueueBytes(long long v) {
    if (v < (1LL << 20)) {
        throw py::value_error("work_queue_bytes must be at least 1 MiB (1048576), got " +
                              std::to_string(v));
    }
    return static_cast<size_t>(v);
}

void bindGpuIndex(py::module_& m) {
    using namespace pybind11::literals;
    const GpuIndexBiLevelLSHConfig defaults;
    py::class_<GpuIndexBiLevelLSHConfig, gpu::GpuIndexConfig> cfg(m, "GpuIndexBiLevelLSHConfig",
                                                                  R"doc(
GPU options of GpuIndexBiLevelLSH (the build parameters are a BiLevelLSHConfig).

device: the GPU (default 0); heap_max_k, heap_max_dim and heap_max_candidates:
BiLevelShortList.AUTO uses the per-query heap when k <= heap_max_k ([0, 1024],
default 1024) and either d <= heap_max_dim (default 16) or the queries hold at
most heap_max_candidates candidates each on average (>= 0, default 256), else
the work queue; work_queue_bytes: device memory for the work queue of one
batch of queries (at least 1 MiB, default 2^30). The C++ spellings (heapMaxK,
heapMaxDim, heapMaxCandidates, workQueueBytes) are aliases.
)doc");
    cfg.def(
        py::init([](int device, int heapMaxK, double heapMaxCandidates, long long workQueueBytes) {
            GpuIndexBiLevelLSHConfig c;
            c.device = device;
            c.heapMaxK = checkHeapMaxK(heapMaxK);
            c.heapMaxCandidates = checkHeapMaxCandidates(heapMaxCandidates);
            c.workQueueBytes = checkWorkQueueBytes(workQueueBytes);
            return c;
        }),
        "device"_a = 0, "heap_max_k"_a = defaults.heapMaxK,
        "heap_max_candidates"_a = defaults.heapMaxCandidates,
        "work_queue_bytes"_a = static_cast<long long>(defaults.workQueueBytes));
    auto heapGet = [](const GpuIndexBiLevelLSHConfig& c) { return c.heapMaxK; };
    auto heapSet = [](GpuIndexBiLevelLSHConfig& c, int v) { c.heapMaxK = checkHeapMaxK(v); };
    auto candGet = [](const GpuIndexBiLevelLSHConfig& c) { return c.heapMaxCandidates; };
    auto candSet = [](GpuIndexBiLevelLSHConfig& c, double v) {
        c.heapMaxCandidates = checkHeapMaxCandidates(v);
    };
    auto wqGet = [](const GpuIndexBiLevelLSHConfig& c) { return c.workQueueBytes; };
    auto wqSet = [](GpuIndexBiLevelLSHConfig& c, long long v) {
        c.workQueueBytes = checkWorkQueueBytes(v);
    };
    cfg.def_property("heap_max_k", heapGet, heapSet,
                     "AUTO short list: the per-query heap only for k <= this ([0, 1024]).")
        .def_property("heapMaxK", heapGet, heapSet, "C++ spelling of heap_max_k.")
        .def_property("heap_max_candidates", candGet, candSet,
                      "AUTO short list: the per-query heap only when the queries hold at most "
                      "this many candidates each on average (>= 0).")
        .def_property("heapMaxCandidates", candGet, candSet, "C++ spelling of heap_max_candidates.")
        .def_property(
            "heap_max_dim", [](const GpuIndexBiLevelLSHConfig& c) { return c.heapMaxDim; },
            [](GpuIndexBiLevelLSHConfig& c, int v) {
                if (v < 0) throw py::value_error("heap_max_dim must be >= 0");
                c.heapMaxDim = v;
            },
            "AUTO short list: the per-query heap whatever the candidates when d <= this.")
        .def_property("work_queue_bytes", wqGet, wqSet,
                      "Device memory for the work queue of one batch of queries (bytes).")
        .def_property("workQueueBytes", wqGet, wqSet, "C++ spelling of work_queue_bytes.")
        .def("__repr__", [](const GpuIndexBiLevelLSHConfig& c) {
            return "GpuIndexBiLevelLSHConfig(device=" + std::to_string(c.device) +
                   ", heap_max_k=" + std::to_string(c.heapMaxK) + ", heap_max_candidates=" +
                   std::string(py::str(py::float_(c.heapMaxCandidates))) +
                   ", work_queue_bytes=" + std::to_string(c.workQueueBytes) + ")";
        });

    using LshConfig = std::optional<BiLevelLSHConfig>;
    using GpuConfig = std::optional<GpuIndexBiLevelLSHConfig>;
    py::class_<GpuIndexBiLevelLSH, faiss::Index> cls(m, "GpuIndexBiLevelLSH", R"doc(
Approximate k-NN on the GPU by Bi-level LSH (Pan & Manocha): the RP-tree and
the projections are trained on the GPU, the buckets live in a GPU cuckoo hash
table, the short list is searched by a per-query heap or a work queue. The
twin of IndexBiLevelLSH: for the same configuration and training data both
give every query the same candidates.

    res = faiss_ext.StandardGpuResources()
    index = faiss_ext.GpuIndexBiLevelLSH(res, d, faiss_ext.BiLevelLSHConfig(n_tables=10))
    index.train(xt); index.add(xb)
    D, I = index.search(xq, 10, faiss_ext.SearchParametersBiLevelLSH(nprobe=8))
    cpu = index.copy_to()                      # a faiss_ext.IndexBiLevelLSH
    gpu = faiss_ext.GpuIndexBiLevelLSH(res, cpu)   # or index_cpu_to_gpu(res, 0, cpu)

Saved by faiss_ext.write_index as its CPU twin.
)doc");
    cls.def(py::init(
                [](gpu::GpuResourcesProvider* res, int d, LshConfig config, GpuConfig gpuConfig) {
                    return std::make_unique<GpuIndexBiLevelLSH>(
                        res, d, config.value_or(BiLevelLSHConfig()),
                        gpuConfig.value_or(GpuIndexBiLevelLSHConfig()));
                }),
            "res"_a, "d"_a, "config"_a = py::none(), "gpu_config"_a = py::none(),
            py::keep_alive<1, 2>())
        .def(py::init([](gpu::GpuResourcesProvider* res, const IndexBiLevelLSH& index,
                         GpuConfig gpuConfig) {
                 const GpuIndexBiLevelLSHConfig c = gpuConfig.value_or(GpuIndexBiLevelLSHConfig());
                 py::gil_scoped_release release;
                 return std::make_unique<GpuIndexBiLevelLSH>(res, &index, c);
             }),
             "res"_a, "index"_a, "gpu_config"_a = py::none(), py::keep_alive<1, 2>(),
             "A copy of a CPU twin (configuration, model, vectors; tables rebuilt on the GPU).")
        .def(
            "copy_from",
            [](GpuIndexBiLevelLSH& self, const IndexBiLevelLSH& index) {
                py::gil_scoped_release release;
                self.copyFrom(&index);
            },
            "index"_a,
            "Replaces everything with the CPU twin's configuration, model and vectors (same "
            "d; else RuntimeError, this index unchanged).")
        .def(
            "copyFrom",
            [](GpuIndexBiLevelLSH& self, const IndexBiLevelLSH& index) {
                py::gil_scoped_release release;
                self.copyFrom(&index);
            },
            "index"_a, "C++ spelling of copy_from.")
        .def(
            "copy_to",
            [](const GpuIndexBiLevelLSH& self, py::object target) -> py::object {
                if (target.is_none()) {
                    auto out =
                        std::make_unique<IndexBiLevelLSH>(int(self.d), self.getBiLevelConfig());
                    {
                        py::gil_scoped_release release;
                        self.copyTo(out.get());
                    }
                    return py::cast(std::move(out));
                }
                auto* index = target.cast<IndexBiLevelLSH*>();
                {
                    py::gil_scoped_release release;
                    self.copyTo(index);
                }
                return target;
            },
            "index"_a = py::none(), R"doc(
Writes the configuration, model and vectors into ``index`` (an
IndexBiLevelLSH of the same d, which rebuilds the same tables on the CPU) and
returns it; None: a new IndexBiLevelLSH.
)doc")
        .def(
            "copyTo",
            [](const GpuIndexBiLevelLSH& self, IndexBiLevelLSH& index) {
                py::gil_scoped_release release;
                self.copyTo(&index);
            },
            "index"_a, "C++ spelling of copy_to (an IndexBiLevelLSH to overwrite).")
        .def("get_candidates", &getCandidates<GpuIndexBiLevelLSH>, "x"_a, "k"_a,
             "params"_a = nullptr, kGetCandidatesDoc)
        .def("getCandidates", &getCandidates<GpuIndexBiLevelLSH>, "x"_a, "k"_a,
             "params"_a = nullptr, "C++ spelling of get_candidates.")
        .def("group_sizes", &groupSizes<GpuIndexBiLevelLSH>, kGroupSizesDoc)
        .def("groupSizes", &groupSizes<GpuIndexBiLevelLSH>, "C++ spelling of group_sizes.")
        .def(
            "get_vectors",
            [](const GpuIndexBiLevelLSH& self) {
                std::vector<float> v;
                {
                    py::gil_scoped_release release;
                    v = self.getVectorsHost();
                }
                return rowsToNumpy(std::move(v), self.d);
            },
            "The stored vectors copied to the host, an (ntotal, d) float32 array.")
        .def(
            "get_model",
            [](const GpuIndexBiLevelLSH& self) { return modelToDict(self.getModel()); }, kModelDoc)
        .def_property_readonly(
            "config", [](const GpuIndexBiLevelLSH& self) { return self.getBiLevelConfig(); },
            "A copy of the build configuration (BiLevelLSHConfig).")
        .def_property_readonly(
            "autotune_verdict",
            [](const GpuIndexBiLevelLSH& self) { return self.getAutoTuneVerdict(); },
            "The autotuner's verdict at the last train() ('' when it did not tune).")
        .def(
            "get_config", [](const GpuIndexBiLevelLSH& self) { return self.getBiLevelConfig(); },
            "A copy of the build configuration (BiLevelLSHConfig).")
        .def(
            "get_gpu_config", [](const GpuIndexBiLevelLSH& self) { return self.getGpuConfig(); },
            "A copy of the GPU options (GpuIndexBiLevelLSHConfig).")
        .def_property_readonly("device", &GpuIndexBiLevelLSH::getDevice,
                               "The device of this index.")
        .def("getDevice", &GpuIndexBiLevelLSH::getDevice, "The device of this index.")
        .def_property_readonly("num_bucket_keys", &GpuIndexBiLevelLSH::numBucketKeys,
                               "Buckets (keys in the GPU cuckoo hash table) over all tables.")
        .def_property_readonly("cuckoo_load", &GpuIndexBiLevelLSH::cuckooLoad,
                               "Load of the GPU cuckoo hash table (keys / slots).")
        .def_property_readonly("cuckoo_attempts", &GpuIndexBiLevelLSH::cuckooAttempts,
                               "Builds the last GPU cuckoo table took (1 + restarts).")
        .def("auto_short_list", &GpuIndexBiLevelLSH::autoShortList, "k"_a, "mean_candidates"_a,
             "The BiLevelShortList that AUTO picks for k and a mean number of candidates per "
             "query.")
        .def("autoShortList", &GpuIndexBiLevelLSH::autoShortList, "k"_a, "meanCandidates"_a,
             "C++ spelling of auto_short_list.");
}

}  // namespace

void bindLsh(py::module_& m) {
    bindConfig(m);
    bindSearchParameters(m);
    bindCpuIndex(m);
    bindGpuIndex(m);
}

}  // namespace python
}  // namespace faiss_ext
