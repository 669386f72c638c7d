"""faiss_ext: GPU k-NN indexes for FAISS, from Python.

Use it next to Debian's python3-faiss, with FAISS's call shapes::

    import faiss, faiss_ext
    res = faiss_ext.StandardGpuResources()
    index = faiss_ext.GpuIndexQuickSelectFlat(res, d, faiss.METRIC_L2)
    index.add(xb)                      # numpy in (converted to float32)
    D, I = index.search(xq, k)         # numpy out: (nq, k) float32, int64
    cpu = faiss_ext.index_gpu_to_cpu(index)   # a real faiss.IndexFlat
    faiss.write_index(cpu, "flat.index")

k-selection on its own and exact k-NN graphs::

    D, I = faiss_ext.select_k(res, dist, k)              # k smallest per row
    D, I = faiss_ext.select_k(res, sim, k, largest=True,
                              algo=faiss_ext.SelectAlgo.MERGE_QUEUE)
    G_D, G_I = index.knn_graph(k)                       # (ntotal, k), self excluded

``SelectAlgo`` (AUTO, QUICK_MULTI_SELECT, MERGE_QUEUE, TH_HEAP) picks the
selection algorithm: per index (GpuIndexQuickSelectFlatConfig.selectAlgo),
per search (SearchParametersQuickSelectFlat), per select_k / knn_graph call
(``algo=``, a member or its name); choose_select_algo says what AUTO runs.
Vectors past StandardGpuResources.set_device_memory_limit are kept in pinned
host memory and streamed through the GPU (``VectorStorage``; config field
``storage``, index method get_storage).

python3-faiss has its own copy of FAISS, so no C++ object is shared between
the two libraries: conversions go through FAISS's serialised form (bytes).
Functions that return CPU indexes (index_factory, read_index,
deserialize_index, index_gpu_to_cpu) return a faiss Python object when
python3-faiss can read the index, and otherwise a ``faiss_ext.Index``, our
own wrapper (e.g. for the Pearson twin, whose RowCenteringTransform plain
FAISS does not know). Functions that take indexes accept both.
"""

import os

import faiss
import numpy as np

from . import _faiss_ext as _C
from ._faiss_ext import (
    FlatMetric,
    GpuClonerOptions,
    GpuIndexConfig,
    GpuIndexQuickSelectFlat,
    GpuIndexQuickSelectFlatConfig,
    GpuResourcesProvider,
    Index,
    SearchParameters,
    SearchParametersQuickSelectFlat,
    SelectAlgo,
    StandardGpuResources,
    VectorStorage,
    choose_select_algo,
    flat_metric_name,
    from_faiss_metric,
    get_num_gpus,
    parse_flat_metric,
    select_algo_from_name,
    select_algo_name,
    select_k,
    to_faiss_metric,
    vector_storage_name,
)

__version__ = "0.1.0"

__all__ = [
    "FlatMetric",
    "GpuClonerOptions",
    "GpuIndexConfig",
    "GpuIndexQuickSelectFlat",
    "GpuIndexQuickSelectFlatConfig",
    "GpuResourcesProvider",
    "Index",
    "SearchParameters",
    "SearchParametersQuickSelectFlat",
    "SelectAlgo",
    "StandardGpuResources",
    "VectorStorage",
    "choose_select_algo",
    "deserialize_index",
    "flat_metric_name",
    "from_faiss",
    "from_faiss_metric",
    "get_num_gpus",
    "index_cpu_to_gpu",
    "index_factory",
    "index_gpu_to_cpu",
    "parse_flat_metric",
    "read_index",
    "select_algo_from_name",
    "select_algo_name",
    "select_k",
    "serialize_index",
    "to_faiss",
    "to_faiss_metric",
    "vector_storage_name",
    "write_index",
]


# ---- conversions between faiss Python objects and our C++ objects ----

def from_faiss(index):
    """Returns a ``faiss_ext.Index`` for ``index``.

    A ``faiss_ext.Index`` (or a GPU index of ours) is returned as is; a faiss
    Python index is copied through bytes (faiss.serialize_index, then
    faiss_ext's reader), so the result shares nothing with the argument.
    Raises TypeError for anything else.
    """
    if isinstance(index, Index):
        return index
    if isinstance(index, faiss.Index):
        return _C._deserialize_index(faiss.serialize_index(index))
    raise TypeError(
        "expected a faiss_ext.Index or a faiss.Index, got %s" % type(index).__name__)


def to_faiss(index):
    """Returns a faiss Python object equivalent to ``index``, through bytes.

    ``index`` is a ``faiss_ext.Index`` (GPU indexes are written as their CPU
    twin) or a faiss Python index (returned as is). Raises RuntimeError with
    python3-faiss's message when plain FAISS cannot read the index (it holds a
    faiss_ext type, e.g. the Pearson twin's RowCenteringTransform).
    """
    if isinstance(index, faiss.Index):
        return index
    return faiss.deserialize_index(_C._serialize_index(from_faiss(index)))


def _faiss_or_native(native, data=None):
    """``native`` as a faiss Python object when python3-faiss can read it
    (``data``: its serialised form, if already at hand), else ``native``."""
    if data is None:
        data = _C._serialize_index(native)
    try:
        return faiss.deserialize_index(data)
    except RuntimeError:
        # A faiss_ext type python3-faiss does not know: keep our wrapper.
        return native


def _faiss_metric(metric):
    """A FAISS metric int from a FAISS metric int or an L2 / IP FlatMetric."""
    if isinstance(metric, FlatMetric):
        if metric in (FlatMetric.Cosine, FlatMetric.Pearson):
            raise ValueError(
                "%s is not a FAISS metric: use the 'QSFlatCosine' / 'QSFlatPearson' "
                "factory strings" % flat_metric_name(metric))
        return to_faiss_metric(metric)
    return int(metric)


def _as_bytes_array(data):
    """bytes, bytearray, memoryview or a 1-D uint8 array as a contiguous
    1-D uint8 numpy array (what faiss.deserialize_index takes)."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise TypeError("expected a uint8 array, got dtype %s" % data.dtype)
        if data.ndim != 1:
            raise ValueError("expected a 1-D uint8 array, got shape %s" % (data.shape,))
        return np.ascontiguousarray(data)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, dtype=np.uint8)
    raise TypeError(
        "expected bytes, bytearray or a uint8 numpy array, got %s" % type(data).__name__)


# ---- the cloner ----

def index_cpu_to_gpu(res, device, index, options=None):
    """Copies a CPU index to GPU ``device``, like faiss.index_cpu_to_gpu.

    ``index`` is a faiss Python index (e.g. faiss.IndexFlatL2, or the cosine
    twin from index_factory) or a ``faiss_ext.Index``. faiss.IndexFlat (L2 /
    IP) and the cosine / Pearson twins become GpuIndexQuickSelectFlat;
    IndexIDMap and IndexPreTransform are walked. ``options``: a
    GpuClonerOptions or None. Returns a GpuIndexQuickSelectFlat, or a
    ``faiss_ext.Index`` for a wrapper around one.
    """
    native = from_faiss(index)
    return _C._index_cpu_to_gpu(res, int(device), native, options)


def index_gpu_to_cpu(index, native=False):
    """Copies a GPU index back to the CPU, like faiss.index_gpu_to_cpu.

    For our indexes the CPU twin is returned as a faiss Python object
    (faiss.IndexFlat for L2 / IP, faiss.IndexPreTransform for cosine) that
    faiss.write_index accepts. The Pearson twin contains faiss_ext's
    RowCenteringTransform, which plain FAISS cannot read: for it (and anything
    else python3-faiss cannot represent) a ``faiss_ext.Index`` is returned,
    which faiss_ext.write_index / serialize_index accept. ``native=True``
    always returns the ``faiss_ext.Index``. A faiss Python index is already on
    the CPU: a clone of it is returned.
    """
    if isinstance(index, faiss.Index):
        return faiss.clone_index(index)
    cpu = _C._index_gpu_to_cpu(from_faiss(index))
    return cpu if native else _faiss_or_native(cpu)


# ---- the factory ----

def index_factory(d, description, metric=faiss.METRIC_L2, native=False):
    """Builds a CPU index from a description, like faiss.index_factory, with
    faiss_ext's strings added ("QSFlat", "QSFlatCosine", "QSFlatPearson",
    composed with FAISS prefixes such as "IDMap,QSFlat" or "PCA64,QSFlat").

    ``metric``: a FAISS metric int (faiss.METRIC_L2 by default) or
    FlatMetric.L2 / FlatMetric.InnerProduct. Returns a faiss Python object
    when python3-faiss can read the index back, else a ``faiss_ext.Index``
    (e.g. for "QSFlatPearson"); ``native=True`` always returns the latter.
    Move the result to a GPU with index_cpu_to_gpu.
    """
    idx = _C._index_factory(int(d), str(description), _faiss_metric(metric))
    return idx if native else _faiss_or_native(idx)


# ---- I/O ----

def write_index(index, fname):
    """Writes ``index`` to the file ``fname``.

    A faiss Python index is written by faiss.write_index (byte for byte what
    faiss_ext's writer produces for FAISS types); a ``faiss_ext.Index`` by
    faiss_ext's writer (GPU indexes are written as their CPU twin).
    """
    fname = os.fspath(fname)
    if isinstance(index, faiss.Index):
        faiss.write_index(index, fname)
    else:
        _C._write_index(from_faiss(index), fname)


def read_index(fname, io_flags=0, native=False):
    """Reads an index written by faiss_ext.write_index or faiss.write_index.

    The file is parsed by faiss_ext's reader (a corrupt or truncated file
    raises RuntimeError, never crashes). Returns a faiss Python object when
    python3-faiss can represent the index, else a ``faiss_ext.Index``;
    ``native=True`` always returns the latter.
    """
    idx = _C._read_index(os.fspath(fname), int(io_flags))
    return idx if native else _faiss_or_native(idx)


def serialize_index(index):
    """Serialises ``index`` (faiss Python or faiss_ext) to a 1-D uint8 numpy
    array, as faiss.serialize_index does; GPU indexes as their CPU twin."""
    if isinstance(index, faiss.Index):
        return faiss.serialize_index(index)
    return _C._serialize_index(from_faiss(index))


def deserialize_index(data, io_flags=0, native=False):
    """Reads an index from ``data`` (bytes, bytearray or a uint8 numpy array,
    as made by serialize_index or faiss.serialize_index).

    Parsed by faiss_ext's reader first (corrupt data raises RuntimeError).
    Returns a faiss Python object when python3-faiss can represent the index,
    else a ``faiss_ext.Index``; ``native=True`` always returns the latter.
    """
    arr = _as_bytes_array(data)
    idx = _C._deserialize_index(arr, int(io_flags))
    return idx if native else _faiss_or_native(idx, arr)


# ---- GpuIndexQuickSelectFlat <-> faiss.IndexFlat ----

def _copy_from(self, index):
    """Replaces the contents of this GPU index by those of a CPU index.

    ``index``: a faiss.IndexFlat (L2 or IP; the metric is taken from it), the
    cosine / Pearson twin made by index_gpu_to_cpu, or a ``faiss_ext.Index``
    holding one of those. Raises RuntimeError on anything else, with this
    index unchanged.
    """
    native = from_faiss(index)
    self._copy_from_native(native)


def _copy_to(self, index=None):
    """Copies the stored vectors into a faiss.IndexFlat and returns it.

    ``index``: a faiss.IndexFlat to overwrite (its d, metric and contents are
    replaced, as FAISS GPU's copyTo does), or None for a new one. For cosine
    and Pearson these are the prepared (normalised) vectors under
    METRIC_INNER_PRODUCT: queries must be prepared the same way (use
    index_gpu_to_cpu for a twin that prepares them).
    """
    flat = faiss.deserialize_index(self._copy_to_bytes())
    if index is None:
        return flat
    if not isinstance(index, faiss.IndexFlat):
        raise TypeError("copy_to needs a faiss.IndexFlat, got %s" % type(index).__name__)
    index.reset()
    index.d = flat.d
    index.code_size = flat.code_size
    index.metric_type = flat.metric_type
    index.metric_arg = flat.metric_arg
    # Through the public API (codes is a std::vector in FAISS 1.7, a
    # MaybeOwnedVector in newer versions): add() stores vectors as given.
    if flat.ntotal > 0:
        index.add(flat.reconstruct_n(0, flat.ntotal))
    index.is_trained = True
    return index


GpuIndexQuickSelectFlat.copy_from = _copy_from
GpuIndexQuickSelectFlat.copyFrom = _copy_from
GpuIndexQuickSelectFlat.copy_to = _copy_to
GpuIndexQuickSelectFlat.copyTo = _copy_to
