"""faiss_ext.distributed on a local multi-node Ray cluster (loopback only), on
the CPU twins: exact shards equal one index, routed adds, filters and deletes
across shards, save and restore, a replica killed during searches, a shard
with no replica left. Skipped, visibly, where Ray is not installed
(scripts/test.sh installs it in a venv for its `distributed` step)."""

import os
import time

import faiss
import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'ray>=2'")
from ray.cluster_utils import Cluster  # noqa: E402

from faiss_ext import distributed  # noqa: E402

D_DIM = 16


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    c.add_node(num_cpus=2)
    c.add_node(num_cpus=2)
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    xb = rng.random((3000, D_DIM), dtype=np.float32)
    xq = rng.random((50, D_DIM), dtype=np.float32)
    return xb, xq


def assert_knn_equal(D, I, refD, refI, larger_is_better=False, tol=1e-4):
    """Equal k-NN results up to ties: distances rank by rank, and the same ids
    wherever a distance is not tied with the k-th (ids are global, not rows)."""
    assert D.shape == refD.shape and I.shape == refI.shape
    np.testing.assert_allclose(D, refD, rtol=tol, atol=tol)
    for d, i, rd, ri in zip(D, I, refD, refI):
        kth = rd[-1]
        clear = (rd < kth - tol * (1 + abs(kth))) if not larger_is_better else \
                (rd > kth + tol * (1 + abs(kth)))
        assert set(i[clear]) == set(ri[clear]), (i, ri)
        assert len(set(i[i >= 0])) == int((i >= 0).sum()), "repeated id in %s" % (i,)


def kill_and_wait(actor, seconds=20):
    """Kills a Ray actor and returns once calls to it fail (ray.kill is asynchronous)."""
    ray.kill(actor, no_restart=True)
    assert_dies(actor, seconds)


def assert_dies(actor, seconds=20):
    """Returns once calls to a killed actor fail; fails the test if it still
    answers after `seconds` (a kill lands asynchronously)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            ray.get(actor.ntotal.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return
        time.sleep(0.1)
    raise AssertionError("the killed actor still answers after %d s" % seconds)


def reference(xb, ids, xq, k, metric=faiss.METRIC_L2):
    flat = faiss.IndexIDMap(faiss.IndexFlat(D_DIM, metric))
    flat.add_with_ids(xb, ids)
    return flat.search(xq, k)


@pytest.mark.parametrize("metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_exact_shards_equal_one_index(cluster, data, metric):
    xb, xq = data
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=3, metric=metric, use_gpu=False)
    index.add(xb[:1000])
    index.add(xb[1000:])           # ids continue: 1000..2999
    assert index.ntotal == 3000
    D, I = index.search(xq, 10)
    refD, refI = reference(xb, np.arange(3000), xq, 10, metric)
    assert_knn_equal(D, I, refD, refI, larger_is_better=metric == faiss.METRIC_INNER_PRODUCT)
    # use_gpu=False: every replica holds the CPU twin
    assert [[p["on_gpu"] for p in s] for s in index.placements()] == [[False]] * 3


@pytest.mark.parametrize("metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_fewer_results_than_k_are_padded_as_one_index_pads(cluster, data, metric):
    """A filter passing 4 ids, k 10: the 4 merged results, then label -1 with
    the distance FAISS's IndexFlat pads with (+-FLT_MAX, not the merge's
    +-inf)."""
    xb, xq = data
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=3, metric=metric, use_gpu=False)
    index.add(xb)
    D, I = index.search(xq, 10, sel=(100, 104))
    refD, refI = reference(xb[100:104], np.arange(100, 104), xq, 10, metric)
    assert (refI[:, 4:] == -1).all() and np.isfinite(refD).all()
    np.testing.assert_array_equal(I[:, 4:], refI[:, 4:])
    np.testing.assert_array_equal(D[:, 4:], refD[:, 4:])
    assert_knn_equal(D, I, refD, refI, larger_is_better=metric == faiss.METRIC_INNER_PRODUCT)


def test_filters_and_deletes_across_shards(cluster, data):
    xb, xq = data
    ids = np.arange(3000, dtype=np.int64) * 5 + 7     # global ids of our own
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=4, use_gpu=False)
    index.add_with_ids(xb, ids)
    # a range filter and an id-array filter
    lo, hi = int(ids[400]), int(ids[1900])
    D, I = index.search(xq, 10, sel=(lo, hi))
    keep = (ids >= lo) & (ids < hi)
    refD, refI = reference(xb[keep], ids[keep], xq, 10)
    assert_knn_equal(D, I, refD, refI)
    few = ids[::97]
    D, I = index.search(xq, 20, sel=few)
    refD, refI = reference(xb[::97], few, xq, 20)
    assert_knn_equal(D, I, refD, refI)
    # deletes: a range and an array, then searches see the survivors only
    assert index.remove_ids((int(ids[0]), int(ids[500]))) == 500
    assert index.remove_ids(ids[2000:2100]) == 100
    left = np.ones(3000, bool)
    left[:500] = False
    left[2000:2100] = False
    assert index.ntotal == int(left.sum())
    D, I = index.search(xq, 10)
    refD, refI = reference(xb[left], ids[left], xq, 10)
    assert_knn_equal(D, I, refD, refI)


def test_save_and_load_answer_as_before(cluster, data, tmp_path):
    xb, xq = data
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=2, use_gpu=False)
    index.add(xb)
    index.remove_ids((0, 100))
    before = index.search(xq, 10)
    index.save(str(tmp_path / "shards"))
    back = distributed.ShardedIndex.load(str(tmp_path / "shards"), use_gpu=False)
    assert back.ntotal == index.ntotal == 2900
    after = back.search(xq, 10)
    np.testing.assert_array_equal(after[1], before[1])
    np.testing.assert_array_equal(after[0], before[0])
    back.add(xb[:5])               # ids go on from the saved next id
    assert back.ntotal == 2905


def test_a_killed_replica_is_replaced_by_its_twin(cluster, data):
    xb, xq = data
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=2, replicas=2, use_gpu=False)
    index.add(xb)
    before = index.search(xq, 10)
    kill_and_wait(index.shards[1][0])   # one replica of shard 1 dies
    after = index.search(xq, 10)   # its twin answers
    np.testing.assert_array_equal(after[1], before[1])
    index.add(xb[:10])             # adds go to the live replicas
    assert index.ntotal == 3010
    for actor in list(index.shards[0]):
        kill_and_wait(actor)
    with pytest.raises(distributed.ShardUnavailableError, match="shard 0 of 2"):
        index.search(xq, 10)


def test_heal_restores_a_lost_replica_from_its_twin(cluster, data):
    """A replica that died is replaced by heal(): a new actor restored from
    its shard's live twin answers alone once the twin is gone too."""
    xb, xq = data
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=2, replicas=2, use_gpu=False)
    index.add(xb)
    before = index.search(xq, 10)
    first = index.shards[0][0]
    kill_and_wait(first)
    index.add(xb[:7] + 100)            # far away; acknowledged by the live replica only
    assert index.heal() == 1
    assert index.heal() == 0           # nothing missing now
    survivor = [a for a in index.shards[0] if a is not first][0]
    kill_and_wait(survivor)            # the restored replica is all shard 0 has left
    assert index.ntotal == 3007
    after = index.search(xq, 10)
    np.testing.assert_array_equal(after[1], before[1])


def test_compiled_search_equals_one_index_through_failures_and_heal(cluster, data):
    """compiled_search=True: the searches go through a Ray Compiled Graph
    (counted), equal one index with and without filters; a killed replica
    makes the graph fail over to normal calls, shards with unequal replica
    counts are searched the normal way, and after heal() the graph serves
    again."""
    xb, xq = data
    ids = np.arange(3000, dtype=np.int64)
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=3, replicas=2, use_gpu=False,
                                     compiled_search=True)
    index.add(xb)
    refD, refI = reference(xb, ids, xq, 10)
    assert_knn_equal(*index.search(xq, 10), refD, refI)
    keep = (ids >= 100) & (ids < 2000)
    assert_knn_equal(*index.search(xq, 10, sel=(100, 2000)), *reference(xb[keep], ids[keep], xq, 10))
    few = ids[::41]
    assert_knn_equal(*index.search(xq, 5, sel=few), *reference(xb[::41], few, xq, 5))
    served = index._compiled.served
    assert served == 3, "the compiled graph served %d of 3 searches" % served
    kill_and_wait(index.shards[1][0])
    assert_knn_equal(*index.search(xq, 10), refD, refI)  # graph fails: normal calls answer
    assert len(index.shards[1]) == 1
    assert_knn_equal(*index.search(xq, 10), refD, refI)  # unequal replicas: normal calls
    assert index._compiled.served == served
    assert index.heal() == 1
    assert_knn_equal(*index.search(xq, 10), refD, refI)  # a new graph over the healed replicas
    assert index._compiled.served == served + 1
    actors = [a for replicas in index.shards for a in replicas]
    index.shutdown()  # the graph torn down and every actor killed (its resources given back)
    for actor in actors:
        assert_dies(actor)
    with pytest.raises(RuntimeError, match="after shutdown"):
        index.search(xq, 10)
    with pytest.raises(RuntimeError, match="after shutdown"):
        index.heal()


def _on_the_drivers_node():
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    here = ray.get_runtime_context().get_node_id()
    return {"num_cpus": 0.1, "scheduling_strategy": NodeAffinitySchedulingStrategy(here, soft=False)}


@pytest.mark.parametrize("placement", ["drivers-node", "spread"])
@pytest.mark.parametrize("compiled", [False, True])
def test_shared_memory_searches_equal_the_object_store_path(cluster, data, placement, compiled):
    """Replicas on the driver's node take their queries from, and write their
    results into, a shared-memory segment (faiss_ext/distributed_shm.py); on
    other nodes through the object store; "spread" mixes both in one search.
    Results equal the object-store-only index and one index, with filters and
    after a replica is killed, are the caller's own arrays, and shutdown()
    leaves no segment file."""
    xb, xq = data
    ids = np.arange(3000, dtype=np.int64)
    opts = _on_the_drivers_node() if placement == "drivers-node" else \
        {"num_cpus": 0.1, "scheduling_strategy": "SPREAD"}
    kw = dict(n_shards=3, replicas=2, use_gpu=False, actor_options=opts, compiled_search=compiled)
    shared = distributed.ShardedIndex(D_DIM, "QSFlat", **kw)
    store = distributed.ShardedIndex(D_DIM, "QSFlat", shared_memory=False, **kw)
    shared.add(xb)
    store.add(xb)
    refD, refI = reference(xb, ids, xq, 10)
    keep = (ids >= 100) & (ids < 2500)
    for sel, ref in ((None, (refD, refI)), ((100, 2500), reference(xb[keep], ids[keep], xq, 10))):
        D, I = shared.search(xq, 10, sel=sel)
        D2, I2 = store.search(xq, 10, sel=sel)
        np.testing.assert_array_equal(I, I2)
        np.testing.assert_array_equal(D, D2)
        assert_knn_equal(D, I, *ref)
    assert D.flags.writeable and I.flags.writeable
    D[:] = -1  # the caller's arrays: the next search is not affected
    assert shared._segments.acquired >= 2, "no search went through shared memory"
    assert store._segments.acquired == 0
    kill_and_wait(shared.shards[0][0])
    assert_knn_equal(*shared.search(xq, 10), refD, refI)
    paths = shared._segments.live_paths()
    assert paths
    shared.shutdown()
    store.shutdown()
    assert not [p for p in paths if os.path.exists(p)], "segments left after shutdown"


def test_a_replica_serialises_its_index_calls():
    """A compiled graph searches on a thread of its own beside the actor's
    normal calls: every call that touches a replica's index waits for the
    replica's lock (checked on the class itself, without Ray)."""
    import threading
    shard = distributed._Shard(D_DIM, "QSFlat", faiss.METRIC_L2, False)
    x = np.random.default_rng(3).random((20, D_DIM), dtype=np.float32)
    calls = {"add": lambda: shard.add(x, np.arange(20, dtype=np.int64)),
             "search": lambda: shard.search(x[:2], 3, None),
             "remove": lambda: shard.remove(("range", 0, 5)),
             "range_search": lambda: shard.range_search(x[:2], 0.5),
             "vectors": lambda: shard.vectors(),
             "reset": lambda: shard.reset()}
    for name, call in calls.items():
        with shard._index_lock:
            t = threading.Thread(target=call)
            t.start()
            t.join(0.2)
            assert t.is_alive(), "%s ran while the replica's lock was held" % name
        t.join(10)
        assert not t.is_alive(), "%s did not finish once the lock was free" % name


@pytest.mark.parametrize("compiled", [False, True])
def test_a_replica_that_cannot_map_the_segment_takes_the_object_store(cluster, data, compiled):
    """A replica on the driver's node that cannot open the segment's file (in
    another container, say) gets its queries through the object store: the
    search answers as one index and the replica is not sent segments again.
    Simulated by unlinking each segment's file as the driver maps it."""
    xb, xq = data
    ids = np.arange(3000, dtype=np.int64)
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=2, replicas=1, use_gpu=False,
                                     actor_options=_on_the_drivers_node(),
                                     compiled_search=compiled)
    index.add(xb)
    acquire = index._segments.acquire

    def unreachable(nbytes):
        seg = acquire(nbytes)
        if seg is not None and os.path.exists(seg.path):
            os.unlink(seg.path)
        return seg

    index._segments.acquire = unreachable
    refD, refI = reference(xb, ids, xq, 10)
    assert_knn_equal(*index.search(xq, 10), refD, refI)
    assert index._local_actors and not any(index._local_actors.values())
    acquired = index._segments.acquired
    assert_knn_equal(*index.search(xq, 10), refD, refI)
    assert index._segments.acquired == acquired, "a segment for replicas that cannot map it"
    index.shutdown()


def test_range_search_equals_one_index_as_sets(cluster, data):
    xb, xq = data
    ids = np.arange(3000, dtype=np.int64) * 3
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=3, use_gpu=False)
    index.add_with_ids(xb, ids)
    flat = faiss.IndexIDMap(faiss.IndexFlat(D_DIM, faiss.METRIC_L2))
    flat.add_with_ids(xb, ids)
    radius = 0.6
    lims, D, I = index.range_search(xq, radius)
    rlims, rD, rI = flat.range_search(xq, radius)
    assert lims[-1] > 0
    np.testing.assert_array_equal(lims, rlims)
    for q in range(len(xq)):
        a, b = int(lims[q]), int(lims[q + 1])
        ours = dict(zip(I[a:b].tolist(), D[a:b].tolist()))
        theirs = dict(zip(rI[a:b].tolist(), rD[a:b].tolist()))
        assert ours.keys() == theirs.keys(), q
        for i in ours:
            assert abs(ours[i] - theirs[i]) <= 1e-4 * (1 + theirs[i])


def test_bad_arguments_are_refused(cluster, data):
    xb, xq = data
    with pytest.raises(ValueError):
        distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=0, use_gpu=False)
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=2, use_gpu=False)
    with pytest.raises(ValueError):
        index.add_with_ids(xb[:5], np.arange(4))
    with pytest.raises(ValueError):
        index.search(xq[:, :8], 5)
    with pytest.raises(TypeError):
        index.search(xq, 5, sel=np.array([0.5, 1.5]))
    assert index.ntotal == 0


def test_write_ahead_log_rebuilds_a_shard_with_no_replica_left(cluster, data, tmp_path):
    """Every replica of a shard killed: heal() rebuilds it from the snapshot
    and the log (adds and a removal after the snapshot included), and the
    answers equal one index over the surviving data."""
    xb, xq = data
    logs, snap = str(tmp_path / "logs"), str(tmp_path / "snap")
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=3, use_gpu=False, log_dir=logs)
    index.add(xb[:1500])
    index.save(snap)
    index.add(xb[1500:])                    # after the snapshot: only in the log
    index.remove_ids((100, 200))
    for actor in list(index.shards[1]):
        kill_and_wait(actor)
    with pytest.raises(distributed.ShardUnavailableError, match="shard 1"):
        index.search(xq, 10)
    assert index.heal() == 1
    ids = np.setdiff1d(np.arange(3000), np.arange(100, 200))
    refD, refI = reference(xb[ids], ids, xq, 10)
    D, I = index.search(xq, 10)
    assert index.ntotal == len(ids)
    assert_knn_equal(D, I, refD, refI)


def test_load_replays_the_log_after_the_snapshot(cluster, data, tmp_path):
    """A restarted cluster (new actors from load) with the log: the adds
    acknowledged after the last save are back, and new ids continue after them."""
    xb, xq = data
    logs, snap = str(tmp_path / "logs"), str(tmp_path / "snap")
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=2, use_gpu=False, log_dir=logs)
    index.add(xb[:1000])
    index.save(snap)
    index.add(xb[1000:2000])
    del index
    back = distributed.ShardedIndex.load(snap, use_gpu=False, log_dir=logs)
    assert back.ntotal == 2000 and back.next_id == 2000
    back.add(xb[2000:])
    refD, refI = reference(xb, np.arange(3000), xq, 10)
    D, I = back.search(xq, 10)
    assert_knn_equal(D, I, refD, refI)
    without_log = distributed.ShardedIndex.load(snap, use_gpu=False)
    assert without_log.ntotal == 1000   # what the snapshot alone holds


def test_progress_of_a_long_add(cluster, data):
    xb, _ = data
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=2, use_gpu=False)
    seen = []
    index.add(xb, progress=lambda done, total: seen.append((done, total)), batch_size=700)
    assert seen == [(700, 3000), (1400, 3000), (2100, 3000), (2800, 3000), (3000, 3000)]
    assert index.ntotal == 3000
    with pytest.raises(TypeError, match="progress"):
        index.add(xb[:10], progress="yes")
    with pytest.raises(ValueError, match="batch_size"):
        index.add(xb[:10], batch_size=0)


# ---- k-NN graphs over actors (faiss_ext.distributed.build_knn_graph) ----

def exact_graph(x, k, metric):
    """The exact k-NN graph of x, each row's own entry left out."""
    flat = faiss.IndexFlat(x.shape[1], metric)
    flat.add(x)
    D, I = flat.search(x, k + 1)
    keep = I != np.arange(len(x))[:, None]
    order = np.argsort(~keep, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, order, 1), np.take_along_axis(I, order, 1)


def test_pair_rounds_meet_every_pair_once_in_disjoint_rounds():
    from faiss_ext.distributed_graph import pair_rounds
    for n in range(1, 9):
        rounds = pair_rounds(n)
        seen = [p for r in rounds for p in r]
        assert sorted(seen) == [(i, j) for i in range(n) for j in range(i + 1, n)], n
        for r in rounds:
            members = [s for p in r for s in p]
            assert len(members) == len(set(members)), (n, r)
        assert len(rounds) == (0 if n < 2 else n - 1 if n % 2 == 0 else n), n


def test_merge_neighbour_lists_keeps_the_best_distinct_ids():
    from faiss_ext.distributed_graph import merge_neighbour_lists
    I = np.array([[5, 7, -1]], dtype=np.int64)
    D = np.array([[1.0, 3.0, np.inf]], dtype=np.float32)
    cI = np.array([[7, 2, 9]], dtype=np.int64)
    cD = np.array([[3.0, 2.0, 0.5]], dtype=np.float32)
    mI, mD = merge_neighbour_lists(I, D, cI, cD, 3, larger_is_better=False)
    assert mI.tolist() == [[9, 5, 2]] and mD.tolist() == [[0.5, 1.0, 2.0]]
    D[0, 2] = -np.inf  # padding of a similarity list
    mI, mD = merge_neighbour_lists(I, D, cI, cD, 4, larger_is_better=True)
    assert mI.tolist() == [[7, 2, 5, 9]] and mD.tolist() == [[3.0, 2.0, 1.0, 0.5]]


@pytest.mark.parametrize("metric", [faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT])
def test_knn_graph_of_exact_shards_is_the_exact_graph(cluster, metric):
    rng = np.random.default_rng(31)
    x = rng.random((1700, D_DIM), dtype=np.float32)
    parts = [x[:400], x[400:700], x[700:1300], x[1300:1550], x[1550:]]  # 5 shards: odd rounds
    steps = []
    g = distributed.build_knn_graph(parts, 10, metric=metric, use_gpu=False,
                                    progress=lambda done, total: steps.append((done, total)))
    D, I = g.gather()
    refD, refI = exact_graph(x, 10, metric)
    assert_knn_equal(D, I, refD, refI, larger_is_better=metric == faiss.METRIC_INNER_PRODUCT)
    assert steps[-1][0] == steps[-1][1] == 1 + 5 and [s[0] for s in steps] == list(range(1, 7))
    D2, I2 = g.shard(2)
    np.testing.assert_array_equal(I2, I[700:1300])
    assert [p["on_gpu"] for p in g.placements()] == [False] * 5


def test_knn_graph_of_parts_already_in_the_cluster(cluster):
    # ObjectRefs (data that never passes through the caller) give the same
    # graph; a bad one is refused by its actor, naming the part.
    rng = np.random.default_rng(32)
    x = rng.random((900, D_DIM), dtype=np.float32)
    refs = [ray.put(x[:300]), ray.put(x[300:650]), ray.put(x[650:])]
    D, I = distributed.build_knn_graph(refs, 8, use_gpu=False).gather()
    refD, refI = exact_graph(x, 8, faiss.METRIC_L2)
    assert_knn_equal(D, I, refD, refI)
    bad = x[:300].copy()
    bad[7, 1] = np.inf
    with pytest.raises(ValueError, match="part 1 holds NaN"):
        distributed.build_knn_graph([refs[0], ray.put(bad)], 8, use_gpu=False)
    with pytest.raises(ValueError, match="part 1 has d = 8"):
        distributed.build_knn_graph([refs[0], ray.put(x[:300, :8])], 8, use_gpu=False)


def test_knn_graph_refuses_bad_parts_before_starting_actors(cluster):
    rng = np.random.default_rng(5)
    a = rng.random((50, D_DIM), dtype=np.float32)
    with pytest.raises(ValueError, match="more than k"):
        distributed.build_knn_graph([a, a[:10]], 10, use_gpu=False)
    with pytest.raises(ValueError, match="d = 8"):
        distributed.build_knn_graph([a, a[:, :8]], 5, use_gpu=False)
    bad = a.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        distributed.build_knn_graph([a, bad], 5, use_gpu=False)
    with pytest.raises(ValueError, match="non-empty"):
        distributed.build_knn_graph([], 5, use_gpu=False)
    with pytest.raises(ValueError, match="k must be"):
        distributed.build_knn_graph([a], 0, use_gpu=False)
    with pytest.raises(ValueError, match="metric"):
        distributed.build_knn_graph([a], 5, metric=23, use_gpu=False)


def test_knn_graph_names_the_shard_whose_actor_died(cluster):
    rng = np.random.default_rng(6)
    parts = [rng.random((300, D_DIM), dtype=np.float32) for _ in range(3)]
    g = distributed.build_knn_graph(parts, 5, use_gpu=False)
    kill = g.actors[1]
    ray.kill(kill, no_restart=True)
    with pytest.raises(distributed.ShardUnavailableError, match="graph shard 1"):
        for _ in range(50):  # ray.kill is asynchronous
            g.shard(1)
            time.sleep(0.1)


def test_sharded_index_knn_graph_is_the_exact_graph_by_id(cluster):
    # The graph of what a ShardedIndex holds, keyed by its ids (here not
    # the rows' order: ids 1000 + 2 i, routed to shard id % 4, so shards 0
    # and 2 hold interleaved rows and shards 1 and 3 stay empty).
    rng = np.random.default_rng(33)
    x = rng.random((1200, D_DIM), dtype=np.float32)
    ids = 1000 + 2 * np.arange(1200, dtype=np.int64)
    index = distributed.ShardedIndex(D_DIM, "QSFlat", n_shards=4, replicas=2, use_gpu=False)
    index.add_with_ids(x, ids)
    got_ids, D, I = index.knn_graph(6)
    np.testing.assert_array_equal(got_ids, ids)
    refD, refPos = exact_graph(x, 6, faiss.METRIC_L2)
    assert_knn_equal(D, I, refD, ids[refPos])
