// GpuKnnGraphGNND (GPU NN-Descent k-NN graphs) and the out-of-core / multi-GPU
// build from a file. Its CPU twins (faiss.IndexNNDescentFlat, and
// faiss.IndexNSGFlat from to_index_nsg) are the FAISS objects of `import
// faiss` themselves (swig_bridge.h).
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexNSG.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/index_io.h"
#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"

namespace faiss_ext {
namespace python {

namespace {

using gpu::GnndFileBuildOptions;
using gpu::GnndFileBuildReport;
using gpu::GpuKnnGraphGNND;
using gpu::GpuKnnGraphGNNDConfig;
using gpu::VectorFileFormat;

// ---- argument checks of the config (the C++ constructor checks them too,
// with the degree; these give a ValueError at the assignment)

int checkSamples(int p) {
    if (p < 1 || p > 32) {
        throw py::value_error("samples (p, NEW and OLD samples per list) must be in [1, 32], got " +
                              std::to_string(p));
    }
    return p;
}

int checkMaxIterations(int it) {
    if (it < 1) throw py::value_error("max_iterations must be >= 1, got " + std::to_string(it));
    return it;
}

float checkThreshold(float t) {
    if (!(t >= 0.f && t < 1.f)) {
        throw py::value_error("termination_threshold must be in [0, 1), got " + std::to_string(t));
    }
    return t;
}

int checkBuildDegree(int b) {
    if (b < 0 || b % 32 != 0) {
        throw py::value_error(
            "build_degree must be 0 (the degree rounded up to a multiple of 32) or a positive "
            "multiple of 32 (>= the degree), got " +
            std::to_string(b));
    }
    return b;
}

int checkSearchL(int l) {
    if (l < 0) {
        throw py::value_error("search_l must be >= 0 (0: the default), got " + std::to_string(l));
    }
    return l;
}

py::dict statsToDict(const gpu::GnndIterationStats& s) {
    py::dict d;
    d["iteration"] = s.iteration;
    d["updates"] = s.updates;
    d["seconds"] = s.seconds;
    d["merge"] = s.merge;
    return d;
}

py::dict memoryToDict(const gpu::GnndMemoryEstimate& e) {
    py::dict d;
    d["vectors"] = e.vectors;
    d["graph"] = e.graph;
    d["build_temp"] = e.buildTemp;
    d["total"] = e.total();
    return d;
}

py::dict reportToDict(const GnndFileBuildReport& r) {
    py::dict d;
    d["n"] = r.n;
    d["d"] = r.d;
    d["shard_size"] = r.shardSize;
    d["shards"] = r.shards;
    d["merges"] = r.merges;
    d["build_seconds"] = r.buildSeconds;
    d["merge_seconds"] = r.mergeSeconds;
    d["total_seconds"] = r.totalSeconds;
    d["in_host_memory"] = r.inHostMemory;
    d["build_devices"] = r.buildDevices;
    d["build_degree"] = r.buildDegree;
    d["schedule"] = gpu::fileScheduleName(r.schedule);
    d["clusters"] = r.clusters;
    d["overlap"] = r.overlap;
    d["largest_cluster"] = r.largestCluster;
    d["partition_seconds"] = r.partitionSeconds;
    d["neighbour_merges"] = r.neighbourMerges;
    d["merge_pairs"] = r.mergePairs;
    d["cluster_build"] = gpu::clusterBuildName(r.clusterBuild);
    py::list steps;
    for (const auto& st : r.steps) {
        py::dict e;
        e["kind"] = st.kind == gpu::GnndFileBuildStep::Merge          ? "merge"
                    : st.kind == gpu::GnndFileBuildStep::ClusterBuild ? "cluster_build"
                                                                        : "shard_build";
        e["shard_a"] = st.shardA;
        e["shard_b"] = st.shardB;
        e["device"] = st.device;
        e["seconds"] = st.seconds;
        e["finished_at"] = st.finishedAt;
        e["seconds_left"] = st.secondsLeft;
        steps.append(e);
    }
    d["steps"] = steps;
    return d;
}

/// get_graph: (n, k) int64 ids, with (n, k) float32 distances when asked.
py::object getGraph(const GpuKnnGraphGNND& self, bool withDistances) {
    const int64_t n = self.ntotal;
    const int64_t k = self.getGraphDegree();
    py::array_t<int64_t> labels({n, k});
    py::array_t<float> distances(withDistances ? std::vector<int64_t>{n, k}
                                               : std::vector<int64_t>{0, k});
    int64_t* lp = labels.mutable_data();
    float* dp = withDistances ? distances.mutable_data() : nullptr;
    if (n > 0) {
        py::gil_scoped_release release;
        self.getGraph(lp, dp);
    }
    if (withDistances) return py::make_tuple(distances, labels);
    return std::move(labels);
}

py::array_t<int32_t> getGraphInt(const GpuKnnGraphGNND& self) {
    const int64_t n = self.ntotal;
    const int64_t k = self.getGraphDegree();
    std::vector<int> g;
    if (n > 0) {
        py::gil_scoped_release release;
        g = self.getGraphInt();
    }
    if (g.size() != size_t(n) * size_t(k)) {
        throw std::runtime_error("get_graph_int: the graph holds " + std::to_string(g.size()) +
                                 " ids, expected ntotal * k = " + std::to_string(n) + " * " +
                                 std::to_string(k));
    }
    return vectorToNumpy(std::move(g), {n, k});
}

/// The providers of gnnd_build_from_file: one provider, or a sequence of them.
std::vector<gpu::GpuResourcesProvider*> toProviders(const py::handle& res) {
    std::vector<gpu::GpuResourcesProvider*> out;
    if (py::isinstance<gpu::GpuResourcesProvider>(res)) {
        out.push_back(res.cast<gpu::GpuResourcesProvider*>());
        return out;
    }
    if (py::isinstance<py::sequence>(res) && !py::isinstance<py::str>(res)) {
        for (const py::handle& item : res.cast<py::sequence>()) {
            if (!py::isinstance<gpu::GpuResourcesProvider>(item)) {
                throw py::type_error(
                    "res must be a GpuResourcesProvider (e.g. StandardGpuResources) or a list "
                    "of them, got a list holding " +
                    typeName(item));
            }
            out.push_back(item.cast<gpu::GpuResourcesProvider*>());
        }
        if (out.empty()) throw py::value_error("res: the list of resources is empty");
        return out;
    }
    throw py::type_error(
        "res must be a GpuResourcesProvider (e.g. StandardGpuResources) or a list of them, got " +
        typeName(res));
}

gpu::GnndAddBuild parseAddBuild(const std::string& v) {
    if (v == "auto") return gpu::GnndAddBuild::Auto;
    if (v == "one-shot") return gpu::GnndAddBuild::OneShot;
    if (v == "partitioned") return gpu::GnndAddBuild::Partitioned;
    if (v == "one-shot-where-it-fits") return gpu::GnndAddBuild::OneShotWhereItFits;
    throw py::value_error(
            "add_build must be 'auto', 'one-shot', 'partitioned' or 'one-shot-where-it-fits', "
            "got '" + v + "'");
}

void bindConfig(py::module_& m) {
    using namespace pybind11::literals;
    const GpuKnnGraphGNNDConfig defaults;
    py::class_<GpuKnnGraphGNNDConfig, gpu::GpuIndexConfig> cfg(m, "GpuKnnGraphGNNDConfig", R"doc(
Build options of GpuKnnGraphGNND (the GNND paper's parameters).

    cfg = faiss_ext.GpuKnnGraphGNNDConfig(samples=16, max_iterations=10)

samples: p, NEW and OLD samples per list and iteration (1..32, default 32);
max_iterations: at most this many iterations (default 20);
termination_threshold: stop when fewer than this x n x k list entries change
in an iteration (default 0.001); build_degree: list length while building (0:
the degree rounded up to a multiple of 32; else a multiple of 32 >= the
degree); seed: of the random initial graph (default 1234); search_l:
candidate pool of search() (0: max(k, 2 x degree)); add_build: how add
builds, 'auto' (partitioned past 2M vectors added at once), 'one-shot' (one
GNND build), 'partitioned' (exact lists in k-means clusters: slower, recall
near 1 on large sets, docs/gnnd.md) or 'one-shot-where-it-fits' (one-shot
where it fits in device memory: what GpuIndexSearchGraph's 'auto' means, for
a navigable search graph); device: the GPU. The C++
spellings (maxIterations, terminationThreshold, buildDegree, searchL) are
aliases.
)doc");
    cfg.def(py::init([](int device, int samples, int maxIterations, float threshold,
                        int buildDegree, uint64_t seed, int searchL, const std::string& addBuild) {
                GpuKnnGraphGNNDConfig c;
                c.addBuild = parseAddBuild(addBuild);
                c.device = device;
                c.samples = checkSamples(samples);
                c.maxIterations = checkMaxIterations(maxIterations);
                c.terminationThreshold = checkThreshold(threshold);
                c.buildDegree = checkBuildDegree(buildDegree);
                c.seed = seed;
                c.searchL = checkSearchL(searchL);
                return c;
            }),
            "device"_a = 0, "samples"_a = defaults.samples,
            "max_iterations"_a = defaults.maxIterations,
            "termination_threshold"_a = defaults.terminationThreshold,
            "build_degree"_a = defaults.buildDegree, "seed"_a = defaults.seed,
            "search_l"_a = defaults.searchL, "add_build"_a = "auto");

    defCheckedInt(cfg, "samples", nullptr, &GpuKnnGraphGNNDConfig::samples, &checkSamples,
                  "p: NEW and OLD samples per list and iteration (1..32).");
    defCheckedInt(cfg, "max_iterations", "maxIterations", &GpuKnnGraphGNNDConfig::maxIterations,
                  &checkMaxIterations, "Maximum number of iterations (>= 1).");
    defCheckedInt(cfg, "build_degree", "buildDegree", &GpuKnnGraphGNNDConfig::buildDegree,
                  &checkBuildDegree,
                  "List length while building: 0 (the degree rounded up to a multiple of 32) or "
                  "a multiple of 32 >= the degree.");
    defCheckedInt(cfg, "search_l", "searchL", &GpuKnnGraphGNNDConfig::searchL, &checkSearchL,
                  "Candidate pool size of search() (0: max(k, 2 x degree)).");
    auto getThreshold = [](const GpuKnnGraphGNNDConfig& c) { return c.terminationThreshold; };
    auto setThreshold = [](GpuKnnGraphGNNDConfig& c, float t) {
        c.terminationThreshold = checkThreshold(t);
    };
    const char* thresholdDoc =
        "Stop when fewer than this x n x k list entries changed in an iteration ([0, 1)).";
    cfg.def_property("termination_threshold", getThreshold, setThreshold, thresholdDoc)
        .def_property("terminationThreshold", getThreshold, setThreshold, thresholdDoc)
        .def_readwrite("seed", &GpuKnnGraphGNNDConfig::seed,
                       "Seed of the random initial graph and of GGM's samples.")
        .def_property(
                "add_build",
                [](const GpuKnnGraphGNNDConfig& c) { return std::string(gpu::addBuildName(c.addBuild)); },
                [](GpuKnnGraphGNNDConfig& c, const std::string& v) { c.addBuild = parseAddBuild(v); },
                "How add builds: 'auto', 'one-shot', 'partitioned' or 'one-shot-where-it-fits' "
                "(docs/gnnd.md).")
        .def("__repr__", [](const GpuKnnGraphGNNDConfig& c) {
            return "GpuKnnGraphGNNDConfig(device=" + std::to_string(c.device) +
                   ", samples=" + std::to_string(c.samples) +
                   ", max_iterations=" + std::to_string(c.maxIterations) +
                   ", termination_threshold=" + std::to_string(c.terminationThreshold) +
                   ", build_degree=" + std::to_string(c.buildDegree) +
                   ", seed=" + std::to_string(c.seed) + ", search_l=" + std::to_string(c.searchL) +
                   ", add_build='" + gpu::addBuildName(c.addBuild) + "')";
        });

    py::class_<gpu::SearchParametersGNND, faiss::SearchParameters>(
        m, "SearchParametersGNND", "Per-search knobs of GpuKnnGraphGNND (search(x, k, params)).")
        .def(py::init([](int searchL) {
                 gpu::SearchParametersGNND p;
                 p.searchL = checkSearchL(searchL);
                 return p;
             }),
             "search_l"_a = 0)
        .def_property(
            "search_l", [](const gpu::SearchParametersGNND& p) { return p.searchL; },
            [](gpu::SearchParametersGNND& p, int l) { p.searchL = checkSearchL(l); },
            "Candidate pool size (0: the index's search_l); must be >= k when set.")
        .def_property(
            "searchL", [](const gpu::SearchParametersGNND& p) { return p.searchL; },
            [](gpu::SearchParametersGNND& p, int l) { p.searchL = checkSearchL(l); },
            "C++ spelling of search_l.");
}

void bindGnndIndex(py::module_& m) {
    using namespace pybind11::literals;
    using Config = std::optional<GpuKnnGraphGNNDConfig>;
    py::class_<GpuKnnGraphGNND, faiss::Index> cls(m, "GpuKnnGraphGNND", R"doc(
Approximate k-NN graph of the added vectors, built on the GPU by GNND (GPU
NN-Descent, Wang, Zhao & Zeng); later adds are merged in by GGM.

    res = faiss_ext.StandardGpuResources()
    index = faiss_ext.GpuKnnGraphGNND(res, d, 32)   # graph degree k = 32
    index.add(xb)                                    # builds the graph
    I = index.get_graph()                            # (ntotal, 32) int64, closest first
    D, I = index.get_graph(with_distances=True)
    D, I = index.search(xq, 10)                      # greedy search on the graph
    cpu = index.copy_to()                            # a faiss.IndexNNDescentFlat

`metric`: a FlatMetric (L2, InnerProduct, Cosine, Pearson) or a FAISS metric
int. `config`: a GpuKnnGraphGNNDConfig (samples, max_iterations, ...).
Degree k in [1, 1024]; an add needs more than k vectors in all.
)doc");
    cls.def(py::init(
                [](gpu::GpuResourcesProvider* res, int d, int k, FlatMetric metric, Config config) {
                    return std::make_unique<GpuKnnGraphGNND>(
                        res, d, k, metric, config.value_or(GpuKnnGraphGNNDConfig()));
                }),
            "res"_a, "d"_a, "k"_a, "metric"_a = FlatMetric::L2, "config"_a = py::none(),
            py::keep_alive<1, 2>())
        .def(py::init([](gpu::GpuResourcesProvider* res, int d, int k, int metric, Config config) {
                 return std::make_unique<GpuKnnGraphGNND>(res, d, k,
                                                          static_cast<faiss::MetricType>(metric),
                                                          config.value_or(GpuKnnGraphGNNDConfig()));
             }),
             "res"_a, "d"_a, "k"_a, "metric"_a, "config"_a = py::none(), py::keep_alive<1, 2>())
        .def_property_readonly("k", &GpuKnnGraphGNND::getGraphDegree, "Graph degree k.")
        .def("get_graph_degree", &GpuKnnGraphGNND::getGraphDegree, "Graph degree k.")
        .def("getGraphDegree", &GpuKnnGraphGNND::getGraphDegree, "Graph degree k.")
        .def(
                "get_last_add_build",
                [](const GpuKnnGraphGNND& g) {
                    return std::string(gpu::addBuildName(g.getLastAddBuild()));
                },
                "How the last add built: 'one-shot' or 'partitioned' ('auto' before any add).")
        .def("get_build_degree", &GpuKnnGraphGNND::getBuildDegree,
             "List length while building (a multiple of 32, >= k).")
        .def("getBuildDegree", &GpuKnnGraphGNND::getBuildDegree,
             "C++ spelling of get_build_degree.")
        .def("get_flat_metric", &GpuKnnGraphGNND::getFlatMetric,
             "The FlatMetric (L2, InnerProduct, Cosine, Pearson).")
        .def("getFlatMetric", &GpuKnnGraphGNND::getFlatMetric, "C++ spelling of get_flat_metric.")
        .def("getDevice", &GpuKnnGraphGNND::getDevice, "The device of this index.")
        .def_property_readonly("device", &GpuKnnGraphGNND::getDevice, "The device of this index.")
        .def("get_config", &GpuKnnGraphGNND::getConfig, "A copy of the configuration.")
        .def("getConfig", &GpuKnnGraphGNND::getConfig, "A copy of the configuration.")
        .def("set_config", &GpuKnnGraphGNND::setConfig, "config"_a,
             "Build parameters of later adds (build_degree only while the index is empty).")
        .def("setConfig", &GpuKnnGraphGNND::setConfig, "config"_a, "C++ spelling of set_config.")
        .def(
            "set_build_devices",
            [](GpuKnnGraphGNND& self, const py::handle& res, const std::vector<int>& devices) {
                std::vector<gpu::GpuResourcesProvider*> providers;
                const bool empty = py::isinstance<py::sequence>(res) &&
                                   !py::isinstance<py::str>(res) && py::len(res) == 0;
                if (!empty) providers = toProviders(res);
                py::gil_scoped_release nogil;
                self.setBuildDevices(providers, devices);
            },
            "res"_a, "devices"_a, R"doc(
More GPUs for the GNND builds of later adds: res[i] (a StandardGpuResources)
serves devices[i]. Each add's build is split over this index's device and
these (every device holds a copy of the added vectors and of the lists, joins
its share of the nodes, and the copies are merged after every iteration by
peer copies); the GGM merge of a second add stays on this index's device.
devices: distinct, valid, not this index's own. set_build_devices([], [])
goes back to one GPU. A runtime setting: not saved, not copied.
)doc")
        .def("get_build_devices", &GpuKnnGraphGNND::getBuildDevices,
             "The extra build devices of set_build_devices (without this index's own).")
        .def("get_graph", &getGraph, "with_distances"_a = false, R"doc(
The graph: for each stored vector i its k neighbours, sorted closest first,
as an (ntotal, k) int64 array; with with_distances=True, (D, I) with D the
(ntotal, k) float32 distances (L2: squared distance; inner product, cosine,
Pearson: similarity, largest first).
)doc")
        .def("getGraph", &getGraph, "with_distances"_a = false, "C++ spelling of get_graph.")
        .def("get_graph_int", &getGraphInt, "The graph as an (ntotal, k) int32 array.")
        .def("getGraphInt", &getGraphInt, "C++ spelling of get_graph_int.")
        .def_property_readonly(
            "build_log",
            [](const GpuKnnGraphGNND& self) {
                py::list out;
                for (const auto& s : self.getBuildLog()) out.append(statsToDict(s));
                return out;
            },
            "Per-iteration statistics of all builds and merges so far: a list of dicts with "
            "keys iteration (1-based), updates (list entries replaced), seconds, merge (True "
            "for a GGM merge).")
        .def(
            "add_fits", [](const GpuKnnGraphGNND& self, int64_t n) { return self.addFits(n); },
            "n"_a,
            "Whether adding n more vectors fits this index's device (the memory estimate "
            "against free memory and the resources' limits).")
        .def(
            "addFits", [](const GpuKnnGraphGNND& self, int64_t n) { return self.addFits(n); },
            "n"_a, "C++ spelling of add_fits.")
        .def_static(
            "estimate_memory",
            [](int64_t n, int d, int k, Config config) {
                return memoryToDict(GpuKnnGraphGNND::estimateMemory(
                    n, d, k, config.value_or(GpuKnnGraphGNNDConfig())));
            },
            "n"_a, "d"_a, "k"_a, "config"_a = py::none(), R"doc(
Bytes a build of n vectors of dimension d at degree k needs on one device:
a dict with keys vectors, graph, build_temp and total.
)doc")
        .def(
            "_to_index_nsg",
            [](const GpuKnnGraphGNND& self, int R) {
                std::unique_ptr<faiss::Index> nsg;
                {
                    py::gil_scoped_release release;
                    nsg.reset(self.toIndexNSG(R));
                }
                return indexToPython(std::move(nsg));
            },
            "R"_a, "toIndexNSG(R) as a faiss.IndexNSGFlat (use to_index_nsg).");
    defTwinCopies<faiss::IndexNNDescentFlat>(
        cls, "IndexNNDescentFlat", [](const GpuKnnGraphGNND& self) {
            return std::make_unique<faiss::IndexNNDescentFlat>(self.d, self.getGraphDegree(),
                                                               self.metric_type);
        });
}

void bindOutOfCore(py::module_& m) {
    using namespace pybind11::literals;
    py::enum_<VectorFileFormat>(m, "VectorFileFormat", R"doc(
Layout of a vector file for gnnd_build_from_file: FVECS (per vector: int32 d,
then d float32, the TEXMEX format) or RAW_FLOAT32 (n x d float32, row major,
no header; d given). The C++ spellings (Fvecs, RawFloat32) are aliases.
)doc")
        .value("FVECS", VectorFileFormat::Fvecs, "per vector: int32 d, then d float32")
        .value("RAW_FLOAT32", VectorFileFormat::RawFloat32, "n x d float32, no header")
        .value("Fvecs", VectorFileFormat::Fvecs)
        .value("RawFloat32", VectorFileFormat::RawFloat32);

    m.def(
        "_gnnd_build_from_file",
        [](const py::object& res, const std::string& vectorsPath, VectorFileFormat format, int d,
           int k, const py::object& metric, const std::string& graphPath,
           std::optional<GpuKnnGraphGNNDConfig> config, std::vector<int> devices, int64_t shardSize,
           const std::string& workDir, bool verbose, const std::string& distancesPath,
           int64_t hostMemoryBytes, bool splitOneShard, const std::string& schedule,
           int overlap, int neighbourMerges, const std::string& clusterBuild,
           int64_t exactClusterRows) {
            std::vector<gpu::GpuResourcesProvider*> providers = toProviders(res);
            if (shardSize < 0) {
                throw py::value_error("shard_size must be >= 0 (0: the largest that fits), got " +
                                      std::to_string(shardSize));
            }
            if (hostMemoryBytes < -1) {
                throw py::value_error("host_memory_bytes must be >= -1 (-1: automatic, 0: shard "
                                      "files), got " + std::to_string(hostMemoryBytes));
            }
            GnndFileBuildOptions options;
            if (schedule == "auto") options.schedule = gpu::GnndFileSchedule::Auto;
            else if (schedule == "all-pairs") options.schedule = gpu::GnndFileSchedule::AllPairs;
            else if (schedule == "partitioned") options.schedule = gpu::GnndFileSchedule::Partitioned;
            else throw py::value_error("schedule must be 'auto', 'all-pairs' or 'partitioned', got '" +
                                       schedule + "'");
            if (clusterBuild == "auto") options.clusterBuild = gpu::GnndClusterBuild::Auto;
            else if (clusterBuild == "nn-descent") options.clusterBuild = gpu::GnndClusterBuild::NNDescent;
            else if (clusterBuild == "exact") options.clusterBuild = gpu::GnndClusterBuild::Exact;
            else throw py::value_error("cluster_build must be 'auto', 'nn-descent' or 'exact', got '" +
                                       clusterBuild + "'");
            options.exactClusterRows = exactClusterRows;
            options.overlap = overlap;
            options.neighbourMerges = neighbourMerges;
            options.hostMemoryBytes = hostMemoryBytes;
            options.splitOneShard = splitOneShard;
            options.config = config.value_or(GpuKnnGraphGNNDConfig());
            options.devices = std::move(devices);
            options.shardSize = shardSize;
            options.workDir = workDir;
            options.verbose = verbose;
            options.distancesPath = distancesPath;
            const FlatMetric fm = toFlatMetric(metric);
            GnndFileBuildReport report;
            {
                py::gil_scoped_release release;
                report = gpu::gnndBuildFromFile(providers, vectorsPath, format, d, k, fm, graphPath,
                                                options);
            }
            return reportToDict(report);
        },
        "res"_a, "vectors_path"_a, "format"_a, "d"_a, "k"_a, "metric"_a, "graph_path"_a,
        "config"_a = py::none(), "devices"_a = std::vector<int>(), "shard_size"_a = 0,
        "work_dir"_a = "", "verbose"_a = false, "distances_path"_a = "",
        "host_memory_bytes"_a = -1, "split_one_shard"_a = true, "schedule"_a = "auto",
        "overlap"_a = 3, "neighbour_merges"_a = -1, "cluster_build"_a = "auto",
        "exact_cluster_rows"_a = 0, "gnndBuildFromFile (use faiss_ext.gnnd_build_from_file).");

    m.def(
        "_read_graph_ivecs",
        [](const std::string& path) {
            int64_t n = 0;
            int k = 0;
            std::vector<int> g;
            {
                py::gil_scoped_release release;
                g = gpu::readGraphIvecs(path, &n, &k);
            }
            if (g.size() != size_t(n) * size_t(k)) {
                throw std::runtime_error(
                    "read_graph_ivecs: '" + path + "' gave " + std::to_string(g.size()) +
                    " ids for n * k = " + std::to_string(n) + " * " + std::to_string(k));
            }
            return vectorToNumpy(std::move(g), {n, k});
        },
        "path"_a, "readGraphIvecs as an (n, k) int32 array (use faiss_ext.read_graph_ivecs).");
}

}  // namespace

void bindGnnd(py::module_& m) {
    bindConfig(m);
    bindGnndIndex(m);
    bindOutOfCore(m);
}

}  // namespace python
}  // namespace faiss_ext
