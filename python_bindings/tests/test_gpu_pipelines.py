"""GPU tests: FAISS pipelines (IDMap, IDMap2, Shards, Replicas, PreTransform
with PCA, RefineFlat) built in Python around each of our GPU indexes
(faiss.Index objects), compared with the same pipeline built in C++; our GPU
indexes inside FAISS's functions (downcast, pickling). Skipped, with the
reason shown, without a GPU."""

import pickle

import faiss
import numpy as np
import pytest

import faiss_ext
from faiss_ext import _faiss_ext_testing as testing
from knn_check import clustered
from pipelines import WRAPPERS, assert_same_results, metric_for, search_python_pipeline

pytestmark = pytest.mark.gpu

D_DIM = 16
K = 10

#: Factory strings whose twin index_cpu_to_gpu turns into each GPU index of
#: ours, and whether its search is deterministic (the GNND graph build is
#: not: its joins race by design, so only validity is compared there).
GPU_INDEXES = [("QSFlat", True), ("QSFlatCosine", True), ("QSFlatPearson", True),
               ("BiLSH6x6_t2", True), ("SGraph16", False), ("GNND16", False)]


@pytest.fixture(scope="module")
def res():
    return faiss_ext.StandardGpuResources()


@pytest.fixture(scope="module")
def data():
    xb = clustered(1, 3000, D_DIM)
    return xb, xb[:2000], np.arange(len(xb), dtype=np.int64) * 7 + 3, clustered(2, 50, D_DIM)


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("description,deterministic", GPU_INDEXES)
def test_python_pipeline_matches_cpp(res, data, wrapper, description, deterministic):
    xb, xt, ids, xq = data
    metric = faiss.METRIC_L2

    def make_inner(d):
        gpu = faiss_ext.index_cpu_to_gpu(res, 0, faiss_ext.index_factory(d, description, metric_for(description, metric)))
        assert isinstance(gpu, faiss.Index) and type(gpu).__module__ == "faiss_ext"
        return gpu

    ours = search_python_pipeline(wrapper, make_inner, D_DIM, xt, xb, ids, xq, K)
    theirs = testing.search_pipeline(wrapper, description, D_DIM, metric, xt, xb, ids, xq, K,
                                     res, 0)
    if deterministic:
        assert_same_results(ours, theirs)
    else:
        # an approximate graph search may find fewer than K: -1 pads a row,
        # +inf its distances; what it found is sorted and each query finds one
        for D, I in (ours, theirs):
            assert I.shape == (len(xq), K) and np.all(I[:, 0] >= 0)
            assert np.all((I >= 0) | (I == -1))
            for d_row, i_row in zip(D, I):
                assert np.all(np.diff(d_row[i_row >= 0]) >= 0)


def test_our_gpu_index_inside_faiss_wrappers(res, data):
    xb, _, ids, xq = data
    gpu = faiss_ext.GpuIndexQuickSelectFlat(res, D_DIM, faiss.METRIC_L2)
    idmap = faiss.IndexIDMap2(gpu)
    idmap.add_with_ids(xb, ids)
    assert gpu.ntotal == len(xb)
    assert faiss_ext.downcast_index(idmap.index) is gpu
    D, I = idmap.search(xq, K)
    ref = faiss.IndexFlatL2(D_DIM)
    ref.add(xb)
    D_ref, I_ref = ref.search(xq, K)
    np.testing.assert_array_equal(I, ids[I_ref])
    np.testing.assert_allclose(D, D_ref, rtol=1e-4, atol=1e-4)
    # FAISS's range of functions that take any index
    faiss.downcast_index(idmap)
    assert faiss_ext.index_gpu_to_cpu(idmap).ntotal == len(xb)


def test_gpu_index_pickles_onto_its_device(res, data):
    xb, _, _, xq = data
    gpu = faiss_ext.GpuIndexQuickSelectFlat(res, D_DIM, faiss.METRIC_L2)
    gpu.add(xb)
    back = pickle.loads(pickle.dumps(gpu))
    assert isinstance(back, faiss_ext.GpuIndexQuickSelectFlat)
    assert back.getDevice() == gpu.getDevice() and back.ntotal == gpu.ntotal
    for a, b in zip(gpu.search(xq, K), back.search(xq, K)):
        np.testing.assert_array_equal(a, b)
