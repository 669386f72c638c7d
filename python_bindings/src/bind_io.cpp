// The factory and the I/O of faiss_ext on faiss_ext's own objects; the
// package's Python layer adds python3-faiss objects (through bytes).
#include <memory>

#include "bindings.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

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
            return std::unique_ptr<faiss::Index>(faiss_ext::index_factory(
                d, description.c_str(), static_cast<faiss::MetricType>(metric)));
        },
        "d"_a, "description"_a, "metric"_a = static_cast<int>(faiss::METRIC_L2),
        "faiss_ext::index_factory as a faiss_ext.Index (use faiss_ext.index_factory).");

    m.def(
        "_write_index",
        [](const faiss::Index& index, const std::string& fname) {
            checkNoNul(fname, "fname");
            py::gil_scoped_release release;
            faiss_ext::write_index(&index, fname.c_str());
        },
        "index"_a, "fname"_a, "Writes a faiss_ext.Index to a file.");

    m.def(
        "_read_index",
        [](const std::string& fname, int ioFlags) {
            checkNoNul(fname, "fname");
            py::gil_scoped_release release;
            return std::unique_ptr<faiss::Index>(faiss_ext::read_index(fname.c_str(), ioFlags));
        },
        "fname"_a, "io_flags"_a = 0, "Reads a file into a faiss_ext.Index.");

    m.def(
        "_serialize_index",
        [](const faiss::Index& index) {
            std::vector<uint8_t> bytes;
            {
                py::gil_scoped_release release;
                bytes = faiss_ext::serialize_index(&index);
            }
            return bytesToNumpy(std::move(bytes));
        },
        "index"_a, "Serialises a faiss_ext.Index to a uint8 numpy array.");

    m.def(
        "_deserialize_index",
        [](const py::buffer& data, int ioFlags) {
            py::buffer_info info = byteView(data);
            const auto* p = static_cast<const uint8_t*>(info.ptr);
            const auto size = static_cast<size_t>(info.size);
            py::gil_scoped_release release;
            return std::unique_ptr<faiss::Index>(faiss_ext::deserialize_index(p, size, ioFlags));
        },
        "data"_a, "io_flags"_a = 0, "Reads a faiss_ext.Index from bytes-like data.");
}

}  // namespace python
}  // namespace faiss_ext
