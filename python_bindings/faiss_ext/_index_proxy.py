"""What our index proxies do differently from a plain faiss.Index proxy.

FAISS's Python methods (class_wrappers.handle_Index) assert on bad input and
take numpy only; our proxies put in front of them the native methods, which
raise ValueError / TypeError with the offending values, take torch tensors
and CuPy arrays (_arrays), and keep FAISS's calling conventions
(``search(x, k, params=None, D=None, I=None)``). Every other faiss.Index
method (range_search, assign, remove_ids, ...) is FAISS's own, calling our
C++ overrides. Pickling goes through faiss_ext's serialiser, which knows our
types (FAISS 1.7.3's does not).
"""

import numpy as np

from . import _arrays
from . import _faiss_ext as _C
from ._proxies import unwrap, wrap


def _native(self):
    return self.__dict__["_native"]


def search(self, x, k, params=None, *, D=None, I=None):
    """k-NN search of the queries x, (n, d): returns (D, I), float32 and
    int64 arrays of shape (n, k), closest first, I = -1 where fewer than k
    results. ``params``: a faiss.SearchParameters (ours or FAISS's) or None;
    ``D``, ``I``: arrays to fill, or None. x may be a numpy array (or
    anything numpy converts), a torch tensor or a CuPy array on the index's
    device; D and I come back of the same kind."""
    if _arrays.kind(x) is not None:
        return _arrays.search(self, _native(self), x, k, params, D, I)
    return _native(self).search(x, _arrays.count_argument(k), params=params, D=D, I=I)


def add(self, x):
    """Adds the vectors of x, (n, d) (numpy, torch or CuPy, as search)."""
    if _arrays.kind(x) is not None:
        _arrays.add(self, _native(self), x)
        return
    _native(self).add(x)


def add_with_ids(self, x, ids):
    """Adds the vectors of x, (n, d), with the int64 ids, (n,)."""
    _native(self).add_with_ids(_arrays.host_array(x), _arrays.host_array(ids))


def train(self, x):
    """Trains the index on the vectors of x, (n, d)."""
    _native(self).train(_arrays.host_array(x))


def reconstruct(self, key):
    """The stored vector ``key`` as a (d,) float32 array (IndexError when
    out of range)."""
    return _native(self).reconstruct(int(key))


def reconstruct_n(self, i0, n):
    """Stored vectors i0 .. i0 + n - 1 as an (n, d) float32 array."""
    return _native(self).reconstruct_n(int(i0), int(n))


def reset(self):
    """Removes all vectors."""
    _native(self).reset()


def __repr__(self):
    return "<faiss_ext.%s d=%d ntotal=%d>" % (type(self).__name__, self.d, self.ntotal)


def __reduce__(self):
    # GPU indexes are serialised as their CPU twin and come back on the same
    # device (with the resources unpickle_index makes); CPU ones as they are
    get_device = getattr(_native(self), "getDevice", None)
    device = get_device() if get_device is not None else None
    return unpickle_index, (bytes(_C._serialize_index(self)), device)


_UNPICKLE_RESOURCES = {}


def unpickle_index(data, device):
    """The index pickled by __reduce__: read by faiss_ext's reader, and moved
    to GPU ``device`` when it was a GPU index (one StandardGpuResources per
    process serves these)."""
    index = wrap(_C._deserialize_index(np.frombuffer(data, dtype=np.uint8), 0))
    if device is None:
        return index
    res = _UNPICKLE_RESOURCES.get("res")
    if res is None:
        res = _UNPICKLE_RESOURCES["res"] = _C.StandardGpuResources()
    return wrap(_C._index_cpu_to_gpu(res, int(device), index, None))


MEMBERS = {
    "search": search,
    "add": add,
    "add_with_ids": add_with_ids,
    "train": train,
    "reconstruct": reconstruct,
    "reconstruct_n": reconstruct_n,
    "reset": reset,
    "__repr__": __repr__,
    "__reduce__": __reduce__,
}

__all__ = ["MEMBERS", "unpickle_index", "unwrap"]
