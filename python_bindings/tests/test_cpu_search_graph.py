"""CPU tests of the search-graph parts of faiss_ext: the "SGraph<R>" factory
strings (the CPU twin faiss.IndexHNSWFlat, level 0 of degree R), saving and
loading the twin after FAISS built its graph on the CPU, and the option
objects of GpuIndexSearchGraph (GpuIndexSearchGraphConfig,
SearchParametersSearchGraph)."""

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import random_data


def _hnsw(index):
    """The faiss.IndexHNSWFlat at the bottom of IDMap / PreTransform wrappers."""
    while isinstance(index, (faiss.IndexIDMap, faiss.IndexPreTransform)):
        inner = faiss.downcast_index(index.index)
        inner.referenced_objects = [index]
        index = inner
    assert isinstance(index, faiss.IndexHNSWFlat), type(index)
    return index


def level_zero_graph(index):
    """Level 0 of an HNSW twin as an (ntotal, R) int array (-1: empty slot)."""
    h = _hnsw(index).hnsw
    R = h.nb_neighbors(0)
    offsets = faiss.vector_to_array(h.offsets).astype(np.int64)
    neighbors = faiss.vector_to_array(h.neighbors)
    return neighbors[offsets[:-1, None] + np.arange(R)[None, :]]


# ---- factory ----

@pytest.mark.parametrize("R", [4, 32, 64, 128])
@pytest.mark.parametrize("metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_factory_sgraph_twin_has_the_level_zero_degree(R, metric):
    index = faiss_ext.index_factory(24, "SGraph%d" % R, metric)
    assert isinstance(index, faiss.IndexHNSWFlat)
    assert index.d == 24 and index.ntotal == 0 and index.metric_type == metric
    assert index.hnsw.nb_neighbors(0) == R          # the search-graph degree
    assert index.hnsw.nb_neighbors(1) == R // 2     # M = R / 2
    storage = faiss.downcast_index(index.storage)
    assert isinstance(storage, faiss.IndexFlat) and storage.metric_type == metric


def test_factory_sgraph64():
    """The brief's case: "SGraph64" is an IndexHNSWFlat(d, 32) whose level 0
    holds 64 neighbours per node."""
    index = faiss_ext.index_factory(32, "SGraph64")
    assert isinstance(index, faiss.IndexHNSWFlat)
    assert index.hnsw.nb_neighbors(0) == 64


def test_factory_sgraph_prefixes(rng):
    idmap = faiss_ext.index_factory(16, "IDMap,SGraph16")
    assert isinstance(idmap, faiss.IndexIDMap)
    assert _hnsw(idmap).hnsw.nb_neighbors(0) == 16
    xb = random_data(rng, 500, 16)
    ids = np.arange(5000, 5500, dtype=np.int64)
    idmap.add_with_ids(xb, ids)
    _, I = idmap.search(xb[:5], 3)
    np.testing.assert_array_equal(I[:, 0], ids[:5])

    cosine = faiss_ext.index_factory(16, "L2norm,SGraph32", faiss.METRIC_INNER_PRODUCT)
    assert isinstance(cosine, faiss.IndexPreTransform)
    assert isinstance(faiss.downcast_VectorTransform(cosine.chain.at(0)),
                      faiss.NormalizationTransform)
    assert _hnsw(cosine).metric_type == faiss.METRIC_INNER_PRODUCT


@pytest.mark.parametrize("description", [
    "SGraph0", "SGraph2", "SGraph63", "SGraph130", "SGraph", "SGraph-4", "IDMap,SGraph7",
])
def test_factory_sgraph_bad_strings(description):
    with pytest.raises(RuntimeError) as e:
        faiss_ext.index_factory(8, description)
    assert description.split(",")[-1] in str(e.value)


# ---- saving and loading the twin ----

def test_twin_built_by_faiss_round_trips(rng, tmp_path):
    twin = faiss_ext.index_factory(8, "SGraph16")
    xb = random_data(rng, 2000, 8)
    twin.add(xb)  # FAISS's HNSW construction on the CPU
    graph = level_zero_graph(twin)
    assert graph.shape == (2000, 16)
    xq = random_data(rng, 20, 8)
    D, I = twin.search(xq, 10)

    path = tmp_path / "sgraph.index"
    faiss.write_index(twin, str(path))
    for back in (faiss_ext.read_index(path), faiss.read_index(str(path))):
        assert isinstance(back, faiss.IndexHNSWFlat)
        np.testing.assert_array_equal(level_zero_graph(back), graph)
        D2, I2 = back.search(xq, 10)
        np.testing.assert_array_equal(I2, I)
        np.testing.assert_allclose(D2, D)


# ---- option objects (no GPU needed) ----

def test_exported():
    for name in ("GpuIndexSearchGraph", "GpuIndexSearchGraphConfig",
                 "SearchParametersSearchGraph"):
        assert name in faiss_ext.__all__
    assert issubclass(faiss_ext.GpuIndexSearchGraph, faiss.Index)
    assert issubclass(faiss_ext.SearchParametersSearchGraph, faiss.SearchParameters)
    assert faiss_ext.GpuIndexSearchGraphConfig is faiss_ext._faiss_ext.GpuIndexSearchGraphConfig


def test_config_defaults_and_aliases():
    c = faiss_ext.GpuIndexSearchGraphConfig()
    assert isinstance(c, faiss_ext.GpuIndexConfig)
    assert (c.device, c.graph_degree, c.knn_degree, c.itopk, c.search_width, c.max_iterations,
            c.seed_rounds, c.seed, c.entry_points, c.entry_seeds, c.fp16_traversal) == \
        (0, 64, 128, 64, 1, 0, 1, 1234, 4096, 8, True)
    assert isinstance(c.knn_build, faiss_ext.GpuKnnGraphGNNDConfig)
    # the search graph needs fewer NN-Descent iterations than a k-NN graph
    assert c.knn_build.max_iterations == 0  # by size (6 below 4M vectors, 9 from there)
    assert faiss_ext.GpuKnnGraphGNNDConfig().max_iterations == 20
    knn = faiss_ext.GpuKnnGraphGNNDConfig(samples=16, max_iterations=5)
    c = faiss_ext.GpuIndexSearchGraphConfig(
        device=1, graph_degree=64, knn_degree=128, knn_build=knn, itopk=256, search_width=2,
        max_iterations=40, seed_rounds=2, seed=7, entry_points=0, entry_seeds=0,
        fp16_traversal=False)
    assert (c.device, c.graphDegree, c.knnDegree, c.itopk, c.searchWidth, c.maxIterations,
            c.seedRounds, c.seed, c.entryPoints, c.entrySeeds, c.fp16Traversal) == \
        (1, 64, 128, 256, 2, 40, 2, 7, 0, 0, False)
    assert (c.knn_build.samples, c.knnBuild.max_iterations) == (16, 5)
    c.knn_build.samples = 8  # the field itself, not a copy
    assert c.knn_build.samples == 8
    c.graphDegree = 16
    c.search_width = 4
    assert c.graph_degree == 16 and c.searchWidth == 4
    assert "graph_degree=16" in repr(c) and "fp16_traversal=False" in repr(c)
    assert c.blocks_per_query == 0  # chosen by batch size
    c.blocksPerQuery = 4
    assert c.blocks_per_query == 4 and "blocks_per_query=4" in repr(c)
    assert faiss_ext.GpuIndexSearchGraphConfig(blocks_per_query=1).blocks_per_query == 1


def test_config_unlike_queries():
    c = faiss_ext.GpuIndexSearchGraphConfig()
    assert (c.unlike_query_ratio, c.unlike_query_share) == (0.0, pytest.approx(0.02))  # off
    c.unlikeQueryRatio = 3  # the suggested ratio
    c.unlike_query_share = 0.5
    assert (c.unlike_query_ratio, c.unlikeQueryShare) == (3.0, 0.5)
    assert "unlike_query_ratio=3.0" in repr(c) and "unlike_query_share=0.5" in repr(c)
    c = faiss_ext.GpuIndexSearchGraphConfig(unlike_query_ratio=4.5, unlike_query_share=0)
    assert (c.unlike_query_ratio, c.unlike_query_share) == (4.5, 0.0)
    assert c.unlike_query_probes == 64  # flagged queries probe 64 lists
    c.unlikeQueryProbes = 0  # exact search instead
    assert c.unlike_query_probes == 0 and "unlike_query_probes=0" in repr(c)
    assert faiss_ext.GpuIndexSearchGraphConfig(unlike_query_probes=128).unlike_query_probes == 128


@pytest.mark.parametrize("field,value", [
    ("graph_degree", 0), ("graph_degree", 129), ("knn_degree", 0), ("knn_degree", 257),
    ("itopk", 8), ("itopk", 15), ("itopk", 1024), ("search_width", 0), ("search_width", 32),
    ("max_iterations", -1), ("seed_rounds", 0), ("entry_points", -1), ("entry_seeds", -1),
    ("entry_seeds", 129), ("blocks_per_query", -1), ("blocks_per_query", 33),
    ("unlike_query_ratio", -1.0), ("unlike_query_ratio", float("nan")),
    ("unlike_query_ratio", float("inf")), ("unlike_query_share", -0.1),
    ("unlike_query_share", 1.5), ("unlike_query_share", float("nan")),
    ("unlike_query_probes", -1),
])
def test_config_checks_values(field, value):
    c = faiss_ext.GpuIndexSearchGraphConfig()
    before = getattr(c, field)
    with pytest.raises(ValueError, match=field):
        setattr(c, field, value)
    assert getattr(c, field) == before
    with pytest.raises(ValueError, match=field):
        faiss_ext.GpuIndexSearchGraphConfig(**{field: value})



def test_search_parameters():
    p = faiss_ext.SearchParametersSearchGraph()
    assert isinstance(p, faiss.SearchParameters)
    assert (p.itopk, p.search_width, p.max_iterations, p.min_iterations, p.seed_rounds,
            p.entry_seeds, p.fp16) == (0, 0, 0, 0, 0, -1, -1)
    p = faiss_ext.SearchParametersSearchGraph(itopk=128, search_width=2, max_iterations=50,
                                              min_iterations=3, seed_rounds=2, entry_seeds=0,
                                              fp16=0)
    assert (p.itopk, p.searchWidth, p.maxIterations, p.minIterations, p.seedRounds,
            p.entrySeeds, p.fp16) == (128, 2, 50, 3, 2, 0, 0)
    p.fp16 = True  # a bool is an int
    assert p.fp16 == 1
    assert "itopk=128" in repr(p)
    assert p.blocks_per_query == 0
    p = faiss_ext.SearchParametersSearchGraph(blocks_per_query=8)
    assert p.blocksPerQuery == 8 and "blocks_per_query=8" in repr(p)
    assert p.seed == -1
    p.seed = 99
    assert faiss_ext.SearchParametersSearchGraph(seed=5).seed == 5 and "seed=99" in repr(p)
    assert p.unlike_query_ratio == -1.0  # the index's
    p.unlikeQueryRatio = 0  # no detection for this search
    assert p.unlike_query_ratio == 0.0 and "unlike_query_ratio=0.0" in repr(p)
    assert faiss_ext.SearchParametersSearchGraph(unlike_query_ratio=5).unlike_query_ratio == 5.0
    assert p.unlike_query_probes == -1  # the index's
    p.unlikeQueryProbes = 0
    assert p.unlike_query_probes == 0 and "unlike_query_probes=0" in repr(p)
    assert faiss_ext.SearchParametersSearchGraph(unlike_query_probes=9).unlike_query_probes == 9


@pytest.mark.parametrize("field,value", [
    ("itopk", -1), ("itopk", 513), ("search_width", -1), ("search_width", 32),
    ("max_iterations", -1), ("min_iterations", -1), ("seed_rounds", -1), ("entry_seeds", -2),
    ("entry_seeds", 129), ("fp16", 2), ("fp16", -2), ("blocks_per_query", -1),
    ("blocks_per_query", 33), ("seed", -2), ("unlike_query_ratio", -2.0),
    ("unlike_query_ratio", -0.5), ("unlike_query_ratio", float("nan")),
    ("unlike_query_probes", -2),
])
def test_search_parameters_check_values(field, value):
    p = faiss_ext.SearchParametersSearchGraph()
    with pytest.raises(ValueError, match=field):
        setattr(p, field, value)
    with pytest.raises(ValueError, match=field):
        faiss_ext.SearchParametersSearchGraph(**{field: value})


def test_docstrings():
    cls = faiss_ext.GpuIndexSearchGraph
    for f in (cls, cls.copy_from, cls.copy_to, cls.get_search_graph, cls.get_knn_graph,
              cls.get_entry_points, cls.get_unlike_query_counts, cls.reset_unlike_query_counts,
              faiss_ext.GpuIndexSearchGraphConfig, faiss_ext.SearchParametersSearchGraph):
        assert f.__doc__ and f.__doc__.strip()
    assert "unlike_query_ratio" in faiss_ext.GpuIndexSearchGraphConfig.__doc__
    assert "unlike_query_probes" in faiss_ext.GpuIndexSearchGraphConfig.__doc__


def test_constructor_argument_types():
    with pytest.raises(TypeError):
        faiss_ext.GpuIndexSearchGraph("res", 8)
    res = faiss_ext.StandardGpuResources()
    with pytest.raises(TypeError, match="metric"):
        faiss_ext.GpuIndexSearchGraph(res, 8, 2.5)
    with pytest.raises(TypeError):
        faiss_ext.GpuIndexSearchGraph(res, 8, faiss.METRIC_L2, config="x")


@pytest.mark.skipif(faiss_ext.get_num_gpus() > 0, reason="checks the no-GPU error path")
def test_search_graph_without_gpu_raises():
    res = faiss_ext.StandardGpuResources()
    for metric in (faiss.METRIC_L2, faiss_ext.FlatMetric.Cosine, "IP"):
        with pytest.raises(RuntimeError, match="GPU"):
            faiss_ext.GpuIndexSearchGraph(res, 8, metric)
    with pytest.raises(RuntimeError, match="GPU"):
        faiss_ext.index_cpu_to_gpu(res, 0, faiss_ext.index_factory(8, "SGraph16"))
