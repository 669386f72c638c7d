"""select_k, knn_graph, the selection algorithms and host storage from Python.

GPU tests (marked `gpu`: skipped, with the reason shown, without a GPU)
compare select_k with numpy's stable sort for every algorithm (smallest and
largest, ties to the smaller column), knn_graph with numpy brute force, and
host storage under a tiny device memory limit with device storage. The CPU
tests check what is checked in the bindings before any C++ runs (shapes, k,
names, config ranges) and the enums."""

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import assert_knn_equal, exact_scores, random_data

SA = faiss_ext.SelectAlgo
VS = faiss_ext.VectorStorage
FM = faiss_ext.FlatMetric
ALGOS = [SA.AUTO, SA.QUICK_MULTI_SELECT, SA.MERGE_QUEUE, SA.TH_HEAP]
CONCRETE = {SA.QUICK_MULTI_SELECT, SA.MERGE_QUEUE, SA.TH_HEAP}
gpu = pytest.mark.gpu


def algo_id(a):
    return a.name


@pytest.fixture(scope="module")
def res():
    """One StandardGpuResources for the module's tests (no GPU work at creation)."""
    return faiss_ext.StandardGpuResources()


# ---- numpy references ----

def ref_select(values, k, largest, ids=None):
    """The k smallest / largest of each row by numpy's stable sort: sorted,
    ties to the smaller column, NaN last (as select_k documents)."""
    keys = -values if largest else values
    order = np.argsort(keys, axis=1, kind="stable")[:, :k]
    out_v = np.take_along_axis(values, order, axis=1)
    out_i = order if ids is None else np.take_along_axis(ids, order, axis=1)
    return out_v, out_i.astype(np.int64)


def ref_knn_graph(xb, k, exclude_self, l2):
    """Brute-force k-NN graph (float64), self left out by id when exclude_self."""
    scores = exact_scores(xb, xb, l2)
    if exclude_self:
        np.fill_diagonal(scores, np.inf if l2 else -np.inf)
    order = np.argsort(scores if l2 else -scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1).astype(np.float32), order.astype(np.int64)


def _gpu_index(res, xb, metric=FM.L2, **config):
    """A GpuIndexQuickSelectFlat holding xb, with the given config fields."""
    cfg = faiss_ext.GpuIndexQuickSelectFlatConfig(**config)
    index = faiss_ext.GpuIndexQuickSelectFlat(res, xb.shape[1], metric, cfg)
    index.add(xb)
    return index


# ======================= CPU: enums, names, argument checks =======================

def test_select_algo_members_and_aliases():
    assert [int(a) for a in ALGOS] == [0, 1, 2, 3]
    # The C++ spellings (and the names of the first binding) still work.
    assert SA.Auto == SA.AUTO and SA.QuickMultiSelect == SA.QUICK_MULTI_SELECT
    assert SA.MergeQueue == SA.MERGE_QUEUE and SA.THHeap == SA.TH_HEAP
    assert SA.TH_HEAP.name == "TH_HEAP"
    assert VS.Auto == VS.AUTO and VS.Device == VS.DEVICE and VS.Host == VS.HOST
    assert [int(s) for s in (VS.AUTO, VS.DEVICE, VS.HOST)] == [0, 1, 2]
    assert faiss_ext.SelectAlgo is faiss_ext._faiss_ext.SelectAlgo
    for name in ("VectorStorage", "select_k", "choose_select_algo", "select_algo_name",
                 "select_algo_from_name", "vector_storage_name"):
        assert name in faiss_ext.__all__, name


def test_select_algo_names_round_trip():
    assert [faiss_ext.select_algo_name(a) for a in ALGOS] == [
        "auto", "quick-multi-select", "merge-queue", "th-heap"]
    for a in ALGOS:
        assert faiss_ext.select_algo_from_name(faiss_ext.select_algo_name(a)) == a
        assert faiss_ext.select_algo_from_name(a.name) == a  # member names too
    assert faiss_ext.select_algo_from_name("qms") == SA.QUICK_MULTI_SELECT
    assert faiss_ext.select_algo_from_name("mq") == SA.MERGE_QUEUE
    assert faiss_ext.select_algo_from_name("thheap") == SA.TH_HEAP
    assert faiss_ext.select_algo_from_name("MergeQueue") == SA.MERGE_QUEUE
    with pytest.raises(ValueError, match="unknown selection algorithm 'bogus'"):
        faiss_ext.select_algo_from_name("bogus")
    assert [faiss_ext.vector_storage_name(s) for s in (VS.AUTO, VS.DEVICE, VS.HOST)] == [
        "auto", "device", "host"]


def test_choose_select_algo_is_concrete():
    for rows, n, k, d in [(1, 1, 1, 0), (10000, 1000000, 10, 128), (1, 1000000, 1024, 0),
                          (100, 5000, 1000, 64), (10000, 100000, 100, 0)]:
        assert faiss_ext.choose_select_algo(rows, n, k, d) in CONCRETE, (rows, n, k, d)
    assert faiss_ext.choose_select_algo(rows=5, n=50, k=5) in CONCRETE


@pytest.mark.parametrize("args,match", [
    ((-1, 10, 1), "rows must be >= 0"),
    ((1, 0, 1), "n must be >= 1"),
    ((1, 10, 0), r"k must be in \[1, n\]"),
    ((1, 10, 11), r"k must be in \[1, n\] with n=10, got k=11"),
    ((1, 10, 1, -1), "d must be >= 0"),
])
def test_choose_select_algo_checks_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        faiss_ext.choose_select_algo(*args)


@pytest.mark.parametrize("values,match", [
    (np.zeros(5, np.float32), r"2-D array of shape \(rows, n\), got shape \(5,\)"),
    (np.zeros((2, 3, 4), np.float32), r"got shape \(2, 3, 4\)"),
    (np.float32(3.0), r"got shape \(\)"),
    (None, "got None"),
    ([["a", "b"]], "convertible"),
    (np.zeros((3, 0), np.float32), "at least one column"),
])
def test_select_k_rejects_bad_values_before_cpp(res, values, match):
    # Checked in the binding: no GPU is needed to get the ValueError.
    with pytest.raises(ValueError, match=match):
        faiss_ext.select_k(res, values, 1)


def test_select_k_checks_k_in_indices_algo_device_res(res):
    v = np.zeros((2, 5), np.float32)
    for k in (0, -1, 6):
        with pytest.raises(ValueError, match=r"k must be in \[1, n\] with n=5 columns, got k=%d" % k):
            faiss_ext.select_k(res, v, k)
    with pytest.raises(ValueError, match=r"in_indices must have the shape of values \(2, 5\), "
                                         r"got shape \(2, 4\)"):
        faiss_ext.select_k(res, v, 1, in_indices=np.zeros((2, 4), np.int64))
    with pytest.raises(ValueError, match="in_indices"):
        faiss_ext.select_k(res, v, 1, in_indices=np.zeros(10, np.int64))
    with pytest.raises(ValueError, match="unknown selection algorithm 'fastest'"):
        faiss_ext.select_k(res, v, 1, algo="fastest")
    with pytest.raises(TypeError, match="algo must be a faiss_ext.SelectAlgo"):
        faiss_ext.select_k(res, v, 1, algo=2)
    with pytest.raises(ValueError, match="device must be a GPU number or -1"):
        faiss_ext.select_k(res, v, 1, device=-2)
    with pytest.raises(TypeError, match="res must be a GpuResourcesProvider"):
        faiss_ext.select_k(None, v, 1)


def test_select_k_with_no_rows_needs_no_gpu(res):
    D, I = faiss_ext.select_k(res, np.zeros((0, 7), np.float64), 3)
    assert D.shape == (0, 3) and D.dtype == np.float32
    assert I.shape == (0, 3) and I.dtype == np.int64


def test_config_fields_defaults_and_ranges():
    c = faiss_ext.GpuIndexQuickSelectFlatConfig()
    assert c.selectAlgo == SA.AUTO and c.storage == VS.AUTO
    assert c.mergeQueueGroup == 4 and c.thheapSampleFactor == 8
    c = faiss_ext.GpuIndexQuickSelectFlatConfig(
        device=0, selectAlgo=SA.MERGE_QUEUE, storage=VS.HOST, mergeQueueGroup=16,
        thheapSampleFactor=32)
    assert (c.selectAlgo, c.storage, c.mergeQueueGroup, c.thheapSampleFactor) == (
        SA.MERGE_QUEUE, VS.HOST, 16, 32)
    # Positional order of the first binding still holds.
    assert faiss_ext.GpuIndexQuickSelectFlatConfig(0, SA.TH_HEAP).selectAlgo == SA.TH_HEAP
    c.storage = VS.DEVICE
    c.mergeQueueGroup = 2
    c.thheapSampleFactor = 1024
    assert (c.storage, c.mergeQueueGroup, c.thheapSampleFactor) == (VS.DEVICE, 2, 1024)
    for bad in (1, 17):
        with pytest.raises(ValueError, match=r"mergeQueueGroup .* must be in \[2, 16\], got %d" % bad):
            c.mergeQueueGroup = bad
        with pytest.raises(ValueError, match="mergeQueueGroup"):
            faiss_ext.GpuIndexQuickSelectFlatConfig(mergeQueueGroup=bad)
    for bad in (0, 1025):
        with pytest.raises(ValueError, match=r"thheapSampleFactor .* \[1, 1024\], got %d" % bad):
            c.thheapSampleFactor = bad
    assert c.mergeQueueGroup == 2 and c.thheapSampleFactor == 1024  # unchanged
    p = faiss_ext.SearchParametersQuickSelectFlat(SA.TH_HEAP)
    assert p.selectAlgo == SA.TH_HEAP and isinstance(p, faiss.SearchParameters)
    p.selectAlgo = SA.MERGE_QUEUE
    assert p.selectAlgo == SA.MERGE_QUEUE


def test_set_device_memory_limit_arguments():
    r = faiss_ext.StandardGpuResources()
    r.set_device_memory_limit(1 << 20)
    r.set_device_memory_limit(np.int64(4096))
    r.setDeviceMemoryLimit(0)  # C++ spelling
    r.set_device_memory_limit(None)  # no limit again
    with pytest.raises(ValueError, match="bytes must be >= 0"):
        r.set_device_memory_limit(-1)
    with pytest.raises(TypeError, match="bytes must be an int"):
        r.set_device_memory_limit(1.5)
    with pytest.raises(ValueError, match="too large"):
        r.set_device_memory_limit(1 << 70)


def test_new_index_methods_are_bound():
    cls = faiss_ext.GpuIndexQuickSelectFlat
    for name in ("knn_graph", "knnGraph", "get_storage", "getStorage", "resolve_select_algo",
                 "resolveSelectAlgo"):
        assert getattr(cls, name).__doc__, name
    assert faiss_ext.StandardGpuResources.set_device_memory_limit.__doc__


# ================================ GPU: select_k ================================

@gpu
@pytest.mark.parametrize("largest", [False, True], ids=["smallest", "largest"])
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
def test_select_k_equals_numpy(res, rng, algo, largest):
    for rows, n in [(1, 1), (1, 5000), (3, 1000), (64, 300), (700, 33)]:
        values = rng.standard_normal((rows, n)).astype(np.float32)
        for k in sorted({1, 7, 100, n}):
            if k > n:
                continue
            D, I = faiss_ext.select_k(res, values, k, largest=largest, algo=algo)
            assert D.shape == (rows, k) and D.dtype == np.float32
            assert I.shape == (rows, k) and I.dtype == np.int64
            D_ref, I_ref = ref_select(values, k, largest)
            np.testing.assert_array_equal(I, I_ref, err_msg="rows=%d n=%d k=%d" % (rows, n, k))
            np.testing.assert_array_equal(D, D_ref)


@gpu
@pytest.mark.parametrize("largest", [False, True], ids=["smallest", "largest"])
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
def test_select_k_ties_go_to_the_smaller_column(res, rng, algo, largest):
    # Five distinct values (no zeros, so no -0.0 / +0.0 question) over many columns.
    for rows, n in [(16, 2000), (200, 64)]:
        values = rng.integers(1, 6, size=(rows, n)).astype(np.float32)
        for k in (1, 10, n // 2, n):
            D, I = faiss_ext.select_k(res, values, k, largest=largest, algo=algo)
            D_ref, I_ref = ref_select(values, k, largest)
            np.testing.assert_array_equal(I, I_ref, err_msg="rows=%d n=%d k=%d" % (rows, n, k))
            np.testing.assert_array_equal(D, D_ref)
    # All equal: the first k columns, in order.
    D, I = faiss_ext.select_k(res, np.full((4, 300), 2.5, np.float32), 50, largest, algo)
    np.testing.assert_array_equal(I, np.tile(np.arange(50), (4, 1)))


@gpu
@pytest.mark.parametrize("largest", [False, True], ids=["smallest", "largest"])
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
def test_select_k_nan_last(res, rng, algo, largest):
    rows, n = 8, 500
    values = rng.standard_normal((rows, n)).astype(np.float32)
    values[rng.random((rows, n)) < 0.1] = np.nan
    nan_count = np.isnan(values).sum(1)
    k = min(n, n - int(nan_count.min()) + 3)  # reaches into the NaNs of every row
    D, I = faiss_ext.select_k(res, values, k, largest=largest, algo=algo)
    D_ref, I_ref = ref_select(values, k, largest)
    np.testing.assert_array_equal(D, D_ref)  # NaN positions included
    for r in range(rows):
        finite = n - nan_count[r]
        np.testing.assert_array_equal(I[r, :finite], I_ref[r, :finite])
        assert np.all(np.isnan(values[r, I[r, finite:]]))
        assert len(set(I[r].tolist())) == k


@gpu
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
def test_select_k_in_indices_and_conversions(res, rng, algo):
    rows, n, k = 50, 400, 20
    # Distinct values per row (a permutation), so the ids' order is unambiguous.
    values = np.stack([rng.permutation(n) for _ in range(rows)]).astype(np.float32) / 8
    ids = rng.integers(0, 1 << 40, size=(rows, n), dtype=np.int64)
    for largest in (False, True):
        D, I = faiss_ext.select_k(res, values, k, largest, algo, in_indices=ids)
        D_ref, I_ref = ref_select(values, k, largest, ids)
        np.testing.assert_array_equal(I, I_ref)
        np.testing.assert_array_equal(D, D_ref)
    # float64, Fortran order, non-contiguous views and lists are converted.
    D, I = faiss_ext.select_k(res, values, k, algo=algo)
    for variant in (values.astype(np.float64), np.asfortranarray(values),
                    np.repeat(values, 2, axis=1)[:, ::2], values.tolist()):
        D2, I2 = faiss_ext.select_k(res, variant, k, algo=algo)
        np.testing.assert_array_equal(I2, I)
        np.testing.assert_array_equal(D2, D)
    # Names work as algo, and an explicit device.
    D3, I3 = faiss_ext.select_k(res, values, k, algo=faiss_ext.select_algo_name(algo), device=0)
    np.testing.assert_array_equal(I3, I)


@gpu
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
def test_select_k_streams_matrices_larger_than_temp_memory(rng, algo):
    small = faiss_ext.StandardGpuResources()
    small.setTempMemory(1 << 20)  # 1 MiB; the matrix is 4.8 MB
    values = rng.standard_normal((600, 2000)).astype(np.float32)
    for k, largest in ((10, False), (100, True)):
        D, I = faiss_ext.select_k(small, values, k, largest, algo)
        D_ref, I_ref = ref_select(values, k, largest)
        np.testing.assert_array_equal(I, I_ref)
        np.testing.assert_array_equal(D, D_ref)
    assert small.getTempMemoryInUse(0) == 0


# =============================== GPU: knn_graph ===============================

@pytest.fixture
def xb(rng):
    """600 random vectors of dimension 24, centred (inner products of both signs)."""
    return random_data(rng, 600, 24) - 0.5


@gpu
@pytest.mark.parametrize("exclude_self", [True, False], ids=["exclude_self", "with_self"])
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
@pytest.mark.parametrize("metric", [FM.L2, FM.InnerProduct], ids=["L2", "IP"])
def test_knn_graph_equals_brute_force(res, xb, metric, algo, exclude_self):
    l2 = metric == FM.L2
    index = _gpu_index(res, xb, metric)
    n = xb.shape[0]
    for k in (1, 16, 128, n - 1 if exclude_self else n):
        D, I = index.knn_graph(k, exclude_self=exclude_self, algo=algo)
        assert D.shape == (n, k) and D.dtype == np.float32
        assert I.shape == (n, k) and I.dtype == np.int64
        D_ref, I_ref = ref_knn_graph(xb, k, exclude_self, l2)
        assert_knn_equal(D, I, D_ref, I_ref, xb, xb, l2)
        if exclude_self:
            assert not np.any(I == np.arange(n)[:, None]), "a vector is its own neighbour"
        elif l2:
            # Self is at distance 0: first, up to float32 rounding of ||x||^2 terms.
            assert np.mean(I[:, 0] == np.arange(n)) > 0.99
    # With the self in, the graph is search(xb, k).
    if not exclude_self:
        D, I = index.knn_graph(10, exclude_self=False, algo=algo)
        D_s, I_s = index.search(xb, 10, faiss_ext.SearchParametersQuickSelectFlat(algo))
        assert_knn_equal(D, I, D_s, I_s, xb, xb, l2)


@gpu
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
def test_knn_graph_excludes_self_by_id_not_duplicates(res, rng, algo):
    xb = random_data(rng, 200, 16)
    xb[1] = xb[0]
    xb[5] = xb[0]
    index = _gpu_index(res, xb)
    D, I = index.knn_graph(2, algo=algo)
    assert set(I[0].tolist()) == {1, 5}
    assert set(I[1].tolist()) == {0, 5}
    assert set(I[5].tolist()) == {0, 1}
    np.testing.assert_allclose(D[[0, 1, 5]], 0, atol=1e-4)


@gpu
def test_knn_graph_argument_checks_and_algo_names(res, xb):
    index = _gpu_index(res, xb)
    n = xb.shape[0]
    with pytest.raises(ValueError, match=r"k must be in \[1, ntotal - 1\] = \[1, %d\], got k=%d"
                       % (n - 1, n)):
        index.knn_graph(n)
    with pytest.raises(ValueError, match=r"k must be in \[1, ntotal\]"):
        index.knn_graph(n + 1, exclude_self=False)
    with pytest.raises(ValueError, match="k must be in"):
        index.knn_graph(0)
    with pytest.raises(ValueError, match="unknown selection algorithm"):
        index.knn_graph(3, algo="nope")
    one = _gpu_index(res, xb[:1])
    with pytest.raises(ValueError, match="ntotal=1 .*at least 2"):
        one.knn_graph(1)
    D1, I1 = one.knn_graph(1, exclude_self=False)
    np.testing.assert_array_equal(I1, [[0]])
    D, I = index.knn_graph(8, algo="mq")
    D2, I2 = index.knn_graph(8, algo=SA.MERGE_QUEUE)
    D3, I3 = index.knnGraph(8, excludeSelf=True, algo=SA.MERGE_QUEUE)
    np.testing.assert_array_equal(I, I2)
    np.testing.assert_array_equal(I, I3)


# =================== GPU: algorithms per index / search, storage ===================

@gpu
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
def test_search_with_each_algo_and_resolve(res, xb, rng, algo):
    xq = random_data(rng, 37, 24) - 0.5
    ref = faiss.IndexFlatL2(24)
    ref.add(xb)
    D_ref, I_ref = ref.search(xq, 50)
    # Per index (config) ...
    index = _gpu_index(res, xb, selectAlgo=algo, mergeQueueGroup=8, thheapSampleFactor=16)
    cfg = index.getConfig()
    assert (cfg.selectAlgo, cfg.mergeQueueGroup, cfg.thheapSampleFactor) == (algo, 8, 16)
    D, I = index.search(xq, 50)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, True)
    resolved = index.resolve_select_algo(37, 50)
    assert resolved in CONCRETE
    if algo != SA.AUTO:
        assert resolved == algo
    assert index.resolveSelectAlgo(37, 50) == resolved
    # ... and per search (SearchParametersQuickSelectFlat), over an AUTO index.
    auto = _gpu_index(res, xb)
    params = faiss_ext.SearchParametersQuickSelectFlat(algo)
    D, I = auto.search(xq, 50, params)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, True)
    by_params = auto.resolve_select_algo(37, 50, params)
    assert by_params in CONCRETE
    if algo != SA.AUTO:
        assert by_params == algo
    with pytest.raises(ValueError, match="k must be > 0"):
        auto.resolve_select_algo(37, 0)


@gpu
def test_default_storage_is_device(res, xb):
    index = _gpu_index(res, xb)
    assert index.get_storage() == VS.DEVICE
    assert index.getStorage() == VS.DEVICE


@gpu
@pytest.mark.parametrize("algo", ALGOS, ids=algo_id)
def test_host_storage_under_tiny_device_limit_equals_device_storage(res, rng, algo):
    xb = random_data(rng, 3000, 32) - 0.5
    xq = random_data(rng, 40, 32) - 0.5
    device = _gpu_index(res, xb, selectAlgo=algo)
    assert device.get_storage() == VS.DEVICE

    tiny = faiss_ext.StandardGpuResources()
    tiny.set_device_memory_limit(1024)  # 1 KiB: 3000 x 32 floats cannot stay
    tiny.setTempMemory(2 << 20)  # 2 MiB of temporary memory
    host = _gpu_index(tiny, xb, selectAlgo=algo)
    assert host.get_storage() == VS.HOST
    assert host.ntotal == 3000
    np.testing.assert_array_equal(host.reconstruct_n(0, 3000), xb)

    for k in (1, 20, 200):
        D_d, I_d = device.search(xq, k)
        D_h, I_h = host.search(xq, k)
        assert_knn_equal(D_h, I_h, D_d, I_d, xq, xb, True)
    for exclude_self in (True, False):
        D_d, I_d = device.knn_graph(30, exclude_self=exclude_self)
        D_h, I_h = host.knn_graph(30, exclude_self=exclude_self)
        assert_knn_equal(D_h, I_h, D_d, I_d, xb, xb, True)
        if exclude_self:
            assert not np.any(I_h == np.arange(3000)[:, None])
    assert tiny.getTempMemoryInUse(0) == 0


@gpu
def test_explicit_host_storage(res, xb, rng):
    index = _gpu_index(res, xb, storage=VS.HOST)
    assert index.get_storage() == VS.HOST
    assert index.getConfig().storage == VS.HOST
    ref = _gpu_index(res, xb)
    xq = random_data(rng, 10, 24) - 0.5
    D, I = index.search(xq, 15)
    D_ref, I_ref = ref.search(xq, 15)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, True)
    D, I = index.knn_graph(15)
    D_ref, I_ref = ref.knn_graph(15)
    assert_knn_equal(D, I, D_ref, I_ref, xb, xb, True)
