"""faiss_ext.merge_knn_results (CPU): the k-way merge of per-shard k-NN
results equals faiss.ResultHeap fed every shard on tie-free data, skips -1
entries whatever their distance, breaks ties by shard then position, pads
short rows with -1 / +-inf, and raises ValueError / TypeError for bad lists.
The C++ side, with ties and a brute-force oracle:
tests/test_cpu_shard_result_merge.cpp."""

import threading

import faiss
import numpy as np
import pytest

import faiss_ext


def _shards(rng, nshards, nq, k, keep_max, pad_fraction=0.0):
    """nshards (D, I) pairs of shape (nq, k), rows sorted best first, with
    distinct distances (no ties anywhere) and distinct labels; with
    pad_fraction > 0, rows end with a random number of (+-inf, -1) entries."""
    total = nshards * nq * k
    values = (rng.permutation(total).astype(np.float64) / total).astype(np.float32)
    assert len(np.unique(values)) == total
    Ds, Is = [], []
    ids = rng.permutation(total).astype(np.int64)
    for s in range(nshards):
        D = np.sort(values[s * nq * k:(s + 1) * nq * k].reshape(nq, k), axis=1)
        if keep_max:
            D = D[:, ::-1].copy()
        I = ids[s * nq * k:(s + 1) * nq * k].reshape(nq, k).copy()
        if pad_fraction > 0:
            present = rng.integers(0, k + 1, nq)
            present[rng.random(nq) >= pad_fraction] = k
            pad = np.arange(k)[None, :] >= present[:, None]
            I[pad] = -1
            D[pad] = -np.inf if keep_max else np.inf
        Ds.append(D)
        Is.append(I)
    return Ds, Is


def _result_heap(Ds, Is, keep_max):
    nq, k = Ds[0].shape
    heap = faiss.ResultHeap(nq, k, keep_max=keep_max)
    for D, I in zip(Ds, Is):
        heap.add_result(D, I)
    heap.finalize()
    return heap.D, heap.I


def _oracle(Ds, Is, keep_max):
    """Every entry with a label other than -1, stable sorted by distance in
    (shard, position) order; padded with (+-inf, -1)."""
    nq, k = Ds[0].shape
    pad = -np.inf if keep_max else np.inf
    D_out = np.full((nq, k), pad, np.float32)
    I_out = np.full((nq, k), -1, np.int64)
    D_all, I_all = np.hstack(Ds), np.hstack(Is)
    for q in range(nq):
        keep = I_all[q] != -1
        d, i = D_all[q][keep], I_all[q][keep]
        order = np.argsort(-d if keep_max else d, kind="stable")[:k]
        D_out[q, :len(order)], I_out[q, :len(order)] = d[order], i[order]
    return D_out, I_out


@pytest.mark.parametrize("keep_max", [False, True])
@pytest.mark.parametrize("nshards", [1, 3, 8])
@pytest.mark.parametrize("k", [1, 10])
def test_equals_faiss_result_heap(rng, keep_max, nshards, k):
    Ds, Is = _shards(rng, nshards, 500, k, keep_max)
    D, I = faiss_ext.merge_knn_results(Ds, Is, keep_max=keep_max)
    D_ref, I_ref = _result_heap(Ds, Is, keep_max)
    assert D.dtype == np.float32 and I.dtype == np.int64 and D.shape == I.shape == (500, k)
    np.testing.assert_array_equal(I, I_ref)
    np.testing.assert_array_equal(D, D_ref)


@pytest.mark.parametrize("keep_max", [False, True])
def test_padding_matches_result_heap_and_is_inf(rng, keep_max):
    Ds, Is = _shards(rng, 3, 400, 10, keep_max, pad_fraction=0.7)
    for D_s in Ds:  # a few queries with nothing in any shard
        D_s[:5] = -np.inf if keep_max else np.inf
    for I_s in Is:
        I_s[:5] = -1
    D, I = faiss_ext.merge_knn_results(Ds, Is, keep_max=keep_max)
    D_ref, I_ref = _result_heap(Ds, Is, keep_max)
    np.testing.assert_array_equal(I, I_ref)
    present = I != -1
    assert (~present).any() and not present[:5].any()
    np.testing.assert_array_equal(D[present], D_ref[present])
    # padding: +-inf here, +-FLT_MAX in faiss.ResultHeap
    assert np.all(D[~present] == (-np.inf if keep_max else np.inf))
    assert np.all(np.abs(D_ref[~present]) == np.finfo(np.float32).max)
    # present entries first in every row
    assert np.all(np.diff(present.astype(np.int8), axis=1) <= 0)


@pytest.mark.parametrize("keep_max", [False, True])
def test_absent_labels_are_skipped_whatever_their_distance(keep_max):
    # a -1 entry's distance (0 for L2, huge for IP) would win if it were read
    lure = np.float32(1e30 if keep_max else 0.0)
    D0 = np.array([[3.0, 1.0, lure]] if keep_max else [[1.0, 3.0, lure]], np.float32)
    I0 = np.array([[10, 11, -1]], np.int64)
    D1 = np.array([[lure, lure, lure]], np.float32)
    I1 = np.array([[-1, -1, -1]], np.int64)
    D, I = faiss_ext.merge_knn_results([D0, D1], [I0, I1], keep_max=keep_max)
    assert I.tolist() == [[10, 11, -1]]
    assert D[0, :2].tolist() == D0[0, :2].tolist() and D[0, 2] == (-np.inf if keep_max else np.inf)


@pytest.mark.parametrize("keep_max", [False, True])
def test_ties_go_to_the_lower_shard_then_the_position(rng, keep_max):
    nq, k = 300, 10
    Ds, Is = [], []
    for s in range(4):  # few distinct values: ties within and across shards
        D = np.sort(rng.integers(0, 4, (nq, k)).astype(np.float32), axis=1)
        Ds.append(D[:, ::-1].copy() if keep_max else D)
        I = 1000 * s + np.arange(k, dtype=np.int64)[None, :].repeat(nq, 0)
        I[rng.random((nq, k)) < 0.1] = -1  # absent entries anywhere in a row
        Is.append(I)
    D, I = faiss_ext.merge_knn_results(Ds, Is, keep_max=keep_max)
    D_ref, I_ref = _oracle(Ds, Is, keep_max)
    np.testing.assert_array_equal(I, I_ref)
    np.testing.assert_array_equal(D, D_ref)


def test_inputs_are_converted_and_outputs_are_new_arrays(rng):
    Ds, Is = _shards(rng, 2, 50, 5, False)
    D_ref, I_ref = faiss_ext.merge_knn_results(Ds, Is)
    # tuples, float64 / int32, Fortran order and strided views all convert
    wide = np.zeros((50, 10), np.int64)
    wide[:, ::2] = Is[1]
    D, I = faiss_ext.merge_knn_results((Ds[0].astype(np.float64), np.asfortranarray(Ds[1])),
                                       (Is[0].astype(np.int32), wide[:, ::2]))
    np.testing.assert_array_equal(I, I_ref)
    np.testing.assert_array_equal(D, D_ref)
    # one shard: a copy, not a view of the input
    D1, I1 = faiss_ext.merge_knn_results([Ds[0]], [Is[0]])
    assert not np.shares_memory(D1, Ds[0]) and not np.shares_memory(I1, Is[0])
    np.testing.assert_array_equal(I1, Is[0])
    Ds[0][:] = 7
    assert not np.any(D1 == 7)


def test_no_queries():
    D, I = faiss_ext.merge_knn_results([np.zeros((0, 4), np.float32)] * 3,
                                       [np.zeros((0, 4), np.int64)] * 3)
    assert D.shape == I.shape == (0, 4) and D.dtype == np.float32 and I.dtype == np.int64


def test_concurrent_calls_agree(rng):
    # the GIL is released during the merge: threads run at once, same answers
    Ds, Is = _shards(rng, 4, 2000, 10, False)
    D_ref, I_ref = faiss_ext.merge_knn_results(Ds, Is)
    errors = []

    def work():
        for _ in range(5):
            D, I = faiss_ext.merge_knn_results(Ds, Is)
            if not (np.array_equal(D, D_ref) and np.array_equal(I, I_ref)):
                errors.append("different result")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


D2 = np.zeros((3, 4), np.float32)
I2 = np.zeros((3, 4), np.int64)


@pytest.mark.parametrize("distances, labels, match", [
    ([], [], "one \\(nq, k\\) array per shard, got 0 and 0"),
    ([D2], [], "got 1 and 0"),
    ([D2, D2], [I2], "distances holds 2 arrays but labels holds 1"),
    ([D2[0]], [I2], r"distances\[0\] must be a 2-D array, got shape \(4,\)"),
    ([D2], [I2[None]], r"labels\[0\] must be a 2-D array, got shape \(1, 3, 4\)"),
    ([D2, D2[:2]], [I2, I2[:2]], r"distances\[1\] has shape \(2, 4\) but distances\[0\] has "
                                 r"shape \(3, 4\)"),
    ([D2, D2], [I2, I2[:, :3]], r"labels\[1\] has shape \(3, 3\) but distances\[0\]"),
    ([D2], [I2.T], r"labels\[0\] has shape \(4, 3\)"),
    ([np.zeros((3, 0), np.float32)], [np.zeros((3, 0), np.int64)], "k must be > 0"),
    ([None], [I2], r"distances\[0\] must be a 2-D float32 array, got None"),
    ([np.array([["x"]])], [I2], r"distances\[0\] must be convertible to a 2-D float32"),
])
def test_bad_inputs_raise_value_error(distances, labels, match):
    with pytest.raises(ValueError, match=match):
        faiss_ext.merge_knn_results(distances, labels)


@pytest.mark.parametrize("keep_max", [False, True])
def test_thread_counts_give_the_same_results(rng, keep_max):
    """threads=1 / 2 / 0 (OpenMP's default) split the queries differently
    (20,000 x 10 x 4: past the size merged on the calling thread) and must
    not change a single entry."""
    Ds, Is = _shards(rng, 4, 20000, 10, keep_max)
    D_ref, I_ref = _result_heap(Ds, Is, keep_max)
    for threads in (1, 2, 0):
        D, I = faiss_ext.merge_knn_results(Ds, Is, keep_max=keep_max, threads=threads)
        np.testing.assert_array_equal(I, I_ref)
        np.testing.assert_array_equal(D, D_ref)


def test_negative_threads_raise_value_error():
    with pytest.raises(ValueError, match="threads = -1 must be >= 0"):
        faiss_ext.merge_knn_results([D2], [I2], threads=-1)


def test_non_lists_raise_type_error():
    with pytest.raises(TypeError, match="distances must be a list or tuple"):
        faiss_ext.merge_knn_results(D2, [I2])
    with pytest.raises(TypeError, match="labels must be a list or tuple"):
        faiss_ext.merge_knn_results([D2], iter([I2]))


def test_exported_with_a_docstring():
    assert "merge_knn_results" in faiss_ext.__all__
    assert "ResultHeap" in faiss_ext.merge_knn_results.__doc__
