// The _faiss_ext extension module: the C++ half of the `faiss_ext` Python
// package (faiss_ext/__init__.py loads it after making `import faiss`'s FAISS
// global, and puts faiss.Index proxy classes in front of our classes).
#include <faiss/impl/FaissException.h>

#include <exception>

#include "bindings.h"
#include "swig_bridge.h"

namespace py = pybind11;

PYBIND11_MODULE(_faiss_ext, m) {
    m.doc() =
        "C++ half of faiss_ext: GPU k-NN indexes for FAISS. Use the `faiss_ext` "
        "package, which wraps this module.";

    // FAISS errors arrive as RuntimeError with the C++ message. Other
    // std::exceptions keep pybind11's mapping (RuntimeError, or ValueError /
    // MemoryError / IndexError for invalid_argument / bad_alloc / out_of_range).
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const faiss::FaissException& e) {
            PyErr_SetString(PyExc_RuntimeError, e.what());
        }
    });

    // Fails the import, with the reason, when this module's FAISS is not the
    // one `import faiss` loaded (docs/one-faiss.md).
    faiss_ext::python::checkSharedFaiss();

    faiss_ext::python::bindIndex(m);
    faiss_ext::python::bindGpu(m);
    faiss_ext::python::bindGnnd(m);
    faiss_ext::python::bindSearchGraph(m);
    faiss_ext::python::bindLsh(m);
    faiss_ext::python::bindLshAutoTune(m);
    faiss_ext::python::bindIo(m);
    faiss_ext::python::bindMerge(m);
    faiss_ext::python::bindShm(m);
}
