"""faiss.Index proxy classes for faiss_ext's own C++ classes.

FAISS's Python layer (python3-faiss) reaches a C++ object through the SWIG
pointer in its proxy's ``this``. Our classes are bound with pybind11 (their
"native" objects, in ``_faiss_ext``); each gets here a Python class deriving
from faiss.Index (or faiss.SearchParameters) whose ``this`` points at the
native object's C++ ``faiss::Index``. Since the process holds one FAISS
(docs/one-faiss.md), that pointer is a valid object for every FAISS function
and wrapper: ``faiss.IndexIDMap(ours)``, ``faiss.IndexShards``,
``faiss.IndexRefineFlat``, ``faiss.write_index`` (for what FAISS can write)
dispatch to our C++ overrides. The proxy owns the native object (FAISS's
wrappers keep the proxy alive through ``referenced_objects``); attributes the
proxy class lacks are looked up on the native object, with our proxies
unwrapped on the way in and wrapped on the way out.
"""

import functools
import weakref

import faiss

from . import _faiss_ext as _C
from ._guards import guard

# native class -> its proxy class (filled by proxy_class)
_PROXY_CLASSES = {}
# id(native object) -> its live proxy, so that one C++ object has one proxy
_LIVE_PROXIES = weakref.WeakValueDictionary()


def _attach(proxy, native):
    object.__setattr__(proxy, "_native", native)
    object.__setattr__(proxy, "this", native._swig_this())
    _LIVE_PROXIES[id(native)] = proxy


def unwrap(value):
    """The native object behind one of our proxies; anything else as is."""
    if isinstance(value, NativeProxy):
        return value.__dict__["_native"]
    return value


def wrap(value):
    """Our proxy for a native object of ours (the same proxy for the same
    object), faiss objects guarded (see _guards), anything else as is."""
    if isinstance(value, (_C.NativeIndex, _C.NativeSearchParameters)):
        proxy = _LIVE_PROXIES.get(id(value))
        if proxy is not None and proxy.__dict__["_native"] is value:
            return proxy
        cls = _proxy_class_of(type(value))
        proxy = cls.__new__(cls)
        _attach(proxy, value)
        return proxy
    if isinstance(value, faiss.Index):
        return guard(value)
    if isinstance(value, tuple):
        return tuple(wrap(v) for v in value)
    return value


def _proxy_class_of(native_cls):
    for klass in native_cls.__mro__:
        if klass in _PROXY_CLASSES:
            return _PROXY_CLASSES[klass]
    raise TypeError("no faiss_ext proxy class for %s" % native_cls.__name__)


def _wrapping(method):
    """A bound native method with our proxies unwrapped in its arguments and
    native objects wrapped in its result."""
    @functools.wraps(method)
    def call(*args, **kwargs):
        args = [unwrap(a) for a in args]
        kwargs = {k: unwrap(v) for k, v in kwargs.items()}
        return wrap(method(*args, **kwargs))
    return call


class NativeProxy:
    """Mixin of every proxy class: construction, attribute delegation to the
    native object, identity in repr."""

    _native_class = None

    def __init__(self, *args, **kwargs):
        args = [unwrap(a) for a in args]
        kwargs = {k: unwrap(v) for k, v in kwargs.items()}
        _attach(self, self._native_class(*args, **kwargs))

    def __getattr__(self, name):
        # only reached for names that neither the proxy class nor FAISS's
        # class has: the native object's methods and properties
        native = self.__dict__.get("_native")
        if native is None or name.startswith("__"):
            raise AttributeError(name)
        value = getattr(native, name)
        if callable(value) and not isinstance(value, type):
            return _wrapping(value)
        return wrap(value)

    def __setattr__(self, name, value):
        native = self.__dict__.get("_native")
        if (native is not None and not hasattr(type(self), name) and name not in self.__dict__
                and hasattr(native, name)):
            setattr(native, name, unwrap(value))
        else:
            object.__setattr__(self, name, value)

    def __dir__(self):
        names = set(super().__dir__())
        native = self.__dict__.get("_native")
        if native is not None:
            names.update(n for n in dir(native) if not n.startswith("_"))
        return sorted(names)


def proxy_class(native_cls, faiss_base, members=None):
    """The proxy class of ``native_cls``: a ``faiss_base`` (faiss.Index or
    faiss.SearchParameters) subclass named as ``native_cls``, with
    ``members`` (methods that take precedence over FAISS's: argument checks,
    torch / CuPy inputs, pickling)."""
    namespace = {
        "_native_class": native_cls,
        "__doc__": native_cls.__doc__,
        "__module__": "faiss_ext",
        "__qualname__": native_cls.__name__,
    }
    namespace.update(members or {})
    bases = [NativeProxy]
    # a proxy of a derived native class derives from its base's proxy (a
    # GpuIndexSearchGraph proxy is not a GpuKnnGraphGNND one, but both are
    # faiss.Index)
    for klass in native_cls.__mro__[1:]:
        if klass in _PROXY_CLASSES:
            bases = [_PROXY_CLASSES[klass]]
            break
    else:
        bases.append(faiss_base)
    cls = type(native_cls.__name__, tuple(bases), namespace)
    _PROXY_CLASSES[native_cls] = cls
    return cls
