// The native base class of our index classes (NativeIndex, the pybind11 side
// of faiss::Index) with FAISS's Python call shapes and argument checks;
// faiss_ext/__init__.py puts a faiss.Index proxy class in front of each of
// our classes (swig_bridge.h), so users see faiss.Index objects.
#include <cuda_runtime.h>
#include <faiss/Index.h>

#include "bindings.h"
#include "faiss_ext/gpu/GpuIndex.h"
#include "swig_bridge.h"

namespace faiss_ext {
namespace python {

namespace {

using idx_t = int64_t;

void add(faiss::Index& self, const py::handle& x) {
    FloatArray a = toFloatMatrix(x, self.d, "x");
    const idx_t n = a.shape(0);
    const float* xp = a.data();
    py::gil_scoped_release release;
    self.add(n, xp);
}

void addWithIds(faiss::Index& self, const py::handle& x, const py::handle& ids) {
    FloatArray a = toFloatMatrix(x, self.d, "x");
    const idx_t n = a.shape(0);
    IdArray idv = toIdVector(ids, n, "ids");
    const float* xp = a.data();
    const idx_t* ip = idv.data();
    py::gil_scoped_release release;
    self.add_with_ids(n, xp, ip);
}

void train(faiss::Index& self, const py::handle& x) {
    FloatArray a = toFloatMatrix(x, self.d, "x");
    const idx_t n = a.shape(0);
    const float* xp = a.data();
    py::gil_scoped_release release;
    self.train(n, xp);
}

/// An output array of FAISS's search (D or I): `given` when it is a
/// C-contiguous writable array of dtype T and shape (n, k), a new one for
/// None, ValueError otherwise (FAISS's own search asserts instead).
template <class T>
py::array_t<T> searchOutput(const py::handle& given, idx_t n, idx_t k, const char* what) {
    if (given.is_none()) return py::array_t<T>({n, k});
    if (!py::isinstance<py::array_t<T>>(given)) {
        throw py::value_error(std::string(what) + " must be a numpy array of dtype " +
                              py::str(py::dtype::of<T>()).cast<std::string>() + ", got " +
                              typeName(given));
    }
    auto a = py::reinterpret_borrow<py::array_t<T>>(given);
    if (a.ndim() != 2 || a.shape(0) != n || a.shape(1) != k) {
        throw py::value_error(std::string(what) + " must have shape (" + std::to_string(n) + ", " +
                              std::to_string(k) + "), got shape " + shapeString(a));
    }
    if (!(a.flags() & py::array::c_style) || !a.writeable()) {
        throw py::value_error(std::string(what) + " must be C-contiguous and writable");
    }
    return a;
}

py::tuple search(const faiss::Index& self, const py::handle& x, idx_t k, const py::handle& params,
                 const py::handle& D, const py::handle& I) {
    FloatArray a = toFloatMatrix(x, self.d, "x");
    if (k <= 0) {
        throw py::value_error("k must be > 0, got k=" + std::to_string(k));
    }
    const faiss::SearchParameters* p = searchParametersArgument(params, "params");
    const idx_t n = a.shape(0);
    py::array_t<float> distances = searchOutput<float>(D, n, k, "D");
    py::array_t<idx_t> labels = searchOutput<idx_t>(I, n, k, "I");
    const float* xp = a.data();
    float* dp = distances.mutable_data();
    idx_t* lp = labels.mutable_data();
    if (n > 0) {
        py::gil_scoped_release release;
        self.search(n, xp, k, dp, lp, p);
    }
    return py::make_tuple(distances, labels);
}

/// Waits for the work a GPU index queued on its stream: a search with device
/// inputs and outputs returns as soon as its kernels are queued, and the
/// caller's library (torch, CuPy) reads the results on its own stream.
void waitForIndexStream(const faiss::Index& index) {
    auto gpuIndex = dynamic_cast<const gpu::GpuIndex*>(&index);
    if (!gpuIndex) return;
    cudaStream_t stream = gpuIndex->getResources()->getDefaultStream(gpuIndex->getDevice());
    cudaError_t err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) {
        throw std::runtime_error(std::string("waiting for the index's stream: ") +
                                 cudaGetErrorString(err));
    }
}

/// search on device (or host) pointers given as integers: the path of torch
/// and CuPy arrays (faiss_ext/_arrays.py checks their shapes, dtypes and
/// devices and allocates the outputs); the index's search takes host or
/// device pointers. Returns when the results are written.
void searchPointers(const faiss::Index& self, idx_t n, uintptr_t x, idx_t k, uintptr_t distances,
                    uintptr_t labels, const py::handle& params) {
    if (n < 0 || k <= 0) {
        throw py::value_error("need n >= 0 and k > 0, got n=" + std::to_string(n) +
                              ", k=" + std::to_string(k));
    }
    if (n > 0 && (!x || !distances || !labels)) {
        throw py::value_error("null pointer for x, D or I");
    }
    const faiss::SearchParameters* p = searchParametersArgument(params, "params");
    if (n == 0) return;
    py::gil_scoped_release release;
    self.search(n, reinterpret_cast<const float*>(x), k, reinterpret_cast<float*>(distances),
                reinterpret_cast<idx_t*>(labels), p);
    waitForIndexStream(self);
}

/// add on a device (or host) pointer given as an integer (see searchPointers).
void addPointer(faiss::Index& self, idx_t n, uintptr_t x) {
    if (n < 0) throw py::value_error("n must be >= 0, got " + std::to_string(n));
    if (n > 0 && !x) throw py::value_error("null pointer for x");
    if (n == 0) return;
    py::gil_scoped_release release;
    self.add(n, reinterpret_cast<const float*>(x));
    waitForIndexStream(self);
}

void checkKey(const faiss::Index& self, idx_t key) {
    if (key < 0 || key >= self.ntotal) {
        throw py::index_error("key " + std::to_string(key) + " out of range (ntotal " +
                              std::to_string(self.ntotal) + ")");
    }
}

py::array_t<float> reconstruct(const faiss::Index& self, idx_t key) {
    checkKey(self, key);
    py::array_t<float> out({static_cast<idx_t>(self.d)});
    float* op = out.mutable_data();
    py::gil_scoped_release release;
    self.reconstruct(key, op);
    return out;
}

py::array_t<float> reconstructN(const faiss::Index& self, idx_t i0, idx_t ni) {
    if (i0 < 0 || ni < 0 || i0 + ni > self.ntotal) {
        throw py::index_error("range [" + std::to_string(i0) + ", " + std::to_string(i0 + ni) +
                              ") out of range (ntotal " + std::to_string(self.ntotal) + ")");
    }
    py::array_t<float> out({ni, static_cast<idx_t>(self.d)});
    float* op = out.mutable_data();
    if (ni > 0) {
        py::gil_scoped_release release;
        self.reconstruct_n(i0, ni, op);
    }
    return out;
}

}  // namespace

void bindIndex(py::module_& m) {
    using namespace pybind11::literals;

    m.def(
        "_downcast_index",
        [](const py::handle& index) {
            return indexReferenceToPython(&indexArgument(index, "index"));
        },
        "index"_a,
        "The object behind any faiss.Index as its most derived class: our native object for "
        "our classes, else FAISS's proxy; not owning it (use faiss_ext.downcast_index).");

    py::class_<faiss::SearchParameters>(
        m, "NativeSearchParameters",
        "The native side of faiss::SearchParameters; faiss_ext's search parameter classes are "
        "faiss.SearchParameters proxies of their native objects.")
        .def(py::init<>())
        .def(
            "_swig_this", [](faiss::SearchParameters& p) { return swigThis(&p); },
            "A SWIG pointer (faiss::SearchParameters *) to this object, not owning it.");

    py::class_<faiss::Index>(m, "NativeIndex", R"doc(
The native side of faiss::Index for faiss_ext's own index classes, with
FAISS's Python call shapes and argument checks (ValueError, not assert).
faiss_ext's classes are faiss.Index proxies of these objects: use those.

    index.add(x)                # x: (n, d) array, converted to float32
    D, I = index.search(q, k)   # (nq, k) float32 and int64
)doc")
        .def_property_readonly(
            "d", [](const faiss::Index& i) { return i.d; }, "Vector dimension.")
        .def_property_readonly(
            "ntotal", [](const faiss::Index& i) { return i.ntotal; }, "Number of stored vectors.")
        .def_property_readonly(
            "metric_type", [](const faiss::Index& i) { return static_cast<int>(i.metric_type); },
            "FAISS metric (faiss.METRIC_L2 = 1, faiss.METRIC_INNER_PRODUCT = 0).")
        .def_property_readonly(
            "is_trained", [](const faiss::Index& i) { return i.is_trained; },
            "Whether the index is ready for add / search.")
        .def_property(
            "verbose", [](const faiss::Index& i) { return i.verbose; },
            [](faiss::Index& i, bool v) { i.verbose = v; }, "Progress messages on stderr.")
        .def_property_readonly("type_name", &indexTypeName,
                               "The C++ type of the index, e.g. 'faiss::IndexPreTransform'.")
        .def("add", &add, "x"_a,
             "Adds the n vectors of x, an (n, d) array (converted to C-contiguous float32).")
        .def("add_with_ids", &addWithIds, "x"_a, "ids"_a,
             "Adds the vectors of x (n, d) with the int64 ids (n,) (IndexIDMap and friends).")
        .def("train", &train, "x"_a, "Trains the index on the (n, d) array x.")
        .def("search", &search, "x"_a, "k"_a, "params"_a = py::none(), "D"_a = py::none(),
             "I"_a = py::none(),
             "k-NN search of the (n, d) queries x: returns (D, I), float32 and int64 "
             "arrays of shape (n, k), closest first, I = -1 where fewer than k results. "
             "params: a faiss.SearchParameters (FAISS's or ours) or None; D, I: arrays to "
             "fill (C-contiguous float32 / int64 of shape (n, k)) or None.")
        .def("_search_pointers", &searchPointers, "n"_a, "x"_a, "k"_a, "D"_a, "I"_a,
             "params"_a = py::none(),
             "search on raw (device or host) pointers given as integers (torch / CuPy "
             "arrays: use search).")
        .def("_add_pointer", &addPointer, "n"_a, "x"_a,
             "add from a raw (device or host) pointer given as an integer (use add).")
        .def(
            "_swig_this", [](faiss::Index& i) { return swigThis(&i); },
            "A SWIG pointer (faiss::Index *) to this object, not owning it: the `this` of "
            "its faiss.Index proxy.")
        .def(
            "reset", [](faiss::Index& i) { i.reset(); }, "Removes all vectors.")
        .def("reconstruct", &reconstruct, "key"_a,
             "The stored vector `key` as a (d,) float32 array.")
        .def("reconstruct_n", &reconstructN, "i0"_a, "n"_a,
             "Stored vectors i0 .. i0 + n - 1 as an (n, d) float32 array.")
        .def("__repr__", [](const faiss::Index& i) {
            return "<faiss_ext native " + indexTypeName(i) + " d=" + std::to_string(i.d) +
                   " ntotal=" + std::to_string(i.ntotal) + ">";
        });
}

}  // namespace python
}  // namespace faiss_ext
