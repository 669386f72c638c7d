"""GPU tests of GpuIndexQuickSelectFlat from Python: results equal
faiss.IndexFlat (ties aside) for several k, cosine / Pearson against a
normalised faiss.IndexFlatIP, save / load, and conversion to and from
faiss.IndexFlat. Skipped, with the reason shown, without a GPU."""

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import assert_knn_equal, center_rows, normalize_rows, random_data

pytestmark = pytest.mark.gpu

NB, NQ, D_DIM = 1000, 37, 48
KS = (1, 10, 100, 1000, 1037)  # 1037 > ntotal: rows padded with -1
FM = faiss_ext.FlatMetric


@pytest.fixture(scope="module")
def res():
    """One StandardGpuResources for the module's tests."""
    return faiss_ext.StandardGpuResources()


@pytest.fixture
def data(rng):
    """(xb, xq): NB and NQ random vectors of D_DIM, centred on 0 so that
    inner products have both signs."""
    return random_data(rng, NB, D_DIM) - 0.5, random_data(rng, NQ, D_DIM) - 0.5


def _gpu(res, metric, xb, config=None):
    """A GpuIndexQuickSelectFlat holding xb."""
    index = faiss_ext.GpuIndexQuickSelectFlat(res, xb.shape[1], metric, config)
    index.add(xb)
    return index


@pytest.mark.parametrize("metric,faiss_metric", [
    (FM.L2, faiss.METRIC_L2), (FM.InnerProduct, faiss.METRIC_INNER_PRODUCT)])
def test_equals_faiss_indexflat(res, data, metric, faiss_metric):
    xb, xq = data
    gpu = _gpu(res, metric, xb)
    assert gpu.ntotal == NB and gpu.d == D_DIM and gpu.is_trained
    assert gpu.metric_type == faiss_metric and gpu.get_flat_metric() == metric
    ref = faiss.IndexFlat(D_DIM, faiss_metric)
    ref.add(xb)
    for k in KS:
        D, I = gpu.search(xq, k)
        D_ref, I_ref = ref.search(xq, k)
        assert_knn_equal(D, I, D_ref, I_ref, xq, xb, faiss_metric == faiss.METRIC_L2)


@pytest.mark.parametrize("faiss_metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_faiss_metric_int_is_accepted(res, faiss_metric):
    index = faiss_ext.GpuIndexQuickSelectFlat(res, 8, faiss_metric)
    assert index.metric_type == faiss_metric
    assert index.get_flat_metric() == faiss_ext.from_faiss_metric(faiss_metric)


def test_select_algo_config_and_search_params(res, data):
    xb, xq = data
    config = faiss_ext.GpuIndexQuickSelectFlatConfig(
        device=0, selectAlgo=faiss_ext.SelectAlgo.QuickMultiSelect)
    gpu = _gpu(res, FM.L2, xb, config)
    assert gpu.getConfig().selectAlgo == faiss_ext.SelectAlgo.QuickMultiSelect
    assert gpu.device == 0
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb)
    params = faiss_ext.SearchParametersQuickSelectFlat(faiss_ext.SelectAlgo.QuickMultiSelect)
    D, I = gpu.search(xq, 25, params)
    D_ref, I_ref = ref.search(xq, 25)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, True)


def test_cosine_equals_normalised_ip(res, data):
    xb, xq = data
    gpu = _gpu(res, FM.Cosine, xb)
    assert gpu.metric_type == faiss.METRIC_INNER_PRODUCT
    nb, nq = normalize_rows(xb), normalize_rows(xq)
    ref = faiss.IndexFlatIP(D_DIM)
    ref.add(nb)
    for k in KS:
        D, I = gpu.search(xq, k)
        D_ref, I_ref = ref.search(nq, k)
        assert_knn_equal(D, I, D_ref, I_ref, nq, nb, False)


def test_pearson_equals_centred_normalised_ip(res, data):
    xb, xq = data
    gpu = _gpu(res, FM.Pearson, xb)
    pb, pq = normalize_rows(center_rows(xb)), normalize_rows(center_rows(xq))
    ref = faiss.IndexFlatIP(D_DIM)
    ref.add(pb)
    for k in (1, 50, NB + 3):
        D, I = gpu.search(xq, k)
        D_ref, I_ref = ref.search(pq, k)
        assert_knn_equal(D, I, D_ref, I_ref, pq, pb, False)


def test_numpy_handling_on_gpu(res, data):
    xb, xq = data
    gpu = _gpu(res, FM.L2, xb.astype(np.float64))  # converted to float32
    D, I = gpu.search(xq, 5)
    D2, I2 = gpu.search(np.asfortranarray(xq.astype(np.float64)), 5)
    np.testing.assert_array_equal(I, I2)
    np.testing.assert_array_equal(D, D2)
    D0, I0 = gpu.search(np.zeros((0, D_DIM), np.float32), 5)
    assert D0.shape == (0, 5) and I0.shape == (0, 5)
    with pytest.raises(ValueError, match="dimension d=48"):
        gpu.search(xq[:, :10], 5)
    with pytest.raises(ValueError, match="k must be > 0"):
        gpu.search(xq, 0)
    with pytest.raises(ValueError, match="dimension"):
        gpu.add(xb[:, :3])
    assert gpu.ntotal == NB


def test_reconstruct_and_reset(res, data):
    xb, _ = data
    gpu = _gpu(res, FM.L2, xb)
    np.testing.assert_array_equal(gpu.reconstruct(17), xb[17])
    np.testing.assert_array_equal(gpu.reconstruct_n(100, 20), xb[100:120])
    with pytest.raises(IndexError):
        gpu.reconstruct(NB)
    gpu.reset()
    assert gpu.ntotal == 0
    D, I = gpu.search(xb[:3], 4)
    np.testing.assert_array_equal(I, -1)


def test_small_temp_memory_still_exact(data):
    xb, xq = data
    res = faiss_ext.StandardGpuResources()
    res.setTempMemory(1 << 20)  # 1 MiB: the search tiles itself
    gpu = _gpu(res, FM.L2, xb)
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb)
    D, I = gpu.search(xq, 64)
    D_ref, I_ref = ref.search(xq, 64)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, True)
    assert res.getTempMemoryInUse(0) == 0


# ---- conversion to and from faiss.IndexFlat ----

@pytest.mark.parametrize("faiss_metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_index_cpu_to_gpu_from_faiss_indexflat(res, data, faiss_metric):
    xb, xq = data
    cpu = faiss.IndexFlat(D_DIM, faiss_metric)
    cpu.add(xb)
    gpu = faiss_ext.index_cpu_to_gpu(res, 0, cpu)
    assert isinstance(gpu, faiss_ext.GpuIndexQuickSelectFlat)
    assert gpu.ntotal == NB and gpu.metric_type == faiss_metric
    np.testing.assert_array_equal(gpu.reconstruct_n(0, NB), xb)
    D, I = gpu.search(xq, 10)
    D_ref, I_ref = cpu.search(xq, 10)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, faiss_metric == faiss.METRIC_L2)


@pytest.mark.parametrize("metric", [FM.L2, FM.InnerProduct])
def test_index_gpu_to_cpu_is_a_faiss_indexflat(res, data, tmp_path, metric):
    xb, xq = data
    gpu = _gpu(res, metric, xb)
    cpu = faiss_ext.index_gpu_to_cpu(gpu)
    assert isinstance(cpu, faiss.IndexFlat)
    assert cpu.metric_type == faiss_ext.to_faiss_metric(metric)
    np.testing.assert_array_equal(cpu.reconstruct_n(0, cpu.ntotal), xb)
    fname = str(tmp_path / "flat.index")
    faiss.write_index(cpu, fname)  # a real faiss object
    back = faiss.read_index(fname)
    D, I = gpu.search(xq, 10)
    D_ref, I_ref = back.search(xq, 10)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, metric == FM.L2)


def test_cosine_twin_is_faiss_and_pearson_twin_is_ours(res, data):
    xb, xq = data
    cos = _gpu(res, FM.Cosine, xb)
    cos_cpu = faiss_ext.index_gpu_to_cpu(cos)
    assert isinstance(cos_cpu, faiss.IndexPreTransform)
    D, I = cos.search(xq, 10)
    D_ref, I_ref = cos_cpu.search(xq, 10)
    assert_knn_equal(D, I, D_ref, I_ref, normalize_rows(xq), normalize_rows(xb), False)

    pear = _gpu(res, FM.Pearson, xb)
    pear_cpu = faiss_ext.index_gpu_to_cpu(pear)
    # a faiss.IndexPreTransform holding our RowCenteringTransform
    assert isinstance(pear_cpu, faiss.IndexPreTransform)
    pb, pq = normalize_rows(center_rows(xb)), normalize_rows(center_rows(xq))
    D, I = pear.search(xq, 10)
    D_ref, I_ref = pear_cpu.search(xq, 10)
    assert_knn_equal(D, I, D_ref, I_ref, pq, pb, False)
    # And back to the GPU, still Pearson.
    again = faiss_ext.index_cpu_to_gpu(res, 0, pear_cpu)
    assert again.get_flat_metric() == FM.Pearson
    D2, I2 = again.search(xq, 10)
    assert_knn_equal(D2, I2, D_ref, I_ref, pq, pb, False)


def test_copy_from_and_copy_to(res, data):
    xb, xq = data
    cpu = faiss.IndexFlatIP(D_DIM)
    cpu.add(xb)
    gpu = faiss_ext.GpuIndexQuickSelectFlat(res, D_DIM, FM.L2)
    gpu.copy_from(cpu)  # the metric is taken from the CPU index
    assert gpu.ntotal == NB and gpu.metric_type == faiss.METRIC_INNER_PRODUCT
    new = gpu.copy_to()
    assert isinstance(new, faiss.IndexFlat)
    np.testing.assert_array_equal(new.reconstruct_n(0, NB), xb)
    existing = faiss.IndexFlatL2(3)
    existing.add(np.zeros((2, 3), np.float32))
    out = gpu.copy_to(existing)
    assert out is existing
    assert existing.d == D_DIM and existing.ntotal == NB
    assert existing.metric_type == faiss.METRIC_INNER_PRODUCT
    np.testing.assert_array_equal(existing.reconstruct_n(0, NB), xb)
    D, I = existing.search(xq, 7)
    D_gpu, I_gpu = gpu.search(xq, 7)
    assert_knn_equal(D_gpu, I_gpu, D, I, xq, xb, False)
    with pytest.raises(TypeError, match="faiss.IndexFlat"):
        gpu.copy_to(faiss.IndexHNSWFlat(D_DIM, 8))


def test_copy_from_rejects_other_indexes_unchanged(res, data):
    xb, _ = data
    gpu = _gpu(res, FM.L2, xb)
    with pytest.raises(RuntimeError):
        gpu.copy_from(faiss.IndexHNSWFlat(D_DIM, 8))
    assert gpu.ntotal == NB


# ---- save / load ----

@pytest.mark.parametrize("metric", [FM.L2, FM.InnerProduct, FM.Cosine, FM.Pearson])
def test_save_load_round_trip(res, data, tmp_path, metric):
    xb, xq = data
    gpu = _gpu(res, metric, xb)
    D, I = gpu.search(xq, 20)
    fname = tmp_path / "gpu.index"
    faiss_ext.write_index(gpu, fname)  # written as the CPU twin
    loaded = faiss_ext.read_index(fname)
    assert isinstance(loaded, faiss.Index)
    if metric != FM.Pearson:  # its RowCenteringTransform is ours
        faiss.read_index(str(fname))  # plain FAISS reads it too
    back = faiss_ext.index_cpu_to_gpu(res, 0, loaded)
    assert back.get_flat_metric() == metric and back.ntotal == NB
    D2, I2 = back.search(xq, 20)
    np.testing.assert_array_equal(I2, I)
    np.testing.assert_allclose(D2, D, rtol=1e-5, atol=1e-5)
    # Through bytes as well.
    data_bytes = faiss_ext.serialize_index(gpu)
    back2 = faiss_ext.index_cpu_to_gpu(res, 0, faiss_ext.deserialize_index(data_bytes))
    D3, I3 = back2.search(xq, 20)
    np.testing.assert_array_equal(I3, I)


def _as_sets(lims, D, I):
    """Query i's range results as {label: distance}."""
    return [dict(zip(I[lims[i]:lims[i + 1]].tolist(), D[lims[i]:lims[i + 1]].tolist()))
            for i in range(len(lims) - 1)]


@pytest.mark.parametrize("metric,faiss_metric", [
    (FM.L2, faiss.METRIC_L2), (FM.InnerProduct, faiss.METRIC_INNER_PRODUCT)])
def test_range_search_equals_faiss_indexflat(res, data, metric, faiss_metric):
    xb, xq = data
    gpu = _gpu(res, metric, xb)
    ref = faiss.IndexFlat(D_DIM, faiss_metric)
    ref.add(xb)
    D10, _ = ref.search(xq, 20)
    radius = float(np.median(D10[:, -1]))
    sel = faiss.IDSelectorRange(100, 700)
    filtered = faiss.SearchParameters()
    filtered.sel = sel
    for params in (None, filtered):
        lims, D, I = gpu.range_search(xq, radius, params=params)
        rlims, rD, rI = ref.range_search(xq, radius, params=params)
        ours, theirs = _as_sets(lims, D, I), _as_sets(rlims, rD, rI)
        assert sum(len(s) for s in ours) > NQ * 5
        for a, b in zip(ours, theirs):
            for label in set(a) ^ set(b):  # only pairs at the radius may differ
                assert abs(a.get(label, b.get(label)) - radius) <= 1e-4 * max(1.0, abs(radius))
        if params is not None:
            assert all(100 <= i < 700 for i in I.tolist())
    with pytest.raises(RuntimeError, match="NaN"):
        gpu.range_search(xq, float("nan"))
