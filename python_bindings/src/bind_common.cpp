// numpy conversions and small helpers shared by the binders.
#include <cxxabi.h>

#include <cstdio>
#include <unistd.h>
#include <cstdlib>
#include <memory>
#include <typeinfo>

#include "bindings.h"

namespace faiss_ext {
namespace python {

std::string shapeString(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) {
        if (i) s += ", ";
        s += std::to_string(a.shape(i));
    }
    if (a.ndim() == 1) s += ",";
    return s + ")";
}

std::string typeName(const py::handle& x) {
    return std::string(py::str(py::type::handle_of(x).attr("__name__")));
}

namespace {

/// Raises MemoryError: "<what>: out of memory making the array of shape ..."
[[noreturn]] void raiseConversionMemoryError(const py::handle& x, const char* what,
                                             size_t itemBytes) {
    std::string shape = "?";
    double bytes = double(itemBytes);
    py::object s = py::getattr(x, "shape", py::none());
    if (py::isinstance<py::tuple>(s)) {
        shape = std::string(py::str(s));
        for (const py::handle& dim : s) bytes *= py::cast<double>(dim);
    }
    // formatted here: PyErr_Format has no %g (Python 3.12 refuses it)
    char size[32];
    std::snprintf(size, sizeof(size), "%.4g", bytes);
    PyErr_SetString(
        PyExc_MemoryError,
        (std::string(what) + ": out of memory making the array of shape " + shape +
         " a contiguous " + (itemBytes == 4 ? "float32" : "int64") + " array (" + size + " bytes)")
            .c_str());
    throw py::error_already_set();
}

/// A conversion of x to a contiguous array of itemBytes elements that
/// needs more bytes than the machine's physical memory is refused before
/// numpy tries: where the kernel overcommits memory, numpy's allocation
/// succeeds and the copy gets the process killed instead of a MemoryError.
void refuseConversionPastPhysicalMemory(const py::handle& x, const char* what,
                                        size_t itemBytes) {
    if (!py::isinstance<py::array>(x)) return;
    const auto a = py::reinterpret_borrow<py::array>(x);
    const bool ready = a.itemsize() == py::ssize_t(itemBytes) &&
                       (a.flags() & py::array::c_style) &&
                       a.dtype().kind() == (itemBytes == 4 ? 'f' : 'i');
    if (ready) return;
    const long pages = sysconf(_SC_PHYS_PAGES), pageBytes = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || pageBytes <= 0) return;
    if (double(a.size()) * double(itemBytes) > double(pages) * double(pageBytes))
        raiseConversionMemoryError(x, what, itemBytes);
}

}  // namespace

void raiseIfOutOfMemory(const py::handle& x, const char* what, size_t itemBytes) {
    // pybind11's ensure() clears numpy's error: convert again with numpy to
    // learn whether it was a MemoryError
    PyErr_Clear();
    try {
        py::module_::import("numpy").attr("ascontiguousarray")(x, itemBytes == 4 ? "float32"
                                                                                   : "int64");
        return;
    } catch (py::error_already_set& e) {
        if (!e.matches(PyExc_MemoryError)) return;
    }
    raiseConversionMemoryError(x, what, itemBytes);
}

void checkNoNul(const std::string& s, const char* what) {
    if (s.find('\0') != std::string::npos) {
        throw py::value_error(std::string(what) + " holds a NUL character at position " +
                              std::to_string(s.find('\0')));
    }
}

namespace {

/// x as a C-contiguous 2-D Array (FloatArray or IdArray); `shape` ("(n, 8)"
/// or empty) is the expected shape named in the ValueError for another ndim.
template <class Array>
Array toMatrix(const py::handle& x, const char* what, const std::string& shape) {
    using T = typename Array::value_type;
    const std::string type = sizeof(T) == sizeof(float) ? "float32" : "int64";
    if (x.is_none()) {
        throw py::value_error(std::string(what) + " must be a 2-D " + type + " array, got None");
    }
    refuseConversionPastPhysicalMemory(x, what, sizeof(T));
    Array a = Array::ensure(x);
    if (!a) {
        raiseIfOutOfMemory(x, what, sizeof(T));
        PyErr_Clear();
        throw py::value_error(std::string(what) + " must be convertible to a 2-D " + type +
                              " array, got " + typeName(x));
    }
    if (a.ndim() != 2) {
        throw py::value_error(std::string(what) + " must be a 2-D array" +
                              (shape.empty() ? "" : " of shape " + shape) + ", got shape " +
                              shapeString(a));
    }
    return a;
}

}  // namespace

FloatArray toFloatMatrix(const py::handle& x, const char* what) {
    return toMatrix<FloatArray>(x, what, "");
}

IdArray toIdMatrix(const py::handle& x, const char* what) { return toMatrix<IdArray>(x, what, ""); }

FloatArray toFloatMatrix(const py::handle& x, int64_t d, const char* what) {
    FloatArray a = toMatrix<FloatArray>(x, what, "(n, " + std::to_string(d) + ")");
    if (a.shape(1) != d) {
        throw py::value_error(std::string(what) + " has " + std::to_string(a.shape(1)) +
                              " columns but the index has dimension d=" + std::to_string(d) +
                              " (shape " + shapeString(a) + ")");
    }
    return a;
}

IdArray toIdVector(const py::handle& ids, int64_t n, const char* what) {
    if (!ids.is_none()) refuseConversionPastPhysicalMemory(ids, what, sizeof(int64_t));
    IdArray a = ids.is_none() ? IdArray() : IdArray::ensure(ids);
    if (!a) {
        if (!ids.is_none()) raiseIfOutOfMemory(ids, what, sizeof(int64_t));
        PyErr_Clear();
        throw py::value_error(std::string(what) + " must be a 1-D int64 array");
    }
    if (a.ndim() != 1 || a.shape(0) != n) {
        throw py::value_error(std::string(what) + " must have shape (" + std::to_string(n) +
                              ",), got shape " + shapeString(a));
    }
    return a;
}

py::array_t<uint8_t> bytesToNumpy(std::vector<uint8_t>&& bytes) {
    const auto n = static_cast<py::ssize_t>(bytes.size());
    return vectorToNumpy(std::move(bytes), {n});
}

FlatMetric toFlatMetric(const py::handle& metric) {
    if (py::isinstance<FlatMetric>(metric)) return metric.cast<FlatMetric>();
    if (py::isinstance<py::int_>(metric)) {
        return fromFaissMetric(static_cast<faiss::MetricType>(metric.cast<int>()));
    }
    if (py::isinstance<py::str>(metric)) return parseFlatMetric(metric.cast<std::string>());
    throw py::type_error(
        "metric must be a faiss_ext.FlatMetric, a FAISS metric int (faiss.METRIC_L2, "
        "faiss.METRIC_INNER_PRODUCT) or a metric name ('L2', 'IP', 'Cosine', 'Pearson'), got " +
        typeName(metric));
}

std::string indexTypeName(const faiss::Index& index) { return demangledTypeName(typeid(index)); }

std::string demangledTypeName(const std::type_info& type) {
    const char* mangled = type.name();
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(
        abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
    return (status == 0 && demangled) ? std::string(demangled.get()) : std::string(mangled);
}

}  // namespace python
}  // namespace faiss_ext
