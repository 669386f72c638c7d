// Shared pieces of the _faiss_ext pybind11 module: numpy conversions that
// behave like FAISS's Python layer (any array-like in, C-contiguous float32
// used, clear ValueErrors for wrong shapes) and the per-area binders.
#pragma once

#include <faiss/Index.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "faiss_ext/Metric.h"
#include "faiss_ext/index_io.h"
#include "swig_bridge.h"

namespace faiss_ext {
namespace python {

namespace py = pybind11;

/// A C-contiguous float32 numpy array (what every vector input becomes).
using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

/// A C-contiguous int64 numpy array (ids).
using IdArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

/// "(3, 4)", "(8,)": an array's shape as numpy prints it.
std::string shapeString(const py::array& a);

/// The name of x's Python type ("ndarray", "NoneType"), for error messages.
std::string typeName(const py::handle& x);

/// Converts x to a C-contiguous float32 matrix (np.ascontiguousarray
/// semantics) and checks that it is 2-D with d columns; `what` names the
/// argument in the ValueError raised otherwise.
FloatArray toFloatMatrix(const py::handle& x, int64_t d, const char* what);

/// Converts x to a C-contiguous float32 / int64 matrix (np.ascontiguousarray
/// semantics) of any shape that is 2-D; `what` names the argument in the
/// ValueError (None, not convertible, not 2-D) or MemoryError raised otherwise.
FloatArray toFloatMatrix(const py::handle& x, const char* what);
IdArray toIdMatrix(const py::handle& x, const char* what);

/// After a failed array conversion of x: when numpy runs out of memory
/// converting it (e.g. a strided view of 2^40 rows made contiguous), raises
/// MemoryError naming `what`, its shape and the bytes asked for; otherwise
/// returns (no Python error set).
void raiseIfOutOfMemory(const py::handle& x, const char* what, size_t itemBytes);

/// Throws ValueError when s holds a NUL character (a C string would end
/// there: "QSFlat\0junk" was read as "QSFlat"); `what` names the argument.
void checkNoNul(const std::string& s, const char* what);

/// Converts ids to a C-contiguous int64 vector of n elements (ValueError
/// otherwise).
IdArray toIdVector(const py::handle& ids, int64_t n, const char* what);

/// A numpy array of the given shape (C order) that takes over the vector's
/// elements (no copy); the shape's product must be v.size().
template <class T>
py::array_t<T> vectorToNumpy(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
    auto* owned = new std::vector<T>(std::move(v));
    py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>(std::move(shape), owned->data(), owner);
}

/// A 1-D numpy uint8 array that takes over the bytes (no copy).
py::array_t<uint8_t> bytesToNumpy(std::vector<uint8_t>&& bytes);

/// A FlatMetric from a faiss_ext.FlatMetric, a FAISS metric int (L2 / IP)
/// or a metric name ('L2', 'IP', 'Cosine', 'Pearson'); TypeError for other
/// types.
FlatMetric toFlatMetric(const py::handle& metric);

/// Defines the int property `name` (and, when not null, its C++ spelling
/// `alias`) of a bound struct: reads the field, and assigns check(value),
/// which raises ValueError for values out of range.
template <class Cls, class T>
void defCheckedInt(Cls& cls, const char* name, const char* alias, int T::*field,
                   int (*check)(int), const char* doc) {
    auto get = [field](const T& c) { return c.*field; };
    auto set = [field, check](T& c, int v) { c.*field = check(v); };
    cls.def_property(name, get, set, doc);
    if (alias) cls.def_property(alias, get, set, doc);
}

/// The dynamic C++ type of an index, demangled ("faiss::IndexFlat").
std::string indexTypeName(const faiss::Index& index);

/// A C++ type's name, demangled.
std::string demangledTypeName(const std::type_info& type);

/// Binds faiss::Index as the generic `Index` wrapper, and SearchParameters.
void bindIndex(py::module_& m);

/// Binds metrics, resources, the selection enums and select_k,
/// GpuIndexQuickSelectFlat (with knn_graph), the cloner, get_num_gpus.
void bindGpu(py::module_& m);

/// Binds GpuKnnGraphGNND, its config and search parameters, VectorFileFormat,
/// gnnd_build_from_file and read_graph_ivecs (after bindGpu: uses its
/// FlatMetric, GpuIndexConfig and GpuResourcesProvider).
void bindGnnd(py::module_& m);

/// Binds GpuIndexSearchGraph, its config and SearchParametersSearchGraph
/// (after bindGnnd: uses its GpuKnnGraphGNNDConfig).
void bindSearchGraph(py::module_& m);

/// Binds Bi-level LSH: BiLevelLSHConfig, BiLevelShortList,
/// SearchParametersBiLevelLSH, IndexBiLevelLSH (the CPU twin),
/// GpuIndexBiLevelLSHConfig and GpuIndexBiLevelLSH (after bindGpu: uses its
/// GpuIndexConfig and GpuResourcesProvider).
void bindLsh(py::module_& m);

/// Binds the Bi-level LSH autotuner: BiLevelAutoTuneOptions,
/// BiLevelAutoTuneResult, autotune_bilevel_lsh (after bindLsh: uses its
/// BiLevelLSHConfig).
void bindLshAutoTune(py::module_& m);

/// Binds the factory and read / write / serialize / deserialize.
void bindIo(py::module_& m);

/// Binds merge_knn_results (the k-way merge of per-shard k-NN results).
void bindMerge(py::module_& m);

/// Binds _shm_copy, _shm_signal and _shm_wait (distributed_shm's segments).
void bindShm(py::module_& m);

/// Defines `_copy_from` (copyFrom a Twin, given as a faiss proxy or native
/// object; TypeError for another type) and `_copy_to` (copyTo the Twin given,
/// or a new one made by makeTwin(self), which it returns as a faiss proxy) on
/// a bound GPU index class whose CPU twin is a Twin (faissName: its FAISS
/// class name); faiss_ext/__init__.py builds copy_from / copy_to on them. Both
/// work on the very C++ objects (one FAISS in the process) and release the
/// GIL while copying.
/// Source: what copyFrom takes (Twin, or faiss::Index for an index that
/// accepts several twins).
template <class Twin, class Source = Twin, class Cls, class MakeTwin>
void defTwinCopies(Cls& cls, const char* faissName, MakeTwin makeTwin) {
    using Gpu = typename Cls::type;
    const std::string name(faissName);
    cls.def(
           "_copy_from",
           [name](Gpu& self, const py::handle& src) {
               auto twin = dynamic_cast<const Source*>(&indexArgument(src, "src"));
               if (!twin) {
                   throw py::type_error("copy_from needs a faiss." + name + ", got " +
                                        indexTypeName(indexArgument(src, "src")));
               }
               py::gil_scoped_release release;
               self.copyFrom(twin);
           },
           py::arg("src"), ("copyFrom a faiss." + name + " (use copy_from).").c_str())
        .def(
            "_copy_to",
            [name, makeTwin](const Gpu& self, const py::handle& dst) -> py::object {
                if (!dst.is_none()) {
                    auto twin = dynamic_cast<Twin*>(&indexArgument(dst, "index"));
                    if (!twin) {
                        throw py::type_error("copy_to needs a faiss." + name + ", got " +
                                             indexTypeName(indexArgument(dst, "index")));
                    }
                    {
                        // the GIL back before py::none() touches a reference count
                        py::gil_scoped_release release;
                        self.copyTo(twin);
                    }
                    return py::none();
                }
                std::unique_ptr<Twin> twin;
                {
                    py::gil_scoped_release release;
                    twin = makeTwin(self);
                    self.copyTo(twin.get());
                }
                return indexToPython(std::move(twin));
            },
            py::arg("index") = py::none(),
            ("copyTo the given faiss." + name + " (returns None) or a new one (returned)").c_str());
}

}  // namespace python
}  // namespace faiss_ext
