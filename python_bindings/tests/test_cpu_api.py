"""CPU tests of the module's API: device queries, metrics, numpy handling of
our index classes (FAISS's call shapes, with ValueError / IndexError instead
of FAISS's asserts), and errors as Python exceptions that carry the C++
message."""

import threading

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import random_data


def _native_flat(rng, n=100, d=8, metric=faiss.METRIC_L2):
    """One of our own CPU indexes (an IndexBiLevelLSH, whose Python methods
    are ours, not FAISS's) with n random vectors, and the vectors."""
    xb = random_data(rng, n, d)
    # one bucket per table (huge width, no tree): its short list is every vector
    index = faiss_ext.index_factory(d, "BiLSH4x4_t0_w1000")
    index.train(xb)
    index.add(xb)
    return index, xb


def test_get_num_gpus_is_a_non_negative_int():
    n = faiss_ext.get_num_gpus()
    assert isinstance(n, int) and n >= 0


def test_public_names_have_docstrings():
    for name in faiss_ext.__all__:
        obj = getattr(faiss_ext, name)
        assert obj.__doc__ and obj.__doc__.strip(), name
    assert faiss_ext.GpuIndexQuickSelectFlat.copy_from.__doc__
    assert faiss_ext.GpuIndexQuickSelectFlat.copy_to.__doc__


# ---- metrics ----

def test_metric_helpers_follow_faiss_conventions():
    FM = faiss_ext.FlatMetric
    assert faiss_ext.to_faiss_metric(FM.L2) == faiss.METRIC_L2
    assert faiss_ext.to_faiss_metric(FM.InnerProduct) == faiss.METRIC_INNER_PRODUCT
    # Cosine and Pearson are similarities: inner-product convention.
    assert faiss_ext.to_faiss_metric(FM.Cosine) == faiss.METRIC_INNER_PRODUCT
    assert faiss_ext.to_faiss_metric(FM.Pearson) == faiss.METRIC_INNER_PRODUCT
    assert faiss_ext.from_faiss_metric(faiss.METRIC_L2) == FM.L2
    assert faiss_ext.from_faiss_metric(faiss.METRIC_INNER_PRODUCT) == FM.InnerProduct
    assert faiss_ext.flat_metric_name(FM.InnerProduct) == "IP"
    assert faiss_ext.parse_flat_metric("pearson") == FM.Pearson
    assert faiss_ext.parse_flat_metric("InnerProduct") == FM.InnerProduct


def test_unsupported_faiss_metric_raises_with_message():
    with pytest.raises(RuntimeError, match="not supported"):
        faiss_ext.from_faiss_metric(faiss.METRIC_L1)


def test_config_objects():
    c = faiss_ext.GpuIndexQuickSelectFlatConfig(device=1, selectAlgo=faiss_ext.SelectAlgo.QuickMultiSelect)
    assert c.device == 1 and c.selectAlgo == faiss_ext.SelectAlgo.QuickMultiSelect
    c.device = 0
    assert c.device == 0
    assert faiss_ext.GpuIndexQuickSelectFlatConfig().selectAlgo == faiss_ext.SelectAlgo.Auto
    assert not faiss_ext.GpuClonerOptions().requireGpu
    p = faiss_ext.SearchParametersQuickSelectFlat(faiss_ext.SelectAlgo.QuickMultiSelect)
    assert isinstance(p, faiss.SearchParameters)


def test_every_public_binding_is_exported():
    # A class or function of the compiled module that the package does not
    # re-export is out of a user's reach (DistancePrecision once was); the
    # Native* bases are wrapped by the proxies instead.
    from faiss_ext import _faiss_ext
    public = [n for n in dir(_faiss_ext) if not n.startswith("_") and not n.startswith("Native")]
    missing = [n for n in public if not hasattr(faiss_ext, n)]
    assert missing == []


def test_distance_precisions_are_settable():
    P = faiss_ext.DistancePrecision
    assert [int(v) for v in (P.AUTO, P.FP32, P.TF32_BOUNDED, P.BF16X3_BOUNDED)] == [0, 1, 2, 3]
    c = faiss_ext.GpuIndexQuickSelectFlatConfig()
    assert c.distancePrecision == P.AUTO
    c.distancePrecision = P.BF16X3_BOUNDED
    assert c.distancePrecision == P.BF16X3_BOUNDED
    p = faiss_ext.SearchParametersQuickSelectFlat()
    p.distancePrecision = P.BF16X3_BOUNDED
    assert p.distancePrecision == P.BF16X3_BOUNDED


# ---- numpy in, numpy out ----

def test_search_shapes_and_dtypes(rng):
    index, xb = _native_flat(rng)
    xq = random_data(rng, 7, 8)
    D, I = index.search(xq, 5)
    assert D.shape == (7, 5) and D.dtype == np.float32
    assert I.shape == (7, 5) and I.dtype == np.int64
    # FAISS's own Python search (faiss.Index.search) reaches the same C++ index
    D_ref, I_ref = faiss.Index.search(index, xq, 5)
    np.testing.assert_array_equal(I, I_ref)
    np.testing.assert_array_equal(D, D_ref)
    # FAISS's calling conventions: params=, D=, I=
    D_out, I_out = np.empty((7, 5), np.float32), np.empty((7, 5), np.int64)
    D2, I2 = index.search(xq, 5, params=faiss_ext.SearchParametersBiLevelLSH(), D=D_out, I=I_out)
    assert D2 is D_out and I2 is I_out
    np.testing.assert_array_equal(I_out, I)
    with pytest.raises(ValueError, match=r"D must have shape \(7, 5\)"):
        index.search(xq, 5, D=np.empty((7, 4), np.float32))
    with pytest.raises(ValueError, match="I must be a numpy array of dtype int64"):
        index.search(xq, 5, I=np.empty((7, 5), np.int32))
    with pytest.raises(TypeError, match="params must be None or a faiss.SearchParameters"):
        index.search(xq, 5, params="fast")


def test_other_dtypes_and_orders_are_converted(rng):
    index, _ = _native_flat(rng)
    xq = random_data(rng, 6, 8)
    D, I = index.search(xq, 4)
    wide = np.zeros((6, 16), dtype=np.float32)
    wide[:, ::2] = xq  # wide[:, ::2] is a non-contiguous view equal to xq
    for variant in (xq.astype(np.float64), np.asfortranarray(xq), xq.tolist(), wide[:, ::2]):
        D2, I2 = index.search(variant, 4)
        np.testing.assert_array_equal(I2, I)
        np.testing.assert_allclose(D2, D, rtol=1e-6)
    # A strided view (every other row) gives the rows' results.
    D3, I3 = index.search(np.vstack([xq, xq])[::2], 4)
    np.testing.assert_array_equal(I3, np.vstack([I, I])[::2])


def test_add_converts_float64(rng):
    xb = random_data(rng, 10, 8)
    index = faiss_ext.index_factory(8, "BiLSH4x4_t1")
    index.train(xb)
    index.add(xb.astype(np.float64))
    assert index.ntotal == 10
    np.testing.assert_array_equal(index.reconstruct_n(0, 10), xb)


def test_k_larger_than_ntotal_pads_with_minus_one(rng):
    index, xb = _native_flat(rng, n=5)
    D, I = index.search(random_data(rng, 3, 8), 9)
    assert I.shape == (3, 9)
    np.testing.assert_array_equal(I[:, 5:], -1)
    assert sorted(I[0, :5].tolist()) == list(range(5))


def test_empty_query_batch(rng):
    index, _ = _native_flat(rng)
    D, I = index.search(np.zeros((0, 8), dtype=np.float32), 3)
    assert D.shape == (0, 3) and I.shape == (0, 3)


def test_reconstruct_and_reset(rng):
    index, xb = _native_flat(rng, n=20)
    r = index.reconstruct(3)
    assert r.shape == (8,) and r.dtype == np.float32
    np.testing.assert_array_equal(r, xb[3])
    np.testing.assert_array_equal(index.reconstruct_n(5, 10), xb[5:15])
    assert index.reconstruct_n(0, 0).shape == (0, 8)
    index.reset()
    assert index.ntotal == 0
    assert "IndexBiLevelLSH" in repr(index)


def test_concurrent_searches_from_threads(rng):
    # The GIL is released during search: threads run and each gets its answer.
    index, _ = _native_flat(rng, n=2000, d=32)
    queries = [random_data(rng, 50, 32) for _ in range(4)]
    expected = [index.search(q, 10)[1] for q in queries]
    results = [None] * len(queries)

    def work(i):
        results[i] = index.search(queries[i], 10)[1]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(queries))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


# ---- errors ----

def test_wrong_dimension_is_a_value_error(rng):
    index, _ = _native_flat(rng)
    with pytest.raises(ValueError, match=r"3 columns but the index has dimension d=8"):
        index.search(random_data(rng, 4, 3), 2)
    with pytest.raises(ValueError, match="dimension d=8"):
        index.add(random_data(rng, 4, 9))
    assert index.ntotal == 100  # unchanged


def test_not_2d_is_a_value_error(rng):
    index, _ = _native_flat(rng)
    with pytest.raises(ValueError, match=r"2-D array of shape \(n, 8\), got shape \(8,\)"):
        index.search(np.zeros(8, dtype=np.float32), 1)
    with pytest.raises(ValueError, match="2-D"):
        index.add(np.zeros((2, 2, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="None"):
        index.add(None)
    with pytest.raises(ValueError, match="convertible"):
        index.add([["a", "b"]])


def test_bad_k_is_a_value_error(rng):
    index, _ = _native_flat(rng)
    for k in (0, -3):
        with pytest.raises(ValueError, match="k must be > 0"):
            index.search(random_data(rng, 2, 8), k)


def test_reconstruct_out_of_range_is_an_index_error(rng):
    index, _ = _native_flat(rng, n=10)
    with pytest.raises(IndexError, match=r"key 10 out of range \(ntotal 10\)"):
        index.reconstruct(10)
    with pytest.raises(IndexError):
        index.reconstruct(-1)
    with pytest.raises(IndexError, match="out of range"):
        index.reconstruct_n(5, 6)


def test_add_with_ids_checks_ids(rng):
    index = faiss_ext.index_factory(8, "BiLSH4x4_t1")
    index.train(random_data(rng, 50, 8))
    with pytest.raises(ValueError, match=r"ids must have shape \(4,\)"):
        index.add_with_ids(random_data(rng, 4, 8), np.arange(3))


def test_cpp_errors_are_runtime_errors_with_the_message(tmp_path):
    with pytest.raises(RuntimeError, match="Bogus42"):
        faiss_ext.index_factory(8, "Bogus42")
    missing = str(tmp_path / "missing.index")
    with pytest.raises(RuntimeError, match="missing.index"):
        faiss_ext.read_index(missing)
    with pytest.raises(RuntimeError, match="add_with_ids"):
        # IndexBiLevelLSH has no add_with_ids: FAISS's own message comes through.
        index = faiss_ext.index_factory(8, "BiLSH4x4_t1")
        index.train(np.random.default_rng(0).random((50, 8), dtype=np.float32))
        index.add_with_ids(np.zeros((1, 8), np.float32), np.zeros(1, np.int64))


def test_corrupt_and_truncated_data_raise(rng, tmp_path):
    index, _ = _native_flat(rng)
    data = faiss_ext.serialize_index(index)
    with pytest.raises(RuntimeError) as e:
        faiss_ext.deserialize_index(data[: len(data) // 2])
    assert len(str(e.value)) > 10
    with pytest.raises(RuntimeError):
        faiss_ext.deserialize_index(b"\x00" * 64)
    with pytest.raises(RuntimeError):
        faiss_ext.deserialize_index(b"")
    bad = tmp_path / "bad.index"
    bad.write_bytes(data[:40].tobytes())
    with pytest.raises(RuntimeError):
        faiss_ext.read_index(bad)


@pytest.mark.skipif(faiss_ext.get_num_gpus() > 0, reason="checks the no-GPU error path")
def test_gpu_index_without_gpu_raises(rng):
    with pytest.raises(RuntimeError) as e:
        res = faiss_ext.StandardGpuResources()
        faiss_ext.GpuIndexQuickSelectFlat(res, 8, faiss_ext.FlatMetric.L2)
    assert str(e.value)
    with pytest.raises(RuntimeError, match="GPU"):
        res = faiss_ext.StandardGpuResources()
        faiss_ext.index_cpu_to_gpu(res, 0, faiss.IndexFlatL2(8))
