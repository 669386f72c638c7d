"""GPU tests of GpuIndexBiLevelLSH from Python: the same candidates as the CPU
twin faiss_ext.IndexBiLevelLSH (get_candidates) for the same configuration and
training data, the same model and groups, search results that agree with the
twin's (ties aside) under every short-list mode, recall against exact brute
force, copy_from / copy_to, the cloner both ways (bare and inside IDMap),
saving the GPU index as its twin, and bad input. Skipped, with the reason
shown, without a GPU."""

import faiss
import numpy as np
import pytest

import faiss_ext
from knn_check import clustered, recall_at

pytestmark = pytest.mark.gpu

N, D_DIM, K = 10000, 32, 10
SL = faiss_ext.BiLevelShortList


CONFIG = dict(n_tables=10, n_projections=8, tree_depth=3)
PARAMS = [
    dict(),
    dict(nprobe=8),
    dict(nprobe=16, min_candidates=1),
    dict(nprobe=4, min_candidates=200, tables=5),
    dict(group_probes=2),
]


@pytest.fixture(scope="module")
def res():
    return faiss_ext.StandardGpuResources()


@pytest.fixture(scope="module")
def data():
    from conftest import SEED
    xb = clustered(SEED, N, D_DIM)
    xq = clustered(SEED + 1, 300, D_DIM)
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb)
    _, gt = ref.search(xq, K)
    return xb, xq, gt


@pytest.fixture(scope="module")
def twin(data):
    """The CPU twin, trained on and holding the base set."""
    xb, _, _ = data
    index = faiss_ext.IndexBiLevelLSH(D_DIM, faiss_ext.BiLevelLSHConfig(**CONFIG))
    index.train(xb)
    index.add(xb)
    return index


@pytest.fixture(scope="module")
def gpu(res, data):
    """A GpuIndexBiLevelLSH trained and filled on the GPU, same configuration."""
    xb, _, _ = data
    index = faiss_ext.GpuIndexBiLevelLSH(res, D_DIM, faiss_ext.BiLevelLSHConfig(**CONFIG))
    index.train(xb)
    index.add(xb)
    return index


def assert_same_model(a, b):
    ma, mb = a.get_model(), b.get_model()
    assert ma.keys() == mb.keys()
    for key in ma:
        np.testing.assert_array_equal(ma[key], mb[key], err_msg=key)


def assert_same_candidates(a, b, xq, k=K):
    for p in PARAMS:
        params = faiss_ext.SearchParametersBiLevelLSH(**p)
        la, ia = a.get_candidates(xq, k, params)
        lb, ib = b.get_candidates(xq, k, params)
        np.testing.assert_array_equal(la, lb, err_msg=str(p))
        np.testing.assert_array_equal(ia, ib, err_msg=str(p))


def assert_same_results(D, I, D_ref, I_ref, xq, xb):
    """Same k-NN up to ties: padding identical, distances equal within
    float tolerance rank by rank, each returned id at its true distance."""
    assert D.shape == D_ref.shape and I.dtype == np.int64 and D.dtype == np.float32
    np.testing.assert_array_equal(I < 0, I_ref < 0)
    valid = I >= 0
    np.testing.assert_allclose(D[valid], D_ref[valid], rtol=1e-4, atol=1e-3)
    rows, cols = np.nonzero(valid)
    true = ((xq[rows] - xb[I[rows, cols]]) ** 2).sum(1)
    np.testing.assert_allclose(D[rows, cols], true, rtol=1e-4, atol=1e-3)
    for i in range(I.shape[0]):
        assert len(np.unique(I[i][valid[i]])) == valid[i].sum()


# ---- the GPU index against its twin ----

def test_gpu_and_cpu_build_the_same_model_and_candidates(gpu, twin, data):
    _, xq, _ = data
    assert gpu.ntotal == twin.ntotal and gpu.is_trained
    assert gpu.config == twin.config
    assert_same_model(gpu, twin)
    np.testing.assert_array_equal(gpu.group_sizes(), twin.group_sizes())
    assert gpu.num_bucket_keys == twin.num_bucket_keys
    assert_same_candidates(gpu, twin, xq)
    assert_same_candidates(gpu, twin, xq[:1], k=1)


@pytest.mark.parametrize("short_list", [SL.AUTO, SL.HEAP, SL.WORK_QUEUE])
@pytest.mark.parametrize("k", [1, 10, 100])
def test_search_agrees_with_the_twin(gpu, twin, data, short_list, k):
    xb, xq, _ = data
    for p in PARAMS:
        params = faiss_ext.SearchParametersBiLevelLSH(short_list=short_list, **p)
        D, I = gpu.search(xq, k, params)
        D_ref, I_ref = twin.search(xq, k, params)
        assert_same_results(D, I, D_ref, I_ref, xq, xb)


def test_recall_against_brute_force(gpu, twin, data):
    _, xq, gt = data
    for nprobe in (1, 16):
        params = faiss_ext.SearchParametersBiLevelLSH(nprobe=nprobe)
        _, I = gpu.search(xq, K, params)
        _, I_ref = twin.search(xq, K, params)
        assert recall_at(I, gt) == pytest.approx(recall_at(I_ref, gt), abs=0.01)
    # two RP-tree groups per query: 0.86 on the CPU twin for 200 queries of this set
    _, I = gpu.search(xq, K, faiss_ext.SearchParametersBiLevelLSH(group_probes=2))
    assert recall_at(I, gt) >= 0.75


def test_auto_short_list_follows_the_config(res, twin):
    index = faiss_ext.GpuIndexBiLevelLSH(
        res, twin, faiss_ext.GpuIndexBiLevelLSHConfig(heap_max_k=16, heap_max_candidates=100))
    assert index.get_gpu_config().heap_max_k == 16
    assert index.auto_short_list(16, 100) == SL.HEAP
    assert index.auto_short_list(17, 100) == SL.WORK_QUEUE
    assert index.auto_short_list(16, 101) == SL.WORK_QUEUE


# ---- copies and the cloner ----

def test_copy_from_and_copy_to(res, gpu, twin, data):
    xb, xq, _ = data
    from_twin = faiss_ext.GpuIndexBiLevelLSH(res, twin)
    assert from_twin.ntotal == twin.ntotal
    assert_same_candidates(from_twin, twin, xq)
    np.testing.assert_array_equal(from_twin.get_vectors(), xb)

    back = gpu.copy_to()
    assert isinstance(back, faiss_ext.IndexBiLevelLSH)
    assert back.config == gpu.config and back.ntotal == gpu.ntotal
    assert_same_model(back, twin)
    assert_same_candidates(back, twin, xq)
    for a, b in zip(back.search(xq, K), twin.search(xq, K)):
        np.testing.assert_array_equal(a, b)

    target = faiss_ext.IndexBiLevelLSH(D_DIM)
    assert gpu.copy_to(target) is target
    assert target.ntotal == gpu.ntotal
    assert_same_candidates(target, twin, xq)

    other = faiss_ext.GpuIndexBiLevelLSH(res, D_DIM, faiss_ext.BiLevelLSHConfig(n_tables=2))
    other.copy_from(twin)
    assert other.config == twin.config
    assert_same_candidates(other, twin, xq)


def test_cloner_round_trip(res, twin, data):
    xb, xq, _ = data
    gpu = faiss_ext.index_cpu_to_gpu(res, 0, twin)
    assert isinstance(gpu, faiss_ext.GpuIndexBiLevelLSH)
    assert gpu.device == 0
    assert_same_candidates(gpu, twin, xq)

    cpu = faiss_ext.index_gpu_to_cpu(gpu)
    assert isinstance(cpu, faiss_ext.IndexBiLevelLSH)  # python3-faiss cannot hold it
    assert cpu.config == twin.config and cpu.ntotal == twin.ntotal
    assert_same_model(cpu, twin)
    np.testing.assert_array_equal(cpu.get_vectors(), xb)
    assert_same_candidates(cpu, twin, xq)
    for a, b in zip(cpu.search(xq, K), twin.search(xq, K)):
        np.testing.assert_array_equal(a, b)

    again = faiss_ext.index_cpu_to_gpu(res, 0, cpu)
    assert_same_candidates(again, twin, xq)


def test_cloner_walks_idmap(res, data):
    xb, xq, _ = data
    cpu = faiss_ext.index_factory(D_DIM, "IDMap,BiLSH8x8_t3")
    cpu.train(xb)
    ids = np.arange(N, dtype=np.int64) * 2 + 1
    cpu.add_with_ids(xb, ids)
    gpu = faiss_ext.index_cpu_to_gpu(res, 0, cpu)
    assert isinstance(gpu, faiss.IndexIDMap)
    assert isinstance(faiss_ext.downcast_index(gpu.index), faiss_ext.GpuIndexBiLevelLSH)
    D, I = gpu.search(xq, K)
    D_ref, I_ref = cpu.search(xq, K)
    assert np.all(np.isin(I[I >= 0], ids))
    np.testing.assert_allclose(D, D_ref, rtol=1e-4, atol=1e-3)
    back = faiss_ext.index_gpu_to_cpu(gpu)
    for a, b in zip(back.search(xq, K), cpu.search(xq, K)):
        np.testing.assert_array_equal(a, b)


def test_gpu_index_is_saved_as_its_twin(gpu, twin, data, tmp_path):
    _, xq, _ = data
    path = tmp_path / "gpu_lsh.index"
    faiss_ext.write_index(gpu, path)
    back = faiss_ext.read_index(path)
    assert isinstance(back, faiss_ext.IndexBiLevelLSH)
    assert_same_candidates(back, twin, xq)
    data_bytes = faiss_ext.serialize_index(gpu)
    assert bytes(data_bytes[:4]) == b"IxBL"
    np.testing.assert_array_equal(data_bytes, faiss_ext.serialize_index(twin))


# ---- bad input ----

def test_bad_input(res, gpu, data):
    xb, xq, _ = data
    ntotal = gpu.ntotal
    with pytest.raises(ValueError):
        gpu.search(xq[:, :16], K)
    with pytest.raises(ValueError):
        gpu.get_candidates(xq, 0)
    with pytest.raises(RuntimeError, match="tables"):
        gpu.search(xq, K, faiss_ext.SearchParametersBiLevelLSH(tables=11))  # L = 10
    bad = xb[:10].copy()
    bad[0, 0] = np.inf
    with pytest.raises(RuntimeError):
        gpu.add(bad)
    assert gpu.ntotal == ntotal
    wrong_d = faiss_ext.IndexBiLevelLSH(D_DIM + 1)
    with pytest.raises(RuntimeError):
        gpu.copy_from(wrong_d)
    assert gpu.ntotal == ntotal
    untrained = faiss_ext.GpuIndexBiLevelLSH(res, D_DIM)
    with pytest.raises(RuntimeError):
        untrained.search(xq, K)
    with pytest.raises(RuntimeError):
        untrained.train(xb[:3])  # fewer than 2^tree_depth = 16 vectors


def test_autotune_on_the_gpu_makes_the_cpu_choice(res):
    """autotune_bilevel_lsh with GPU resources measures the CPU twin's recall
    at every setting (same candidates), so it makes the same choice."""
    x = clustered(93, 8000 + 400, 16)
    xb, held = x[:8000], x[8000:]
    opt = faiss_ext.BiLevelAutoTuneOptions()
    opt.tree_depths = [0, 2]
    opt.tables_projections = [(8, 8)]
    opt.bucket_widths = [2.0, 3.0]
    opt.nprobes = [1, 4]
    cpu = faiss_ext.autotune_bilevel_lsh(xb, held, opt)
    gpu = faiss_ext.autotune_bilevel_lsh(xb, held, opt, res)
    assert [p["recall"] for p in cpu.points] == [p["recall"] for p in gpu.points]
    assert cpu.config == gpu.config and cpu.recall == gpu.recall
    index = faiss_ext.GpuIndexBiLevelLSH(res, 16, gpu.config)
    index.train(xb)
    index.add(xb)
    D, I = index.search(held, 10)
    assert I.shape == (400, 10)
