// The generic `Index` wrapper: any faiss::Index living in libfaiss_ext's copy
// of FAISS (our GPU indexes, and CPU indexes from our factory or reader that
// python3-faiss cannot represent), with FAISS's Python call shapes.
#include <faiss/Index.h>

#include "bindings.h"

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

py::tuple search(const faiss::Index& self, const py::handle& x, idx_t k,
                 const faiss::SearchParameters* params) {
    FloatArray a = toFloatMatrix(x, self.d, "x");
    if (k <= 0) {
        throw py::value_error("k must be > 0, got k=" + std::to_string(k));
    }
    const idx_t n = a.shape(0);
    py::array_t<float> distances({n, k});
    py::array_t<idx_t> labels({n, k});
    const float* xp = a.data();
    float* dp = distances.mutable_data();
    idx_t* lp = labels.mutable_data();
    if (n > 0) {
        py::gil_scoped_release release;
        self.search(n, xp, k, dp, lp, params);
    }
    return py::make_tuple(distances, labels);
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

    py::class_<faiss::SearchParameters>(m, "SearchParameters",
                                        "Per-search parameters (FAISS's SearchParameters).")
        .def(py::init<>());

    py::class_<faiss::Index>(m, "Index", R"doc(
A C++ index of faiss_ext, with FAISS's Python call shapes.

Returned by faiss_ext.read_index / deserialize_index / index_factory /
index_gpu_to_cpu when python3-faiss cannot represent the index (it contains a
faiss_ext type, e.g. the Pearson twin's RowCenteringTransform), and the base
class of the GPU indexes. It lives in faiss_ext's own copy of FAISS: pass it
to faiss_ext functions, not to faiss ones (faiss_ext.write_index,
faiss_ext.serialize_index and faiss_ext.index_cpu_to_gpu accept it).

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
        .def("search", &search, "x"_a, "k"_a, "params"_a = nullptr,
             "k-NN search of the (n, d) queries x: returns (D, I), float32 and int64 "
             "arrays of shape (n, k), closest first, I = -1 where fewer than k results.")
        .def(
            "reset", [](faiss::Index& i) { i.reset(); }, "Removes all vectors.")
        .def("reconstruct", &reconstruct, "key"_a,
             "The stored vector `key` as a (d,) float32 array.")
        .def("reconstruct_n", &reconstructN, "i0"_a, "n"_a,
             "Stored vectors i0 .. i0 + n - 1 as an (n, d) float32 array.")
        .def("__repr__", [](const faiss::Index& i) {
            return "<faiss_ext.Index " + indexTypeName(i) + " d=" + std::to_string(i.d) +
                   " ntotal=" + std::to_string(i.ntotal) + ">";
        });
}

}  // namespace python
}  // namespace faiss_ext
