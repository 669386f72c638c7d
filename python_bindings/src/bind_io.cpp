// The factory and the I/O of faiss_ext. Indexes come in and go out as the
// objects of `import faiss` (FAISS's classes) or as our own classes
// (swig_bridge.h): one FAISS in the process, no copies through bytes.
#include <memory>

#include "bindings.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"
#include "swig_bridge.h"

namespace faiss_ext {
namespace python {

namespace {

/// A readable, contiguous, 1-byte-per-item view of a bytes-like object.
py::buffer_info byteView(const py::buffer& data) {
    py::buffer_info info = data.request();
    if (info.itemsize != 1 || info.ndim != 1 || (info.shape[0] > 1 && info.strides[0] != 1)) {
        throw py::value_error(
            "expected bytes, bytearray or a contiguous 1-D uint8 array, got a buffer of "
            "format '" +
            info.format + "' with ndim " + std::to_string(info.ndim));
    }
    return info;
}

}  // namespace

void bindIo(py::module_& m) {
    using namespace pybind11::literals;

    m.def(
        "_index_factory",
        [](int d, const std::string& description, int metric) {
            checkNoNul(description, "description");
            return indexToPython(std::unique_ptr<faiss::Index>(faiss_ext::index_factory(
                d, description.c_str(), static_cast<faiss::MetricType>(metric))));
        },
        "d"_a, "description"_a, "metric"_a = static_cast<int>(faiss::METRIC_L2),
        "faiss_ext::index_factory (use faiss_ext.index_factory).");

    m.def(
        "_write_index",
        [](const py::handle& indexObj, const std::string& fname) {
            const faiss::Index& index = indexArgument(indexObj, "index");
            checkNoNul(fname, "fname");
            py::gil_scoped_release release;
            faiss_ext::write_index(&index, fname.c_str());
        },
        "index"_a, "fname"_a, "Writes any faiss.Index (FAISS's or ours) to a file.");

    m.def(
        "_read_index",
        [](const std::string& fname, int ioFlags) {
            checkNoNul(fname, "fname");
            std::unique_ptr<faiss::Index> index;
            {
                py::gil_scoped_release release;
                index.reset(faiss_ext::read_index(fname.c_str(), ioFlags));
            }
            return indexToPython(std::move(index));
        },
        "fname"_a, "io_flags"_a = 0, "Reads a file: a FAISS proxy, or our native object.");

    m.def(
        "_serialize_index",
        [](const py::handle& indexObj) {
            const faiss::Index& index = indexArgument(indexObj, "index");
            std::vector<uint8_t> bytes;
            {
                py::gil_scoped_release release;
                bytes = faiss_ext::serialize_index(&index);
            }
            return bytesToNumpy(std::move(bytes));
        },
        "index"_a, "Serialises any faiss.Index to a uint8 numpy array.");

    m.def(
        "_deserialize_index",
        [](const py::buffer& data, int ioFlags) {
            py::buffer_info info = byteView(data);
            const auto* p = static_cast<const uint8_t*>(info.ptr);
            const auto size = static_cast<size_t>(info.size);
            std::unique_ptr<faiss::Index> index;
            {
                py::gil_scoped_release release;
                index.reset(faiss_ext::deserialize_index(p, size, ioFlags));
            }
            return indexToPython(std::move(index));
        },
        "data"_a, "io_flags"_a = 0, "Reads an index from bytes-like data (as _read_index).");
}

}  // namespace python
}  // namespace faiss_ext
