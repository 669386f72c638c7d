"""CPU tests: FAISS pipelines (IDMap, IDMap2, Shards, Replicas, PreTransform
with PCA, RefineFlat) built in Python around each index our factory makes,
compared with the same pipeline built in C++ (_faiss_ext_testing). Our
IndexBiLevelLSH is a faiss.Index in Python; the twins (QSFlat, its cosine and
Pearson forms, GNND, SGraph) are FAISS's objects. The GPU indexes get the same
tests in test_gpu_pipelines.py."""

import faiss
import numpy as np
import pytest

import faiss_ext
from faiss_ext import _faiss_ext_testing as testing
from knn_check import clustered
from pipelines import WRAPPERS, assert_same_results, metric_for, search_python_pipeline

D_DIM = 16
K = 10

#: Our factory strings: each index type of ours and each twin.
DESCRIPTIONS = ["QSFlat", "QSFlatCosine", "QSFlatPearson", "GNND16", "SGraph16", "BiLSH6x6_t2"]


@pytest.fixture(scope="module")
def data():
    xb = clustered(1, 1500, D_DIM)
    return xb, xb[:1000], np.arange(len(xb), dtype=np.int64) * 7 + 3, clustered(2, 40, D_DIM)


@pytest.fixture
def one_thread():
    """FAISS's graph builds (NN-Descent, HNSW) are deterministic with one
    OpenMP thread; set from Python, seen by the C++ pipeline: one FAISS (and
    one OpenMP runtime) in the process."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("description", DESCRIPTIONS)
def test_python_pipeline_matches_cpp(data, one_thread, wrapper, description):
    xb, xt, ids, xq = data
    metric = faiss.METRIC_L2

    def make_inner(d):
        return faiss_ext.index_factory(d, description, metric_for(description, metric))

    ours = search_python_pipeline(wrapper, make_inner, D_DIM, xt, xb, ids, xq, K)
    theirs = testing.search_pipeline(wrapper, description, D_DIM, metric, xt, xb, ids, xq, K)
    assert_same_results(ours, theirs)
    I = ours[1]
    assert I.shape == (len(xq), K) and np.all(I >= 0)
    if wrapper.startswith("IDMap"):
        assert np.all(np.isin(I, ids))


def test_pipeline_holds_our_object_itself(data):
    xb, xt, ids, xq = data
    lsh = faiss_ext.index_factory(D_DIM, "BiLSH6x6_t2")
    idmap = faiss.IndexIDMap2(lsh)
    idmap.train(xt)
    idmap.add_with_ids(xb, ids)
    # FAISS trained and filled our index through its C++ pointer
    assert lsh.is_trained and lsh.ntotal == len(xb)
    assert testing.index_address(idmap.index) == testing.index_address(lsh)
    assert faiss_ext.downcast_index(idmap.index) is lsh
    # FAISS's own functions take it
    assert faiss.downcast_index(idmap) is not None
    D, I = idmap.search(xq, K)
    D_inner, I_inner = lsh.search(xq, K)
    np.testing.assert_array_equal(I, np.where(I_inner >= 0, ids[I_inner], -1))
    np.testing.assert_array_equal(D, D_inner)
    np.testing.assert_array_equal(idmap.reconstruct(int(ids[5])), xb[5])


def test_search_parameters_reach_our_index_through_faiss(data):
    xb, xt, _, xq = data
    lsh = faiss_ext.index_factory(D_DIM, "BiLSH6x6_t2")
    lsh.train(xt)
    lsh.add(xb)
    narrow = faiss_ext.SearchParametersBiLevelLSH(nprobe=1)
    wide = faiss_ext.SearchParametersBiLevelLSH(nprobe=16)
    assert isinstance(narrow, faiss.SearchParameters)
    # FAISS's own Python search (class_wrappers) passes our parameters to C++
    for params in (narrow, wide):
        D, I = faiss.Index.search(lsh, xq, K, params=params)
        D2, I2 = lsh.search(xq, K, params=params)
        np.testing.assert_array_equal(I, I2)
        np.testing.assert_array_equal(D, D2)
    # they change the search: a wider probe finds at least as close neighbours
    D_n, _ = lsh.search(xq, K, params=narrow)
    D_w, _ = lsh.search(xq, K, params=wide)
    assert np.all(D_w[:, 0] <= D_n[:, 0])
    assert not np.array_equal(D_w, D_n)


@pytest.mark.parametrize("cls", [faiss_ext.GpuIndexQuickSelectFlat, faiss_ext.GpuKnnGraphGNND,
                                 faiss_ext.GpuIndexSearchGraph, faiss_ext.GpuIndexBiLevelLSH,
                                 faiss_ext.IndexBiLevelLSH])
def test_our_index_classes_are_faiss_indexes(cls):
    assert issubclass(cls, faiss.Index)
    assert cls.__module__ == "faiss_ext"


@pytest.mark.parametrize("cls", [faiss_ext.SearchParametersQuickSelectFlat,
                                 faiss_ext.SearchParametersGNND,
                                 faiss_ext.SearchParametersSearchGraph,
                                 faiss_ext.SearchParametersBiLevelLSH])
def test_our_search_parameters_are_faiss_search_parameters(cls):
    assert issubclass(cls, faiss.SearchParameters)
    params = cls()
    assert testing.search_parameters_type_name(params) != "faiss::SearchParameters"


def test_faiss_wrapper_keeps_our_index_alive(data):
    import gc
    xb, xt, ids, xq = data
    idmap = faiss.IndexIDMap(faiss_ext.index_factory(D_DIM, "BiLSH6x6_t2"))
    gc.collect()  # no Python name holds our index: FAISS's wrapper does
    idmap.train(xt)
    idmap.add_with_ids(xb, ids)
    inner = faiss_ext.downcast_index(idmap.index)
    assert isinstance(inner, faiss_ext.IndexBiLevelLSH) and inner.ntotal == len(xb)
    del inner
    gc.collect()
    D, I = idmap.search(xq, K)
    assert np.all(np.isin(I[:, 0], ids))
