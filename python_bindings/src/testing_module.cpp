// _faiss_ext_testing: a test-only module (never installed) for the Python
// tests of "one FAISS in the process" (docs/one-faiss.md):
//   - FAISS's globals as our C++ code sees them, to compare with what
//     `import faiss` sees (faiss.cvar.indexIVF_stats, ...);
//   - the C++ address of an index, to check that a faiss proxy and our code
//     hold the very same object;
//   - FAISS pipelines (IDMap, IDMap2, Shards, Replicas, PCA, RefineFlat)
//     built in C++ around an index of faiss_ext's factory, searched, so that
//     the same pipeline built in Python from faiss's classes can be compared.
#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexRefine.h>
#include <faiss/IndexReplicas.h>
#include <faiss/IndexShards.h>
#include <faiss/VectorTransform.h>
#include <faiss/utils/distances.h>
#include <omp.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "bindings.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/index_factory.h"
#include "swig_bridge.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace faiss_ext {
namespace python {
namespace {

/// An index of faiss_ext's factory (`description`, dimension d), moved to GPU
/// `device` with `res` when device >= 0.
std::unique_ptr<faiss::Index> makeInner(int d, const std::string& description, int metric,
                                        gpu::GpuResourcesProvider* res, int device) {
    std::unique_ptr<faiss::Index> cpu(
        faiss_ext::index_factory(d, description.c_str(), static_cast<faiss::MetricType>(metric)));
    if (device < 0) return cpu;
    if (!res) throw py::value_error("a GPU inner index needs resources");
    return std::unique_ptr<faiss::Index>(gpu::index_cpu_to_gpu(res, device, cpu.get()));
}

/// Builds `wrapper` around indexes of `description` in C++, trains it on xt,
/// adds xb (with ids for the ID maps), searches xq for k neighbours and
/// returns (D, I). Wrappers: IDMap, IDMap2, Shards and Replicas (two inner
/// indexes each), PCA<m> (an IndexPreTransform of a PCAMatrix to m
/// dimensions, the inner index of dimension m), RefineFlat (k_factor 2).
py::tuple searchPipeline(const std::string& wrapper, const std::string& description, int d,
                         int metric, FloatArray xt, FloatArray xb, IdArray ids, FloatArray xq,
                         int64_t k, gpu::GpuResourcesProvider* res, int device) {
    auto inner = [&](int innerD) { return makeInner(innerD, description, metric, res, device); };
    std::unique_ptr<faiss::Index> pipeline;
    bool withIds = false;
    if (wrapper == "IDMap" || wrapper == "IDMap2") {
        faiss::IndexIDMap* map = wrapper == "IDMap" ? new faiss::IndexIDMap(inner(d).release())
                                                    : new faiss::IndexIDMap2(inner(d).release());
        map->own_fields = true;
        pipeline.reset(map);
        withIds = true;
    } else if (wrapper == "Shards" || wrapper == "Replicas") {
        if (wrapper == "Shards") {
            // successive ids: shard i holds the i-th contiguous part of xb
            auto shards = new faiss::IndexShards(d, false, true);
            pipeline.reset(shards);
            shards->add_shard(inner(d).release());
            shards->add_shard(inner(d).release());
            shards->own_fields = true;
        } else {
            auto replicas = new faiss::IndexReplicas(d, false);
            pipeline.reset(replicas);
            replicas->addIndex(inner(d).release());
            replicas->addIndex(inner(d).release());
            replicas->own_fields = true;
        }
    } else if (wrapper.rfind("PCA", 0) == 0) {
        const int m = std::stoi(wrapper.substr(3));
        auto pre = new faiss::IndexPreTransform(new faiss::PCAMatrix(d, m), inner(m).release());
        pre->own_fields = true;
        pipeline.reset(pre);
    } else if (wrapper == "RefineFlat") {
        auto refine = new faiss::IndexRefineFlat(inner(d).release());
        refine->own_fields = true;
        refine->k_factor = 2;
        pipeline.reset(refine);
    } else {
        throw py::value_error("unknown wrapper '" + wrapper + "'");
    }
    const int64_t nq = xq.shape(0);
    py::array_t<float> distances({nq, k});
    py::array_t<int64_t> labels({nq, k});
    {
        py::gil_scoped_release release;
        if (!pipeline->is_trained) pipeline->train(xt.shape(0), xt.data());
        if (withIds) {
            pipeline->add_with_ids(xb.shape(0), xb.data(), ids.data());
        } else {
            pipeline->add(xb.shape(0), xb.data());
        }
        pipeline->search(nq, xq.data(), k, distances.mutable_data(), labels.mutable_data());
    }
    return py::make_tuple(distances, labels);
}

}  // namespace
}  // namespace python
}  // namespace faiss_ext

PYBIND11_MODULE(_faiss_ext_testing, m) {
    namespace fp = faiss_ext::python;
    m.doc() = "Test-only helpers of faiss_ext (not installed).";
    m.def(
        "faiss_globals",
        []() {
            py::dict g;
            g["indexIVF_stats_nq"] = faiss::indexIVF_stats.nq;
            g["indexIVF_stats_address"] = reinterpret_cast<uintptr_t>(&faiss::indexIVF_stats);
            g["distance_compute_blas_threshold"] = faiss::distance_compute_blas_threshold;
            g["omp_max_threads"] = omp_get_max_threads();
            return g;
        },
        "FAISS's globals as faiss_ext's C++ code sees them.");
    m.def(
        "set_indexIVF_stats_nq", [](size_t nq) { faiss::indexIVF_stats.nq = nq; }, "nq"_a,
        "Sets faiss::indexIVF_stats.nq from faiss_ext's C++ code.");
    m.def(
        "index_address",
        [](const py::handle& index) {
            return reinterpret_cast<uintptr_t>(&fp::indexArgument(index, "index"));
        },
        "index"_a, "The C++ address of the faiss::Index behind a Python index.");
    m.def(
        "index_type_name",
        [](const py::handle& index) {
            return fp::indexTypeName(fp::indexArgument(index, "index"));
        },
        "index"_a, "The dynamic C++ type of a Python index, demangled.");
    m.def(
        "search_parameters_type_name",
        [](const py::handle& params) {
            const faiss::SearchParameters* p = fp::searchParametersArgument(params, "params");
            if (!p) throw py::value_error("params is None");
            return fp::demangledTypeName(typeid(*p));
        },
        "params"_a, "The dynamic C++ type of a Python search parameters object, demangled.");
    m.def("search_pipeline", &fp::searchPipeline, "wrapper"_a, "description"_a, "d"_a, "metric"_a,
          "xt"_a, "xb"_a, "ids"_a, "xq"_a, "k"_a, "res"_a = nullptr, "device"_a = -1,
          "Builds, trains, fills and searches a FAISS pipeline around faiss_ext indexes "
          "in C++; returns (D, I).");
}
