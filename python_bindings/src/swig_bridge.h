// The bridge between our pybind11 module and python3-faiss's SWIG proxies.
//
// faiss_ext and `import faiss` share one FAISS in the process
// (docs/one-faiss.md), so a faiss::Index made by one side is a valid object
// for the other; what differs is only its Python wrapper. SWIG's external
// runtime (generated at build time by `swig -python -external-runtime`) reads
// the SWIG type table that faiss's _swigfaiss module registered, which lets
// us unwrap faiss.Index / faiss.SearchParameters proxies to C++ pointers and
// wrap C++ objects as proxies of their FAISS class, without going through
// bytes.
#pragma once

#include <faiss/Index.h>
#include <pybind11/pybind11.h>

#include <memory>

namespace faiss_ext {
namespace python {

namespace py = pybind11;

/// The faiss::Index behind obj: a faiss SWIG proxy (faiss.IndexFlat, an
/// IndexIDMap, ..., or one of faiss_ext's proxy classes, which carry a SWIG
/// `this`) or a native object of this module; nullptr when obj is neither.
/// Never throws for a wrong type.
faiss::Index* indexPointer(py::handle obj);

/// indexPointer(obj), or TypeError naming `what` and obj's type.
faiss::Index& indexArgument(py::handle obj, const char* what);

/// The faiss::SearchParameters behind obj (a faiss.SearchParameters proxy,
/// one of ours, or a native object), nullptr for None, TypeError for anything
/// else.
const faiss::SearchParameters* searchParametersArgument(py::handle obj, const char* what);

/// A SWIG pointer object of type `faiss::Index *` for index, not owning it:
/// the `this` of faiss_ext's Python proxy classes, through which FAISS's
/// functions and wrappers reach our C++ object.
py::object swigThis(faiss::Index* index);

/// As swigThis(faiss::Index*), typed `faiss::SearchParameters *`.
py::object swigThis(faiss::SearchParameters* params);

/// index as a Python object. Our own index classes (GPU indexes,
/// IndexBiLevelLSH) become this module's native objects (faiss_ext/__init__.py
/// gives them their faiss.Index proxy class); every other index becomes the
/// faiss proxy of its FAISS class (faiss.downcast_index's choice, e.g.
/// faiss.IndexFlat), owning the C++ object: the unique_ptr is released.
py::object indexToPython(std::unique_ptr<faiss::Index> index);

/// As indexToPython, for an index owned elsewhere (e.g. the index inside an
/// IndexIDMap): the Python object does not delete it.
py::object indexReferenceToPython(faiss::Index* index);

/// Whether the FAISS of `import faiss` and the one this module was linked
/// against are the same copy: the SWIG type table is found and a proxy
/// round-trips to the same pointer. Raises ImportError with the reason
/// otherwise (called once at import).
void checkSharedFaiss();

}  // namespace python
}  // namespace faiss_ext
