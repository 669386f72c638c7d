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
wrappers keep the proxy alive through ``referenced_objects``). The native
class's own methods and properties (knn_graph, get_graph, config fields...)
are forwarded by the proxy class, with our proxies unwrapped on the way in and
wrapped on the way out; where FAISS's class has the same name, FAISS's (or
the proxy's ``members``) win.
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
    """Base of every proxy class: made like its native class, shown as ours."""

    _native_class = None

    def __init__(self, *args, **kwargs):
        args = [unwrap(a) for a in args]
        kwargs = {k: unwrap(v) for k, v in kwargs.items()}
        _attach(self, self._native_class(*args, **kwargs))


def _forward_method(name, doc):
    def method(self, *args, **kwargs):
        return _wrapping(getattr(self.__dict__["_native"], name))(*args, **kwargs)
    method.__name__ = name
    method.__doc__ = doc
    return method


def _forward_property(name, prop):
    def get(self):
        return wrap(getattr(self.__dict__["_native"], name))

    def set_(self, value):
        setattr(self.__dict__["_native"], name, unwrap(value))
    return property(get, set_ if prop.fset is not None else None, doc=prop.__doc__)


def _forwarded_members(native_cls, faiss_base, taken):
    """Class-level forwarders for the public methods, static methods and
    properties that native_cls defines (itself and its pybind11 bases) and
    that neither faiss_base nor ``taken`` has."""
    forwarded = {}
    for klass in native_cls.__mro__:
        if klass.__module__ != _C.__name__:
            continue  # pybind11's own base classes, object
        for name, attr in vars(klass).items():
            if (name.startswith("_") or name in forwarded or name in taken
                    or hasattr(faiss_base, name)):
                continue
            if isinstance(attr, property):
                forwarded[name] = _forward_property(name, attr)
            elif isinstance(attr, staticmethod):
                forwarded[name] = staticmethod(_wrapping(attr.__func__))
            elif callable(attr):
                forwarded[name] = _forward_method(name, getattr(attr, "__doc__", None))
    return forwarded


def proxy_class(native_cls, faiss_base, members=None):
    """The proxy class of ``native_cls``: a ``faiss_base`` (faiss.Index or
    faiss.SearchParameters) subclass named as ``native_cls``, with
    ``members`` (methods that take precedence over FAISS's: argument checks,
    torch / CuPy inputs, pickling) and forwarders to the native class's own
    methods and properties."""
    namespace = {
        "_native_class": native_cls,
        "__doc__": native_cls.__doc__,
        "__module__": "faiss_ext",
        "__qualname__": native_cls.__name__,
    }
    namespace.update(members or {})
    namespace.update(_forwarded_members(native_cls, faiss_base, namespace))
    # a proxy of a derived native class derives from its base's proxy (all
    # our index proxies from the NativeIndex one, which holds the members
    # common to our indexes)
    bases = (NativeProxy, faiss_base)
    for klass in native_cls.__mro__[1:]:
        if klass in _PROXY_CLASSES:
            bases = (_PROXY_CLASSES[klass],)
            break
    cls = type(native_cls.__name__, bases, namespace)
    _PROXY_CLASSES[native_cls] = cls
    return cls
