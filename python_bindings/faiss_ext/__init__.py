"""faiss_ext: GPU k-NN indexes for FAISS, from Python.

faiss_ext uses the FAISS that ``import faiss`` loaded (one FAISS in the
process, docs/one-faiss.md), and its indexes are ``faiss.Index`` objects:
they go into FAISS's wrappers and functions, with FAISS's call shapes::

    import faiss, faiss_ext
    res = faiss_ext.StandardGpuResources()
    index = faiss_ext.GpuIndexQuickSelectFlat(res, d, faiss.METRIC_L2)
    isinstance(index, faiss.Index)     # True
    index.add(xb)                      # numpy, torch or CuPy in
    D, I = index.search(xq, k)         # same kind out: (nq, k) float32, int64
    idmap = faiss.IndexIDMap(index)    # FAISS's wrappers take our indexes
    cpu = faiss_ext.index_gpu_to_cpu(index)   # the faiss.IndexFlat itself
    faiss.write_index(cpu, "flat.index")

k-selection on its own and exact k-NN graphs::

    D, I = faiss_ext.select_k(res, dist, k)              # k smallest per row
    D, I = faiss_ext.select_k(res, sim, k, largest=True,
                              algo=faiss_ext.SelectAlgo.MERGE_QUEUE)
    G_D, G_I = index.knn_graph(k)                       # (ntotal, k), self excluded

Merging the results of index shards (CPU; each row sorted best first)::

    D, I = faiss_ext.merge_knn_results([D0, D1], [I0, I1])   # k best of both
    D, I = faiss_ext.merge_knn_results(Ds, Is, keep_max=True)  # similarities

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
    D, I = index.search(xq, 10, params=faiss_ext.SearchParametersBiLevelLSH(nprobe=8))
    gpu = faiss_ext.index_cpu_to_gpu(res, 0, index)           # GpuIndexBiLevelLSH
    faiss_ext.write_index(index, "lsh.index")                 # not faiss.write_index

``SelectAlgo`` (AUTO, QUICK_MULTI_SELECT, MERGE_QUEUE, TH_HEAP) picks the
selection algorithm: per index (GpuIndexQuickSelectFlatConfig.selectAlgo),
per search (SearchParametersQuickSelectFlat), per select_k / knn_graph call
(``algo=``, a member or its name); choose_select_algo says what AUTO runs.
Vectors past StandardGpuResources.set_device_memory_limit are kept in pinned
host memory and streamed through the GPU (``VectorStorage``; config field
``storage``, index method get_storage).

Saving: ``faiss.write_index`` / ``faiss.read_index`` work on every index
FAISS 1.7.3 knows (the twins IndexFlat, IndexNNDescentFlat, IndexHNSWFlat,
and wrappers of them). FAISS 1.7.3 has no hook for foreign types, so files
holding our types (IndexBiLevelLSH, the Pearson twin's RowCenteringTransform,
GPU indexes, written as their CPU twin) are written and read by
``faiss_ext.write_index`` / ``read_index`` (which read FAISS's files too).
Pickling our indexes goes through faiss_ext's serialiser.
"""

import ctypes
import os
import sys

import faiss


def _make_process_faiss_global():
    """Puts the symbols of the FAISS that ``import faiss`` loaded (its
    _swigfaiss extension, loaded by Python with RTLD_LOCAL) in the global
    symbol scope, so that libfaiss_ext and our extension, which leave every
    faiss:: symbol undefined, bind to that FAISS when they are loaded next:
    one FAISS in the process. RTLD_NOLOAD: only promote the loaded copy."""
    swig_module = sys.modules.get("faiss._swigfaiss") or getattr(faiss, "_swigfaiss", None)
    path = getattr(swig_module, "__file__", None)
    if not path:
        raise ImportError("faiss_ext: cannot find the _swigfaiss module of `import faiss` "
                          "(faiss_ext needs python3-faiss, FAISS 1.7.3's SWIG module)")
    ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL | os.RTLD_NOW)


_make_process_faiss_global()

import numpy as np  # noqa: E402

from . import _faiss_ext as _C  # noqa: E402
from ._faiss_ext import (  # noqa: E402
    BiLevelAutoTuneOptions,
    BiLevelAutoTuneResult,
    BiLevelLSHConfig,
    BiLevelShortList,
    BiLevelWidthRule,
    DistancePrecision,
    FlatMetric,
    GpuClonerOptions,
    GpuIndexBiLevelLSHConfig,
    GpuIndexConfig,
    GpuIndexQuickSelectFlatConfig,
    GpuIndexSearchGraphConfig,
    GpuKnnGraphGNNDConfig,
    GpuMultipleClonerOptions,
    GpuResourcesProvider,
    SelectAlgo,
    StandardGpuResources,
    VectorFileFormat,
    VectorStorage,
    autotune_bilevel_lsh,
    choose_select_algo,
    flat_metric_name,
    from_faiss_metric,
    get_num_gpus,
    merge_knn_results,
    parse_flat_metric,
    select_algo_from_name,
    select_algo_name,
    select_k,
    to_faiss_metric,
    vector_storage_name,
)
from . import _index_proxy  # noqa: E402
from ._guards import guard  # noqa: E402
from ._proxies import proxy_class, wrap  # noqa: E402

__version__ = "0.1.0"

# ---- our classes as faiss.Index / faiss.SearchParameters proxies ----

_IndexBase = proxy_class(_C.NativeIndex, faiss.Index, _index_proxy.MEMBERS)
_SearchParametersBase = proxy_class(_C.NativeSearchParameters, faiss.SearchParameters,
                                    {"__repr__": lambda self: repr(self.__dict__["_native"])})

GpuIndexQuickSelectFlat = proxy_class(_C.GpuIndexQuickSelectFlat, faiss.Index)
GpuKnnGraphGNND = proxy_class(_C.GpuKnnGraphGNND, faiss.Index)
GpuIndexSearchGraph = proxy_class(_C.GpuIndexSearchGraph, faiss.Index)
GpuIndexBiLevelLSH = proxy_class(_C.GpuIndexBiLevelLSH, faiss.Index)
IndexBiLevelLSH = proxy_class(_C.IndexBiLevelLSH, faiss.Index)

SearchParametersQuickSelectFlat = proxy_class(_C.SearchParametersQuickSelectFlat,
                                              faiss.SearchParameters)
SearchParametersGNND = proxy_class(_C.SearchParametersGNND, faiss.SearchParameters)
SearchParametersSearchGraph = proxy_class(_C.SearchParametersSearchGraph, faiss.SearchParameters)
SearchParametersBiLevelLSH = proxy_class(_C.SearchParametersBiLevelLSH, faiss.SearchParameters)

__all__ = [
    "BiLevelAutoTuneOptions",
    "BiLevelAutoTuneResult",
    "BiLevelLSHConfig",
    "BiLevelShortList",
    "BiLevelWidthRule",
    "DistancePrecision",
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
    "IndexBiLevelLSH",
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
    "downcast_index",
    "flat_metric_name",
    "from_faiss_metric",
    "get_num_gpus",
    "gnnd_build_from_file",
    "index_cpu_to_gpu",
    "index_cpu_to_gpu_multiple",
    "index_factory",
    "index_gpu_to_cpu",
    "merge_knn_results",
    "parse_flat_metric",
    "read_graph_ivecs",
    "read_index",
    "select_algo_from_name",
    "select_algo_name",
    "select_k",
    "serialize_index",
    "to_faiss_metric",
    "vector_storage_name",
    "write_index",
]


def _check_index(index, what="index"):
    if not isinstance(index, faiss.Index):
        raise TypeError("%s must be a faiss.Index (FAISS's or faiss_ext's), got %s"
                        % (what, type(index).__name__))
    return index


def downcast_index(index):
    """``index`` as its most derived class, like faiss.downcast_index, which
    knows FAISS's classes only: our indexes come back as our classes (e.g.
    the ``idmap.index`` of a faiss.IndexIDMap around a GpuIndexQuickSelectFlat
    gives the GpuIndexQuickSelectFlat object, the same Python object when it
    was made in Python). Like faiss.downcast_index, the result does not keep
    a wrapper that owns the index alive."""
    _check_index(index)
    return wrap(_C._downcast_index(index))


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
    1-D uint8 numpy array."""
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

    ``index``: any faiss.Index. faiss.IndexFlat (L2 / IP) and the cosine /
    Pearson twins become GpuIndexQuickSelectFlat; faiss.IndexNNDescentFlat
    (the "GNND<k>" twin) becomes GpuKnnGraphGNND (nndescent.S clamped to
    1..32 as samples, iter as max_iterations, random_seed as seed, search_L
    as search_l; a built graph is kept); faiss.IndexHNSWFlat over an
    IndexFlat (the "SGraph<R>" twin) becomes GpuIndexSearchGraph (its level-0
    graph as the search graph); IndexBiLevelLSH becomes GpuIndexBiLevelLSH
    (configuration, model and vectors; default GpuIndexBiLevelLSHConfig on
    ``device``); IndexIDMap and IndexPreTransform are walked. ``options``: a
    GpuClonerOptions or None. Returns the GPU index, or a FAISS wrapper (e.g.
    faiss.IndexIDMap) around one; it keeps ``res`` alive.
    """
    _check_index(index)
    return wrap(_C._index_cpu_to_gpu(res, int(device), index, options))


def index_cpu_to_gpu_multiple(resources, devices, index, options=None, shard=None):
    """Copies a CPU index to several GPUs, like faiss.index_cpu_to_gpu_multiple.

    ``resources``: one StandardGpuResources per entry of ``devices`` (a
    device may be listed twice, each time with its own resources). ``options``:
    a GpuMultipleClonerOptions or None; ``shard`` (when given) overrides
    ``options.shard``. Replicate (the default): a full copy on every device
    under a faiss.IndexReplicas, which splits the queries of a search between
    them. ``shard=True``: the i-th contiguous slice of the vectors on
    ``devices[i]`` under a faiss.IndexShards, which merges the shards'
    results; for flat indexes (and the cosine / Pearson twins, IndexIDMap and
    IndexPreTransform around them) and IndexBiLevelLSH (same model, sliced
    vectors); k-NN graphs (GNND) can only be replicated. With one device this
    is index_cpu_to_gpu. Returns FAISS's IndexShards / IndexReplicas (or our
    GPU index for one device); index_gpu_to_cpu on it returns the CPU index
    again (shards merged, one replica copied). The result keeps the resources
    alive.
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
    _check_index(index)
    return wrap(_C._index_cpu_to_gpu_multiple(resources, devices, index, options))


def index_gpu_to_cpu(index):
    """Copies a GPU index back to the CPU, like faiss.index_gpu_to_cpu.

    For our indexes the CPU twin is returned as the FAISS object itself
    (faiss.IndexFlat for L2 / IP, faiss.IndexPreTransform for cosine and
    Pearson, faiss.IndexNNDescentFlat for GpuKnnGraphGNND,
    faiss.IndexHNSWFlat for GpuIndexSearchGraph); GpuIndexBiLevelLSH's twin
    is IndexBiLevelLSH, our own type. faiss.write_index takes the twins FAISS
    knows; the Pearson twin (its RowCenteringTransform is ours) and
    IndexBiLevelLSH are saved with faiss_ext.write_index. A CPU index comes
    back as a copy.
    """
    _check_index(index)
    return wrap(_C._index_gpu_to_cpu(index))


# ---- the factory ----

def index_factory(d, description, metric=None):
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
    level 0 (M = 32; R even, 4..128): the CPU twin of GpuIndexSearchGraph,
    whose graph_degree it sets when moved to a GPU.

    "BiLSH10x8_t6_w0.75" gives an untrained IndexBiLevelLSH with n_tables
    L = 10 ([1, 64]), n_projections M = 8 ([1, 32]), tree_depth 6 ([0, 14],
    default 4) and bucket_width 0.75 (> 0, default 4: times the distance to the
    k-th neighbour), METRIC_L2 only.

    ``metric``: a FAISS metric int (faiss.METRIC_L2 when left out) or
    FlatMetric.L2 / FlatMetric.InnerProduct. "QSFlatCosine" and
    "QSFlatPearson" name their metric themselves: an explicit METRIC_L2 with
    them contradicts the string and raises ValueError. Returns the FAISS object (e.g. a
    faiss.IndexFlat, a faiss.IndexIDMap) or our class. Move the result to a
    GPU with index_cpu_to_gpu.
    """
    if metric is None:
        metric = faiss.METRIC_L2
    else:
        metric = _faiss_metric(metric)
        named = [c.strip() for c in str(description).split(",")
                 if c.strip() in ("QSFlatCosine", "QSFlatPearson")]
        if named and metric == faiss.METRIC_L2:
            raise ValueError(
                "index_factory: %r names its metric (%s: a similarity, searched as inner "
                "product), but metric=METRIC_L2 was passed; leave metric out or pass "
                "METRIC_INNER_PRODUCT" % (str(description), named[0]))
    return wrap(_C._index_factory(int(d), str(description), _faiss_metric(metric)))


# ---- I/O ----

def write_index(index, fname):
    """Writes any faiss.Index to the file ``fname`` with faiss_ext's writer:
    FAISS's types byte for byte as faiss.write_index writes them, our types
    (IndexBiLevelLSH, fourcc "IxBL"; the Pearson twin's RowCenteringTransform)
    with their own fourcc, GPU indexes as their CPU twin. FAISS 1.7.3 has no
    hook for foreign types, so faiss.write_index refuses ours: use this. A
    failed write raises RuntimeError, a full disk included; the file is then
    incomplete.
    """
    _check_index(index)
    _C._write_index(index, os.fspath(fname))


def read_index(fname, io_flags=0):
    """Reads an index written by faiss_ext.write_index or faiss.write_index
    (a corrupt or truncated file raises RuntimeError, never crashes).
    Returns the FAISS object or our class."""
    return wrap(_C._read_index(os.fspath(fname), int(io_flags)))


def serialize_index(index):
    """Serialises any faiss.Index to a 1-D uint8 numpy array, as
    faiss.serialize_index does (our types too; GPU indexes as their CPU
    twin)."""
    _check_index(index)
    return _C._serialize_index(index)


def deserialize_index(data, io_flags=0):
    """Reads an index from ``data`` (bytes, bytearray or a uint8 numpy array,
    as made by serialize_index or faiss.serialize_index); corrupt data raises
    RuntimeError. Returns the FAISS object or our class."""
    return wrap(_C._deserialize_index(_as_bytes_array(data), int(io_flags)))


# ---- GPU indexes <-> their CPU twins, on the very FAISS objects ----

def _twin_copies(cls, twin_name, extra_doc, same_d_and_metric):
    def copy_from(self, index):
        """Replaces the contents of this GPU index by those of its CPU twin
        ``index`` (a faiss.%s%s), read in place; raises TypeError for other
        index types and RuntimeError for a mismatch, with this index
        unchanged."""
        _check_index(index)
        self._native._copy_from(index)

    def copy_to(self, index=None):
        """Copies this index into its CPU twin: ``index`` (a faiss.%s with
        this index's d and metric, overwritten in place and returned) or a new
        one. For cosine and Pearson these are the prepared (normalised)
        vectors under METRIC_INNER_PRODUCT (use index_gpu_to_cpu for a twin
        that prepares the queries too)."""
        if index is None:
            return wrap(self._native._copy_to(None))
        _check_index(index)
        if same_d_and_metric and (index.d != self.d or index.metric_type != self.metric_type):
            raise ValueError("copy_to: the faiss.%s has d=%d, metric %d; this index has d=%d, "
                             "metric %d" % (twin_name, index.d, index.metric_type, self.d,
                                            self.metric_type))
        self._native._copy_to(index)
        return index

    copy_from.__doc__ = copy_from.__doc__ % (twin_name, extra_doc)
    copy_to.__doc__ = copy_to.__doc__ % twin_name
    cls.copy_from = cls.copyFrom = copy_from
    cls.copy_to = cls.copyTo = copy_to


_twin_copies(GpuIndexQuickSelectFlat, "IndexFlat",
             " (L2 or IP; the metric is taken from it), or the cosine / Pearson twin made "
             "by index_gpu_to_cpu", False)
_twin_copies(GpuKnnGraphGNND, "IndexNNDescentFlat",
             ": its vectors, its K as our degree, and its final_graph when built; else the "
             "graph is built on the GPU", True)
_twin_copies(GpuIndexSearchGraph, "IndexHNSWFlat",
             " over an IndexFlat whose level-0 degree is our graph_degree: its vectors and "
             "its level-0 graph become ours, the k-NN graph is rebuilt on the GPU", True)


def _gnnd_to_index_nsg(self, R=32):
    """A faiss.IndexNSGFlat with R neighbours per node (1..1024) built from
    this index's graph by FAISS's NSG construction (GK = our build degree)."""
    return wrap(self._native._to_index_nsg(int(R)))


GpuKnnGraphGNND.to_index_nsg = _gnnd_to_index_nsg
GpuKnnGraphGNND.toIndexNSG = _gnnd_to_index_nsg


# ---- graphs of vector files (past GPU memory, several GPUs) ----

def gnnd_build_from_file(res, vectors_path, format, d, k, metric, graph_path, config=None,
                         devices=None, shard_size=0, work_dir="", verbose=False,
                         distances_path="", host_memory_bytes=-1, split_one_shard=True,
                         schedule="auto", overlap=3, neighbour_merges=-1,
                         cluster_build="auto", exact_cluster_rows=0):
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
    build_devices (devices that built the one shard together, else 1),
    build_degree (list length while building and merging: by default twice k,
    rounded up to 32), steps (one dict per shard build and merge, in the order
    they ended: kind "shard_build" or "merge", shard_a, shard_b, device,
    seconds, finished_at, seconds_left: the estimate of the time left then).
    ``schedule``: "all-pairs" (the shards above), "partitioned" (k-means
    clusters, each vector in ``overlap`` of them, one GNND build per cluster,
    lists folded per vector: time linear in n; docs/gnnd.md, "Schedules of
    the file build") or "auto" (all-pairs up to 4 shards and 4M vectors,
    partitioned past either); ``overlap`` defaults to 3; the dict then also
    has schedule, clusters, overlap, largest_cluster, partition_seconds, and
    steps of kind "cluster_build". ``neighbour_merges`` (partitioned): after
    the cluster builds, GGM merges of each cluster with the m clusters
    sharing the most members with it (m = neighbour_merges; 0: off; -1, the
    default: 2 past 24 clusters, else off), which find the neighbours that
    lie outside a vector's ``overlap`` clusters; the dict then has
    neighbour_merges (m), merge_pairs, merges and merge_seconds, and steps of
    kind "merge" naming the two clusters. ``cluster_build`` (partitioned):
    "exact" (each cluster's lists by exact search among its vectors; k-means
    clusters of about ``exact_cluster_rows`` vectors, 0: 131072, and each
    vector joins a further cluster only when it is within 1.1 times the
    distance of its nearest centroid), "nn-descent" (one GNND build per
    cluster of up to 3M vectors), or "auto" (exact unless ``shard_size``
    fixes the cluster count; no automatic neighbour merges then); the dict
    says which ran (cluster_build). docs/gnnd.md, "Exact clusters".
    ``verbose`` prints each step with that estimate. The graph is written under
    a temporary name and renamed when complete. The GIL is released meanwhile.
    """
    if not isinstance(metric, FlatMetric):
        metric = int(metric)
    return _C._gnnd_build_from_file(
        res, os.fspath(vectors_path), format, int(d), int(k), metric, os.fspath(graph_path),
        config, [int(x) for x in (devices or [])], int(shard_size), os.fspath(work_dir),
        bool(verbose), os.fspath(distances_path), int(host_memory_bytes), bool(split_one_shard),
        str(schedule), int(overlap), int(neighbour_merges), str(cluster_build),
        int(exact_cluster_rows))


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
    return guard(flat)


IndexBiLevelLSH.to_index_flat = _lsh_to_index_flat
GpuIndexBiLevelLSH.to_index_flat = _lsh_to_index_flat
