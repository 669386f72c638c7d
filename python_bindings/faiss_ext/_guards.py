"""Guards for FAISS 1.7.3's unchecked calls on the faiss objects faiss_ext returns.

The faiss Python objects our functions return are python3-faiss's own
classes, so their calls run FAISS 1.7.3's code, which crashes the process
on some arguments: IndexFlat (and the other flat-code indexes) reconstruct
any key, in range or not (SIGSEGV for 10**6, garbage for -1); the
NN-Descent search of the "GNND<k>" twin divides by zero when
max(search_L, k) == ntotal, reads out of range when it is larger or the
graph holds -1 entries, and aborts (an exception inside OpenMP) when the
graph is not built. guard() gives each returned object a subclass of its own
class (same object, same FAISS methods, isinstance unchanged) whose search,
reconstruct and reconstruct_n check first and raise instead. The C++ side
guards the same calls in faiss_ext::IndexNNDescentFlatChecked.
"""

import faiss
import numpy as np


def _wrapped_chain(index):
    """The indexes from ``index`` down through IndexIDMap / IndexIDMap2 /
    IndexPreTransform to the innermost one (downcast SWIG proxies)."""
    chain = [index]
    while True:
        node = chain[-1]
        if isinstance(node, (faiss.IndexIDMap, faiss.IndexIDMap2, faiss.IndexPreTransform)):
            inner = faiss.downcast_index(node.index)
            if inner is None:
                return chain
            chain.append(inner)
        else:
            return chain


def _nndescent_search_problem(nnd, k):
    """Why FAISS 1.7.3's search of the faiss.IndexNNDescent ``nnd`` for ``k``
    neighbours would crash, or None when it is safe."""
    nd = nnd.nndescent
    ntotal = nnd.ntotal
    if ntotal == 0:
        return ("the index is empty (add more than 100 vectors first: FAISS's NN-Descent builds "
                "the graph when they are added)")
    if not nd.has_built or nd.ntotal != ntotal:
        return ("the graph of the %d vectors is not built (FAISS's NN-Descent builds graphs of "
                "more than 100 vectors)" % ntotal)
    pool = max(int(nd.search_L), int(k))
    if pool >= ntotal:
        return ("the candidate pool max(search_L = %d, k = %d) must be smaller than ntotal = %d "
                "(FAISS 1.7.3's NN-Descent search cannot draw it; for an exact search of all "
                "vectors use the storage index)" % (nd.search_L, k, ntotal))
    size = nd.final_graph.size()
    if nd.K <= 0 or size != ntotal * nd.K:
        return "the graph has %d entries for ntotal %d x K %d" % (size, ntotal, nd.K)
    graph = faiss.rev_swig_ptr(nd.final_graph.data(), size)
    if graph.min() < 0 or graph.max() >= ntotal:
        return ("the graph holds entries outside [0, ntotal = %d) (-1 pads the lists of a graph "
                "with fewer than K + 1 = %d nodes), which FAISS's NN-Descent search follows "
                "unchecked" % (ntotal, nd.K + 1))
    return None


def _guarded_search(self, x, k, *args, **kwargs):
    if int(k) <= 0:
        raise ValueError("k must be > 0, got k=%d" % int(k))
    n = len(x) if hasattr(x, "__len__") else 1
    if n > 0:
        for node in _wrapped_chain(self):
            if isinstance(node, faiss.IndexNNDescent):
                problem = _nndescent_search_problem(node, int(k))
                if problem is not None:
                    raise RuntimeError("%s.search: %s" % (type(node).__name__, problem))
    return type(self)._faiss_ext_base.search(self, x, k, *args, **kwargs)


def _guarded_add_plain(self, x, *args, **kwargs):
    return _guarded_add_impl(self, "add", x, *args, **kwargs)


def _guarded_add_with_ids(self, x, *args, **kwargs):
    return _guarded_add_impl(self, "add_with_ids", x, *args, **kwargs)


def _guarded_add_impl(self, name, x, *args, **kwargs):
    n = len(x) if hasattr(x, "__len__") else 0
    for node in _wrapped_chain(self):
        if isinstance(node, faiss.IndexNNDescent) and n > 0 and node.ntotal + n <= 100:
            raise RuntimeError(
                "%s.add: FAISS's NN-Descent builds graphs of more than 100 vectors (it divides "
                "by zero at 100); %d + %d is too few (nothing was added)"
                % (type(node).__name__, node.ntotal, n))
    return getattr(type(self)._faiss_ext_base, name)(self, x, *args, **kwargs)


def _positional_keys(index):
    """Whether reconstruct keys of ``index`` are positions in [0, ntotal)
    (no id map on the way to the innermost index)."""
    return not any(isinstance(node, (faiss.IndexIDMap, faiss.IndexIDMap2))
                   for node in _wrapped_chain(index))


def _guarded_reconstruct(self, key, *args, **kwargs):
    if _positional_keys(self) and not 0 <= int(key) < self.ntotal:
        raise IndexError("key %d out of range (ntotal %d)" % (int(key), self.ntotal))
    return type(self)._faiss_ext_base.reconstruct(self, key, *args, **kwargs)


def _guarded_reconstruct_n(self, n0, ni, *args, **kwargs):
    n0, ni = int(n0), int(ni)
    if _positional_keys(self):
        if n0 < 0 or ni < 0 or n0 + ni > self.ntotal:
            raise IndexError("range [%d, %d) out of range (ntotal %d)" % (n0, n0 + ni, self.ntotal))
        return type(self)._faiss_ext_base.reconstruct_n(self, n0, ni, *args, **kwargs)
    # Keys are ids of an id map: FAISS's reconstruct_n calls reconstruct in
    # an OpenMP loop, where the exception of an id not in the map (or of an
    # IndexIDMap, which cannot reconstruct) ends the process. One call per
    # key here: the first missing id raises, nothing else happens.
    if ni < 0:
        raise IndexError("reconstruct_n: ni = %d must be >= 0" % ni)
    x = args[0] if args else kwargs.get("x")
    out = np.empty((ni, self.d), dtype=np.float32) if x is None else x
    if out.shape != (ni, self.d):
        raise ValueError("reconstruct_n: x has shape %s, expected %s" % (out.shape, (ni, self.d)))
    for j in range(ni):
        out[j] = self.reconstruct(n0 + j)
    return out


def _guarded_reduce(self):
    # the guarded class is made at run time (pickle cannot name it): pickle
    # as FAISS's serialised form, unpickled into a guarded object again
    return unpickle_guarded, (faiss.serialize_index(self).tobytes(),)


def unpickle_guarded(data):
    """A pickled guarded index: FAISS's serialised form, read by FAISS."""
    return guard(faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8)))


_GUARDED_CLASSES = {}


def guard(index):
    """``index`` (a faiss Python index) with its class replaced by a guarded
    subclass (see above); returned for chaining. Other objects unchanged."""
    cls = type(index)
    if not isinstance(index, faiss.Index) or getattr(cls, "_faiss_ext_base", None) is not None:
        return index
    guarded = _GUARDED_CLASSES.get(cls)
    if guarded is None:
        guarded = type(cls.__name__, (cls,), {
            "__module__": cls.__module__,
            "__doc__": cls.__doc__,
            "_faiss_ext_base": cls,
            "search": _guarded_search,
            "add": _guarded_add_plain,
            "add_with_ids": _guarded_add_with_ids,
            "reconstruct": _guarded_reconstruct,
            "reconstruct_n": _guarded_reconstruct_n,
            "__reduce__": _guarded_reduce,
        })
        _GUARDED_CLASSES[cls] = guarded
    index.__class__ = guarded
    return index
