"""faiss_ext.distributed_shm (CPU, no Ray needed): the shared-memory
segments a ShardedIndex's searches use for actors on the driver's host. An
actor's views see the driver's queries and the driver sees what the actor
writes, each shard in its own region; the pool reuses released segments,
unlinks discarded ones and all of them at close, and declines (None, the
object store then) where a segment is too large, shared memory is off or
full (posix_fallocate failing) or the pool is closed. The flags: an actor
starts once the driver flags its queries written, the driver takes a call's
results once the actor flags them, a reused segment's old flags count for
nothing."""

import errno
import os

import numpy as np
import pytest

from faiss_ext import distributed_shm as shm

pytestmark = pytest.mark.skipif(not os.path.isdir(shm.SHM_DIRECTORY),
                                reason="no %s on this machine" % shm.SHM_DIRECTORY)


def _begun(pool, x, k, n_shards, parts, seq):
    """A segment of the pool with search number seq begun, its queries x copied."""
    shape = shm.SearchShape(len(x), x.shape[1], k, n_shards, parts)
    seg = pool.acquire(shm.segment_bytes(shape))
    assert seg is not None and os.path.exists(seg.path)
    seg.begin(x, shape, seq)
    seg.finish_copy()
    return seg


def test_actor_views_share_the_drivers_queries_and_results():
    pool = shm.SegmentPool()
    nq, d, k, n_shards = 37, 5, 3, 3
    x = np.random.default_rng(1).random((nq, d), dtype=np.float32)
    seg = _begun(pool, x, k, n_shards, parts=2, seq=7)
    attached = shm.AttachedSegments()
    for s in range(n_shards):  # each "actor" answers rows 10..29 as part 1 of its shard
        ticket = seg.ticket(1, 10, 20)
        q, D, I = attached.views(ticket, s)
        np.testing.assert_array_equal(q, x[10:30])
        D[:] = s + 0.5
        I[:] = s
        attached.finished(ticket, s)
    flagged = [seg.shape.slot(s, 1) for s in range(n_shards)]
    unflagged = [seg.shape.slot(s, 0) for s in range(n_shards)]
    assert sorted(seg.wait_results(flagged + unflagged, 0.0)) == flagged
    assert seg.wait_results(unflagged, 0.01) == [], "parts that wrote nothing are not flagged"
    for s in range(n_shards):
        D, I = seg.results(s)
        assert (D[10:30] == s + 0.5).all() and (I[10:30] == s).all()
        assert (I[:10] == 0).all() and (I[30:] == 0).all()  # rows of no call untouched
    pool.release(seg)
    pool.close()
    assert not os.path.exists(seg.path)


def test_flags_of_an_earlier_search_do_not_count(monkeypatch):
    """A reused segment holds the previous search's flags: an actor given the
    next search's ticket waits for that search's queries (TimeoutError if
    they never come) and the driver does not take old results for new."""
    monkeypatch.setattr(shm, "QUERY_WAIT_SECONDS", 0.05)
    pool = shm.SegmentPool()
    x = np.ones((8, 4), dtype=np.float32)
    seg = _begun(pool, x, 2, 1, parts=1, seq=1)
    attached = shm.AttachedSegments()
    attached.views(seg.ticket(0, 0, 8), 0)
    attached.finished(seg.ticket(0, 0, 8), 0)
    pool.release(seg)
    again = pool.acquire(shm.segment_bytes(seg.shape))
    assert again is seg
    stale = shm.SearchTicket(seg.path, seg.size, seg.shape, 2, 0, 0, 8)
    with pytest.raises(TimeoutError, match="did not write its queries"):
        attached.views(stale, 0)
    seg.begin(2 * x, seg.shape, 2)
    assert seg.wait_results([0], 0.01) == [], "search 1's flag is not search 2's"
    q, _, _ = attached.views(seg.ticket(0, 0, 8), 0)
    np.testing.assert_array_equal(q, 2 * x)
    pool.close()


def test_an_actor_starts_once_the_queries_are_flagged():
    """The actor's call may arrive before the driver's copy ends (the driver
    submits while it copies): views() waits for flag 0, without the GIL."""
    import threading
    pool = shm.SegmentPool()
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    shape = shm.SearchShape(10, 4, 1, 1, 1)
    seg = pool.acquire(shm.segment_bytes(shape))
    seg.shape, seg.seq = shape, 5  # the ticket exists before the copy starts
    ticket = seg.ticket(0, 0, 10)
    seen = []
    actor = threading.Thread(target=lambda: seen.append(
        shm.AttachedSegments().views(ticket, 0)[0].copy()))
    actor.start()
    actor.join(0.05)
    assert actor.is_alive(), "the actor waits for the queries"
    seg.begin(x, shape, 5)
    seg.finish_copy()
    actor.join(5)
    assert not actor.is_alive()
    np.testing.assert_array_equal(seen[0], x)
    pool.close()


def test_flag_helpers_refuse_what_they_cannot_share():
    from faiss_ext import _faiss_ext as C
    flags = np.zeros(4, dtype=np.int64)
    C._shm_signal(flags, 3, 9)
    assert flags[3] == 9 and C._shm_wait(flags, [1, 3], 9, 0.0) == [3]
    with pytest.raises(TypeError, match="int64"):
        C._shm_signal(np.zeros(4, dtype=np.int32), 0, 1)
    readonly = flags.copy()
    readonly.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        C._shm_wait(readonly, [0], 1, 0.0)
    with pytest.raises(IndexError, match="outside"):
        C._shm_signal(flags, 4, 1)
    with pytest.raises(ValueError, match="timeout"):
        C._shm_wait(flags, [0], 1, -1.0)
    src = np.ones((3, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="shape"):
        C._ShmCopy(np.zeros((3, 3), dtype=np.float32), src, 1, flags, 0, 1)
    with pytest.raises(TypeError, match="float32"):
        C._ShmCopy(np.zeros((3, 2), dtype=np.float64), src, 1, flags, 0, 1)
    with pytest.raises(ValueError, match="threads"):
        C._ShmCopy(np.zeros((3, 2), dtype=np.float32), src, 0, flags, 0, 1)
    with pytest.raises(IndexError, match="outside"):
        C._ShmCopy(np.zeros((3, 2), dtype=np.float32), src, 1, flags, 4, 1)
    dst = np.zeros((3, 2), dtype=np.float32)
    C._ShmCopy(dst, src, 2, flags, 0, 6).wait()
    assert (dst == 1).all() and flags[0] == 6


def test_pool_reuses_released_and_unlinks_discarded_segments():
    pool = shm.SegmentPool()
    a = pool.acquire(1000)
    pool.release(a)
    b = pool.acquire(2000)
    assert b is a, "a released segment large enough is reused"
    c = pool.acquire(4 << 20)
    assert c is not a and c.size >= 4 << 20
    pool.discard(c)
    assert not os.path.exists(c.path)
    assert pool.live_paths() == [a.path]
    pool.release(b)
    pool.close()
    assert pool.live_paths() == [] and not os.path.exists(a.path)
    assert pool.acquire(10) is None, "a closed pool hands out nothing"


def test_pool_declines_what_it_cannot_serve(monkeypatch):
    assert shm.SegmentPool(directory=None).acquire(10) is None
    pool = shm.SegmentPool()
    assert pool.acquire(shm.MAX_SEGMENT_BYTES + 1) is None

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    before = set(os.listdir(shm.SHM_DIRECTORY))
    assert pool.acquire(1000) is None
    assert set(os.listdir(shm.SHM_DIRECTORY)) <= before, "a failed segment leaves no file"
    assert pool.live_paths() == []


def test_a_pool_dropped_without_close_unlinks_its_files():
    import gc
    pool = shm.SegmentPool()
    seg = pool.acquire(10)
    path = seg.path
    pool.release(seg)
    del pool, seg
    gc.collect()
    assert not os.path.exists(path)


def test_large_queries_are_copied_whole_by_several_threads():
    """Queries past _PARALLEL_COPY_BYTES are copied in row slices by C++
    threads (_ShmCopy), flag 0 set after: every row arrives, odd row counts
    included."""
    pool = shm.SegmentPool()
    for nq in (shm._COPY_THREADS, 10007):
        x = np.random.default_rng(nq).random((nq, 64), dtype=np.float32)
        assert nq == shm._COPY_THREADS or x.nbytes >= shm._PARALLEL_COPY_BYTES
        seg = _begun(pool, x, 1, 1, parts=1, seq=1)
        q, _, _ = shm.AttachedSegments().views(seg.ticket(0, 0, nq), 0)
        np.testing.assert_array_equal(q, x)
        pool.discard(seg)
    pool.close()
