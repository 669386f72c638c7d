// Shared pieces of the _faiss_ext pybind11 module: numpy conversions that
// behave like FAISS's Python layer (any array-like in, C-contiguous float32
// used, clear ValueErrors for wrong shapes) and the per-area binders.
#pragma once

#include <faiss/Index.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

namespace faiss_ext {
namespace python {

namespace py = pybind11;

/// A C-contiguous float32 numpy array (what every vector input becomes).
using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

/// A C-contiguous int64 numpy array (ids).
using IdArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

/// "(3, 4)", "(8,)": an array's shape as numpy prints it.
std::string shapeString(const py::array& a);

/// Converts x to a C-contiguous float32 matrix (np.ascontiguousarray
/// semantics) and checks that it is 2-D with d columns; `what` names the
/// argument in the ValueError raised otherwise.
FloatArray toFloatMatrix(const py::handle& x, int64_t d, const char* what);

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

/// A 1-D numpy uint8 array that takes over the bytes (no copy).
py::array_t<uint8_t> bytesToNumpy(std::vector<uint8_t>&& bytes);

/// The dynamic C++ type of an index, demangled ("faiss::IndexFlat").
std::string indexTypeName(const faiss::Index& index);

/// Binds faiss::Index as the generic `Index` wrapper, and SearchParameters.
void bindIndex(py::module_& m);

/// Binds metrics, resources, the selection enums and select_k,
/// GpuIndexQuickSelectFlat (with knn_graph), the cloner, get_num_gpus.
void bindGpu(py::module_& m);

/// Binds GpuKnnGraphGNND, its config and search parameters, VectorFileFormat,
/// gnnd_build_from_file and read_graph_ivecs (after bindGpu: uses its
/// FlatMetric, GpuIndexConfig and GpuResourcesProvider).
void bindGnnd(py::module_& m);

/// Binds Bi-level LSH: BiLevelLSHConfig, BiLevelShortList,
/// SearchParametersBiLevelLSH, IndexBiLevelLSH (the CPU twin),
/// GpuIndexBiLevelLSHConfig and GpuIndexBiLevelLSH (after bindGpu: uses its
/// GpuIndexConfig and GpuResourcesProvider).
void bindLsh(py::module_& m);

/// Binds the factory and read / write / serialize / deserialize.
void bindIo(py::module_& m);

}  // namespace python
}  // namespace faiss_ext
