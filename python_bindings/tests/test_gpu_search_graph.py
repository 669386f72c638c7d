"""GPU tests of GpuIndexSearchGraph from Python: recall@10 against exact
search (faiss.IndexFlatL2) on clustered data, sorted results, -1 padding when
k > ntotal, the search graph / k-NN graph / entry points as numpy arrays,
search parameters, the CPU twin (faiss.IndexHNSWFlat) with FAISS's search and
I/O on it, copy_from, the cloner and the factory string, and bad input with
the index unchanged. Skipped, with the reason shown, without a GPU."""

import faiss
import numpy as np
import pytest

import faiss_ext
from conftest import SEED
from knn_check import clustered, normalize_rows, recall_at

pytestmark = pytest.mark.gpu

N, D_DIM, NQ, K = 20000, 32, 500, 10
R, KNN = 64, 128  # search-graph and k-NN graph degrees (the defaults)
FM = faiss_ext.FlatMetric
FLT_MAX = np.finfo(np.float32).max


@pytest.fixture(scope="module")
def res():
    """One StandardGpuResources for the module's tests."""
    return faiss_ext.StandardGpuResources()


@pytest.fixture(scope="module")
def xb():
    return clustered(SEED, N, D_DIM)


@pytest.fixture(scope="module")
def xq():
    return clustered(SEED + 1, NQ, D_DIM)


@pytest.fixture(scope="module")
def truth(xb, xq):
    """Exact (D, I) of xq over xb at K by faiss.IndexFlatL2."""
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb)
    return ref.search(xq, K)


@pytest.fixture(scope="module")
def built(res, xb):
    """A GpuIndexSearchGraph holding xb (degrees R / KNN)."""
    cfg = faiss_ext.GpuIndexSearchGraphConfig(graph_degree=R, knn_degree=KNN)
    index = faiss_ext.GpuIndexSearchGraph(res, D_DIM, faiss.METRIC_L2, cfg)
    index.add(xb)
    return index


def check_sorted(D, larger_is_closer=False):
    """Every row of D sorted closest first (padding at the end)."""
    diffs = np.diff(D.astype(np.float64), axis=1)
    if larger_is_closer:
        assert np.all(diffs <= 0), "rows not sorted (largest first)"
    else:
        assert np.all(diffs >= 0), "rows not sorted (smallest first)"


def level_zero_graph(twin):
    """Level 0 of a faiss.IndexHNSWFlat as an (ntotal, degree) int array."""
    h = twin.hnsw
    degree = h.nb_neighbors(0)
    offsets = faiss.vector_to_array(h.offsets).astype(np.int64)
    neighbors = faiss.vector_to_array(h.neighbors)
    return neighbors[offsets[:-1, None] + np.arange(degree)[None, :]]


def exact_distances(xq, xb, I):
    """Squared L2 distances of the (nq, k) ids I (all valid), float64."""
    diff = xq[:, None, :].astype(np.float64) - xb[I].astype(np.float64)
    return (diff ** 2).sum(-1)


# ---- search ----

def test_recall_at_itopk_128(built, xb, xq, truth):
    index = built
    assert index.ntotal == N and index.d == D_DIM and index.graph_degree == R
    assert index.metric_type == faiss.METRIC_L2 and index.get_flat_metric() == FM.L2
    D_ref, I_ref = truth
    params = faiss_ext.SearchParametersSearchGraph(itopk=128)
    D, I = index.search(xq, K, params=params)
    assert D.shape == I.shape == (NQ, K)
    assert D.dtype == np.float32 and I.dtype == np.int64
    r = recall_at(I, I_ref)
    print("GpuIndexSearchGraph recall@10 (itopk 128) = %.4f" % r)
    assert r >= 0.95
    assert np.all((I >= 0) & (I < N))
    for row in I:
        assert len(np.unique(row)) == K, "duplicate ids in a row: %s" % row
    check_sorted(D)
    # the returned distances are the exact FP32 ones (FP32 re-scoring)
    np.testing.assert_allclose(D, exact_distances(xq, xb, I), rtol=1e-4, atol=1e-3)
    # the default parameters, FP32 traversal, a wider search: all sorted, similar recall
    for p in (None, faiss_ext.SearchParametersSearchGraph(fp16=0),
              faiss_ext.SearchParametersSearchGraph(itopk=256, search_width=2,
                                                    min_iterations=4, seed_rounds=2,
                                                    entry_seeds=16)):
        D2, I2 = index.search(xq, K, params=p)
        check_sorted(D2)
        assert recall_at(I2, I_ref) >= 0.9, p


def test_several_blocks_per_query(built, xb, xq, truth):
    """Small batches: several blocks search each query, results merged."""
    D_ref, I_ref = truth
    one = faiss_ext.SearchParametersSearchGraph(itopk=32, blocks_per_query=1)
    eight = faiss_ext.SearchParametersSearchGraph(itopk=32, blocks_per_query=8)
    D1, I1 = built.search(xq, K, params=one)
    D8, I8 = built.search(xq, K, params=eight)
    r1, r8 = recall_at(I1, I_ref), recall_at(I8, I_ref)
    print("itopk 32: recall@10 %.4f with one block per query, %.4f with eight" % (r1, r8))
    assert r8 >= r1 - 0.005
    for row in I8:
        assert len(np.unique(row)) == K, "duplicate ids in a row: %s" % row
    check_sorted(D8)
    np.testing.assert_allclose(D8, exact_distances(xq, xb, I8), rtol=1e-4, atol=1e-3)
    # one query at a time: the automatic choice (16 blocks) is deterministic
    auto = faiss_ext.SearchParametersSearchGraph(itopk=32)
    Da, Ia = built.search(xq[:1], K, params=auto)
    Db, Ib = built.search(xq[:1], K, params=auto)
    np.testing.assert_array_equal(Ia, Ib)
    with pytest.raises(RuntimeError, match="blocksPerQuery"):
        built.search(xq[:1], 512, params=faiss_ext.SearchParametersSearchGraph(
            itopk=512, blocks_per_query=32))


def test_results_sorted_at_large_k(built, xq):
    D, I = built.search(xq[:50], 512)
    assert I.shape == (50, 512)
    assert np.all(I >= 0), "20,000 vectors: no padding at k = 512"
    check_sorted(D)


def test_empty_batch_and_empty_index(res, built, xq):
    D, I = built.search(xq[:0], K)
    assert D.shape == I.shape == (0, K)
    empty = faiss_ext.GpuIndexSearchGraph(res, D_DIM)
    D, I = empty.search(xq[:3], 5)
    np.testing.assert_array_equal(I, -1)
    assert np.all(np.abs(D) >= FLT_MAX)


def test_padding_when_k_exceeds_ntotal(res):
    n, d = 100, 8
    x = np.random.default_rng(SEED).random((n, d), dtype=np.float32)
    cfg = faiss_ext.GpuIndexSearchGraphConfig(graph_degree=8, knn_degree=16)
    index = faiss_ext.GpuIndexSearchGraph(res, d, "L2", cfg)
    index.add(x)
    for k in (150, 512):
        D, I = index.search(x[:20], k)
        assert I.shape == (20, k)
        np.testing.assert_array_equal(I[:, n:], -1)
        assert np.all(np.abs(D[:, n:]) >= FLT_MAX), "padding distances are +-inf / FLT_MAX"
        for i in range(20):
            valid = I[i][I[i] >= 0]
            # -1 only after the results, results distinct and sorted
            assert np.all(I[i, :len(valid)] >= 0)
            assert len(np.unique(valid)) == len(valid)
            check_sorted(D[i:i + 1, :len(valid)])
            assert I[i, 0] == i  # the query is a stored vector
        # 100 nodes, a connected graph, a buffer of 256 or 512: all found
        assert np.mean(I[:, :n] >= 0) >= 0.95


# ---- graphs, entry points, timings ----

def test_graphs_and_entry_points(built, xb):
    index = built
    G = index.get_search_graph()
    assert G.dtype == np.int32 and G.shape == (N, R)
    assert np.all((G >= 0) & (G < N)), "ids out of range or empty slots"
    assert not np.any(G == np.arange(N)[:, None]), "self loops"
    np.testing.assert_array_equal(index.getSearchGraph(), G)

    knn = index.get_knn_graph()
    assert knn.dtype == np.int32 and knn.shape == (N, KNN)
    # the k-NN graph against the exact one (self excluded), first 10 columns
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb)
    _, I = ref.search(xb[:2000], 11)
    exact = np.array([row[row != i][:10] for i, row in enumerate(I)])
    assert recall_at(knn[:2000, :10], exact) >= 0.9

    e = index.get_entry_points()
    assert e.dtype == np.int32 and e.ndim == 1
    assert 0 < len(e) <= index.get_config().entry_points
    assert np.all(np.diff(e) > 0), "sorted, distinct"
    assert e[0] >= 0 and e[-1] < N


def test_build_timings_and_config(built):
    assert built.knn_build_seconds > 0 and built.optimize_seconds >= 0
    assert built.getKnnBuildSeconds() == built.knn_build_seconds
    assert built.getOptimizeSeconds() == built.optimize_seconds
    cfg = built.get_config()
    assert (cfg.graph_degree, cfg.knn_degree) == (R, KNN)
    assert built.device == built.getDevice() == 0


def test_second_add_and_reset(res, xb, xq, truth):
    index = faiss_ext.GpuIndexSearchGraph(res, D_DIM)
    index.add(xb[:N // 2])
    index.add(xb[N // 2:])
    assert index.ntotal == N
    assert index.get_search_graph().shape == (N, index.graph_degree)
    D, I = index.search(xq, K, params=faiss_ext.SearchParametersSearchGraph(itopk=128))
    assert recall_at(I, truth[1]) >= 0.95
    np.testing.assert_array_equal(index.reconstruct(7), xb[7])
    np.testing.assert_array_equal(index.reconstruct_n(10, 3), xb[10:13])
    index.reset()
    assert index.ntotal == 0
    assert index.get_search_graph().shape == (0, index.graph_degree)
    assert index.get_knn_graph().shape[0] == 0
    index.add(xb[:2000])
    assert index.ntotal == 2000


def test_cosine_by_name(res, xb, xq):
    n = 5000
    xn, qn = normalize_rows(xb[:n]), normalize_rows(xq)
    ref = faiss.IndexFlatIP(D_DIM)
    ref.add(xn)
    _, I_ref = ref.search(qn, K)
    index = faiss_ext.GpuIndexSearchGraph(res, D_DIM, "Cosine")
    assert index.get_flat_metric() == FM.Cosine
    assert index.metric_type == faiss.METRIC_INNER_PRODUCT
    index.add(xb[:n] * 3)  # scaled: cosine prepares (normalises) the vectors
    D, I = index.search(xq, K, params=faiss_ext.SearchParametersSearchGraph(itopk=128))
    check_sorted(D, larger_is_closer=True)
    assert recall_at(I, I_ref) >= 0.95
    cpu = faiss_ext.index_gpu_to_cpu(index)  # the twin prepares the queries too
    assert isinstance(cpu, faiss.IndexPreTransform)
    inner = faiss.downcast_index(cpu.index)
    assert isinstance(inner, faiss.IndexHNSWFlat)
    _, Ic = cpu.search(xq, K)
    assert recall_at(Ic, I_ref) >= 0.85


# ---- the CPU twin: faiss.IndexHNSWFlat ----

def test_copy_to_gives_a_faiss_hnsw_faiss_can_search_and_save(built, xb, xq, truth, tmp_path):
    index = built
    twin = index.copy_to()
    assert isinstance(twin, faiss.IndexHNSWFlat)
    assert twin.ntotal == N and twin.d == D_DIM and twin.metric_type == faiss.METRIC_L2
    assert twin.hnsw.nb_neighbors(0) == R
    assert twin.hnsw.efSearch == index.get_config().itopk
    graph = level_zero_graph(twin)
    np.testing.assert_array_equal(graph, index.get_search_graph())
    np.testing.assert_array_equal(twin.reconstruct_n(0, 10), xb[:10])

    # FAISS's own search on our graph, against ours at the same buffer
    _, I_ref = truth
    _, I_gpu = index.search(xq, K)
    D, I = twin.search(xq, K)
    r_gpu, r_cpu = recall_at(I_gpu, I_ref), recall_at(I, I_ref)
    print("recall@10: GPU %.4f, CPU twin (efSearch %d) %.4f" % (r_gpu, twin.hnsw.efSearch, r_cpu))
    assert r_cpu >= r_gpu - 0.05

    # FAISS's I/O on it, and ours
    path = str(tmp_path / "sgraph.index")
    faiss.write_index(twin, path)
    for back in (faiss.read_index(path), faiss_ext.read_index(path)):
        assert isinstance(back, faiss.IndexHNSWFlat)
        np.testing.assert_array_equal(level_zero_graph(back), graph)
        _, I2 = back.search(xq, K)
        np.testing.assert_array_equal(I2, I)

    # the GPU index written directly is written as its twin; copy_to and the cloner agree
    path2 = str(tmp_path / "gpu.index")
    faiss_ext.write_index(index, path2)
    for back in (faiss.read_index(path2), index.copy_to(),
                 faiss_ext.index_gpu_to_cpu(index)):
        assert isinstance(back, faiss.IndexHNSWFlat)
        np.testing.assert_array_equal(level_zero_graph(back), graph)


def test_copy_to_an_existing_index(built, xq):
    index = built
    target = faiss.IndexHNSWFlat(D_DIM, 8)
    out = index.copy_to(target)
    assert out is target
    assert target.ntotal == N and target.hnsw.nb_neighbors(0) == R
    np.testing.assert_array_equal(level_zero_graph(target), index.get_search_graph())
    _, I = target.search(xq[:20], K)
    _, I_new = index.copy_to().search(xq[:20], K)
    np.testing.assert_array_equal(I, I_new)
    with pytest.raises(ValueError, match="d="):
        index.copy_to(faiss.IndexHNSWFlat(D_DIM + 1, R // 2))
    with pytest.raises(TypeError):
        index.copy_to(faiss.IndexFlatL2(D_DIM))


def test_copy_from(res, built, xb, xq, truth):
    index = built
    twin = index.copy_to()
    other = faiss_ext.GpuIndexSearchGraph(res, D_DIM)
    assert other.graph_degree == R
    other.copy_from(twin)
    assert other.ntotal == N
    np.testing.assert_array_equal(other.get_search_graph(), index.get_search_graph())
    params = faiss_ext.SearchParametersSearchGraph(itopk=128)
    _, I = other.search(xq, K, params=params)
    assert recall_at(I, truth[1]) >= 0.95
    with pytest.raises(TypeError):
        other.copy_from(faiss.IndexFlatL2(D_DIM))
    with pytest.raises(RuntimeError):
        other.copy_from(faiss.IndexHNSWFlat(D_DIM + 1, R // 2))
    with pytest.raises(RuntimeError):  # level-0 degree 32, not ours
        small = faiss.IndexHNSWFlat(D_DIM, 16)
        small.add(xb[:500])
        other.copy_from(small)
    assert other.ntotal == N  # unchanged
    np.testing.assert_array_equal(other.get_search_graph(), index.get_search_graph())


def test_copy_from_a_graph_faiss_built(res, xb, xq, truth):
    cpu = faiss.IndexHNSWFlat(D_DIM, 16)  # level 0: 32 neighbours
    cpu.add(xb[:5000])
    cfg = faiss_ext.GpuIndexSearchGraphConfig(graph_degree=32, knn_degree=64)
    index = faiss_ext.GpuIndexSearchGraph(res, D_DIM, FM.L2, cfg)
    index.copy_from(cpu)
    assert index.ntotal == 5000
    np.testing.assert_array_equal(index.get_search_graph(), level_zero_graph(cpu))
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb[:5000])
    _, I_ref = ref.search(xq, K)
    _, I = index.search(xq, K, params=faiss_ext.SearchParametersSearchGraph(itopk=128))
    assert recall_at(I, I_ref) >= 0.95


def test_factory_and_cloner(res, xb, xq, truth):
    twin = faiss_ext.index_factory(D_DIM, "SGraph32")
    gpu = faiss_ext.index_cpu_to_gpu(res, 0, twin)
    assert isinstance(gpu, faiss_ext.GpuIndexSearchGraph)
    assert gpu.graph_degree == 32
    gpu.add(xb)
    _, I = gpu.search(xq, K, params=faiss_ext.SearchParametersSearchGraph(itopk=128))
    assert recall_at(I, truth[1]) >= 0.9
    cpu = faiss_ext.index_gpu_to_cpu(gpu)
    assert isinstance(cpu, faiss.IndexHNSWFlat)
    assert cpu.hnsw.nb_neighbors(0) == 32
    np.testing.assert_array_equal(level_zero_graph(cpu), gpu.get_search_graph())
    again = faiss_ext.index_cpu_to_gpu(res, 0, cpu)
    assert isinstance(again, faiss_ext.GpuIndexSearchGraph)
    np.testing.assert_array_equal(again.get_search_graph(), gpu.get_search_graph())


# ---- bad input ----

@pytest.mark.parametrize("kwargs", [
    dict(graph_degree=64, knn_degree=32),       # knn_degree below graph_degree
    dict(graph_degree=64, search_width=31),     # search_width x graph_degree > 1024
])
def test_bad_config_combinations(res, kwargs):
    with pytest.raises(RuntimeError):
        faiss_ext.GpuIndexSearchGraph(res, D_DIM, FM.L2,
                                      faiss_ext.GpuIndexSearchGraphConfig(**kwargs))


@pytest.mark.parametrize("d", [0, -4])
def test_bad_dimension(res, d):
    with pytest.raises(RuntimeError):
        faiss_ext.GpuIndexSearchGraph(res, d)


def test_bad_input_leaves_the_index_unchanged(res, built, xb, xq):
    index = built
    before = index.get_search_graph()
    P = faiss_ext.SearchParametersSearchGraph
    with pytest.raises(RuntimeError, match="512"):
        index.search(xq[:3], 513)
    with pytest.raises(ValueError, match="k must be > 0"):
        index.search(xq[:3], 0)
    with pytest.raises(ValueError, match="dimension"):
        index.search(np.zeros((3, D_DIM - 1), dtype=np.float32), 5)
    with pytest.raises(ValueError, match="dimension"):
        index.add(np.zeros((10, D_DIM + 1), dtype=np.float32))
    with pytest.raises(RuntimeError, match="SearchParametersSearchGraph"):
        index.search(xq[:3], K, params=faiss_ext.SearchParametersGNND(search_l=64))
    with pytest.raises(RuntimeError, match="searchWidth"):
        index.search(xq[:3], K, params=P(search_width=31))  # 31 x 64 > 1024
    with pytest.raises(ValueError, match="itopk"):
        P(itopk=1024)
    with pytest.raises(RuntimeError):
        index.add(np.full((100, D_DIM), np.nan, dtype=np.float32))
    assert index.ntotal == N
    np.testing.assert_array_equal(index.get_search_graph(), before)

    no_fp16 = faiss_ext.GpuIndexSearchGraph(
        res, D_DIM, FM.L2, faiss_ext.GpuIndexSearchGraphConfig(fp16_traversal=False))
    no_fp16.add(xb[:2000])
    with pytest.raises(RuntimeError, match="fp16"):
        no_fp16.search(xq[:3], K, params=P(fp16=1))
    D, I = no_fp16.search(xq[:3], K, params=P(fp16=0))
    check_sorted(D)

    small = faiss_ext.GpuIndexSearchGraph(res, D_DIM)
    with pytest.raises(RuntimeError, match="knnDegree"):
        small.add(xb[:small.get_config().knn_degree])  # needs more than knn_degree vectors
    assert small.ntotal == 0


def test_remove_ids_and_range_search(res, xb, xq):
    """remove_ids renumbers as faiss.IndexFlat does and keeps recall;
    range_search is exact over the stored vectors."""
    index = faiss_ext.GpuIndexSearchGraph(res, D_DIM)
    index.add(xb)
    gone = index.remove_ids(faiss.IDSelectorRange(0, N // 4))
    assert gone == N // 4 and index.ntotal == N - N // 4
    kept = xb[N // 4:]
    exact = faiss.IndexFlatL2(D_DIM)
    exact.add(kept)
    _, I_ref = exact.search(xq, K)
    _, I = index.search(xq, K)
    assert recall_at(I, I_ref) >= 0.95
    np.testing.assert_array_equal(index.reconstruct(0), kept[0])
    D_ref, _ = exact.search(xq, 30)
    radius = float(np.median(D_ref[:, -1]))
    lims, D, I = index.range_search(xq, radius)
    rlims, rD, rI = exact.range_search(xq, radius)
    for i in range(NQ):
        a = set(I[lims[i]:lims[i + 1]].tolist())
        b = set(rI[rlims[i]:rlims[i + 1]].tolist())
        assert len(a ^ b) <= 1, i  # a pair at the radius may fall either side


def test_small_removals_patch_the_graph(res, xb, xq):
    """Below 5% removed since the last pruning the graph is patched
    (removed_since_prune counts them); past it, pruned again (0); removed
    ids are never returned and recall holds either way."""
    index = faiss_ext.GpuIndexSearchGraph(res, D_DIM)
    index.add(xb)
    assert index.removed_since_prune == 0
    step = N // 100
    alive = np.arange(N)
    for removed_total, expect_patched in ((step, True), (3 * step, True), (8 * step, False)):
        now = removed_total - (N - len(alive))
        gone = index.remove_ids(faiss.IDSelectorRange(0, now))  # positions
        assert gone == now
        alive = alive[now:]
        assert (index.removed_since_prune > 0) == expect_patched, removed_total
        assert index.getRemovedSincePrune() == index.removed_since_prune
        exact = faiss.IndexFlatL2(D_DIM)
        exact.add(xb[alive])
        _, I_ref = exact.search(xq, K)
        _, I = index.search(xq, K)
        assert I.max() < index.ntotal
        assert recall_at(I, I_ref) >= 0.95, removed_total


def test_queries_unlike_the_data_answered_again(res, xb, xq):
    """With unlike_query_ratio set, queries around other centres than the
    data's are flagged and answered again: by probing the nearest lists
    (every list probed: faiss.IndexFlatL2's results; the default 64: most of
    them) or by exact search (unlike_query_probes=0); queries of the data's
    distribution keep the graph's answers."""
    cfg = faiss_ext.GpuIndexSearchGraphConfig(graph_degree=32, knn_degree=64,
                                              unlike_query_ratio=3.0)
    index = faiss_ext.GpuIndexSearchGraph(res, D_DIM, faiss.METRIC_L2, cfg)
    index.add(xb)
    rng = np.random.default_rng(SEED + 7)
    far = (rng.normal(0, 4, (50, D_DIM))[rng.integers(0, 50, 200)]
           + rng.normal(0, 1, (200, D_DIM))).astype(np.float32)
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb)
    D_ref, I_ref = ref.search(far, K)
    for probes, answer in ((1 << 30, "answered_by_probe"), (0, "answered_exactly")):
        index.reset_unlike_query_counts()
        D, I = index.search(far, K, params=faiss_ext.SearchParametersSearchGraph(
            unlike_query_probes=probes))
        expected = {"searched": 200, "flagged": 200, "answered_exactly": 0,
                    "answered_by_probe": 0, "left_for_lack_of_memory": 0}
        expected[answer] = 200
        assert index.get_unlike_query_counts() == expected
        np.testing.assert_allclose(D, D_ref, rtol=1e-4, atol=1e-3)
        assert recall_at(I, I_ref) >= 0.999  # ties aside
    _, I = index.search(far, K)  # the default: 64 lists of round(4 sqrt(n))
    assert recall_at(I, I_ref) >= 0.95
    index.reset_unlike_query_counts()
    D_on, I_on = index.search(xq, K)
    assert index.get_unlike_query_counts()["flagged"] == 0
    D_off, I_off = index.search(xq, K, params=faiss_ext.SearchParametersSearchGraph(
        unlike_query_ratio=0))
    np.testing.assert_array_equal(I_on, I_off)
