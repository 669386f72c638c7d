"""faiss_ext.distributed_shm (CPU, no Ray needed): the shared-memory
segments a ShardedIndex's searches use for actors on the driver's host. An
actor's views see the driver's queries and the driver sees what the actor
writes, each shard in its own region; the pool reuses released segments,
unlinks discarded ones and all of them at close, and declines (None, the
object store then) where a segment is too large, shared memory is off or
full (posix_fallocate failing) or the pool is closed."""

import errno
import os

import numpy as np
import pytest

from faiss_ext import distributed_shm as shm

pytestmark = pytest.mark.skipif(not os.path.isdir(shm.SHM_DIRECTORY),
                                reason="no %s on this machine" % shm.SHM_DIRECTORY)


def test_actor_views_share_the_drivers_queries_and_results():
    pool = shm.SegmentPool()
    nq, d, k, n_shards = 37, 5, 3, 3
    seg = pool.acquire(shm.segment_bytes(nq, d, k, n_shards))
    assert seg is not None and os.path.exists(seg.path)
    x = np.random.default_rng(1).random((nq, d), dtype=np.float32)
    seg.write_queries(x)
    attached = shm.AttachedSegments()
    for s in range(n_shards):  # each "actor" takes rows 10..29 of its shard
        ticket = seg.ticket(nq, d, k, 10, 20, n_shards)
        q, D, I = attached.views(ticket, s)
        np.testing.assert_array_equal(q, x[10:30])
        D[:] = s + 0.5
        I[:] = s
    for s in range(n_shards):
        D, I = seg.results(nq, d, k, s)
        assert (D[10:30] == s + 0.5).all() and (I[10:30] == s).all()
        assert (I[:10] == 0).all() and (I[30:] == 0).all()  # rows of no call untouched
    pool.release(seg)
    pool.close()
    assert not os.path.exists(seg.path)


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
    """Queries past _PARALLEL_COPY_BYTES are copied in row slices by a
    thread pool: every row arrives, odd row counts included."""
    pool = shm.SegmentPool()
    for nq in (shm._COPY_THREADS, 10007):
        x = np.random.default_rng(nq).random((nq, 64), dtype=np.float32)
        assert nq == shm._COPY_THREADS or x.nbytes >= shm._PARALLEL_COPY_BYTES
        seg = pool.acquire(shm.segment_bytes(nq, 64, 1, 1))
        seg.write_queries(x)
        q, _, _ = shm.AttachedSegments().views(seg.ticket(nq, 64, 1, 0, nq, 1), 0)
        np.testing.assert_array_equal(q, x)
        pool.discard(seg)
    pool.close()
