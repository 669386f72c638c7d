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

Approximate k-NN graphs on the GPU (GNND, GPU NN-Descent)::

    index = faiss_ext.GpuKnnGraphGNND(res, d, 32)       # graph degree 32
    index.add(xb)                                       # builds the graph
    I = index.get_graph()                               # (ntotal, 32) int64
    cpu = index.copy_to()                               # a faiss.IndexNNDescentFlat
    report = faiss_ext.gnnd_build_from_file(res, "base.fvecs",
                                            faiss_ext.VectorFileFormat.FVECS,
                                            0, 32, faiss.METRIC_L2, "graph.ivecs")

Graph-based approximate k-NN search on the GPU (GNND k-NN graph, CAGRA-style
search graph, beam search)::

    index = faiss_ext.GpuIndexSearchGraph(res, d, faiss.METRIC_L2,
                                          faiss_ext.GpuIndexSearchGraphConfig(graph_degree=32))
    index.add(xb)                                       # builds both graphs
    D, I = index.search(xq, 10, params=faiss_ext.SearchParametersSearchGraph(itopk=128))
    G = index.get_search_graph()                        # (ntotal, 32) int32
    cpu = index.copy_to()                               # a faiss.IndexHNSWFlat

Approximate k-NN by Bi-level LSH (RP-tree groups, then p-stable LSH tables)::

    index = faiss_ext.index_factory(d, "BiLSH10x8_t6_w0.75")  # IndexBiLevelLSH (CPU)
    index.train(xt); index.add(xb)
    D, I = index.search(xq, 10, faiss_ext.SearchParametersBiLevelLSH(nprobe=8))
    gpu = faiss_ext.index_cpu_to_gpu(res, 0, index)           # GpuIndexBiLevelLSH
    faiss_ext.write_index(index, "lsh.index")                 # not faiss.write_index

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
    BiLevelAutoTuneOptions,
    BiLevelAutoTuneResult,
    BiLevelLSHConfig,
    BiLevelShortList,
    BiLevelWidthRule,
    FlatMetric,
    GpuClonerOptions,
    GpuIndexBiLevelLSH,
    GpuIndexBiLevelLSHConfig,
    GpuIndexConfig,
    GpuIndexQuickSelectFlat,
    GpuIndexQuickSelectFlatConfig,
    GpuIndexSearchGraph,
    GpuIndexSearchGraphConfig,
    GpuKnnGraphGNND,
    GpuKnnGraphGNNDConfig,
    GpuMultipleClonerOptions,
    GpuResourcesProvider,
    Index,
    IndexBiLevelLSH,
    SearchParameters,
    SearchParametersBiLevelLSH,
    SearchParametersGNND,
    SearchParametersQuickSelectFlat,
    SearchParametersSearchGraph,
    SelectAlgo,
    StandardGpuResources,
    VectorFileFormat,
    VectorStorage,
    autotune_bilevel_lsh,
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
    "BiLevelAutoTuneOptions",
    "BiLevelAutoTuneResult",
    "BiLevelLSHConfig",
    "BiLevelShortList",
    "BiLevelWidthRule",
    "FlatMetric",
    "GpuClonerOptions",
    "GpuIndexBiLevelLSH",
    "GpuIndexBiLevelLSHConfig",
    "GpuIndexConfig",
    "GpuIndexQuickSelectFlat",
    "GpuIndexQuickSelectFlatConfig",
    "GpuIndexSearchGraph",
    "GpuIndexSearchGraphConfig",
    "GpuKnnGraphGNND",
    "GpuKnnGraphGNNDConfig",
    "GpuMultipleClonerOptions",
    "GpuResourcesProvider",
    "Index",
    "IndexBiLevelLSH",
    "SearchParameters",
    "SearchParametersBiLevelLSH",
    "SearchParametersGNND",
    "SearchParametersQuickSelectFlat",
    "SearchParametersSearchGraph",
    "SelectAlgo",
    "StandardGpuResources",
    "VectorFileFormat",
    "VectorStorage",
    "autotune_bilevel_lsh",
    "choose_select_algo",
    "deserialize_index",
    "flat_metric_name",
    "from_faiss",
    "from_faiss_metric",
    "get_num_gpus",
    "gnnd_build_from_file",
    "index_cpu_to_gpu",
    "index_cpu_to_gpu_multiple",
    "index_factory",
    "index_gpu_to_cpu",
    "parse_flat_metric",
    "read_graph_ivecs",
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
    return _guard(faiss.deserialize_index(_C._serialize_index(from_faiss(index))))


def _faiss_or_native(native, data=None):
    """``native`` as a faiss Python object when python3-faiss can read it
    (``data``: its serialised form, if already at hand), else ``native``.
    The faiss object is guarded (_guard)."""
    if data is None:
        data = _C._serialize_index(native)
    try:
        return _guard(faiss.deserialize_index(data))
    except RuntimeError:
        # A faiss_ext type python3-faiss does not know: keep our wrapper.
        return native


# ---- guards for FAISS 1.7.3's unchecked calls on the objects we return ----
#
# The faiss Python objects our functions return are python3-faiss's own
# classes, so their calls run FAISS 1.7.3's code, which crashes the process
# on some arguments: IndexFlat (and the other flat-code indexes) reconstruct
# any key, in range or not (SIGSEGV for 10**6, garbage for -1); the
# NN-Descent search of the "GNND<k>" twin divides by zero when
# max(search_L, k) == ntotal, reads out of range when it is larger or the
# graph holds -1 entries, and aborts (an exception inside OpenMP) when the
# graph is not built. _guard gives each returned object a subclass of its own
# class (same object, same FAISS methods, isinstance unchanged) whose search,
# reconstruct and reconstruct_n check first and raise instead. The C++ side
# guards the same calls in faiss_ext::IndexNNDescentFlatChecked.

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
    if _positional_keys(self) and (n0 < 0 or ni < 0 or n0 + ni > self.ntotal):
        raise IndexError("range [%d, %d) out of range (ntotal %d)" % (n0, n0 + ni, self.ntotal))
    return type(self)._faiss_ext_base.reconstruct_n(self, n0, ni, *args, **kwargs)


_GUARDED_CLASSES = {}


def _guard(index):
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
        })
        _GUARDED_CLASSES[cls] = guarded
    index.__class__ = guarded
    return index


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
    faiss.IndexNNDescentFlat (the "GNND<k>" twin) becomes GpuKnnGraphGNND
    (nndescent.S clamped to 1..32 as samples, iter as max_iterations,
    random_seed as seed, search_L as search_l; a built graph is kept);
    faiss.IndexHNSWFlat over an IndexFlat (the "SGraph<R>" twin) becomes
    GpuIndexSearchGraph (its level-0 graph as the search graph);
    faiss_ext.IndexBiLevelLSH becomes GpuIndexBiLevelLSH (configuration,
    model and vectors; default GpuIndexBiLevelLSHConfig on ``device``);
    IndexIDMap and IndexPreTransform are walked. ``options``: a
    GpuClonerOptions or None. Returns the GPU index, or a ``faiss_ext.Index``
    for a wrapper around one.
    """
    native = from_faiss(index)
    return _C._index_cpu_to_gpu(res, int(device), native, options)


def index_cpu_to_gpu_multiple(resources, devices, index, options=None, shard=None):
    """Copies a CPU index to several GPUs, like faiss.index_cpu_to_gpu_multiple.

    ``resources``: one StandardGpuResources per entry of ``devices`` (a
    device may be listed twice, each time with its own resources). ``options``:
    a GpuMultipleClonerOptions or None; ``shard`` (when given) overrides
    ``options.shard``. Replicate (the default): a full copy on every device
    under a C++ faiss::IndexReplicas, which splits the queries of a search
    between them. ``shard=True``: the i-th contiguous slice of the vectors on
    ``devices[i]`` under a faiss::IndexShards, which merges the shards'
    results; for flat indexes (and the cosine / Pearson twins, IndexIDMap and
    IndexPreTransform around them) and IndexBiLevelLSH (same model, sliced
    vectors); k-NN graphs (GNND) can only be replicated. With one device this
    is index_cpu_to_gpu.

    Returns a ``faiss_ext.Index`` (add, add_with_ids, search, ntotal,
    type_name "faiss::IndexShardsTemplate<faiss::Index>" or
    "...IndexReplicasTemplate..."), not a faiss.IndexShards: python3-faiss has
    its own copy of FAISS and cannot hold our GPU indexes. index_gpu_to_cpu on
    it returns the input as a faiss Python object again (shards merged, one
    replica copied). The result keeps the resources alive.
    """
    resources = list(resources)
    for r in resources:
        if not isinstance(r, GpuResourcesProvider):
            raise TypeError("resources: expected StandardGpuResources objects, got %s"
                            % type(r).__name__)
    devices = [int(dev) for dev in devices]
    if shard is not None:
        base = options if options is not None else GpuMultipleClonerOptions()
        options = GpuMultipleClonerOptions(shard=bool(shard), requireGpu=base.requireGpu)
    native = from_faiss(index)
    return _C._index_cpu_to_gpu_multiple(resources, devices, native, options)


def index_gpu_to_cpu(index, native=False):
    """Copies a GPU index back to the CPU, like faiss.index_gpu_to_cpu.

    For our indexes the CPU twin is returned as a faiss Python object
    (faiss.IndexFlat for L2 / IP, faiss.IndexPreTransform for cosine,
    faiss.IndexNNDescentFlat for GpuKnnGraphGNND, faiss.IndexHNSWFlat for
    GpuIndexSearchGraph) that faiss.write_index
    accepts. GpuIndexBiLevelLSH's twin is faiss_ext.IndexBiLevelLSH, our
    own type (save it with faiss_ext.write_index). The Pearson twin contains faiss_ext's
    RowCenteringTransform, which plain FAISS cannot read: for it (and anything
    else python3-faiss cannot represent) a ``faiss_ext.Index`` is returned,
    which faiss_ext.write_index / serialize_index accept. ``native=True``
    always returns the ``faiss_ext.Index``. A faiss Python index is already on
    the CPU: a clone of it is returned.
    """
    if isinstance(index, faiss.Index):
        return _guard(faiss.clone_index(index))
    cpu = _C._index_gpu_to_cpu(from_faiss(index))
    return cpu if native else _faiss_or_native(cpu)


# ---- the factory ----

def index_factory(d, description, metric=faiss.METRIC_L2, native=False):
    """Builds a CPU index from a description, like faiss.index_factory, with
    faiss_ext's strings added ("QSFlat", "QSFlatCosine", "QSFlatPearson",
    "GNND<k>[_p<samples>][_it<iterations>]", "SGraph<R>",
    "BiLSH<L>x<M>[_t<treeDepth>][_w<bucketWidth>]", composed with FAISS
    prefixes such as "IDMap,QSFlat", "PCA64,QSFlat", "L2norm,GNND64" or
    "IDMap,BiLSH10x8").

    "GNND64_p24_it10" gives a faiss.IndexNNDescentFlat with K = 64,
    nndescent.S = 24 (samples, 1..32, default 32) and nndescent.iter = 10
    (default 20): the CPU twin of GpuKnnGraphGNND. Bad strings ("GNND0",
    "GNND64_p33", "GNND64_x") raise RuntimeError naming the problem.

    "SGraph64" gives a faiss.IndexHNSWFlat with 64 neighbours per node on
    level 0 (M = 32; R even, 2..128): the CPU twin of GpuIndexSearchGraph,
    whose graph_degree it sets when moved to a GPU.

    "BiLSH10x8_t6_w0.75" gives an untrained faiss_ext.IndexBiLevelLSH with
    n_tables L = 10 ([1, 64]), n_projections M = 8 ([1, 32]), tree_depth 6
    ([0, 14], default 4) and bucket_width 0.75 (> 0, default 0.5), METRIC_L2
    only; python3-faiss cannot hold it, so it (and a wrapper around it, as a
    faiss_ext.Index) is returned as our object whatever ``native`` says.

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

    A faiss Python index is serialised by faiss.serialize_index (byte for
    byte what faiss_ext's writer produces for FAISS types) and written with
    Python's file I/O; a ``faiss_ext.Index`` by faiss_ext's writer (GPU
    indexes are written as their CPU twin). This is the way to save a
    faiss_ext.IndexBiLevelLSH (fourcc "IxBL"), which faiss.write_index cannot
    take. A failed write raises, a full disk included (OSError for a faiss
    object, RuntimeError for ours; faiss.write_index itself only prints a
    failed close to stderr); the file is then incomplete.
    """
    fname = os.fspath(fname)
    if isinstance(index, faiss.Index):
        data = faiss.serialize_index(index)
        with open(fname, "wb") as f:
            f.write(memoryview(data))
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
        return _guard(flat)
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


# ---- GpuKnnGraphGNND <-> faiss.IndexNNDescentFlat ----

def _downcast(index, cls):
    """``index`` as a ``cls`` (a faiss class; SWIG downcast), or TypeError."""
    if isinstance(index, faiss.Index) and not isinstance(index, cls):
        down = faiss.downcast_index(index)
        # a downcast proxy does not own the object: keep its owner alive
        down.referenced_objects = [index]
        index = down
    if not isinstance(index, cls):
        raise TypeError("expected a faiss.%s, got %s" % (cls.__name__, type(index).__name__))
    return index


def _nndescent(index):
    """``index`` as a faiss.IndexNNDescentFlat (SWIG downcast), or TypeError."""
    return _downcast(index, faiss.IndexNNDescentFlat)


def _graph_twin_copy_to(self, index, cls, graph_field):
    """copy_to of a graph index whose CPU twin is a faiss ``cls`` with an
    IndexFlat storage and its graph in the field ``graph_field``: the twin
    made by self._copy_to_bytes() (guarded), or, into ``index`` (a ``cls``
    of this index's d and metric), its vectors and a copy of its graph."""
    twin = _downcast(faiss.deserialize_index(self._copy_to_bytes()), cls)
    if index is None:
        return _guard(twin)
    index = _downcast(index, cls)
    if index.d != twin.d or index.metric_type != twin.metric_type:
        raise ValueError(
            "copy_to: the faiss.%s has d=%d, metric %d; this index has d=%d, metric %d"
            % (cls.__name__, index.d, index.metric_type, twin.d, twin.metric_type))
    index.reset()
    if twin.ntotal > 0:
        index.storage.add(twin.storage.reconstruct_n(0, twin.ntotal))
    index.ntotal = twin.ntotal
    setattr(index, graph_field, getattr(twin, graph_field))  # SWIG copies the struct
    index.is_trained = True
    return index


def _gnnd_copy_from(self, index):
    """Replaces the contents of this index by those of a CPU NN-Descent index.

    ``index``: a faiss.IndexNNDescentFlat (its vectors, its K as our degree,
    and its final_graph when built; else the graph is built on the GPU) with
    this index's d and metric, or a ``faiss_ext.Index`` holding one. Raises
    TypeError for other index types and RuntimeError for a mismatch, with this
    index unchanged.
    """
    if isinstance(index, faiss.Index):
        index = _nndescent(index)
    self._copy_from_native(from_faiss(index))


def _gnnd_copy_to(self, index=None):
    """Copies the vectors and the graph into a faiss.IndexNNDescentFlat and
    returns it (K = our degree, has_built set, S / iter / search_L /
    random_seed from our configuration), so faiss's search and
    faiss.write_index work on it.

    ``index``: a faiss.IndexNNDescentFlat with this index's d and metric to
    overwrite, or None for a new one. For cosine and Pearson the vectors are
    the prepared (normalised) ones under METRIC_INNER_PRODUCT (use
    index_gpu_to_cpu for a twin that prepares the queries too).
    """
    # nndescent is copied: K, parameters and final_graph
    return _graph_twin_copy_to(self, index, faiss.IndexNNDescentFlat, "nndescent")


def _gnnd_to_index_nsg(self, R=32):
    """A faiss.IndexNSGFlat with R neighbours per node (1..1024) built from
    this index's graph by FAISS's NSG construction (GK = our build degree)."""
    # faiss.deserialize_index returns the derived class already (and owns it)
    return faiss.deserialize_index(self._to_index_nsg_bytes(int(R)))


GpuKnnGraphGNND.copy_from = _gnnd_copy_from
GpuKnnGraphGNND.copyFrom = _gnnd_copy_from
GpuKnnGraphGNND.copy_to = _gnnd_copy_to
GpuKnnGraphGNND.copyTo = _gnnd_copy_to
GpuKnnGraphGNND.to_index_nsg = _gnnd_to_index_nsg
GpuKnnGraphGNND.toIndexNSG = _gnnd_to_index_nsg


# ---- GpuIndexSearchGraph <-> faiss.IndexHNSWFlat ----

def _sgraph_copy_from(self, index):
    """Replaces the contents of this index by those of a CPU HNSW index.

    ``index``: a faiss.IndexHNSWFlat (the "SGraph<R>" twin, ours from copy_to
    or one FAISS built) over an IndexFlat with this index's d and metric, whose
    level-0 degree is our graph_degree, or a ``faiss_ext.Index`` holding one:
    its vectors and its level-0 graph become ours, the k-NN graph is rebuilt
    on the GPU. Raises TypeError for other index types and RuntimeError for a
    mismatch, with this index unchanged.
    """
    if isinstance(index, faiss.Index):
        index = _downcast(index, faiss.IndexHNSWFlat)
    self._copy_from_native(from_faiss(index))


def _sgraph_copy_to(self, index=None):
    """Copies the vectors and the search graph into a faiss.IndexHNSWFlat and
    returns it (level 0: the search graph; level 1: a complete graph over
    1,024 sampled nodes; efSearch = our itopk), so FAISS's CPU search and
    faiss.write_index work on it.

    ``index``: a faiss.IndexHNSWFlat over an IndexFlat with this index's d and
    metric to overwrite (its graph and contents are replaced), or None for a
    new one. For cosine and Pearson the vectors are the prepared (normalised)
    ones under METRIC_INNER_PRODUCT (use index_gpu_to_cpu for a twin that
    prepares the queries too).
    """
    # hnsw is copied: levels, neighbours, entry point, efSearch
    return _graph_twin_copy_to(self, index, faiss.IndexHNSWFlat, "hnsw")


GpuIndexSearchGraph.copy_from = _sgraph_copy_from
GpuIndexSearchGraph.copyFrom = _sgraph_copy_from
GpuIndexSearchGraph.copy_to = _sgraph_copy_to
GpuIndexSearchGraph.copyTo = _sgraph_copy_to


# ---- graphs of vector files (past GPU memory, several GPUs) ----

def gnnd_build_from_file(res, vectors_path, format, d, k, metric, graph_path, config=None,
                         devices=None, shard_size=0, work_dir="", verbose=False,
                         distances_path="", host_memory_bytes=-1, split_one_shard=True):
    """Builds the k-NN graph (degree ``k``) of the vectors in a file and
    writes it to ``graph_path`` as ivecs (per vector: int32 k, then the k
    neighbour ids, closest first); read it with read_graph_ivecs.

    The file is cut into shards that fit a device; GNND builds each shard's
    graph and GGM merges every pair of shards, with only the pair being merged
    on a device. Between merges the shards stay in host memory when they fit
    ``host_memory_bytes`` (-1: half of the available memory; 0: never), else
    in shard files, so the file may be larger than GPU and host memory. With
    several ``devices`` the shard builds and each round's merges run on all
    of them; a file that is one shard has its build split over the distinct
    devices (``split_one_shard``, the default; False: built on the first).

    ``res``: a StandardGpuResources, or a list with one per entry of
    ``devices`` (a single one serves every device). ``format``: a
    VectorFileFormat (FVECS reads d from the file: pass d=0 or the same d;
    RAW_FLOAT32 needs d). ``metric``: a FlatMetric or a FAISS metric int.
    ``config``: a GpuKnnGraphGNNDConfig (samples, max_iterations, seed, ...;
    its device is ignored: see ``devices``, default [0]). ``shard_size``:
    vectors per shard (0: the largest that fits). ``work_dir``: where shard
    graphs go (default: next to graph_path). ``distances_path``: also write
    the distances as fvecs. Returns a dict: n, d, shard_size, shards, merges,
    build_seconds, merge_seconds, total_seconds, in_host_memory,
    build_devices (devices that built the one shard together, else 1). The GIL is
    released meanwhile.
    """
    if not isinstance(metric, FlatMetric):
        metric = int(metric)
    return _C._gnnd_build_from_file(
        res, os.fspath(vectors_path), format, int(d), int(k), metric, os.fspath(graph_path),
        config, [int(x) for x in (devices or [])], int(shard_size), os.fspath(work_dir),
        bool(verbose), os.fspath(distances_path), int(host_memory_bytes), bool(split_one_shard))


def read_graph_ivecs(path):
    """Reads an ivecs graph file written by gnnd_build_from_file: an (n, k)
    int32 array, row i holding the neighbours of vector i, closest first."""
    return _C._read_graph_ivecs(os.fspath(path))


# ---- IndexBiLevelLSH -> faiss.IndexFlatL2 ----

def _lsh_to_index_flat(self):
    """The stored vectors as a faiss.IndexFlatL2 (same ids, in insertion
    order): exact search over the same data, e.g. for ground truth or
    re-ranking. The LSH structure itself has no FAISS counterpart: save the
    index with faiss_ext.write_index."""
    flat = faiss.IndexFlatL2(self.d)
    vectors = self.get_vectors()  # one consistent copy, also while other threads add
    if len(vectors) > 0:
        flat.add(vectors)
    return _guard(flat)


IndexBiLevelLSH.to_index_flat = _lsh_to_index_flat
GpuIndexBiLevelLSH.to_index_flat = _lsh_to_index_flat
