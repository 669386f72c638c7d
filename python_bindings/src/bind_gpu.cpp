// The GPU layer: metrics, resources, the selection algorithms and select_k,
// GpuIndexQuickSelectFlat (search, knn_graph), the cloner and device queries. Indexes
// come in and go out as the objects of `import faiss` (swig_bridge.h): one FAISS in the process.
#include <faiss/IndexFlat.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "bindings.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/index_io.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuSelect.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace python {

namespace {

using gpu::GpuIndexQuickSelectFlat;
using gpu::GpuIndexQuickSelectFlatConfig;
using gpu::SelectAlgo;
using gpu::VectorStorage;

/// A byte count from a Python int (numpy integers too); None means no limit
/// (SIZE_MAX). ValueError for negative values, TypeError for non-integers.
size_t toByteCount(const py::handle& bytes, const char* what) {
    if (bytes.is_none()) return SIZE_MAX;
    PyObject* index = PyNumber_Index(bytes.ptr());
    if (!index) {
        PyErr_Clear();
        throw py::type_error(std::string(what) + " must be an int (bytes) or None, got " +
                             typeName(bytes));
    }
    py::int_ value = py::reinterpret_steal<py::int_>(index);
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow < 0 || (overflow == 0 && v < 0)) {
        throw py::value_error(std::string(what) + " must be >= 0 (or None for no limit), got " +
                              std::string(py::str(value)));
    }
    if (overflow == 0) return static_cast<size_t>(v);
    const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
    if (PyErr_Occurred()) {
        PyErr_Clear();
        throw py::value_error(std::string(what) + " is too large: " + std::string(py::str(value)));
    }
    return static_cast<size_t>(u);
}

/// Parses a selection algorithm name: a SelectAlgo member name ("MERGE_QUEUE",
/// "MergeQueue") or a C++ name ("merge-queue", "mq", ...; selectAlgoFromName).
SelectAlgo parseSelectAlgo(const std::string& name) {
    py::dict members = py::type::of<SelectAlgo>().attr("__members__");
    if (members.contains(name)) return members[py::str(name)].cast<SelectAlgo>();
    try {
        return gpu::selectAlgoFromName(name.c_str());
    } catch (const std::exception&) {
        throw py::value_error("unknown selection algorithm '" + name +
                              "': expected a SelectAlgo member name or one of 'auto', "
                              "'quick-multi-select' ('qms'), 'merge-queue' ('mq'), 'th-heap' "
                              "('thheap')");
    }
}

/// A SelectAlgo from a SelectAlgo, its name (see parseSelectAlgo) or None (Auto).
SelectAlgo toSelectAlgo(const py::handle& algo, const char* what) {
    if (algo.is_none()) return SelectAlgo::Auto;
    if (py::isinstance<py::str>(algo)) return parseSelectAlgo(algo.cast<std::string>());
    if (py::isinstance<SelectAlgo>(algo)) return algo.cast<SelectAlgo>();
    throw py::type_error(std::string(what) +
                         " must be a faiss_ext.SelectAlgo, an algorithm name or None, got " +
                         typeName(algo));
}

int checkMergeQueueGroup(int g) {
    if (g < 2 || g > 16) {
        throw py::value_error(
            "mergeQueueGroup (the merge queue's hierarchical partition group size G) must be "
            "in [2, 16], got " +
            std::to_string(g));
    }
    return g;
}

int checkThheapSampleFactor(int f) {
    if (f < 1 || f > 1024) {
        throw py::value_error(
            "thheapSampleFactor (TH-heap sample size as a multiple of k) must be in [1, 1024], "
            "got " +
            std::to_string(f));
    }
    return f;
}

void bindMetrics(py::module_& m) {
    using namespace pybind11::literals;
    py::enum_<FlatMetric>(m, "FlatMetric",
                          "Metric of the exact flat index. Cosine and Pearson are similarities "
                          "(larger is closer), like METRIC_INNER_PRODUCT.")
        .value("L2", FlatMetric::L2, "squared Euclidean distance (smaller is closer)")
        .value("InnerProduct", FlatMetric::InnerProduct, "dot product (larger is closer)")
        .value("Cosine", FlatMetric::Cosine, "dot product of L2-normalised vectors")
        .value("Pearson", FlatMetric::Pearson, "cosine of row-centred vectors");

    m.def(
        "to_faiss_metric", [](FlatMetric f) { return static_cast<int>(toFaissMetric(f)); },
        "metric"_a,
        "The FAISS metric (int, e.g. faiss.METRIC_L2) whose convention a FlatMetric uses.");
    m.def(
        "from_faiss_metric",
        [](int metric) { return fromFaissMetric(static_cast<faiss::MetricType>(metric)); },
        "metric"_a,
        "The FlatMetric of a FAISS metric int (L2 or inner product); RuntimeError otherwise.");
    m.def(
        "flat_metric_name", [](FlatMetric f) { return std::string(flatMetricName(f)); }, "metric"_a,
        "'L2', 'IP', 'Cosine' or 'Pearson'.");
    m.def(
        "parse_flat_metric", [](const std::string& s) { return parseFlatMetric(s); }, "name"_a,
        "Parses 'L2', 'IP' / 'InnerProduct', 'Cosine', 'Pearson' (case-insensitive).");
}

void bindResources(py::module_& m) {
    using namespace pybind11::literals;
    m.def("get_num_gpus", &gpu::getNumDevices,
          "Number of usable CUDA devices; 0 without a GPU or driver (never raises).");

    py::class_<gpu::GpuResourcesProvider, std::shared_ptr<gpu::GpuResourcesProvider>>(
        m, "GpuResourcesProvider",
        "Something that hands out GPU resources (FAISS's GpuResourcesProvider).");

    py::class_<gpu::StandardGpuResources, gpu::GpuResourcesProvider,
               std::shared_ptr<gpu::StandardGpuResources>>
        resources(m, "StandardGpuResources", R"doc(
Default GPU resources: cuBLAS handle, stream, temporary memory pool and pinned
staging memory per device. Create one and pass it to GPU indexes (the indexes
keep the resources alive).
)doc");
    resources.def(py::init<>())
        .def("setTempMemory", &gpu::StandardGpuResources::setTempMemory, "bytes"_a,
             "Limits temporary memory (distance tiles, selection buffers) per device; "
             "searches tile themselves to fit.")
        .def("setPinnedMemory", &gpu::StandardGpuResources::setPinnedMemory, "bytes"_a,
             "Size of the pinned host staging buffer (0 disables); set before first use.")
        .def(
            "setDefaultStream",
            [](gpu::StandardGpuResources& r, int device, uintptr_t stream) {
                r.setDefaultStream(device, reinterpret_cast<cudaStream_t>(stream));
            },
            "device"_a, "stream"_a,
            "Orders our work on a CUDA stream given as an integer handle (e.g. "
            "torch.cuda.current_stream().cuda_stream); not owned.")
        .def("getTempMemoryInUse", &gpu::StandardGpuResources::getTempMemoryInUse, "device"_a = 0,
             "Bytes of temporary memory in use on `device`.");

    const char* deviceLimitDoc = R"doc(
Limits the data indexes keep resident on each device (their stored vectors)
to `bytes` (None: no limit, the default). Indexes with VectorStorage.AUTO
keep data past it in pinned host memory and stream it through the GPU for
each search; indexes already holding more keep it until their next add.
Temporary memory is limited separately (setTempMemory).
)doc";
    auto setDeviceMemoryLimit = [](gpu::StandardGpuResources& r, const py::object& bytes) {
        r.setDeviceMemoryLimit(toByteCount(bytes, "bytes"));
    };
    resources.def("set_device_memory_limit", setDeviceMemoryLimit, "bytes"_a, deviceLimitDoc)
        .def("setDeviceMemoryLimit", setDeviceMemoryLimit, "bytes"_a,
             "C++ spelling of set_device_memory_limit.");
}

/// select_k: checks and converts in Python's thread, then selects without the GIL.
py::tuple selectK(gpu::GpuResourcesProvider* res, const py::handle& values, int64_t k, bool largest,
                  const py::handle& algo, const py::handle& inIndices, int device) {
    if (!res) {
        throw py::type_error(
            "res must be a GpuResourcesProvider (e.g. StandardGpuResources), "
            "got None");
    }
    if (values.is_none()) {
        throw py::value_error("values must be a 2-D float32 array of shape (rows, n), got None");
    }
    FloatArray v = FloatArray::ensure(values);
    if (!v) {
        raiseIfOutOfMemory(values, "values", sizeof(float));
        PyErr_Clear();
        throw py::value_error("values must be convertible to a 2-D float32 array, got " +
                              typeName(values));
    }
    if (v.ndim() != 2) {
        throw py::value_error("values must be a 2-D array of shape (rows, n), got shape " +
                              shapeString(v));
    }
    const int64_t rows = v.shape(0);
    const int64_t n = v.shape(1);
    if (n < 1) {
        throw py::value_error("values must have at least one column, got shape " + shapeString(v));
    }
    if (k < 1 || k > n) {
        throw py::value_error("k must be in [1, n] with n=" + std::to_string(n) +
                              " columns, got k=" + std::to_string(k));
    }
    if (device < -1) {
        throw py::value_error("device must be a GPU number or -1 (the current device), got " +
                              std::to_string(device));
    }
    gpu::SelectKOptions options;
    options.algo = toSelectAlgo(algo, "algo");
    options.device = device;
    IdArray ids;
    if (!inIndices.is_none()) {
        ids = IdArray::ensure(inIndices);
        if (!ids) {
            PyErr_Clear();
            throw py::value_error("in_indices must be convertible to a 2-D int64 array, got " +
                                  typeName(inIndices));
        }
        if (ids.ndim() != 2 || ids.shape(0) != rows || ids.shape(1) != n) {
            throw py::value_error("in_indices must have the shape of values (" +
                                  std::to_string(rows) + ", " + std::to_string(n) +
                                  "), got shape " + shapeString(ids));
        }
        options.inIndices = ids.data();
    }
    py::array_t<float> outValues({rows, k});
    py::array_t<int64_t> outIndices({rows, k});
    const float* vp = v.data();
    float* ov = outValues.mutable_data();
    int64_t* oi = outIndices.mutable_data();
    if (rows > 0) {
        py::gil_scoped_release release;
        gpu::selectK(res, vp, rows, n, k, largest, ov, oi, options);
    }
    return py::make_tuple(outValues, outIndices);
}

void bindSelect(py::module_& m) {
    using namespace pybind11::literals;

    // Upper-case names first (what repr shows); the C++ spellings stay as aliases.
    py::enum_<SelectAlgo>(m, "SelectAlgo", R"doc(
k-selection algorithm (GpuIndexQuickSelectFlat, knn_graph, select_k).

AUTO picks by shape (see choose_select_algo). The C++ spellings (Auto,
QuickMultiSelect, MergeQueue, THHeap) are aliases of the same members.
Functions taking an algorithm also accept its name as a str: a member name,
or 'auto', 'quick-multi-select' ('qms'), 'merge-queue' ('mq'), 'th-heap'
('thheap').
)doc")
        .value("AUTO", SelectAlgo::Auto, "chosen by (k, n, rows, d) from measured crossovers")
        .value("QUICK_MULTI_SELECT", SelectAlgo::QuickMultiSelect,
               "Komarov et al.'s quick multi-select")
        .value("MERGE_QUEUE", SelectAlgo::MergeQueue,
               "Tang et al.'s merge queue + buffered search + hierarchical partition")
        .value("TH_HEAP", SelectAlgo::THHeap,
               "Matsumoto & Yiu's TH-heap: GPU threshold pruning, CPU min-max heap")
        .value("Auto", SelectAlgo::Auto)
        .value("QuickMultiSelect", SelectAlgo::QuickMultiSelect)
        .value("MergeQueue", SelectAlgo::MergeQueue)
        .value("THHeap", SelectAlgo::THHeap);

    py::enum_<VectorStorage>(m, "VectorStorage", R"doc(
Where GpuIndexQuickSelectFlat keeps its vectors (config field `storage`).

AUTO: on the device while they fit (StandardGpuResources.set_device_memory_limit
and free memory after the temporary budget), else in pinned host memory.
DEVICE: always on the device. HOST: pinned host memory, streamed through the
GPU per search. The C++ spellings (Auto, Device, Host) are aliases.
)doc")
        .value("AUTO", VectorStorage::Auto, "device while the vectors fit, else host")
        .value("DEVICE", VectorStorage::Device,
               "always on the device (adds fail when they do not fit)")
        .value("HOST", VectorStorage::Host, "pinned host memory, streamed per search")
        .value("Auto", VectorStorage::Auto)
        .value("Device", VectorStorage::Device)
        .value("Host", VectorStorage::Host);

    py::enum_<gpu::DistancePrecision>(m, "DistancePrecision", R"doc(
Precision of GpuIndexQuickSelectFlat's distance products (config and search
parameter `distancePrecision`); exact either way (docs/flat.md).

AUTO: chosen per search (TF32_BOUNDED for batches of >= 1,000 queries at
k <= 1,024 over device vectors, its uncertified queries handed to
BF16X3_BOUNDED; FP32 otherwise). FP32: cuBLAS FP32 GEMM. TF32_BOUNDED: TF32
tensor cores, a proven error bound, FP32 re-scoring of the candidates and
FP32 for queries it cannot certify. BF16X3_BOUNDED: the same with one BF16
GEMM over a two-part split of each coordinate (a bound 3-16 times tighter:
data far from the origin; a split copy of 1.5 times the vectors).
)doc")
        .value("AUTO", gpu::DistancePrecision::Auto)
        .value("FP32", gpu::DistancePrecision::FP32)
        .value("TF32_BOUNDED", gpu::DistancePrecision::TF32Bounded)
        .value("BF16X3_BOUNDED", gpu::DistancePrecision::BF16x3Bounded);

    m.def(
        "select_algo_name", [](SelectAlgo a) { return std::string(gpu::selectAlgoName(a)); },
        "algo"_a, "'auto', 'quick-multi-select', 'merge-queue' or 'th-heap'.");
    m.def("select_algo_from_name", &parseSelectAlgo, "name"_a,
          "Parses a selection algorithm name: a SelectAlgo member name ('MERGE_QUEUE'), or "
          "'auto', 'quick-multi-select' / 'qms', 'merge-queue' / 'mq', 'th-heap' / 'thheap'. "
          "ValueError for others.");
    m.def(
        "vector_storage_name",
        [](VectorStorage s) { return std::string(gpu::vectorStorageName(s)); }, "storage"_a,
        "'auto', 'device' or 'host'.");

    m.def(
        "choose_select_algo",
        [](int64_t rows, int64_t n, int64_t k, int64_t d) {
            if (rows < 0) {
                throw py::value_error("rows must be >= 0, got " + std::to_string(rows));
            }
            if (n < 1) throw py::value_error("n must be >= 1, got " + std::to_string(n));
            if (k < 1 || k > n) {
                throw py::value_error("k must be in [1, n] with n=" + std::to_string(n) +
                                      ", got k=" + std::to_string(k));
            }
            if (d < 0) {
                throw py::value_error("d must be >= 0 (0: unknown), got " + std::to_string(d));
            }
            return gpu::chooseSelectAlgo(rows, n, k, d);
        },
        "rows"_a, "n"_a, "k"_a, "d"_a = 0, R"doc(
The algorithm SelectAlgo.AUTO runs to select k of n entries in each of `rows`
rows (d: dimension of the vectors behind the distances, 0 if unknown), from
the crossovers measured by the `select` benchmark suite. Never AUTO.
)doc");

    m.def("select_k", &selectK, "res"_a, "values"_a, "k"_a, "largest"_a = false,
          "algo"_a = SelectAlgo::Auto, "in_indices"_a = py::none(), "device"_a = -1, R"doc(
The k smallest (or, with largest=True, largest) entries of each row of a
matrix, selected on the GPU by the algorithms GpuIndexQuickSelectFlat uses.

    D, I = faiss_ext.select_k(res, values, k)   # values: (rows, n)

values: a 2-D array (converted to C-contiguous float32; ValueError for other
shapes). Returns (values, indices): (rows, k) float32 and int64 arrays, each
row sorted (ascending, or descending with largest=True); ties go to the
smaller column, NaN entries come last. indices are column numbers, or, when
in_indices (int64, the shape of values) is given, the ids at those columns.
algo: a SelectAlgo or its name; device: GPU number, -1 for the current one.
(values are host arrays here: C++ selectK's one-read sampled-threshold filter,
which AUTO runs on matrices already on the GPU, is not reached from Python.)
Requires 1 <= k <= n. Matrices larger than the temporary memory are streamed
through it in row tiles. The GIL is released while it runs.
)doc");
}

py::tuple knnGraph(const GpuIndexQuickSelectFlat& self, int64_t k, bool excludeSelf,
                   const py::handle& algo) {
    const int64_t n = self.ntotal;
    const int64_t kMax = excludeSelf ? n - 1 : n;
    if (kMax < 1) {
        throw py::value_error("knn_graph: the index holds ntotal=" + std::to_string(n) +
                              " vectors, too few for a k-NN graph" +
                              (excludeSelf ? " (exclude_self=True needs at least 2)" : ""));
    }
    if (k < 1 || k > kMax) {
        throw py::value_error(std::string("knn_graph: k must be in [1, ") +
                              (excludeSelf ? "ntotal - 1] = [1, " : "ntotal] = [1, ") +
                              std::to_string(kMax) + "], got k=" + std::to_string(k));
    }
    gpu::SearchParametersQuickSelectFlat params;
    const bool withParams = !algo.is_none();
    if (withParams) params.selectAlgo = toSelectAlgo(algo, "algo");
    py::array_t<float> distances({n, k});
    py::array_t<int64_t> labels({n, k});
    float* dp = distances.mutable_data();
    int64_t* lp = labels.mutable_data();
    {
        py::gil_scoped_release release;
        self.knnGraph(k, excludeSelf, dp, lp, withParams ? &params : nullptr);
    }
    return py::make_tuple(distances, labels);
}

SelectAlgo resolveSelectAlgo(const GpuIndexQuickSelectFlat& self, int64_t nq, int64_t k,
                             const faiss::SearchParameters* params) {
    if (nq < 0) throw py::value_error("nq must be >= 0, got " + std::to_string(nq));
    if (k < 1) throw py::value_error("k must be > 0, got k=" + std::to_string(k));
    return self.resolveSelectAlgo(nq, k, params);
}

void bindQuickSelectFlat(py::module_& m) {
    using namespace pybind11::literals;

    py::class_<gpu::GpuIndexConfig>(m, "GpuIndexConfig", "Options common to every GPU index.")
        .def(py::init([](int device) {
                 gpu::GpuIndexConfig c;
                 c.device = device;
                 return c;
             }),
             "device"_a = 0)
        .def_readwrite("device", &gpu::GpuIndexConfig::device, "GPU on which the index lives.");

    GpuIndexQuickSelectFlatConfig defaults;
    py::class_<GpuIndexQuickSelectFlatConfig, gpu::GpuIndexConfig>(
        m, "GpuIndexQuickSelectFlatConfig", "Options of GpuIndexQuickSelectFlat.")
        .def(py::init(
                 [](int device, SelectAlgo algo, VectorStorage storage, int mqGroup, int thFactor) {
                     GpuIndexQuickSelectFlatConfig c;
                     c.device = device;
                     c.selectAlgo = algo;
                     c.storage = storage;
                     c.mergeQueueGroup = checkMergeQueueGroup(mqGroup);
                     c.thheapSampleFactor = checkThheapSampleFactor(thFactor);
                     return c;
                 }),
             "device"_a = 0, "selectAlgo"_a = defaults.selectAlgo, "storage"_a = defaults.storage,
             "mergeQueueGroup"_a = defaults.mergeQueueGroup,
             "thheapSampleFactor"_a = defaults.thheapSampleFactor)
        .def_readwrite("selectAlgo", &GpuIndexQuickSelectFlatConfig::selectAlgo,
                       "Default k-selection algorithm (SelectAlgo).")
        .def_readwrite("storage", &GpuIndexQuickSelectFlatConfig::storage,
                       "Where the vectors live (VectorStorage; AUTO by default).")
        .def_readwrite("distancePrecision", &GpuIndexQuickSelectFlatConfig::distancePrecision,
                       "Precision of the distance products (DistancePrecision; AUTO by default).")
        .def_property(
            "mergeQueueGroup",
            [](const GpuIndexQuickSelectFlatConfig& c) { return c.mergeQueueGroup; },
            [](GpuIndexQuickSelectFlatConfig& c, int g) {
                c.mergeQueueGroup = checkMergeQueueGroup(g);
            },
            "Hierarchical partition group size G of the merge-queue selection (2..16).")
        .def_property(
            "thheapSampleFactor",
            [](const GpuIndexQuickSelectFlatConfig& c) { return c.thheapSampleFactor; },
            [](GpuIndexQuickSelectFlatConfig& c, int f) {
                c.thheapSampleFactor = checkThheapSampleFactor(f);
            },
            "TH-heap sample size n_S as a multiple of k (the paper's 8 .. 32; 1..1024).");

    py::class_<gpu::SearchParametersQuickSelectFlat, faiss::SearchParameters>(
        m, "SearchParametersQuickSelectFlat", "Per-search knobs of GpuIndexQuickSelectFlat.")
        .def(py::init([](SelectAlgo algo) {
                 gpu::SearchParametersQuickSelectFlat p;
                 p.selectAlgo = algo;
                 return p;
             }),
             "selectAlgo"_a = SelectAlgo::Auto)
        .def_readwrite("selectAlgo", &gpu::SearchParametersQuickSelectFlat::selectAlgo,
                       "Overrides the index's selectAlgo for this search (AUTO: the "
                       "index's).")
        .def_readwrite("distancePrecision",
                       &gpu::SearchParametersQuickSelectFlat::distancePrecision,
                       "Overrides the index's distancePrecision for this search (AUTO: the "
                       "index's).");

    using Config = std::optional<GpuIndexQuickSelectFlatConfig>;
    py::class_<GpuIndexQuickSelectFlat, faiss::Index> cls(m, "GpuIndexQuickSelectFlat", R"doc(
Exact brute-force k-NN on the GPU: GEMM distances, then k-selection (quick
multi-select of Komarov et al., merge queue, or TH-heap: see SelectAlgo). Same
results as faiss.IndexFlat (ties aside), any k (rows padded with -1 where
k > ntotal).

    res = faiss_ext.StandardGpuResources()
    index = faiss_ext.GpuIndexQuickSelectFlat(res, d, faiss_ext.FlatMetric.L2)
    index.add(xb)
    D, I = index.search(xq, k)
    G_D, G_I = index.knn_graph(k)    # k-NN graph of the stored vectors

`metric` is a FlatMetric (L2, InnerProduct, Cosine, Pearson) or a FAISS metric
int (faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT). `config`: a
GpuIndexQuickSelectFlatConfig (device, selectAlgo, storage, ...); vectors
past the resources' device memory limit are kept in pinned host memory with
VectorStorage.AUTO (see get_storage).
)doc");
    cls
        .def(py::init([](gpu::GpuResourcesProvider* res, int d, FlatMetric metric, Config config) {
                 return std::make_unique<GpuIndexQuickSelectFlat>(
                     res, d, metric, config.value_or(GpuIndexQuickSelectFlatConfig()));
             }),
             "res"_a, "d"_a, "metric"_a = FlatMetric::L2, "config"_a = py::none(),
             py::keep_alive<1, 2>())
        .def(py::init([](gpu::GpuResourcesProvider* res, int d, int metric, Config config) {
                 return std::make_unique<GpuIndexQuickSelectFlat>(
                     res, d, static_cast<faiss::MetricType>(metric),
                     config.value_or(GpuIndexQuickSelectFlatConfig()));
             }),
             "res"_a, "d"_a, "metric"_a, "config"_a = py::none(), py::keep_alive<1, 2>())
        .def("get_flat_metric", &GpuIndexQuickSelectFlat::getFlatMetric,
             "The FlatMetric (L2, InnerProduct, Cosine, Pearson).")
        .def("getFlatMetric", &GpuIndexQuickSelectFlat::getFlatMetric,
             "The FlatMetric (C++ spelling of get_flat_metric).")
        .def("getDevice", &GpuIndexQuickSelectFlat::getDevice, "The device of this index.")
        .def_property_readonly("device", &GpuIndexQuickSelectFlat::getDevice,
                               "The device of this index.")
        .def("getConfig", &GpuIndexQuickSelectFlat::getConfig, "A copy of the configuration.")
        .def("reserveMemory", &GpuIndexQuickSelectFlat::reserveMemory, "n"_a,
             "Reserves device memory for n vectors in total.")
        .def("setMinPagingSize", &GpuIndexQuickSelectFlat::setMinPagingSize, "bytes"_a,
             "Host input larger than this many bytes is copied in chunks.")
        .def("get_storage", &GpuIndexQuickSelectFlat::getStorage,
             "Where the vectors are now: VectorStorage.DEVICE or HOST (never AUTO).")
        .def("getStorage", &GpuIndexQuickSelectFlat::getStorage, "C++ spelling of get_storage.")
        .def("knn_graph", &knnGraph, "k"_a, "exclude_self"_a = true, "algo"_a = py::none(),
             R"doc(
The exact k-NN graph of the stored vectors: returns (D, I), float32 and int64
arrays of shape (ntotal, k), row i holding the k nearest stored vectors of
stored vector i, sorted closest first, as search() would give them for query
x_i. exclude_self=True leaves i itself out (by id: duplicates of x_i still
count) and needs k <= ntotal - 1; otherwise k <= ntotal. algo: a SelectAlgo
or its name (None: the index's selectAlgo). Runs tiled on the GPU; the GIL is
released meanwhile.
)doc")
        .def("knnGraph", &knnGraph, "k"_a, "excludeSelf"_a = true, "algo"_a = py::none(),
             "C++ spelling of knn_graph.")
        .def("resolve_select_algo", &resolveSelectAlgo, "nq"_a, "k"_a, "params"_a = nullptr,
             "The SelectAlgo a search of nq queries at k runs with this index (and "
             "`params`, a SearchParametersQuickSelectFlat or None): AUTO resolved.")
        .def("resolveSelectAlgo", &resolveSelectAlgo, "nq"_a, "k"_a, "params"_a = nullptr,
             "C++ spelling of resolve_select_algo.");
    defTwinCopies<faiss::IndexFlat, faiss::Index>(
        cls, "IndexFlat",
        [](const GpuIndexQuickSelectFlat&) { return std::make_unique<faiss::IndexFlat>(); });
}

void bindCloner(py::module_& m) {
    using namespace pybind11::literals;
    py::class_<gpu::GpuClonerOptions>(m, "GpuClonerOptions", "Options of index_cpu_to_gpu.")
        .def(py::init([](bool requireGpu) {
                 gpu::GpuClonerOptions o;
                 o.requireGpu = requireGpu;
                 return o;
             }),
             "requireGpu"_a = false)
        .def_readwrite("requireGpu", &gpu::GpuClonerOptions::requireGpu,
                       "Raise when a part of the index has no GPU counterpart "
                       "(False: keep it on the CPU).");

    m.def(
        "_index_cpu_to_gpu",
        [](gpu::GpuResourcesProvider* res, int device, const py::handle& index,
           const gpu::GpuClonerOptions* options) {
            const faiss::Index& cpu = indexArgument(index, "index");
            std::unique_ptr<faiss::Index> out;
            {
                py::gil_scoped_release release;
                out.reset(gpu::index_cpu_to_gpu(res, device, &cpu, options));
            }
            return indexToPython(std::move(out));
        },
        "res"_a, "device"_a, "index"_a, "options"_a = nullptr, py::keep_alive<0, 1>(),
        "index_cpu_to_gpu of any faiss.Index (use faiss_ext.index_cpu_to_gpu).");
    py::class_<gpu::GpuMultipleClonerOptions, gpu::GpuClonerOptions>(
        m, "GpuMultipleClonerOptions",
        "Options of index_cpu_to_gpu_multiple: GpuClonerOptions and shard.")
        .def(py::init([](bool shard, bool requireGpu) {
                 gpu::GpuMultipleClonerOptions o;
                 o.shard = shard;
                 o.requireGpu = requireGpu;
                 return o;
             }),
             "shard"_a = false, "requireGpu"_a = false)
        .def_readwrite("shard", &gpu::GpuMultipleClonerOptions::shard,
                       "True: contiguous slices of the vectors, one per device, under an "
                       "IndexShards; False (default): a full copy per device under an "
                       "IndexReplicas.");

    m.def(
        "_index_cpu_to_gpu_multiple",
        [](const py::sequence& resources, const std::vector<int>& devices,
           const py::handle& indexObj, const gpu::GpuMultipleClonerOptions* options) {
            const faiss::Index& index = indexArgument(indexObj, "index");
            std::vector<gpu::GpuResourcesProvider*> providers;
            for (const py::handle& r : resources) {
                providers.push_back(r.is_none() ? nullptr
                                                : r.cast<gpu::GpuResourcesProvider*>());
            }
            std::unique_ptr<faiss::Index> out;
            {
                py::gil_scoped_release release;
                out.reset(gpu::index_cpu_to_gpu_multiple(providers, devices, &index, options));
            }
            // the result keeps every resources object alive (not only the list)
            py::object result = indexToPython(std::move(out));
            for (const py::handle& r : resources) {
                if (!r.is_none()) py::detail::keep_alive_impl(result, r);
            }
            return result;
        },
        "resources"_a, "devices"_a, "index"_a, "options"_a = nullptr,
        "index_cpu_to_gpu_multiple of any faiss.Index (use "
        "faiss_ext.index_cpu_to_gpu_multiple).");
    m.def(
        "_index_gpu_to_cpu",
        [](const py::handle& indexObj) {
            const faiss::Index& index = indexArgument(indexObj, "index");
            std::unique_ptr<faiss::Index> out;
            {
                py::gil_scoped_release release;
                out.reset(gpu::index_gpu_to_cpu(&index));
            }
            return indexToPython(std::move(out));
        },
        "index"_a, "index_gpu_to_cpu of any faiss.Index (use faiss_ext.index_gpu_to_cpu).");
}

}  // namespace

void bindGpu(py::module_& m) {
    bindMetrics(m);
    bindResources(m);
    bindSelect(m);
    bindQuickSelectFlat(m);
    bindCloner(m);
}

}  // namespace python
}  // namespace faiss_ext
