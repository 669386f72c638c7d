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

Layout of a segment for one search (a SearchShape: nq queries of d floats,
k results, n_shards shards answered in `parts` calls each at most): a header
of int64 flags, then the queries (nq, d) float32, then per shard its
distances (nq, k) float32 and its labels (nq, k) int64, each region 64-byte
aligned. Flag 0 holds the number of the search whose queries are written;
flag 1 + slot (slot = shard * parts + part) the number of the search whose
results that call wrote.

Flag 0 lets the driver copy the queries while its calls travel: each actor
starts once it shows them written (and knows that the queries in a reused
segment are its search's). The results flags take Ray's reply off the
critical path: the driver merges a shard's results as soon as its flag is
up instead of waiting for Ray to return the call (0.3-0.7 ms after the
shard's end on an H200 host, bench/distributed_bench.py). Ray still carries
the calls and reports failures (a call that ended without its flag raised
or its actor died).

Segments are reused: the driver takes one from a pool per search and gives
it back once the results are merged. A search that fails part-way discards
its segment instead (an actor may still be writing to it): the file is
unlinked and never handed out again.
"""

import collections
import mmap
import os
import threading
import uuid
import weakref

import numpy as np

from faiss_ext import _faiss_ext as _C

SHM_DIRECTORY = "/dev/shm"
# Larger searches go through the object store (and never fill /dev/shm).
MAX_SEGMENT_BYTES = 1 << 30
_ALIGN = 64
_FREE_SEGMENTS_KEPT = 2
# Queries of at least this many bytes are copied into a segment by several
# C++ threads without the GIL, while the driver submits its calls (_ShmCopy):
# one Python thread copied 3.8 MB in 0.5-0.8 ms on the H200 host, where the
# first call takes ~1.2 ms to start.
_PARALLEL_COPY_BYTES = 1 << 20
_COPY_THREADS = 4

# How long an actor waits for the driver's queries to be flagged written
# (the copy takes milliseconds; only a driver that died while copying
# leaves the flag down).
QUERY_WAIT_SECONDS = 10.0


class SearchShape(collections.namedtuple("SearchShape", "nq d k n_shards parts")):
    """One search's shape in a segment: nq queries of d floats, k results,
    n_shards shards each answered by at most `parts` calls (the slices of
    its replicas)."""

    @property
    def slots(self):
        return self.n_shards * self.parts

    def slot(self, shard, part):
        """The results flag of a shard's call (flag 1 + slot)."""
        return shard * self.parts + part


class SearchTicket(collections.namedtuple("SearchTicket", "path size shape seq part row0 rows")):
    """What one search call carries instead of its queries: the segment's
    file and size, the search's SearchShape and number (seq), which of its
    shard's calls it is (part) and the rows [row0, row0 + rows) of the
    queries it answers (its shard is the actor's own; a compiled graph
    passes one ticket to the same part of every shard)."""


class SegmentUnreachable(OSError):
    """An actor could not map the driver's segment (a replica that shares the
    driver's Ray node but not its /dev/shm, e.g. in another container): the
    driver then sends that replica its queries through the object store."""


def _aligned(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _header_bytes(shape):
    return _aligned(8 * (1 + shape.slots))


def segment_bytes(shape):
    """Bytes of a segment for a search of SearchShape `shape` (see the
    layout above)."""
    nq, d, k = shape.nq, shape.d, shape.k
    return (_header_bytes(shape) + _aligned(4 * nq * d)
            + shape.n_shards * (_aligned(4 * nq * k) + _aligned(8 * nq * k)))


def _flags(buffer, shape):
    """The header's flags of a segment's buffer (see the layout above)."""
    return np.frombuffer(buffer, np.int64, 1 + shape.slots, 0)


def _views(buffer, shape, shard):
    """(flags, queries, distances, labels) of `shard` in a segment's buffer."""
    nq, d, k = shape.nq, shape.d, shape.k
    q0 = _header_bytes(shape)
    s0 = q0 + _aligned(4 * nq * d) + shard * (_aligned(4 * nq * k) + _aligned(8 * nq * k))
    flags = _flags(buffer, shape)
    queries = np.frombuffer(buffer, np.float32, nq * d, q0).reshape(nq, d)
    D = np.frombuffer(buffer, np.float32, nq * k, s0).reshape(nq, k)
    I = np.frombuffer(buffer, np.int64, nq * k, s0 + _aligned(4 * nq * k)).reshape(nq, k)
    return flags, queries, D, I


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
        self.shape, self.seq, self._copy = None, 0, None
        try:
            self._mm = _map(self.path, size, create=True)
        except BaseException:
            self._unlink()
            raise

    def begin(self, x, shape, seq):
        """Starts search number seq (of SearchShape shape) in this segment:
        its queries x are copied in and flag 0 set to seq once they are
        (the actors wait for it), large ones by C++ threads while the caller
        goes on submitting its calls; finish_copy() waits for the copy (x
        must not change before)."""
        self.shape, self.seq = shape, seq
        flags, queries, _, _ = _views(self._mm, shape, 0)
        if x.nbytes >= _PARALLEL_COPY_BYTES:
            self._copy = _C._ShmCopy(queries, x, _COPY_THREADS, flags, 0, seq)
        else:
            np.copyto(queries, x)
            _C._shm_signal(flags, 0, seq)

    def finish_copy(self):
        """Waits until the queries of the search begun are copied."""
        copy, self._copy = self._copy, None
        if copy is not None:
            copy.wait()

    def ticket(self, part, row0, rows):
        """The ticket of the calls answering rows [row0, row0 + rows) as
        part `part` of their shard."""
        return SearchTicket(self.path, self.size, self.shape, self.seq, part, row0, rows)

    def results(self, shard):
        """(D, I) views of `shard`'s region (valid while the segment lives)."""
        _, _, D, I = _views(self._mm, self.shape, shard)
        return D, I

    def wait_results(self, slots, timeout):
        """The slots (SearchShape.slot, of `slots`) whose call of this search
        has written its results, waiting up to timeout seconds for one; []
        after that."""
        flags = _flags(self._mm, self.shape)
        return [f - 1 for f in _C._shm_wait(flags, [1 + s for s in slots], self.seq, timeout)]

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
        """(queries, D, I) of this call's rows in `ticket`'s segment, once
        the driver has flagged the queries written (TimeoutError after
        QUERY_WAIT_SECONDS: the driver failed while copying;
        SegmentUnreachable where the segment cannot be mapped here)."""
        mm = self._maps.get(ticket.path)
        if mm is None:
            try:
                mm = _map(ticket.path, ticket.size, create=False)
            except OSError as e:
                raise SegmentUnreachable(e.errno, "cannot map the driver's segment %s: %s"
                                         % (ticket.path, e.strerror)) from e
            self._maps[ticket.path] = mm
            while len(self._maps) > self._keep:
                _close_mapping(self._maps.popitem(last=False)[1])
        else:
            self._maps.move_to_end(ticket.path)
        flags, queries, D, I = _views(mm, ticket.shape, shard)
        if not _C._shm_wait(flags, [0], ticket.seq, QUERY_WAIT_SECONDS):
            raise TimeoutError("search %d: the driver did not write its queries into %s within "
                               "%g s" % (ticket.seq, ticket.path, QUERY_WAIT_SECONDS))
        rows = slice(ticket.row0, ticket.row0 + ticket.rows)
        return queries[rows], D[rows], I[rows]

    def finished(self, ticket, shard):
        """Flags this call's results written (after every write to them)."""
        flags = _flags(self._maps[ticket.path], ticket.shape)
        _C._shm_signal(flags, 1 + ticket.shape.slot(shard, ticket.part), ticket.seq)
