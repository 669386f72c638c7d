// numpy conversions and small helpers shared by the binders.
#include <cxxabi.h>

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

FloatArray toFloatMatrix(const py::handle& x, int64_t d, const char* what) {
    if (x.is_none()) {
        throw py::value_error(std::string(what) + " must be a 2-D float32 array, got None");
    }
    FloatArray a = FloatArray::ensure(x);
    if (!a) {
        PyErr_Clear();
        throw py::value_error(std::string(what) +
                              " must be convertible to a 2-D float32 array, got " +
                              std::string(py::str(py::type::handle_of(x).attr("__name__"))));
    }
    if (a.ndim() != 2) {
        throw py::value_error(std::string(what) + " must be a 2-D array of shape (n, " +
                              std::to_string(d) + "), got shape " + shapeString(a));
    }
    if (a.shape(1) != d) {
        throw py::value_error(std::string(what) + " has " + std::to_string(a.shape(1)) +
                              " columns but the index has dimension d=" + std::to_string(d) +
                              " (shape " + shapeString(a) + ")");
    }
    return a;
}

IdArray toIdVector(const py::handle& ids, int64_t n, const char* what) {
    IdArray a = ids.is_none() ? IdArray() : IdArray::ensure(ids);
    if (!a) {
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
    auto* owned = new std::vector<uint8_t>(std::move(bytes));
    py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<uint8_t>*>(p); });
    return py::array_t<uint8_t>({static_cast<py::ssize_t>(owned->size())}, {1}, owned->data(),
                                owner);
}

std::string indexTypeName(const faiss::Index& index) {
    const char* mangled = typeid(index).name();
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(
        abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
    return (status == 0 && demangled) ? std::string(demangled.get()) : std::string(mangled);
}

}  // namespace python
}  // namespace faiss_ext
