"""CPU tests of Bi-level LSH from Python: the "BiLSH<L>x<M>[_t<depth>][_w<width>]"
factory strings (the CPU twin faiss_ext.IndexBiLevelLSH), train / add / search
shapes and dtypes, recall against exact brute force (faiss.IndexFlatL2) on a
seeded clustered set, rising with nprobe, candidates, saving and loading
(identical results), the option objects, and errors as Python exceptions."""

import threading

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import clustered, recall_at

D_DIM = 32


@pytest.fixture(scope="module")
def data():
    """Base set (10k), queries (200) and their exact 10-NN (faiss.IndexFlatL2)."""
    from conftest import SEED
    xb = clustered(SEED, 10000, D_DIM)
    xq = clustered(SEED + 1, 200, D_DIM)
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb)
    _, gt = ref.search(xq, 10)
    return xb, xq, gt


@pytest.fixture(scope="module")
def built(data):
    """A factory twin "BiLSH10x8_t3_w1.5" trained on and holding the base set
    (buckets 1.5 x the 10th-neighbour distance: narrow, so that multi-probe
    matters)."""
    xb, _, _ = data
    index = faiss_ext.index_factory(D_DIM, "BiLSH10x8_t3_w1.5")
    index.train(xb)
    index.add(xb)
    return index


# ---- factory ----

@pytest.mark.parametrize("description,L,M,depth,width", [
    ("BiLSH10x8", 10, 8, 4, 4.0),
    ("BiLSH10x8_t6_w0.75", 10, 8, 6, 0.75),
    ("BiLSH10x8_w0.75_t6", 10, 8, 6, 0.75),
    ("BiLSH1x1_t0", 1, 1, 0, 4.0),
    ("BiLSH64x32_t14_w3", 64, 32, 14, 3.0),
])
def test_factory_gives_untrained_twin(description, L, M, depth, width):
    index = faiss_ext.index_factory(24, description)
    assert isinstance(index, faiss_ext.IndexBiLevelLSH)
    assert isinstance(index, faiss.Index)
    assert index.d == 24 and index.ntotal == 0 and not index.is_trained
    assert index.metric_type == faiss.METRIC_L2
    cfg = index.config
    assert (cfg.n_tables, cfg.n_projections, cfg.tree_depth) == (L, M, depth)
    assert cfg.bucket_width == pytest.approx(width)
    assert (index.n_tables, index.n_projections, index.tree_depth) == (L, M, depth)
    defaults = faiss_ext.BiLevelLSHConfig()
    assert (cfg.seed, cfg.mean_rule_c, cfg.cuckoo_sub_tables) == \
        (defaults.seed, defaults.mean_rule_c, defaults.cuckoo_sub_tables)


def test_factory_defaults_are_the_config_defaults():
    index = faiss_ext.index_factory(8, "BiLSH10x8")
    assert index.config == faiss_ext.BiLevelLSHConfig()
    assert index.config == faiss_ext.IndexBiLevelLSH(8).config


def test_factory_prefixes(data):
    xb, xq, _ = data
    idmap = faiss_ext.index_factory(D_DIM, "IDMap,BiLSH8x6_t3")
    assert isinstance(idmap, faiss.IndexIDMap)
    assert isinstance(faiss_ext.downcast_index(idmap.index), faiss_ext.IndexBiLevelLSH)
    idmap.train(xb[:2000])
    ids = np.arange(2000, dtype=np.int64) * 3 + 7
    idmap.add_with_ids(xb[:2000], ids)
    D, I = idmap.search(xb[:10], 1)
    np.testing.assert_array_equal(I[:, 0], ids[:10])
    assert np.all(D[:, 0] < 1e-3)

    pca = faiss_ext.index_factory(128, "PCA64,BiLSH16x8")
    assert isinstance(pca, faiss.IndexPreTransform) and not pca.is_trained


@pytest.mark.parametrize("description,message", [
    ("BiLSH0x8", "hash tables L"),
    ("BiLSH65x8", r"\[1, 64\]"),
    ("BiLSH10x0", "projections per table M"),
    ("BiLSH10x33", r"\[1, 32\]"),
    ("BiLSH10", "<L>x<M>"),
    ("BiLSH10x8_t15", r"\[0, 14\]"),
    ("BiLSH10x8_w0", "bucket width"),
    ("BiLSH10x8_w-0.5", "bucket width"),
    ("BiLSH10x8_winf", "bucket width"),
    ("BiLSH10x8_wnan", "bucket width"),
    ("BiLSH10x8_z2", "unknown suffix '_z2'"),
    ("BiLSH10x8_t2_t3", "given twice"),
    ("IDMap,BiLSH0x8", "hash tables L"),
])
def test_factory_bad_strings(description, message):
    with pytest.raises(RuntimeError, match=message) as e:
        faiss_ext.index_factory(8, description)
    assert description.split(",")[-1] in str(e.value)


def test_factory_only_l2():
    with pytest.raises(RuntimeError, match="METRIC_L2"):
        faiss_ext.index_factory(8, "BiLSH10x8", faiss.METRIC_INNER_PRODUCT)
    with pytest.raises(RuntimeError, match="METRIC_L2"):
        faiss_ext.IndexBiLevelLSH(8, metric=faiss.METRIC_INNER_PRODUCT)


# ---- train / add / search ----

def test_shapes_dtypes_and_self_queries(built, data):
    xb, xq, _ = data
    index = built
    assert index.is_trained and index.ntotal == xb.shape[0]
    assert index.n_groups == 8
    sizes = index.group_sizes()
    assert sizes.dtype == np.int64 and sizes.shape == (8,) and sizes.sum() == xb.shape[0]
    D, I = index.search(xq, 10)
    assert D.shape == (200, 10) and I.shape == (200, 10)
    assert D.dtype == np.float32 and I.dtype == np.int64
    valid = I >= 0
    assert np.all(np.diff(np.where(valid, D, np.inf), axis=1) >= 0)  # sorted
    # reported distances are the true squared L2 distances
    rows, cols = np.nonzero(valid)
    true = ((xq[rows] - xb[I[rows, cols]]) ** 2).sum(1)
    np.testing.assert_allclose(D[rows, cols], true, rtol=1e-4, atol=1e-3)
    # a stored vector finds itself
    D, I = index.search(xb[:50], 1)
    np.testing.assert_array_equal(I[:, 0], np.arange(50))
    # float64 and non-contiguous input are converted
    D2, I2 = index.search(np.asfortranarray(xq.astype(np.float64)), 10)
    D1, I1 = index.search(xq, 10)
    np.testing.assert_array_equal(I1, I2)
    # nq = 0
    D, I = index.search(np.zeros((0, D_DIM), np.float32), 5)
    assert D.shape == (0, 5) and I.shape == (0, 5)
    np.testing.assert_array_equal(index.reconstruct(17), xb[17])
    np.testing.assert_array_equal(index.get_vectors(), xb)


def test_candidates_match_search(built, data):
    _, xq, _ = data
    params = faiss_ext.SearchParametersBiLevelLSH(nprobe=4)
    lims, ids = built.get_candidates(xq, 10, params)
    assert lims.dtype == np.int64 and ids.dtype == np.int64
    assert lims.shape == (201,) and lims[0] == 0 and lims[-1] == ids.shape[0]
    assert np.all(np.diff(lims) >= 0)
    D, I = built.search(xq, 10, params)
    for i in range(xq.shape[0]):
        cand = ids[lims[i]:lims[i + 1]]
        assert np.all(np.diff(cand) > 0)  # distinct, ascending
        found = I[i][I[i] >= 0]
        assert np.all(np.isin(found, cand))
        # the search ranks exactly these: its results are their k nearest
        n_expected = min(10, cand.size)
        assert found.size == n_expected
    lims0, ids0 = built.get_candidates(np.zeros((0, D_DIM), np.float32), 10)
    assert lims0.tolist() == [0] and ids0.size == 0


def test_recall_against_brute_force_rises_with_nprobe(built, data):
    _, xq, gt = data
    # pure multi-probe (no Morton widening past one item): nprobe decides
    recalls = []
    for nprobe in (1, 4, 16, 64):
        p = faiss_ext.SearchParametersBiLevelLSH(nprobe=nprobe, min_candidates=1)
        _, I = built.search(xq, 10, p)
        recalls.append(recall_at(I, gt))
    # measured (seed 1234): 0.26, 0.30, 0.45, 0.62
    assert all(b >= a for a, b in zip(recalls, recalls[1:])), recalls
    assert recalls[-1] >= recalls[0] + 0.2, recalls
    assert recalls[-1] >= 0.6, recalls

    # default search (widening to k items per table, the 4 nearest groups
    # within margin 0.05): measured 0.81
    _, I = built.search(xq, 10)
    assert recall_at(I, gt) >= 0.6
    # one RP-tree group against two: measured 0.71 and 0.87
    _, I1 = built.search(xq, 10, faiss_ext.SearchParametersBiLevelLSH(group_probes=1))
    _, I2 = built.search(xq, 10, faiss_ext.SearchParametersBiLevelLSH(group_probes=2))
    assert recall_at(I2, gt) >= recall_at(I1, gt) + 0.05


def test_fewer_tables_fewer_candidates(built, data):
    _, xq, _ = data
    l_all, _ = built.get_candidates(xq, 10)
    l_two, _ = built.get_candidates(xq, 10, faiss_ext.SearchParametersBiLevelLSH(tables=2))
    assert l_two[-1] < l_all[-1]


def test_deterministic_for_a_seed(data):
    xb, xq, _ = data
    a = faiss_ext.index_factory(D_DIM, "BiLSH6x6_t2")
    b = faiss_ext.IndexBiLevelLSH(D_DIM, faiss_ext.BiLevelLSHConfig(
        n_tables=6, n_projections=6, tree_depth=2))
    for index in (a, b):
        index.train(xb[:3000])
        index.add(xb[:3000])
    Da, Ia = a.search(xq, 5)
    Db, Ib = b.search(xq, 5)
    np.testing.assert_array_equal(Ia, Ib)
    np.testing.assert_array_equal(Da, Db)
    for key, value in a.get_model().items():
        np.testing.assert_array_equal(value, b.get_model()[key])


def test_remove_ids_answers_as_an_index_of_the_kept_vectors(data):
    xb, xq, _ = data
    index = faiss_ext.index_factory(D_DIM, "BiLSH6x6_t2")
    index.train(xb[:3000])
    index.add(xb[:3000])
    assert index.remove_ids(faiss.IDSelectorRange(500, 1500)) == 1000
    assert index.ntotal == 2000
    kept = np.concatenate([xb[:500], xb[1500:3000]])
    np.testing.assert_array_equal(index.reconstruct_n(0, 2000), kept)
    fresh = faiss_ext.index_factory(D_DIM, "BiLSH6x6_t2")
    fresh.train(xb[:3000])        # the same seed and data: the same model
    fresh.add(kept)
    np.testing.assert_array_equal(index.search(xq, 5)[1], fresh.search(xq, 5)[1])


def test_reset_keeps_training(data):
    xb, xq, _ = data
    index = faiss_ext.index_factory(D_DIM, "BiLSH4x4_t2")
    index.train(xb[:1000])
    index.add(xb[:1000])
    index.reset()
    assert index.ntotal == 0 and index.is_trained
    D, I = index.search(xq[:3], 4)
    assert np.all(I == -1) and np.all(np.isinf(D))
    index.add(xb[:500])
    assert index.ntotal == 500


def test_search_releases_the_gil(built, data):
    """Searches from several threads at once give the single-thread results."""
    _, xq, _ = data
    expected = built.search(xq, 10)
    results = [None] * 4

    def work(i):
        results[i] = built.search(xq, 10)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for D, I in results:
        np.testing.assert_array_equal(I, expected[1])
        np.testing.assert_array_equal(D, expected[0])


# ---- saving and loading ----

def test_save_load_round_trip(built, data, tmp_path):
    _, xq, _ = data
    params = faiss_ext.SearchParametersBiLevelLSH(nprobe=8, min_candidates=20)
    D, I = built.search(xq, 10, params)
    lims, ids = built.get_candidates(xq, 10, params)

    path = tmp_path / "lsh.index"
    faiss_ext.write_index(built, path)
    data_bytes = faiss_ext.serialize_index(built)
    assert bytes(data_bytes[:4]) == b"IxBL"
    for back in (faiss_ext.read_index(path), faiss_ext.read_index(str(path)),
                 faiss_ext.deserialize_index(data_bytes),
                 faiss_ext.deserialize_index(bytes(data_bytes))):
        assert isinstance(back, faiss_ext.IndexBiLevelLSH)
        assert back.ntotal == built.ntotal and back.is_trained
        assert back.config == built.config
        D2, I2 = back.search(xq, 10, params)
        np.testing.assert_array_equal(I2, I)
        np.testing.assert_array_equal(D2, D)
        lims2, ids2 = back.get_candidates(xq, 10, params)
        np.testing.assert_array_equal(lims2, lims)
        np.testing.assert_array_equal(ids2, ids)
        np.testing.assert_array_equal(back.group_sizes(), built.group_sizes())
    # written again, byte for byte
    np.testing.assert_array_equal(faiss_ext.serialize_index(faiss_ext.deserialize_index(
        data_bytes)), data_bytes)


def test_untrained_and_wrapped_round_trip(data):
    xb, xq, _ = data
    fresh = faiss_ext.index_factory(D_DIM, "BiLSH5x7_t2_w1.25")
    back = faiss_ext.deserialize_index(faiss_ext.serialize_index(fresh))
    assert isinstance(back, faiss_ext.IndexBiLevelLSH) and not back.is_trained
    assert back.config == fresh.config and back.get_model() == {}

    idmap = faiss_ext.index_factory(D_DIM, "IDMap,BiLSH4x6_t2")
    idmap.train(xb[:2000])
    idmap.add_with_ids(xb[:2000], np.arange(2000, dtype=np.int64) + 100)
    back = faiss_ext.deserialize_index(faiss_ext.serialize_index(idmap))
    assert isinstance(back, faiss.IndexIDMap)
    assert isinstance(faiss_ext.downcast_index(back.index), faiss_ext.IndexBiLevelLSH)
    for a, b in zip(idmap.search(xq, 5), back.search(xq, 5)):
        np.testing.assert_array_equal(a, b)


def test_faiss_cannot_write_the_twin(built):
    # our own type: FAISS 1.7.3's writer does not know it (no hook for
    # foreign types); faiss_ext.write_index writes it
    assert isinstance(built, faiss.Index)
    with pytest.raises(RuntimeError, match="serialize"):
        faiss.write_index(built, "/tmp/never-written.index")
    # the stored vectors as a FAISS index: exact search over the same ids
    flat = built.to_index_flat()
    assert isinstance(flat, faiss.IndexFlatL2) and flat.ntotal == built.ntotal
    np.testing.assert_array_equal(flat.reconstruct(5), built.reconstruct(5))


def test_corrupt_bytes_raise(built):
    data_bytes = np.array(faiss_ext.serialize_index(built))
    with pytest.raises(RuntimeError, match="truncated"):
        faiss_ext.deserialize_index(data_bytes[:1000])
    bad = data_bytes.copy()
    bad[4:8] = np.frombuffer(np.int32(7).tobytes(), dtype=np.uint8)  # version
    with pytest.raises(RuntimeError, match="version"):
        faiss_ext.deserialize_index(bad)
    bad = data_bytes.copy()
    bad[45:49] = np.frombuffer(np.int32(0).tobytes(), dtype=np.uint8)  # nTables
    with pytest.raises(RuntimeError, match="nTables"):
        faiss_ext.deserialize_index(bad)


# ---- option objects ----

def test_config_defaults_aliases_and_checks():
    c = faiss_ext.BiLevelLSHConfig()
    assert (c.tree_depth, c.n_tables, c.n_projections, c.diameter_iterations,
            c.cuckoo_sub_tables, c.seed) == (4, 10, 8, 8, 4, 1234)
    assert c.bucket_width == pytest.approx(4.0) and c.mean_rule_c == pytest.approx(10)
    assert c.width_rule == faiss_ext.BiLevelWidthRule.NEIGHBOUR_DISTANCE
    assert (c.width_neighbours, c.default_nprobe, c.default_group_probes,
            c.default_min_candidates) == (10, 1, 4, 0)
    assert c.default_group_margin == pytest.approx(0.05) and c.autotune_recall == 0
    assert c.cuckoo_max_load == pytest.approx(0.8)
    c.nTables = 12
    c.tree_depth = 6
    assert c.n_tables == 12 and c.treeDepth == 6
    assert "n_tables=12" in repr(c)
    c2 = faiss_ext.BiLevelLSHConfig(n_tables=12, tree_depth=6)
    assert c2 == c


@pytest.mark.parametrize("field,value", [
    ("tree_depth", 15), ("tree_depth", -1), ("n_tables", 0), ("n_tables", 65),
    ("n_projections", 0), ("n_projections", 33), ("bucket_width", 0.0),
    ("bucket_width", float("nan")), ("mean_rule_c", -1.0), ("diameter_iterations", 0),
    ("cuckoo_sub_tables", 1), ("cuckoo_sub_tables", 9), ("cuckoo_max_load", 0.99),
])
def test_config_checks_values(field, value):
    c = faiss_ext.BiLevelLSHConfig()
    with pytest.raises(ValueError):
        setattr(c, field, value)
    assert c == faiss_ext.BiLevelLSHConfig()  # unchanged
    with pytest.raises(ValueError):
        faiss_ext.BiLevelLSHConfig(**{field: value})


def test_search_parameters():
    p = faiss_ext.SearchParametersBiLevelLSH()
    assert isinstance(p, faiss.SearchParameters)
    assert (p.nprobe, p.min_candidates, p.tables, p.group_probes) == (1, 0, 0, 1)
    assert p.short_list == faiss_ext.BiLevelShortList.AUTO
    p = faiss_ext.SearchParametersBiLevelLSH(nprobe=8, min_candidates=100, tables=3,
                                             group_probes=2,
                                             short_list=faiss_ext.BiLevelShortList.WORK_QUEUE)
    assert (p.nprobe, p.minCandidates, p.tables, p.groupProbes) == (8, 100, 3, 2)
    assert p.shortList == faiss_ext.BiLevelShortList.WorkQueue
    for field, value in (("nprobe", 0), ("nprobe", 129), ("min_candidates", -1),
                         ("tables", -1), ("group_probes", 0), ("group_probes", 17)):
        with pytest.raises(ValueError):
            setattr(p, field, value)


def test_gpu_config_defaults_and_checks():
    c = faiss_ext.GpuIndexBiLevelLSHConfig()
    assert isinstance(c, faiss_ext.GpuIndexConfig)
    assert (c.device, c.heap_max_k, c.heap_max_dim, c.heap_max_candidates, c.work_queue_bytes) == \
        (0, 1024, 16, 256, 1 << 30)
    c = faiss_ext.GpuIndexBiLevelLSHConfig(device=1, heap_max_k=64, heap_max_candidates=1000,
                                           work_queue_bytes=1 << 20)
    assert (c.device, c.heapMaxK, c.heapMaxCandidates, c.workQueueBytes) == \
        (1, 64, 1000, 1 << 20)
    c.heap_max_k = 0  # never the heap
    assert "heap_max_k=0" in repr(c)
    for field, value in (("heap_max_k", -1), ("heap_max_k", 1025),
                         ("heap_max_candidates", -1.0), ("work_queue_bytes", 0),
                         ("work_queue_bytes", (1 << 20) - 1)):
        with pytest.raises(ValueError):
            setattr(c, field, value)


# ---- errors ----

def test_errors_are_python_exceptions(data):
    xb, xq, _ = data
    index = faiss_ext.index_factory(D_DIM, "BiLSH4x4_t3")
    with pytest.raises(RuntimeError, match="train"):
        index.add(xb[:10])
    with pytest.raises(RuntimeError, match="not trained"):
        index.search(xq, 5)
    with pytest.raises(RuntimeError, match="2\\^treeDepth"):
        index.train(xb[:7])
    bad = xb[:100].copy()
    bad[3, 4] = np.nan
    with pytest.raises(RuntimeError, match="finite"):
        index.train(bad)
    assert not index.is_trained
    index.train(xb[:1000])
    with pytest.raises(ValueError, match="dimension"):
        index.add(xb[:10, :16])
    with pytest.raises(RuntimeError, match="finite"):
        index.add(bad)
    assert index.ntotal == 0  # unchanged
    index.add(xb[:1000])
    with pytest.raises(ValueError, match="k must be > 0"):
        index.search(xq, 0)
    with pytest.raises(ValueError, match="k must be > 0"):
        index.get_candidates(xq, 0)
    # nprobe past 1 + 2M + 2M(M-1) for M = 4 (33), tables past L
    with pytest.raises(RuntimeError, match="nprobe"):
        index.search(xq, 5, faiss_ext.SearchParametersBiLevelLSH(nprobe=100))
    with pytest.raises(RuntimeError, match="tables"):
        index.search(xq, 5, faiss_ext.SearchParametersBiLevelLSH(tables=5))
    with pytest.raises(ValueError):
        faiss_ext.IndexBiLevelLSH(0)


@pytest.mark.skipif(faiss_ext.get_num_gpus() > 0, reason="checks the no-GPU error path")
def test_gpu_lsh_without_gpu_raises():
    res = faiss_ext.StandardGpuResources()
    with pytest.raises(RuntimeError, match="GPU"):
        faiss_ext.GpuIndexBiLevelLSH(res, 8)
    twin = faiss_ext.index_factory(8, "BiLSH4x4_t1")
    with pytest.raises(RuntimeError, match="GPU"):
        faiss_ext.index_cpu_to_gpu(res, 0, twin)
    with pytest.raises(RuntimeError, match="GPU"):
        faiss_ext.GpuIndexBiLevelLSH(res, twin)


def test_lsh_docstrings():
    for f in (faiss_ext.IndexBiLevelLSH, faiss_ext.IndexBiLevelLSH.get_candidates,
              faiss_ext.IndexBiLevelLSH.to_index_flat, faiss_ext.GpuIndexBiLevelLSH,
              faiss_ext.GpuIndexBiLevelLSH.copy_to, faiss_ext.BiLevelLSHConfig,
              faiss_ext.SearchParametersBiLevelLSH, faiss_ext.GpuIndexBiLevelLSHConfig):
        assert f.__doc__ and f.__doc__.strip()


# ---- parameters from the data, group margin, autotuner (issue 22) ----

def _split_clustered(n, nq, d, seed):
    """n base rows and nq queries of one clustered distribution."""
    x = clustered(seed, n + nq, d)
    return np.ascontiguousarray(x[:n]), np.ascontiguousarray(x[n:])


def test_width_rule_and_defaults_round_trip():
    c = faiss_ext.BiLevelLSHConfig()
    c.width_rule = faiss_ext.BiLevelWidthRule.RMS_RADIUS
    c.default_nprobe = 6
    c.default_group_margin = 0.1
    assert "width_rule=" in repr(c) and "default_nprobe=6" in repr(c)
    for field, bad in (("width_neighbours", 0), ("default_nprobe", 0),
                       ("default_group_probes", 17), ("default_group_margin", -1.0),
                       ("autotune_recall", 1.5)):
        with pytest.raises(ValueError):
            setattr(c, field, bad)
    with pytest.raises(ValueError):
        faiss_ext.SearchParametersBiLevelLSH(group_margin=-0.5)
    p = faiss_ext.SearchParametersBiLevelLSH(group_probes=4, group_margin=0.05)
    assert p.groupMargin == pytest.approx(0.05) and "group_margin=0.05" in repr(p)


def test_group_margin_between_one_group_and_all():
    xb, xq = _split_clustered(8000, 100, 16, 77)
    index = faiss_ext.index_factory(16, "BiLSH10x8_t4")
    index.train(xb)
    index.add(xb)
    counts = []
    for gp, margin in ((1, 0.0), (8, 0.05), (8, 0.0)):
        lims, _ = index.get_candidates(
            xq, 10, faiss_ext.SearchParametersBiLevelLSH(group_probes=gp, group_margin=margin))
        counts.append(int(lims[-1]))
    assert counts[0] < counts[1] < counts[2], counts


def test_autotune_reports_recall_that_holds_on_other_queries():
    d = 24
    x = clustered(91, 12000 + 600 + 600, d)
    xb, held, other = x[:12000], x[12000:12600], x[12600:]
    opt = faiss_ext.BiLevelAutoTuneOptions()
    opt.target_recall = 0.9
    opt.tree_depths = [0]
    opt.tables_projections = [(10, 8)]
    opt.bucket_widths = [2.0, 3.0, 4.0]
    opt.nprobes = [1, 4, 16]
    r = faiss_ext.autotune_bilevel_lsh(xb, held, opt)
    assert r.reached_target, r.verdict
    assert r.points and r.builds >= 2
    assert "recall@10" in r.verdict
    index = faiss_ext.IndexBiLevelLSH(d, r.config)
    index.train(xb)
    index.add(xb)
    ref = faiss.IndexFlatL2(d)
    ref.add(xb)
    _, gt = ref.search(other, 10)
    _, I = index.search(other, 10)  # the chosen search settings are the defaults
    assert recall_at(I, gt) == pytest.approx(r.recall, abs=0.03)
    with pytest.raises(ValueError):
        faiss_ext.autotune_bilevel_lsh(xb, held[:, :5], opt)
    bad = faiss_ext.BiLevelAutoTuneOptions()
    bad.target_recall = 0.0
    with pytest.raises(RuntimeError):
        faiss_ext.autotune_bilevel_lsh(xb, held, bad)


def test_bilsh_auto_factory_tunes_at_train():
    xb, _ = _split_clustered(3000, 10, 16, 5)
    index = faiss_ext.index_factory(16, "BiLSHauto_r0.9")
    assert index.config.autotune_recall == pytest.approx(0.9)
    index.train(xb)
    assert index.is_trained and "recall@10" in index.autotune_verdict
