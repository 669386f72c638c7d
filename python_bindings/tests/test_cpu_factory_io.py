"""CPU tests: the factory, read / write / serialize round trips with
python3-faiss objects (the very FAISS objects: one FAISS in the process)."""

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import assert_knn_equal, center_rows, normalize_rows, random_data

D_DIM = 16


def _flat_with_data(rng, metric=faiss.METRIC_L2, n=200):
    """A faiss.IndexFlat of D_DIM with n random vectors, and the vectors."""
    xb = random_data(rng, n, D_DIM)
    index = faiss.IndexFlat(D_DIM, metric)
    index.add(xb)
    return index, xb


# ---- factory ----

@pytest.mark.parametrize("metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_factory_qsflat_is_a_faiss_indexflat(rng, metric):
    index = faiss_ext.index_factory(D_DIM, "QSFlat", metric)
    assert isinstance(index, faiss.IndexFlat)
    assert index.d == D_DIM and index.ntotal == 0 and index.metric_type == metric
    xb, xq = random_data(rng, 300, D_DIM), random_data(rng, 10, D_DIM)
    index.add(xb)
    ref = faiss.IndexFlat(D_DIM, metric)
    ref.add(xb)
    D, I = index.search(xq, 7)
    D_ref, I_ref = ref.search(xq, 7)
    assert_knn_equal(D, I, D_ref, I_ref, xq, xb, metric == faiss.METRIC_L2)


def test_factory_accepts_flat_metric_for_l2_and_ip():
    assert faiss_ext.index_factory(4, "QSFlat", faiss_ext.FlatMetric.InnerProduct).metric_type \
        == faiss.METRIC_INNER_PRODUCT
    assert faiss_ext.index_factory(4, "QSFlat", faiss_ext.FlatMetric.L2).metric_type \
        == faiss.METRIC_L2
    with pytest.raises(ValueError, match="QSFlatCosine"):
        faiss_ext.index_factory(4, "QSFlat", faiss_ext.FlatMetric.Cosine)


def test_factory_default_metric_is_l2():
    assert faiss_ext.index_factory(4, "QSFlat").metric_type == faiss.METRIC_L2


def test_factory_idmap_prefix(rng):
    index = faiss_ext.index_factory(D_DIM, "IDMap,QSFlat")
    assert isinstance(index, faiss.IndexIDMap)
    xb = random_data(rng, 50, D_DIM)
    ids = np.arange(1000, 1050, dtype=np.int64)
    index.add_with_ids(xb, ids)
    _, I = index.search(xb[:5], 1)
    np.testing.assert_array_equal(I[:, 0], ids[:5])


def test_factory_delegates_faiss_strings():
    index = faiss_ext.index_factory(D_DIM, "Flat", faiss.METRIC_INNER_PRODUCT)
    assert isinstance(index, faiss.IndexFlat)
    assert index.metric_type == faiss.METRIC_INNER_PRODUCT


def test_factory_pca_prefix_trains(rng):
    index = faiss_ext.index_factory(D_DIM, "PCA4,QSFlat")
    assert isinstance(index, faiss.IndexPreTransform)
    assert not index.is_trained
    xb = random_data(rng, 500, D_DIM)
    index.train(xb)
    index.add(xb)
    assert index.ntotal == 500


def test_factory_cosine_twin_matches_normalised_ip(rng):
    index = faiss_ext.index_factory(D_DIM, "QSFlatCosine")
    assert isinstance(index, faiss.IndexPreTransform)
    assert index.metric_type == faiss.METRIC_INNER_PRODUCT
    xb, xq = random_data(rng, 300, D_DIM) - 0.5, random_data(rng, 12, D_DIM) - 0.5
    index.add(xb)
    ref = faiss.IndexFlatIP(D_DIM)
    ref.add(normalize_rows(xb))
    for k in (1, 10, 300):
        D, I = index.search(xq, k)
        D_ref, I_ref = ref.search(normalize_rows(xq), k)
        assert_knn_equal(D, I, D_ref, I_ref, normalize_rows(xq), normalize_rows(xb), False)


def test_factory_pearson_twin_is_a_faiss_pretransform(rng):
    index = faiss_ext.index_factory(D_DIM, "QSFlatPearson")
    # A faiss.IndexPreTransform holding our RowCenteringTransform: FAISS's
    # Python layer searches it (one FAISS), FAISS's writer does not know it.
    assert isinstance(index, faiss.IndexPreTransform)
    assert index.d == D_DIM and index.metric_type == faiss.METRIC_INNER_PRODUCT
    xb, xq = random_data(rng, 250, D_DIM), random_data(rng, 9, D_DIM)
    index.add(xb)
    assert index.ntotal == 250
    pb, pq = normalize_rows(center_rows(xb)), normalize_rows(center_rows(xq))
    ref = faiss.IndexFlatIP(D_DIM)
    ref.add(pb)
    D, I = index.search(xq, 8)
    D_ref, I_ref = ref.search(pq, 8)
    assert_knn_equal(D, I, D_ref, I_ref, pq, pb, False)
    # Pearson correlation itself, computed independently.
    for q in range(len(xq)):
        r = np.corrcoef(xq[q].astype(np.float64), xb[I[q, 0]].astype(np.float64))[0, 1]
        assert abs(D[q, 0] - r) < 1e-4
    with pytest.raises(RuntimeError, match="serialize"):
        faiss.serialize_index(index)


# ---- serialize / deserialize ----

def test_serialize_faiss_object_is_faiss_bytes(rng):
    index, _ = _flat_with_data(rng)
    ours = faiss_ext.serialize_index(index)
    assert ours.dtype == np.uint8 and ours.ndim == 1
    np.testing.assert_array_equal(ours, faiss.serialize_index(index))


def test_serialize_of_our_factory_twin_is_readable_by_faiss(rng):
    index, xb = _flat_with_data(rng)
    twin = faiss_ext.index_factory(D_DIM, "QSFlat")
    twin.add(xb)
    data = faiss_ext.serialize_index(twin)
    back = faiss.deserialize_index(data)
    assert isinstance(back, faiss.IndexFlat)
    np.testing.assert_array_equal(back.reconstruct_n(0, back.ntotal), xb)
    # Byte for byte what FAISS writes for the same index.
    np.testing.assert_array_equal(data, faiss.serialize_index(index))


@pytest.mark.parametrize("as_type", ["numpy", "bytes", "bytearray", "memoryview"])
def test_deserialize_faiss_bytes(rng, as_type):
    index, xb = _flat_with_data(rng, faiss.METRIC_INNER_PRODUCT)
    data = faiss.serialize_index(index)
    data = {"numpy": data, "bytes": data.tobytes(), "bytearray": bytearray(data.tobytes()),
            "memoryview": memoryview(data.tobytes())}[as_type]
    back = faiss_ext.deserialize_index(data)
    assert isinstance(back, faiss.IndexFlat)
    assert back.metric_type == faiss.METRIC_INNER_PRODUCT
    np.testing.assert_array_equal(back.reconstruct_n(0, back.ntotal), xb)


def test_deserialized_twin_searches_like_faiss(rng):
    index, xb = _flat_with_data(rng)
    native = faiss_ext.deserialize_index(faiss.serialize_index(index))
    assert isinstance(native, faiss.IndexFlat)
    assert native.ntotal == index.ntotal and native.d == index.d
    xq = random_data(rng, 20, D_DIM)
    for k in (1, 5, 200, 250):
        D, I = native.search(xq, k)
        D_ref, I_ref = index.search(xq, k)
        assert_knn_equal(D, I, D_ref, I_ref, xq, xb, True)


def test_pearson_serialize_round_trip(rng):
    index = faiss_ext.index_factory(D_DIM, "QSFlatPearson")
    xb, xq = random_data(rng, 100, D_DIM), random_data(rng, 5, D_DIM)
    index.add(xb)
    data = faiss_ext.serialize_index(index)
    back = faiss_ext.deserialize_index(data)
    assert isinstance(back, faiss.IndexPreTransform) and back.ntotal == 100
    D0, I0 = index.search(xq, 10)
    D1, I1 = back.search(xq, 10)
    np.testing.assert_array_equal(I0, I1)
    np.testing.assert_array_equal(D0, D1)


# ---- files ----

def test_faiss_file_reads_back(rng, tmp_path):
    index, xb = _flat_with_data(rng)
    fname = tmp_path / "faiss.index"
    faiss.write_index(index, str(fname))
    back = faiss_ext.read_index(fname)  # pathlib accepted
    assert isinstance(back, faiss.IndexFlat)
    np.testing.assert_array_equal(back.reconstruct_n(0, back.ntotal), xb)


def test_write_faiss_object_reads_in_faiss(rng, tmp_path):
    index, xb = _flat_with_data(rng, faiss.METRIC_INNER_PRODUCT)
    fname = str(tmp_path / "ours.index")
    faiss_ext.write_index(index, fname)
    back = faiss.read_index(fname)
    assert back.metric_type == faiss.METRIC_INNER_PRODUCT
    np.testing.assert_array_equal(back.reconstruct_n(0, back.ntotal), xb)


def test_write_factory_twin_reads_in_faiss(rng, tmp_path):
    index, xb = _flat_with_data(rng)
    twin = faiss_ext.index_factory(D_DIM, "IDMap2,QSFlat")
    twin.add_with_ids(xb, np.arange(len(xb), dtype=np.int64))
    fname = str(tmp_path / "twin.index")
    faiss_ext.write_index(twin, fname)
    back = faiss.read_index(fname)
    np.testing.assert_array_equal(back.reconstruct_n(0, back.ntotal), xb)


def test_pearson_file_round_trip(rng, tmp_path):
    index = faiss_ext.index_factory(D_DIM, "IDMap,QSFlatPearson")
    xb, xq = random_data(rng, 80, D_DIM), random_data(rng, 4, D_DIM)
    index.add_with_ids(xb, np.arange(80, dtype=np.int64) * 10)
    fname = str(tmp_path / "pearson.index")
    faiss_ext.write_index(index, fname)
    back = faiss_ext.read_index(fname)
    assert isinstance(back, faiss.IndexIDMap)
    D0, I0 = index.search(xq, 6)
    D1, I1 = back.search(xq, 6)
    np.testing.assert_array_equal(I0, I1)
    np.testing.assert_array_equal(D0, D1)
    assert np.all(I1 % 10 == 0)
    with pytest.raises(RuntimeError):
        faiss.read_index(fname)  # plain FAISS does not know RowCenteringTransform


# ---- the very objects: no copies through bytes ----

def test_factory_twin_is_the_object_faiss_wraps(rng):
    from faiss_ext import _faiss_ext_testing as testing
    twin = faiss_ext.index_factory(D_DIM, "QSFlat")
    idmap = faiss.IndexIDMap(twin)
    assert testing.index_address(idmap.index) == testing.index_address(twin)
    xb = random_data(rng, 50, D_DIM)
    idmap.add_with_ids(xb, np.arange(50, dtype=np.int64) + 1000)
    assert twin.ntotal == 50  # FAISS's wrapper added to the factory's object itself
    np.testing.assert_array_equal(twin.reconstruct_n(0, 50), xb)


def test_index_gpu_to_cpu_of_cpu_objects(rng):
    index, xb = _flat_with_data(rng)
    # A faiss object is already on the CPU: a clone comes back.
    clone = faiss_ext.index_gpu_to_cpu(index)
    assert isinstance(clone, faiss.IndexFlat) and clone is not index
    np.testing.assert_array_equal(clone.reconstruct_n(0, clone.ntotal), xb)
    # A CPU index of our factory comes back as a copy that faiss can write.
    twin = faiss_ext.index_factory(D_DIM, "QSFlat")
    twin.add(xb)
    cpu = faiss_ext.index_gpu_to_cpu(twin)
    assert isinstance(cpu, faiss.IndexFlat) and cpu is not twin
    np.testing.assert_array_equal(cpu.reconstruct_n(0, cpu.ntotal), xb)
    faiss.serialize_index(cpu)


def test_functions_reject_other_objects():
    with pytest.raises(TypeError, match="must be a faiss.Index"):
        faiss_ext.index_gpu_to_cpu("not an index")
    with pytest.raises(TypeError, match="must be a faiss.Index"):
        faiss_ext.write_index(object(), "never.index")
    with pytest.raises(TypeError, match="must be a faiss.Index"):
        faiss_ext.downcast_index(None)
    with pytest.raises(TypeError):
        faiss_ext.serialize_index(42)
    with pytest.raises(TypeError, match="uint8"):
        faiss_ext.deserialize_index(np.zeros(10, dtype=np.float32))
    with pytest.raises(TypeError):
        faiss_ext.deserialize_index("a string")


def test_flat_twins_of_different_metrics_do_not_merge():
    """merge_from between an L2 and an inner-product QSFlat twin was accepted
    (both were base faiss::IndexFlat objects); now each metric has its C++
    class (IndexFlatL2, IndexFlatIP), as FAISS's own factory makes them, and
    FAISS refuses the merge."""
    rng = np.random.default_rng(3)
    x = rng.random((50, 8), dtype=np.float32)
    l2 = faiss_ext.index_factory(8, "QSFlat", faiss.METRIC_L2)
    ip = faiss_ext.index_factory(8, "QSFlat", faiss.METRIC_INNER_PRODUCT)
    ip.add(x)
    with pytest.raises(RuntimeError):
        l2.merge_from(ip)
    assert l2.ntotal == 0
    other = faiss_ext.index_factory(8, "QSFlat", faiss.METRIC_L2)
    other.add(x)
    l2.merge_from(other)
    assert l2.ntotal == 50


def test_cosine_and_pearson_strings_refuse_an_explicit_l2_metric():
    """"QSFlatCosine" built with METRIC_L2 dropped the argument silently
    (issue 37): an explicit METRIC_L2 now contradicts the string; left out or
    METRIC_INNER_PRODUCT, the string's metric is built."""
    for description in ("QSFlatCosine", "QSFlatPearson", "IDMap,QSFlatCosine"):
        with pytest.raises(ValueError, match="names its metric"):
            faiss_ext.index_factory(8, description, faiss.METRIC_L2)
        assert faiss_ext.index_factory(8, description) is not None
        assert faiss_ext.index_factory(8, description, faiss.METRIC_INNER_PRODUCT) is not None
    assert faiss_ext.index_factory(8, "QSFlat", faiss.METRIC_L2).metric_type == faiss.METRIC_L2
