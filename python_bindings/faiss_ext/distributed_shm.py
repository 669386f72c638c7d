"""Queries and results of a ShardedIndex's searches through shared memory,
for shard actors on the driver's own host.

Through Ray's object store, 10,000 x 96 queries out to four actors and their
10,000 x 10 results back took 13.5 ms a search on a 2-core machine, against
2.7 ms for the same calls carrying only a few numbers (putting 3.8 MB into
the store alone took 3.9 ms there, where a memcpy takes 0.2 ms). So when an
actor runs on the driver's host, the driver writes the queries once into a
file in /dev/shm (a "segment"), every call carries only a SearchTicket naming
the segment and the actor's rows, and each actor writes its (D, I) into its
shard's region of the same segment. Ray still places the actors, makes the
calls and reports failures; only the bytes skip its object store. Actors on
other hosts get the queries through the object store, as before.

Layout of a segment for nq queries of d floats, k results, n_shards shards:
the queries (nq, d) float32, then per shard its distances (nq, k) float32 and
its labels (nq, k) int64, each region 64-byte aligned.

Segments are reused: the driver takes one from a pool per search and gives
it back once the results are merged. A search that fails part-way discards
its segment instead (an actor may still be writing to it): the file is
unlinked and never handed out again.
"""

import collections
import concurrent.futures
import mmap
import os
import threading
import uuid
import weakref

import numpy as np

SHM_DIRECTORY = "/dev/shm"
# Larger searches go through the object store (and never fill /dev/shm).
MAX_SEGMENT_BYTES = 1 << 30
_ALIGN = 64
_FREE_SEGMENTS_KEPT = 2
# Queries of at least this many bytes are copied into a segment by several
# threads (numpy's copy releases the GIL): one thread copied 3.8 MB in about
# 0.5-0.8 ms on the H200 host, the largest part of a search's time before
# the first shard starts.
_PARALLEL_COPY_BYTES = 1 << 20
_COPY_THREADS = 4
_copy_pool = None
_copy_pool_lock = threading.Lock()


def _copy_rows(dst, src):
    """dst[:] = src, by _COPY_THREADS threads for large arrays."""
    global _copy_pool
    if src.nbytes < _PARALLEL_COPY_BYTES or len(src) < _COPY_THREADS:
        np.copyto(dst, src)
        return
    with _copy_pool_lock:
        if _copy_pool is None:
            _copy_pool = concurrent.futures.ThreadPoolExecutor(_COPY_THREADS)
    bounds = np.linspace(0, len(src), _COPY_THREADS + 1).astype(int)
    jobs = [_copy_pool.submit(np.copyto, dst[a:b], src[a:b]) for a, b in zip(bounds, bounds[1:])]
    for job in jobs:
        job.result()


class SearchTicket(collections.namedtuple(
        "SearchTicket", "path size nq d k row0 rows n_shards")):
    """What one search call carries instead of its queries: the segment's
    file and size, the search's shape and the rows [row0, row0 + rows) of
    the queries this call answers (its shard is the actor's own)."""


def _aligned(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def segment_bytes(nq, d, k, n_shards):
    """Bytes of a segment for a search of nq queries (see the layout above)."""
    return _aligned(4 * nq * d) + n_shards * (_aligned(4 * nq * k) + _aligned(8 * nq * k))


def _views(buffer, nq, d, k, shard):
    """(queries, distances, labels) of `shard` in a segment's buffer."""
    q0 = 0
    s0 = _aligned(4 * nq * d) + shard * (_aligned(4 * nq * k) + _aligned(8 * nq * k))
    queries = np.frombuffer(buffer, np.float32, nq * d, q0).reshape(nq, d)
    D = np.frombuffer(buffer, np.float32, nq * k, s0).reshape(nq, k)
    I = np.frombuffer(buffer, np.int64, nq * k, s0 + _aligned(4 * nq * k)).reshape(nq, k)
    return queries, D, I


def _map(path, size, create):
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(path, flags, 0o600)
    try:
        if create:
            # allocates the pages now: a full /dev/shm raises OSError here
            # instead of SIGBUS on a later write
            os.posix_fallocate(fd, 0, size)
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
    finally:
        os.close(fd)


class Segment:
    """One shared-memory file of the driver, mapped."""

    def __init__(self, directory, size):
        self.size = size
        self.path = os.path.join(directory, "faiss_ext-%s" % uuid.uuid4().hex)
        try:
            self._mm = _map(self.path, size, create=True)
        except BaseException:
            self._unlink()
            raise

    def ticket(self, nq, d, k, row0, rows, n_shards):
        return SearchTicket(self.path, self.size, nq, d, k, row0, rows, n_shards)

    def write_queries(self, x):
        queries, _, _ = _views(self._mm, len(x), x.shape[1], 0, 0)
        _copy_rows(queries, x)

    def results(self, nq, d, k, shard):
        """(D, I) views of `shard`'s region (valid while the segment lives)."""
        _, D, I = _views(self._mm, nq, d, k, shard)
        return D, I

    def _unlink(self):
        _unlink_all([self.path])

    def destroy(self):
        """Unlinks the file; the memory goes when the last view and the
        actors' mappings are gone."""
        self._unlink()
        _close_mapping(self._mm)


class SegmentPool:
    """The driver's segments: acquire one per search, release it after the
    merge (reused), or discard it when the search failed part-way."""

    def __init__(self, directory=SHM_DIRECTORY):
        self.directory = directory
        self.enabled = (directory is not None and os.path.isdir(directory)
                        and os.access(directory, os.W_OK))
        self._free = []
        self._live = set()  # every segment not yet destroyed, by path
        self._lock = threading.Lock()
        self.acquired = 0  # searches that got a segment (tests, benches)
        self._closed = False
        # an index dropped without shutdown(), or the interpreter exiting,
        # still unlinks its files (a killed driver leaves them: faiss_ext-*)
        weakref.finalize(self, _unlink_all, self._live)

    def acquire(self, nbytes):
        """A segment of at least nbytes, or None (too large, shared memory
        unavailable or full: the caller uses Ray's object store)."""
        if not self.enabled or self._closed or nbytes > MAX_SEGMENT_BYTES:
            return None
        with self._lock:
            fits = [s for s in self._free if s.size >= nbytes]
            if fits:
                seg = min(fits, key=lambda s: s.size)
                self._free.remove(seg)
                self.acquired += 1
                return seg
        try:
            # a power of two: one segment serves the batch sizes around it
            seg = Segment(self.directory, max(1 << 20, 1 << (int(nbytes) - 1).bit_length()))
        except OSError:
            return None
        with self._lock:
            self._live.add(seg.path)
            self.acquired += 1
        return seg

    def release(self, seg):
        if self._closed:
            self.discard(seg)
            return
        with self._lock:
            self._free.append(seg)
            self._free.sort(key=lambda s: -s.size)
            drop = self._free[_FREE_SEGMENTS_KEPT:]
            del self._free[_FREE_SEGMENTS_KEPT:]
        for s in drop:
            self.discard(s)

    def discard(self, seg):
        with self._lock:
            self._live.discard(seg.path)
        seg.destroy()

    def close(self):
        """Destroys the free segments (those of searches in flight go when
        they end: discard)."""
        with self._lock:
            self._closed = True
            free, self._free = self._free, []
        for s in free:
            self.discard(s)

    def live_paths(self):
        """The files of the segments not destroyed yet."""
        with self._lock:
            return sorted(self._live)


def _unlink_all(paths):
    for path in list(paths):
        try:
            os.unlink(path)
        except OSError:
            pass


def _close_mapping(mm):
    try:
        mm.close()
    except BufferError:  # views still exported: the mapping closes with them
        pass


class AttachedSegments:
    """An actor's mappings of the driver's segments, the few latest kept."""

    def __init__(self, keep=4):
        self._maps = collections.OrderedDict()
        self._keep = keep

    def views(self, ticket, shard):
        """(queries, D, I) of this call's rows in `ticket`'s segment."""
        mm = self._maps.get(ticket.path)
        if mm is None:
            mm = _map(ticket.path, ticket.size, create=False)
            self._maps[ticket.path] = mm
            while len(self._maps) > self._keep:
                _close_mapping(self._maps.popitem(last=False)[1])
        else:
            self._maps.move_to_end(ticket.path)
        queries, D, I = _views(mm, ticket.nq, ticket.d, ticket.k, shard)
        rows = slice(ticket.row0, ticket.row0 + ticket.rows)
        return queries[rows], D[rows], I[rows]
