// The GPU layer: metrics, resources, GpuIndexQuickSelectFlat, the cloner and
// device queries. Copies to and from python3-faiss objects go through bytes
// (faiss_ext/__init__.py); here they take and give faiss_ext's own objects.
#include <faiss/IndexFlat.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "bindings.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/index_io.h"
#include "gpu/GpuCloner.h"
#include "gpu/GpuIndexQuickSelectFlat.h"
#include "gpu/StandardGpuResources.h"
#include "gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace python {

namespace {

using gpu::GpuIndexQuickSelectFlat;
using gpu::GpuIndexQuickSelectFlatConfig;

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
               std::shared_ptr<gpu::StandardGpuResources>>(m, "StandardGpuResources", R"doc(
Default GPU resources: cuBLAS handle, stream, temporary memory pool and pinned
staging memory per device. Create one and pass it to GPU indexes (the indexes
keep the resources alive).
)doc")
        .def(py::init<>())
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
}

void bindQuickSelectFlat(py::module_& m) {
    using namespace pybind11::literals;

    py::enum_<gpu::SelectAlgo>(m, "SelectAlgo", "k-selection algorithm of GpuIndexQuickSelectFlat.")
        .value("Auto", gpu::SelectAlgo::Auto, "chosen by (k, nb, nq, d)")
        .value("QuickMultiSelect", gpu::SelectAlgo::QuickMultiSelect,
               "Komarov et al.'s quick multi-select");

    py::class_<gpu::GpuIndexConfig>(m, "GpuIndexConfig", "Options common to every GPU index.")
        .def(py::init([](int device) {
                 gpu::GpuIndexConfig c;
                 c.device = device;
                 return c;
             }),
             "device"_a = 0)
        .def_readwrite("device", &gpu::GpuIndexConfig::device, "GPU on which the index lives.");

    py::class_<GpuIndexQuickSelectFlatConfig, gpu::GpuIndexConfig>(
        m, "GpuIndexQuickSelectFlatConfig", "Options of GpuIndexQuickSelectFlat.")
        .def(py::init([](int device, gpu::SelectAlgo algo) {
                 GpuIndexQuickSelectFlatConfig c;
                 c.device = device;
                 c.selectAlgo = algo;
                 return c;
             }),
             "device"_a = 0, "selectAlgo"_a = gpu::SelectAlgo::Auto)
        .def_readwrite("selectAlgo", &GpuIndexQuickSelectFlatConfig::selectAlgo,
                       "Default k-selection algorithm.");

    py::class_<gpu::SearchParametersQuickSelectFlat, faiss::SearchParameters>(
        m, "SearchParametersQuickSelectFlat", "Per-search knobs of GpuIndexQuickSelectFlat.")
        .def(py::init([](gpu::SelectAlgo algo) {
                 gpu::SearchParametersQuickSelectFlat p;
                 p.selectAlgo = algo;
                 return p;
             }),
             "selectAlgo"_a = gpu::SelectAlgo::Auto)
        .def_readwrite("selectAlgo", &gpu::SearchParametersQuickSelectFlat::selectAlgo,
                       "Overrides the index's selectAlgo for this search.");

    using Config = std::optional<GpuIndexQuickSelectFlatConfig>;
    py::class_<GpuIndexQuickSelectFlat, faiss::Index>(m, "GpuIndexQuickSelectFlat", R"doc(
Exact brute-force k-NN on the GPU: GEMM distances, then quick multi-select
k-selection (Komarov et al.). Same results as faiss.IndexFlat (ties aside),
any k (rows padded with -1 where k > ntotal).

    res = faiss_ext.StandardGpuResources()
    index = faiss_ext.GpuIndexQuickSelectFlat(res, d, faiss_ext.FlatMetric.L2)
    index.add(xb)
    D, I = index.search(xq, k)

`metric` is a FlatMetric (L2, InnerProduct, Cosine, Pearson) or a FAISS metric
int (faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT).
)doc")
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
        .def(
            "_copy_from_native",
            [](GpuIndexQuickSelectFlat& self, const faiss::Index& src) {
                py::gil_scoped_release release;
                self.copyFrom(&src);
            },
            "src"_a, "copyFrom a faiss_ext.Index (use copy_from, which also takes faiss objects).")
        .def(
            "_copy_to_bytes",
            [](const GpuIndexQuickSelectFlat& self) {
                std::vector<uint8_t> bytes;
                {
                    py::gil_scoped_release release;
                    faiss::IndexFlat flat;
                    self.copyTo(&flat);
                    bytes = serialize_index(&flat);
                }
                return bytesToNumpy(std::move(bytes));
            },
            "copyTo a faiss::IndexFlat, serialised (use copy_to).");
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
        [](gpu::GpuResourcesProvider* res, int device, const faiss::Index& index,
           const gpu::GpuClonerOptions* options) {
            py::gil_scoped_release release;
            return std::unique_ptr<faiss::Index>(
                gpu::index_cpu_to_gpu(res, device, &index, options));
        },
        "res"_a, "device"_a, "index"_a, "options"_a = nullptr, py::keep_alive<0, 1>(),
        "index_cpu_to_gpu on a faiss_ext.Index (use faiss_ext.index_cpu_to_gpu).");
    m.def(
        "_index_gpu_to_cpu",
        [](const faiss::Index& index) {
            py::gil_scoped_release release;
            return std::unique_ptr<faiss::Index>(gpu::index_gpu_to_cpu(&index));
        },
        "index"_a, "index_gpu_to_cpu to a faiss_ext.Index (use faiss_ext.index_gpu_to_cpu).");
}

}  // namespace

void bindGpu(py::module_& m) {
    bindMetrics(m);
    bindResources(m);
    bindQuickSelectFlat(m);
    bindCloner(m);
}

}  // namespace python
}  // namespace faiss_ext
