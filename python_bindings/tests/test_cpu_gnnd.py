"""CPU tests of the GNND parts of faiss_ext: the "GNND<k>[_p<samples>][_it<iterations>]"
factory strings (the CPU twin faiss.IndexNNDescentFlat), saving and loading the
twin after FAISS built its graph on the CPU, and the GNND option objects."""

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import random_data


def _downcast(index, owner):
    """faiss.downcast_index(index), keeping ``owner`` alive as long as the
    result (downcast proxies do not own the C++ object)."""
    down = faiss.downcast_index(index)
    down.referenced_objects = [owner]
    return down


def _nnd(index):
    """The faiss.IndexNNDescentFlat at the bottom of IDMap / PreTransform wrappers."""
    while isinstance(index, (faiss.IndexIDMap, faiss.IndexPreTransform)):
        index = _downcast(index.index, index)
    if not isinstance(index, faiss.IndexNNDescentFlat):
        index = _downcast(index, index)
    assert isinstance(index, faiss.IndexNNDescentFlat), type(index)
    return index


def _graph(index):
    return faiss.vector_to_array(_nnd(index).nndescent.final_graph)


# ---- factory ----

@pytest.mark.parametrize("description,k,samples,iterations", [
    ("GNND64", 64, 32, 20),
    ("GNND32_p16", 32, 16, 20),
    ("GNND64_p24_it10", 64, 24, 10),
    ("GNND8_it3_p4", 8, 4, 3),
    ("GNND1024_p1_it1", 1024, 1, 1),
])
@pytest.mark.parametrize("metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_factory_gnnd_twin(description, k, samples, iterations, metric):
    index = faiss_ext.index_factory(24, description, metric)
    assert isinstance(index, faiss.IndexNNDescentFlat)
    assert index.d == 24 and index.ntotal == 0 and index.metric_type == metric
    nn = index.nndescent
    assert (nn.K, nn.S, nn.iter) == (k, samples, iterations)
    assert nn.random_seed == 1234 and not nn.has_built
    storage = faiss.downcast_index(index.storage)
    assert isinstance(storage, faiss.IndexFlat) and storage.metric_type == metric


def test_factory_gnnd_defaults_are_the_gpu_config_defaults():
    index = faiss_ext.index_factory(8, "GNND16")
    cfg = faiss_ext.GpuKnnGraphGNNDConfig()
    assert index.nndescent.S == cfg.samples
    assert index.nndescent.iter == cfg.max_iterations
    assert index.nndescent.random_seed == cfg.seed


def test_factory_gnnd_accepts_flat_metric():
    index = faiss_ext.index_factory(8, "GNND16", faiss_ext.FlatMetric.InnerProduct)
    assert index.metric_type == faiss.METRIC_INNER_PRODUCT


def test_factory_gnnd_prefixes(rng):
    idmap = faiss_ext.index_factory(16, "IDMap,GNND16")
    assert isinstance(idmap, faiss.IndexIDMap)
    assert _nnd(idmap).nndescent.K == 16
    xb = random_data(rng, 500, 16)
    ids = np.arange(5000, 5500, dtype=np.int64)
    idmap.add_with_ids(xb, ids)
    _nnd(idmap).nndescent.search_L = 64
    _, I = idmap.search(xb[:5], 3)
    np.testing.assert_array_equal(I[:, 0], ids[:5])

    cosine = faiss_ext.index_factory(16, "L2norm,GNND16", faiss.METRIC_INNER_PRODUCT)
    assert isinstance(cosine, faiss.IndexPreTransform)
    assert isinstance(faiss.downcast_VectorTransform(cosine.chain.at(0)),
                      faiss.NormalizationTransform)
    assert _nnd(cosine).metric_type == faiss.METRIC_INNER_PRODUCT

    pca = faiss_ext.index_factory(128, "PCA64,GNND32")
    assert isinstance(pca, faiss.IndexPreTransform) and not pca.is_trained
    assert _nnd(pca).d == 64 and _nnd(pca).nndescent.K == 32
    xt = random_data(rng, 400, 128)
    pca.train(xt)
    pca.add(xt)
    assert _nnd(pca).ntotal == 400 and _nnd(pca).nndescent.has_built


@pytest.mark.parametrize("description,message", [
    ("GNND0", "graph degree"),
    ("GNND-3", "graph degree"),
    ("GNND", "graph degree"),
    ("GNND1025", r"\[1, 1024\]"),
    ("GNND64_p0", "samples"),
    ("GNND64_p33", r"\[1, 32\]"),
    ("GNND64_it0", "iteration"),
    ("GNND64_x", "unknown suffix '_x'"),
    ("GNND64_p8_p8", "given twice"),
    ("IDMap,GNND0", "graph degree"),
])
def test_factory_gnnd_bad_strings(description, message):
    with pytest.raises(RuntimeError, match=message) as e:
        faiss_ext.index_factory(8, description)
    assert description.split(",")[-1] in str(e.value)


def test_factory_gnnd_other_metrics_are_refused():
    with pytest.raises(RuntimeError, match="L2norm,GNND"):
        faiss_ext.index_factory(8, "GNND16", faiss.METRIC_L1)


# ---- saving and loading the twin ----

def test_twin_built_by_faiss_round_trips(rng, tmp_path):
    twin = faiss_ext.index_factory(8, "GNND16")
    xb = random_data(rng, 2000, 8)
    twin.add(xb)  # FAISS's NN-Descent on the CPU
    assert twin.nndescent.has_built
    graph = _graph(twin)
    assert graph.shape == (2000 * 16,)
    twin.nndescent.search_L = 32
    xq = random_data(rng, 20, 8)
    D, I = twin.search(xq, 10)

    path = tmp_path / "gnnd.index"
    faiss_ext.write_index(twin, path)
    for back in (faiss_ext.read_index(path), faiss.read_index(str(path))):
        # ours: our reader's checked subclass of faiss::IndexNNDescentFlat,
        # as FAISS's class
        back = _nnd(back)
        np.testing.assert_array_equal(_graph(back), graph)
        assert back.nndescent.search_L == 32 and back.nndescent.S == 32
        D2, I2 = back.search(xq, 10)
        np.testing.assert_array_equal(I2, I)
        np.testing.assert_array_equal(D2, D)

    data = faiss_ext.serialize_index(twin)
    assert bytes(data[:4]) == b"INNf"
    back = _nnd(faiss_ext.deserialize_index(data))
    np.testing.assert_array_equal(_graph(back), graph)


def test_wrapped_twin_round_trips(rng):
    twin = faiss_ext.index_factory(8, "IDMap,GNND8_p8_it5")
    xb = random_data(rng, 1000, 8)
    twin.add_with_ids(xb, np.arange(1000, dtype=np.int64) * 3)
    back = faiss_ext.deserialize_index(faiss_ext.serialize_index(twin))
    assert isinstance(back, faiss.IndexIDMap)
    np.testing.assert_array_equal(faiss.vector_to_array(back.id_map),
                                  faiss.vector_to_array(twin.id_map))
    np.testing.assert_array_equal(_graph(back), _graph(twin))
    assert _nnd(back).nndescent.S == 8 and _nnd(back).nndescent.iter == 5


def test_corrupt_twin_graph_raises(rng):
    twin = faiss_ext.index_factory(4, "GNND4_p4_it2")
    twin.add(random_data(rng, 200, 4))
    data = np.array(faiss_ext.serialize_index(twin))
    # a neighbour id past ntotal: FAISS's search would follow it
    at = 4 + 33 + 37 + 8 + 4 * 5
    data[at:at + 4] = np.frombuffer(np.int32(200).tobytes(), dtype=np.uint8)
    with pytest.raises(RuntimeError, match="graph entry"):
        faiss_ext.deserialize_index(data)
    with pytest.raises(RuntimeError):
        faiss_ext.deserialize_index(data[:300])


# ---- option objects (no GPU needed) ----

def test_gnnd_config_defaults_and_aliases():
    c = faiss_ext.GpuKnnGraphGNNDConfig()
    assert (c.device, c.samples, c.max_iterations, c.build_degree, c.seed, c.search_l) == \
        (0, 32, 20, 0, 1234, 0)
    assert c.termination_threshold == pytest.approx(0.001)
    assert isinstance(c, faiss_ext.GpuIndexConfig)
    c = faiss_ext.GpuKnnGraphGNNDConfig(device=1, samples=16, max_iterations=5,
                                        termination_threshold=0.01, build_degree=64, seed=7,
                                        search_l=100)
    assert (c.device, c.samples, c.maxIterations, c.buildDegree, c.seed, c.searchL) == \
        (1, 16, 5, 64, 7, 100)
    assert c.terminationThreshold == pytest.approx(0.01)
    c.maxIterations = 9
    c.search_l = 12
    assert c.max_iterations == 9 and c.searchL == 12
    assert "samples=16" in repr(c)


def test_gnnd_config_add_build():
    c = faiss_ext.GpuKnnGraphGNNDConfig()
    assert c.add_build == "auto"
    c.add_build = "partitioned"
    assert c.add_build == "partitioned" and "add_build='partitioned'" in repr(c)
    assert faiss_ext.GpuKnnGraphGNNDConfig(add_build="one-shot").add_build == "one-shot"
    fits = faiss_ext.GpuKnnGraphGNNDConfig(add_build="one-shot-where-it-fits")
    assert fits.add_build == "one-shot-where-it-fits"
    with pytest.raises(ValueError, match="add_build"):
        c.add_build = "exact"
    assert c.add_build == "partitioned"
    with pytest.raises(ValueError, match="add_build"):
        faiss_ext.GpuKnnGraphGNNDConfig(add_build="")


@pytest.mark.parametrize("field,value", [
    ("samples", 0), ("samples", 33), ("max_iterations", 0), ("termination_threshold", 1.0),
    ("termination_threshold", -0.1), ("build_degree", 48), ("build_degree", -32),
    ("search_l", -1),
])
def test_gnnd_config_checks_values(field, value):
    c = faiss_ext.GpuKnnGraphGNNDConfig()
    with pytest.raises(ValueError, match=field.split("_")[0]):
        setattr(c, field, value)
    with pytest.raises(ValueError):
        faiss_ext.GpuKnnGraphGNNDConfig(**{field: value})


def test_search_parameters_gnnd():
    p = faiss_ext.SearchParametersGNND(search_l=64)
    assert isinstance(p, faiss.SearchParameters)
    assert p.search_l == 64 and p.searchL == 64
    assert faiss_ext.SearchParametersGNND().search_l == 0
    with pytest.raises(ValueError):
        faiss_ext.SearchParametersGNND(search_l=-5)


def test_vector_file_format():
    F = faiss_ext.VectorFileFormat
    assert F.FVECS == F.Fvecs and F.RAW_FLOAT32 == F.RawFloat32 and F.FVECS != F.RAW_FLOAT32


def test_estimate_memory_is_a_dict():
    est = faiss_ext.GpuKnnGraphGNND.estimate_memory(100000, 128, 32)
    assert set(est) == {"vectors", "graph", "build_temp", "total"}
    assert est["total"] == est["vectors"] + est["graph"] + est["build_temp"]
    assert est["vectors"] >= 100000 * 128 * 4
    bigger = faiss_ext.GpuKnnGraphGNND.estimate_memory(
        200000, 128, 32, faiss_ext.GpuKnnGraphGNNDConfig(samples=16))
    assert bigger["total"] > est["total"]


def test_gnnd_docstrings():
    for f in (faiss_ext.GpuKnnGraphGNND.copy_from, faiss_ext.GpuKnnGraphGNND.copy_to,
              faiss_ext.GpuKnnGraphGNND.to_index_nsg, faiss_ext.GpuKnnGraphGNND.get_graph,
              faiss_ext.gnnd_build_from_file, faiss_ext.read_graph_ivecs):
        assert f.__doc__ and f.__doc__.strip()


@pytest.mark.skipif(faiss_ext.get_num_gpus() > 0, reason="checks the no-GPU error path")
def test_gnnd_without_gpu_raises():
    res = faiss_ext.StandardGpuResources()
    with pytest.raises(RuntimeError, match="GPU"):
        faiss_ext.GpuKnnGraphGNND(res, 8, 16)
    with pytest.raises(RuntimeError, match="GPU"):
        faiss_ext.index_cpu_to_gpu(res, 0, faiss_ext.index_factory(8, "GNND16"))
