"""faiss_ext.distributed_merge.ArrivalOrderMerge (CPU, no Ray needed): the
shards' results merged as they arrive, in any order and in any grouping,
equal one k-way merge of every shard in shard order, ties included (a tie
goes to the lower shard either way); shards added twice, out of range or a
result asked for too early raise."""

import itertools

import numpy as np
import pytest

import faiss_ext
from faiss_ext.distributed_merge import ArrivalOrderMerge


def _tied_shards(rng, nshards, nq, k):
    """Sorted (D, I) per shard whose distances come from a few values, so
    that most entries tie with entries of other shards."""
    Ds, Is = [], []
    for s in range(nshards):
        D = np.sort(rng.integers(0, 6, (nq, k)).astype(np.float32), axis=1)
        I = (np.arange(nq * k, dtype=np.int64).reshape(nq, k) + s * nq * k)
        Ds.append(D)
        Is.append(I)
    return Ds, Is


def _merge(Ds, Is):
    return faiss_ext.merge_knn_results(list(Ds), list(Is))


def _by_arrival(Ds, Is, batches):
    merger = ArrivalOrderMerge(len(Ds), _merge)
    for batch in batches:
        merger.add({s: (Ds[s], Is[s]) for s in batch})
    return merger.result()


@pytest.mark.parametrize("nshards", [2, 3, 4, 5])
def test_every_arrival_order_equals_one_merge(nshards):
    rng = np.random.default_rng(nshards)
    Ds, Is = _tied_shards(rng, nshards, 50, 7)
    refD, refI = _merge(Ds, Is)
    for order in itertools.permutations(range(nshards)):
        D, I = _by_arrival(Ds, Is, [[s] for s in order])
        np.testing.assert_array_equal(I, refI, err_msg="arrival order %s" % (order,))
        np.testing.assert_array_equal(D, refD)


def test_shards_arriving_together_equal_one_merge():
    rng = np.random.default_rng(11)
    Ds, Is = _tied_shards(rng, 6, 40, 5)
    refD, refI = _merge(Ds, Is)
    for batches in ([[5, 1], [0, 3, 4], [2]], [[0, 1, 2, 3, 4, 5]], [[2, 4], [3], [1, 5], [0]]):
        D, I = _by_arrival(Ds, Is, batches)
        np.testing.assert_array_equal(I, refI, err_msg="batches %s" % (batches,))
        np.testing.assert_array_equal(D, refD)


def test_merges_only_what_arrival_completes():
    """Shards 0 and 2 in: nothing to merge yet; shard 1 joins all three in
    one k-way merge (the merge calls are counted)."""
    rng = np.random.default_rng(3)
    Ds, Is = _tied_shards(rng, 3, 10, 4)
    calls = []

    def counting(D, I):
        calls.append(len(D))
        return _merge(D, I)

    merger = ArrivalOrderMerge(3, counting)
    merger.add({0: (Ds[0], Is[0]), 2: (Ds[2], Is[2])})
    assert calls == []
    merger.add({1: (Ds[1], Is[1])})
    assert calls == [3]
    np.testing.assert_array_equal(merger.result()[1], _merge(Ds, Is)[1])


def test_refuses_duplicates_out_of_range_and_early_results():
    rng = np.random.default_rng(5)
    Ds, Is = _tied_shards(rng, 3, 4, 2)
    merger = ArrivalOrderMerge(3, _merge)
    merger.add({0: (Ds[0], Is[0])})
    with pytest.raises(RuntimeError, match="not every shard"):
        merger.result()
    with pytest.raises(ValueError, match="twice or out of range"):
        merger.add({0: (Ds[0], Is[0])})
    merger.add({1: (Ds[1], Is[1])})
    with pytest.raises(ValueError, match="twice or out of range"):
        merger.add({1: (Ds[1], Is[1])})  # now inside the run [0, 2)
    with pytest.raises(ValueError, match="twice or out of range"):
        merger.add({3: (Ds[2], Is[2])})
