"""faiss_ext indexes as shards on Ray actors (``import faiss_ext.distributed``).

A :class:`ShardedIndex` keeps ``n_shards`` shards, each a Ray actor holding
one faiss_ext index made from a factory string (moved to the actor's GPU when
it has one, its CPU twin otherwise), and ``replicas`` copies of each shard:

- ``add`` / ``add_with_ids`` route every vector to the shard ``id % n_shards``
  (ids stay global) and return once every live replica of that shard holds it;
- ``search`` sends the queries to every shard, split across its replicas, and
  merges the shards' sorted results (``faiss_ext.merge_knn_results``, a k-way
  merge in C++): for exact shards the same results as one index over all the
  data, ties aside;
- ``remove_ids`` and ``search(..., sel=...)`` take an id range ``(lo, hi)``
  or an array of ids (FAISS's IDSelector objects cannot travel between
  processes) and apply it on every shard;
- ``save(directory)`` writes each shard with faiss_ext's ``write_index``;
  ``ShardedIndex.load(directory)`` brings a cluster back to the same answers;
- a replica that dies is dropped: its shard's other replicas answer, and when
  none is left the call fails with an error naming the shard;
- with ``log_dir``, every add, removal and reset is written ahead to the
  shard's log (fsync'ed) before any replica gets it: ``heal()`` rebuilds a
  shard that lost every replica from its last snapshot (``save``) and its log,
  and ``load(directory, log_dir=...)`` replays what came after the snapshot,
  so no acknowledged add is lost;
- ``add(x, progress=f)`` adds in batches and calls ``f(done, total)``.

``build_knn_graph(parts, k)`` (faiss_ext/distributed_graph.py) builds the
k-NN graph of data spread over actors: GNND per part, then GGM merges of
every pair of parts scheduled on Ray in rounds of disjoint pairs;
``ShardedIndex.knn_graph(k)`` does it for the vectors a sharded index holds.

Ray is an optional dependency: ``pip install .[distributed]`` or
``pip install ray``. docs/distributed.md says how to run a cluster.
"""

import collections
import functools
import itertools
import json
import os
import pickle
import struct
import threading
import time

import faiss
import numpy as np

try:
    import ray
except ImportError as e:  # pragma: no cover - exercised where Ray is absent
    raise ImportError("faiss_ext.distributed needs Ray: pip install 'ray>=2' (or .[distributed])") from e

__all__ = ["ShardedIndex", "ShardUnavailableError", "build_knn_graph", "ShardedKnnGraph"]


class ShardUnavailableError(RuntimeError):
    """Every replica of a shard has failed."""


import faiss_ext  # noqa: E402
from faiss_ext.distributed_graph import ShardedKnnGraph, build_knn_graph  # noqa: E402
from faiss_ext.distributed_compiled import (CompiledSearch, GraphFailed,  # noqa: E402
                                            stacked_results)
from faiss_ext.distributed_merge import ArrivalOrderMerge  # noqa: E402
from faiss_ext.distributed_shm import (AttachedSegments, SearchShape,  # noqa: E402
                                       SearchTicket, SegmentPool, SegmentUnreachable,
                                       segment_bytes)


def _selector_spec(sel):
    """A picklable form of a filter: None, (lo, hi) for ids in [lo, hi), or
    an int64 array of ids; faiss.IDSelectorRange is taken too."""
    if sel is None:
        return None
    if isinstance(sel, faiss.IDSelectorRange):
        return ("range", int(sel.imin), int(sel.imax))
    if isinstance(sel, tuple) and len(sel) == 2:
        return ("range", int(sel[0]), int(sel[1]))
    ids = np.asarray(sel)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise TypeError("sel must be None, (lo, hi), a faiss.IDSelectorRange or a 1-D array of "
                        "integer ids, got %r" % (type(sel).__name__,))
    return ("ids", ids.astype(np.int64))


def _shared_arg(a):
    """`a` as an argument of several actor calls: large arrays are put in
    Ray's object store once (passed by value, each call would copy them in
    again); small ones travel inline with the call."""
    return ray.put(a) if a.nbytes >= (64 << 10) else a


def _selected(ids, spec):
    """Which of a shard's global ids the filter `spec` keeps (bool array)."""
    if spec[0] == "range":
        return (ids >= spec[1]) & (ids < spec[2])
    return np.isin(ids, spec[1])


def _pad_as_the_shards(outD, outI, shardD, shardI):
    """Entries no shard filled (label -1) get the distance the shards pad
    with (FAISS's indexes: +-FLT_MAX; faiss_ext's GPU indexes: +-inf), so
    that a sharded index pads as one index of the same kind would."""
    missing = outI == -1
    if not missing.any():
        return
    for D, I in zip(shardD, shardI):
        padded = I == -1
        if padded.any():
            outD[missing] = D[padded][0]
            return


# How often a search waiting on its segment's flags asks Ray about its calls:
# for replies of replicas on other nodes, and, where every call answers
# through the segment, only for failures (each ask holds the driver's GIL for
# ~0.1-0.3 ms, which a flag going up then waits for).
_RAY_POLL_SECONDS = 0.001
_FAILURE_POLL_SECONDS = 0.005


class _Call(collections.namedtuple("_Call", "shard part rows actor by_segment")):
    """One search call in flight: which part (rows) of which shard, the
    replica that has it, and whether its results come through the segment."""


def _holding_index_lock(method):
    """Runs a _Shard method under the replica's lock: a compiled graph runs
    the replica's searches on a thread of its own, beside the normal calls
    (adds, removals) on the actor's main thread (Ray leaves that
    synchronisation to the actor)."""
    @functools.wraps(method)
    def locked(self, *args):
        with self._index_lock:
            return method(self, *args)
    return locked


class _Shard:
    """One replica of one shard: an index over positions 0..n-1 and the
    global id of each position (the shard's own id map, so that filters and
    deletes work on FAISS 1.7.3, whose IndexIDMap refuses search parameters)."""

    def __init__(self, d, description, metric, use_gpu, shard=0):
        import faiss_ext
        self.shard = int(shard)  # its region in a search's shared-memory segment
        self._index_lock = threading.Lock()
        self.index = faiss_ext.index_factory(d, description, metric)
        self._segments = AttachedSegments()
        self.ids = np.empty(0, dtype=np.int64)
        self.last_search_span = (0.0, 0.0)
        self.on_gpu = bool(use_gpu) and faiss_ext.get_num_gpus() > 0
        if self.on_gpu:
            self.res = faiss_ext.StandardGpuResources()
            self.index = faiss_ext.index_cpu_to_gpu(self.res, 0, self.index)

    def node_id(self):
        """The Ray node this replica runs on (the driver passes queries
        through shared memory to replicas on its own node)."""
        return ray.get_runtime_context().get_node_id()

    def placement(self):
        """Where this replica runs: its index on a GPU or not, the GPUs Ray gave it."""
        return {"on_gpu": self.on_gpu, "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}

    @_holding_index_lock
    def train(self, x):
        if not self.index.is_trained:
            self.index.train(x)

    @_holding_index_lock
    def add(self, x, ids):
        self.index.add(x)
        self.ids = np.concatenate([self.ids, ids])
        return len(self.ids)

    def ntotal(self):
        return int(self.index.ntotal)

    def _params(self, spec):
        if spec is None:
            return None, None
        keep = _selected(self.ids, spec)
        bits = np.packbits(keep, bitorder="little")
        sel = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
        p = faiss.SearchParameters()
        p.sel = sel
        return p, (sel, bits)  # the caller keeps them alive during the search

    @_holding_index_lock
    def search(self, x, k, spec):
        """(D, I) with global ids for the queries x; or, where x is a
        SearchTicket (faiss_ext/distributed_shm.py), the queries are read
        from the driver's shared-memory segment once it flags them written,
        the results written into this shard's region of it and flagged, and
        only the number of rows returns."""
        if isinstance(x, SearchTicket):
            queries, D_out, I_out = self._segments.views(x, self.shard)
            t0 = time.monotonic()
            D, I = self._search(queries, k, spec)
            D_out[:] = D
            I_out[:] = self._global_ids(I)
            self.last_search_span = (t0, time.monotonic())
            self._segments.finished(x, self.shard)
            return x.rows
        t0 = time.monotonic()
        D, I = self._search(x, k, spec)
        out = D, self._global_ids(I)
        self.last_search_span = (t0, time.monotonic())
        return out

    def _search(self, x, k, spec):
        params, keep_alive = self._params(spec)
        D, I = self.index.search(x, k, params=params) if params else self.index.search(x, k)
        del keep_alive
        return D, I

    def search_span(self):
        """When this replica's last search began and ended inside the actor
        (time.monotonic(), one clock for every process of a host): the
        selector, the index's search and the id mapping. What a search takes
        outside the union of its shards' spans is the Ray layer's
        (bench/distributed_bench.py)."""
        return self.last_search_span

    def _global_ids(self, positions):
        """The global ids of result positions (-1 padding stays)."""
        positions = np.asarray(positions, dtype=np.int64)
        return np.where(positions >= 0, self.ids[np.maximum(positions, 0)], -1)

    @_holding_index_lock
    def range_search(self, x, radius):
        lims, D, I = self.index.range_search(x, radius)
        return lims, np.asarray(D, dtype=np.float32), self._global_ids(I)

    @_holding_index_lock
    def remove(self, spec):
        gone = _selected(self.ids, spec)
        positions = np.flatnonzero(gone).astype(np.int64)
        if len(positions) == 0:
            return 0
        n = self.index.remove_ids(faiss.IDSelectorBatch(len(positions), faiss.swig_ptr(positions)))
        self.ids = self.ids[~gone]
        return int(n)

    @_holding_index_lock
    def reset(self):
        self.index.reset()
        self.ids = np.empty(0, dtype=np.int64)

    @_holding_index_lock
    def vectors(self):
        """The shard's vectors, in position order (float32, (ntotal, d))."""
        n = int(self.index.ntotal)
        if n == 0:
            return np.empty((0, self.index.d), dtype=np.float32)
        return np.asarray(self.index.reconstruct_n(0, n), dtype=np.float32)

    def id_array(self):
        return self.ids

    @_holding_index_lock
    def state(self):
        """The shard as bytes (faiss_ext's serialiser) and its ids."""
        import faiss_ext
        cpu = faiss_ext.index_gpu_to_cpu(self.index) if self.on_gpu else self.index
        return faiss_ext.serialize_index(cpu), self.ids

    @_holding_index_lock
    def restore(self, data, ids):
        import faiss_ext
        index = faiss_ext.deserialize_index(data)
        if self.on_gpu:
            index = faiss_ext.index_cpu_to_gpu(self.res, 0, index)
        self.index, self.ids = index, np.asarray(ids, dtype=np.int64)
        return int(self.index.ntotal)


class _ShardLog:
    """One shard's write-ahead log: records (seq, method, args) appended and
    fsync'ed before the shard's replicas are called; a torn last record (a
    crash while writing) is ignored on reading."""

    _HEADER = struct.Struct("<Q")

    def __init__(self, path):
        self.path = path
        self.seq = max((seq for seq, _, _ in self.records()), default=0)

    def append(self, method, *args):
        self.seq += 1
        blob = pickle.dumps((self.seq, method, args), protocol=pickle.HIGHEST_PROTOCOL)
        with open(self.path, "ab") as f:
            f.write(self._HEADER.pack(len(blob)) + blob)
            f.flush()
            os.fsync(f.fileno())
        return self.seq

    def records(self, after=0):
        """(seq, method, args) of every whole record with seq > after."""
        if not os.path.exists(self.path):
            return []
        out = []
        with open(self.path, "rb") as f:
            data = f.read()
        at, h = 0, self._HEADER.size
        while at + h <= len(data):
            (n,) = self._HEADER.unpack_from(data, at)
            if at + h + n > len(data):
                break  # torn tail: the call it belongs to was never acknowledged
            seq, method, args = pickle.loads(data[at + h:at + h + n])
            if seq > after:
                out.append((seq, method, args))
            at += h + n
        return out


class ShardedIndex:
    """A faiss_ext index split over Ray actors (see the module's docstring).

    ``description``: a faiss_ext factory string for every shard ("QSFlat",
    "SGraph32", ...); ``actor_options``: passed to Ray for each replica (for
    example ``{"num_gpus": 0.25}`` to share one GPU between four shards);
    ``log_dir``: a folder for the shards' write-ahead logs (None: no log);
    ``compiled_search``: searches through a Ray Compiled Graph over the
    replicas (faiss_ext/distributed_compiled.py: no task submission per
    shard; falls back to normal calls on any failure; on an H200 host its
    layer took 1.5-1.8 ms a batch of 10,000 at 4 shards against 2.3 ms for
    normal calls: use it where latency matters); ``shared_memory``:
    queries and results of replicas on this process's node go through a
    /dev/shm segment instead of Ray's object store
    (faiss_ext/distributed_shm.py; False: always the object store).
    ``ray.init`` must have been called."""

    def __init__(self, d, description, n_shards, metric=faiss.METRIC_L2, replicas=1,
                 use_gpu=True, actor_options=None, log_dir=None, compiled_search=False,
                 shared_memory=True):
        if int(n_shards) < 1 or int(replicas) < 1:
            raise ValueError("n_shards = %r and replicas = %r must be >= 1" % (n_shards, replicas))
        if not ray.is_initialized():
            raise RuntimeError("ShardedIndex: call ray.init(...) first")
        self.d, self.description, self.metric = int(d), str(description), int(metric)
        self.n_shards, self.n_replicas = int(n_shards), int(replicas)
        self.next_id = 0
        self._use_gpu = bool(use_gpu)
        self._actor_class = ray.remote(_Shard).options(**dict(actor_options or {"num_cpus": 0.1}))
        self.shards = [[self._new_actor(s) for _ in range(self.n_replicas)]
                       for s in range(self.n_shards)]
        self._turn = 0
        self.last_merge_seconds = 0.0  # the driver's merges in the last search (benches)
        # threads of the driver's merge (None: one per 2^15 entries, at most 8)
        self.merge_threads = None
        self._shut_down = False
        self._compiled = CompiledSearch() if compiled_search else None
        self._segments = SegmentPool() if shared_memory else SegmentPool(directory=None)
        self._search_numbers = itertools.count(1)  # each search's number in its segment's flags
        self._local_actors = {}  # actor id -> runs on this process's node
        self._logs = None
        self._snapshot, self._snapshot_seq = None, [0] * self.n_shards
        if log_dir is not None:
            os.makedirs(log_dir, exist_ok=True)
            self._logs = [_ShardLog(os.path.join(log_dir, "shard%d.log" % s))
                          for s in range(self.n_shards)]

    def _new_actor(self, shard):
        return self._actor_class.remote(self.d, self.description, self.metric, self._use_gpu,
                                        shard)

    def close(self):
        """Tears down the compiled search graph, if any (``compiled_search``);
        the index keeps working through normal calls (a later search compiles
        the graph again). Ray tears graphs down itself at ``ray.shutdown``."""
        if self._compiled is not None:
            self._compiled.close()

    def shutdown(self):
        """Ends the index: tears down the compiled graph and kills every
        replica's actor, giving its GPU share back to Ray now (a compiled
        graph keeps handles to its actors, so dropping the index alone may
        not free them). Saved shards (``save``) stay; the index cannot be used
        afterwards."""
        self.close()
        self._segments.close()
        for replicas in self.shards:
            for actor in replicas:
                ray.kill(actor, no_restart=True)
        self.shards = [[] for _ in range(self.n_shards)]
        self._shut_down = True

    def placements(self):
        """Per shard, per live replica: {"on_gpu": bool, "gpu_ids": [...]}, where it runs."""
        return [[ray.get(a.placement.remote()) for a in replicas] for replicas in self.shards]

    def heal(self):
        """Brings every shard back to its number of replicas: new actors
        restored from a live replica of their shard (its index and ids). A
        shard with no live replica left is rebuilt from its last snapshot and
        its write-ahead log when the index has one (``log_dir``), else raises
        ShardUnavailableError. Returns how many replicas were started."""
        if self._shut_down:
            raise RuntimeError("ShardedIndex: heal after shutdown()")
        started = 0
        for s in range(self.n_shards):
            try:
                self._call_all(s, "ntotal")  # drops dead replicas, raises if none is left
            except ShardUnavailableError:
                if self._logs is None:
                    raise
                self.shards[s] = [self._rebuilt_from_log(s)]
                started += 1
            missing = self.n_replicas - len(self.shards[s])
            if missing <= 0:
                continue
            data, ids = self._call_all(s, "state")
            fresh = [self._new_actor(s) for _ in range(missing)]
            ray.get([a.restore.remote(data, ids) for a in fresh])
            self.shards[s] += fresh
            started += missing
        return started

    def _rebuilt_from_log(self, shard):
        """A new actor holding `shard` as its log says: the snapshot's state
        (if a snapshot was saved or loaded), then every later record."""
        actor = self._new_actor(shard)
        if self._snapshot is not None:
            data, ids = _read_shard(self._snapshot, shard)
            ray.get(actor.restore.remote(data, ids))
        for _, method, args in self._logs[shard].records(after=self._snapshot_seq[shard]):
            ray.get(getattr(actor, method).remote(*args))
        return actor

    def _logged_call(self, shard, method, *args):
        """method(*args) on every live replica, written ahead to the shard's log."""
        if self._logs is not None:
            self._logs[shard].append(method, *args)
        return self._call_all(shard, method, *args)

    # -- failures ------------------------------------------------------------
    def _call_all(self, shard, method, *args):
        """method(*args) on every live replica of `shard`; dead replicas are
        dropped; returns the first result."""
        alive, results = [], []
        refs = [(actor, getattr(actor, method).remote(*args)) for actor in self.shards[shard]]
        for actor, ref in refs:  # the replicas work at once
            try:
                results.append(ray.get(ref))
                alive.append(actor)
            except ray.exceptions.RayActorError:
                continue
        self.shards[shard] = alive
        if not alive:
            raise self._unavailable(shard, method)
        return results[0]

    def _unavailable(self, shard, method):
        if self._shut_down:
            return RuntimeError("ShardedIndex: %s after shutdown()" % method)
        return ShardUnavailableError("shard %d of %d: every replica has failed (%s)"
                                     % (shard, self.n_shards, method))

    def _next_replica(self, shard, method):
        """One live replica of `shard`, taken in turn (raises when none is left)."""
        replicas = self.shards[shard]
        if not replicas:
            raise self._unavailable(shard, method)
        self._turn += 1
        return replicas[self._turn % len(replicas)]

    def _drop_replica(self, shard, actor):
        """Forgets a replica whose call failed because its actor died."""
        self.shards[shard] = [a for a in self.shards[shard] if a is not actor]

    def _submit_one(self, shard, method, *args):
        """An object ref of method(*args) on one replica of `shard`, taken in turn."""
        actor = self._next_replica(shard, method)
        return actor, getattr(actor, method).remote(*args)

    def _get_with_retry(self, shard, actor, ref, method, *args):
        """The result of `ref`; if its replica died, the call again on the others."""
        while True:
            try:
                return ray.get(ref)
            except ray.exceptions.RayActorError:
                self._drop_replica(shard, actor)
                actor, ref = self._submit_one(shard, method, *args)

    # -- the index -----------------------------------------------------------
    @property
    def ntotal(self):
        return sum(self._call_all(s, "ntotal") for s in range(self.n_shards))

    def train(self, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        for s in range(self.n_shards):
            self._call_all(s, "train", x)

    def add(self, x, progress=None, batch_size=1 << 20):
        """Adds x with the next global ids (0, 1, ... across calls); see
        add_with_ids for ``progress`` and ``batch_size``."""
        n = len(x)
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.add_with_ids(x, ids, progress, batch_size)

    def add_with_ids(self, x, ids, progress=None, batch_size=1 << 20):
        """Adds x (n, d) with the int64 ids (n,), in batches of batch_size
        rows; ``progress(done, n)`` (optional) is called after each batch."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if x.ndim != 2 or x.shape[1] != self.d or ids.shape != (len(x),):
            raise ValueError("add_with_ids: x must be (n, %d) and ids (n,), got %s and %s"
                             % (self.d, x.shape, ids.shape))
        if int(batch_size) < 1:
            raise ValueError("add_with_ids: batch_size = %r must be >= 1" % (batch_size,))
        if progress is not None and not callable(progress):
            raise TypeError("add_with_ids: progress must be callable (done, total), got %r"
                            % (progress,))
        for b0 in range(0, len(ids), int(batch_size)):
            bx, bids = x[b0:b0 + int(batch_size)], ids[b0:b0 + int(batch_size)]
            route = bids % self.n_shards
            for s in range(self.n_shards):
                mine = route == s
                if mine.any():
                    self._logged_call(s, "add", bx[mine], bids[mine])
            self.next_id = max(self.next_id, int(bids.max()) + 1)
            if progress is not None:
                progress(b0 + len(bids), len(ids))

    def _queries(self, x, what):
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError("%s: x must be (nq, %d), got %s" % (what, self.d, x.shape))
        return x

    def search(self, x, k, sel=None):
        """k-NN of the queries x over every shard: (D, I) as faiss.Index.search."""
        x = self._queries(x, "search")
        k = int(k)
        if k <= 0:
            raise ValueError("search: k must be > 0, got %d" % k)
        spec = _selector_spec(sel)
        keep_max = self.metric == faiss.METRIC_INNER_PRODUCT

        def merge(Ds, Is):
            # A k-way merge of sorted rows in C++, on few threads: beside the
            # GPU actors a 16-thread merge of 4 x 10,000 x 10 took 12-17 ms
            # (threads descheduled at its barrier), one thread 0.9-1.6 ms
            # (H200 host), 8 threads 0.5 ms once the actors are done; one
            # more thread per 2^15 entries, up to 8.
            t0 = time.perf_counter()
            threads = self.merge_threads or int(min(8, max(1, (Ds[0].size * len(Ds)) >> 15)))
            out = faiss_ext.merge_knn_results(list(Ds), list(Is), keep_max=keep_max,
                                              threads=threads)
            self.last_merge_seconds += time.perf_counter() - t0
            return out

        def merged(per_shard):
            D, I = zip(*per_shard)
            outD, outI = merge(D, I)
            _pad_as_the_shards(outD, outI, D, I)
            return outD, outI

        self.last_merge_seconds = 0.0
        self._learn_locality()
        out = None
        if self._compiled is not None:
            out = self._with_segment(
                x, k, lambda seg: self._search_compiled(x, k, spec, merge, merged, seg))
        if out is None:
            out = self._with_segment(
                x, k, lambda seg: self._search_by_calls(x, k, spec, merge, merged, seg))
        return out

    # -- how queries and results travel ---------------------------------------
    def _learn_locality(self):
        """Which live replicas run on this process's Ray node (their searches
        go through shared memory, faiss_ext/distributed_shm.py); asked once
        per actor."""
        unknown = [a for replicas in self.shards for a in replicas
                   if a._actor_id.hex() not in self._local_actors]
        if not unknown or not self._segments.enabled:
            return
        here = ray.get_runtime_context().get_node_id()
        for actor in unknown:
            try:
                node = ray.get(actor.node_id.remote())
            except ray.exceptions.RayActorError:
                node = None  # dead: the search drops it
            self._local_actors[actor._actor_id.hex()] = node == here

    def _is_local(self, actor):
        return self._local_actors.get(actor._actor_id.hex(), False)

    def _with_segment(self, x, k, search):
        """search(segment) with a shared-memory segment for this search
        (None where shared memory is off or unavailable, or no replica is
        local); its queries are copied in while search() submits the calls
        (distributed_shm.py). The segment goes back to the pool after a
        search that returned, and is discarded after one that failed
        part-way (an actor may still write to it). A search returning None
        (the compiled graph could not serve it) discards it too."""
        seg = None
        if any(self._is_local(a) for replicas in self.shards for a in replicas):
            nq = len(x)
            parts = max(1, min(max(len(replicas) for replicas in self.shards), nq))
            shape = SearchShape(nq, self.d, k, self.n_shards, parts)
            seg = self._segments.acquire(segment_bytes(shape))
        if seg is None:
            return search(None)
        seg.begin(x, shape, next(self._search_numbers))
        try:
            out = search(seg)
            seg.finish_copy()
        except BaseException:
            self._discard_segment(seg)
            raise
        if out is None:
            self._discard_segment(seg)
        else:
            self._segments.release(seg)
        return out

    def _discard_segment(self, seg):
        try:
            seg.finish_copy()  # no thread writes into it any more
        finally:
            self._segments.discard(seg)

    def _search_compiled(self, x, k, spec, merge, merged, seg):
        """The search through the compiled graph (None where it cannot
        serve it): replica r of every shard takes the r-th slice of the
        queries, as a SearchTicket where every replica is local."""
        replicas = len(self.shards[0])
        nq = len(x)
        if replicas == 0 or nq < replicas:
            return None
        slices = [(int(p[0]), len(p)) for p in np.array_split(np.arange(nq), replicas)]
        by_segment = (seg is not None and seg.shape.parts == replicas and all(
            self._is_local(a) for of_shard in self.shards for a in of_shard))
        if by_segment:
            inputs = [seg.ticket(r, r0, rows) for r, (r0, rows) in enumerate(slices)]
        else:
            inputs = [x[r0:r0 + rows] for r0, rows in slices]

        def consume(outputs):
            if by_segment:
                return self._merge_flagged(seg, merge, merged, outputs)
            outs = outputs.get()
            return merged([stacked_results(outs[s * replicas:(s + 1) * replicas])
                           for s in range(self.n_shards)])

        return self._compiled.run(self.shards, inputs, k, spec, consume)

    def _merge_flagged(self, seg, merge, merged, outputs):
        """The compiled graph's search through the segment: every shard
        merged (ArrivalOrderMerge) as the flags of all its parts are up;
        GraphFailed where the graph's outputs report a failure, or arrived
        while flags are missing."""
        parts = seg.shape.parts
        waiting = {seg.shape.slot(s, r): s for s in range(self.n_shards) for r in range(parts)}
        left = [parts] * self.n_shards
        merger = ArrivalOrderMerge(self.n_shards, merge)
        shard_results = [None] * self.n_shards
        while waiting:
            done = seg.wait_results(list(waiting), _FAILURE_POLL_SECONDS)
            if not done and outputs.done():
                outputs.get()  # GraphFailed where the graph failed
                done = seg.wait_results(list(waiting), 0.0)
                if not done:
                    raise GraphFailed("the compiled graph returned without every results flag")
            arrived = {}
            for slot in done:
                s = waiting.pop(slot)
                left[s] -= 1
                if left[s] == 0:
                    shard_results[s] = arrived[s] = seg.results(s)
            if arrived:
                merger.add(arrived)
        return self._merged_result(merger, shard_results, merged)

    def _merged_result(self, merger, shard_results, merged):
        """The search's (D, I) once every shard has arrived."""
        if self.n_shards == 1:
            return merged(shard_results)  # a copy: the shard's arrays may be the segment's
        outD, outI = merger.result()
        _pad_as_the_shards(outD, outI, *zip(*shard_results))
        return outD, outI

    def _search_by_calls(self, x, k, spec, merge, merged, seg):
        """The search through normal actor calls: every shard's replicas get
        their slice of the queries (a SearchTicket for local replicas when
        there is a segment, else an object-store copy put once per slice),
        and the results are merged as they arrive (ArrivalOrderMerge), a
        dead replica's call going again to the shard's other replicas."""
        nq = len(x)
        pending = {}  # object ref -> _Call
        stored = {}  # each slice of queries goes to Ray's object store once, for every shard

        def submit(s, j, rows):
            actor = self._next_replica(s, "search")
            by_segment = seg is not None and self._is_local(actor)
            if by_segment:
                q = seg.ticket(j, rows.start, rows.stop - rows.start)
            else:
                if (rows.start, rows.stop) not in stored:
                    stored[rows.start, rows.stop] = _shared_arg(x[rows])
                q = stored[rows.start, rows.stop]
            pending[actor.search.remote(q, k, spec)] = _Call(s, j, rows, actor, by_segment)

        parts = []
        for s in range(self.n_shards):
            # the queries split across the shard's replicas
            n_parts = min(len(self.shards[s]), nq, seg.shape.parts if seg is not None else nq)
            split = np.array_split(np.arange(nq), max(1, n_parts))
            parts.append([None] * len(split))
            for j, part in enumerate(split):
                submit(s, j, slice(int(part[0]), int(part[-1]) + 1) if len(part) else slice(0, 0))
        merger = ArrivalOrderMerge(self.n_shards, merge)  # (one shard: merged below)
        shard_results = [None] * self.n_shards
        while pending:
            arrived = {}
            for ref, flagged in self._ended_calls(pending, seg):
                call = pending.pop(ref)
                try:
                    out = None if flagged else ray.get(ref)
                except ray.exceptions.RayActorError:
                    self._drop_replica(call.shard, call.actor)
                    submit(call.shard, call.part, call.rows)
                    continue
                except SegmentUnreachable:
                    # on the driver's node but not sharing its /dev/shm: this
                    # replica takes the object store from now on
                    self._local_actors[call.actor._actor_id.hex()] = False
                    submit(call.shard, call.part, call.rows)
                    continue
                s = call.shard
                parts[s][call.part] = (call.rows, out if not call.by_segment else None)
                if all(p is not None for p in parts[s]):
                    shard_results[s] = arrived[s] = self._shard_result(parts[s], seg, s)
            if arrived:
                merger.add(arrived)
        return self._merged_result(merger, shard_results, merged)

    def _ended_calls(self, pending, seg):
        """Calls of `pending` (object ref -> _Call) that have ended, at least
        one: [(ref, flagged)]. flagged: the call's results are in the segment
        by its flag, Ray's reply not awaited (distributed_shm.py); else Ray
        reports the call done (results, an error or a dead actor: ray.get
        tells). While flags are awaited Ray is asked every
        _RAY_POLL_SECONDS for replies of remote replicas and failures, or
        every _FAILURE_POLL_SECONDS where every call has a flag."""
        by_slot = {seg.shape.slot(c.shard, c.part): ref
                   for ref, c in pending.items() if c.by_segment} if seg is not None else {}
        poll = _FAILURE_POLL_SECONDS if len(by_slot) == len(pending) else _RAY_POLL_SECONDS
        while True:
            if by_slot:
                done = seg.wait_results(list(by_slot), poll)
                if done:
                    return [(by_slot[slot], True) for slot in done]
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
            else:
                ready, rest = ray.wait(list(pending), num_returns=1)
                if rest:  # and whatever else is in by now
                    ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            if ready:
                return [(ref, False) for ref in ready]

    def _shard_result(self, parts, seg, s):
        """One shard's (D, I) from its parts, (rows, (D, I)) or (rows, None)
        for parts written into the segment."""
        if all(out is None for _, out in parts):
            return seg.results(s)  # the shard's whole region
        if seg is not None:
            D_seg, I_seg = seg.results(s)
        return stacked_results([out if out is not None else (D_seg[rows], I_seg[rows])
                                for rows, out in parts])

    def knn_graph(self, k, use_gpu=None, actor_options=None, progress=None):
        """The k-NN graph of every vector the index holds, built where the
        vectors are: each shard's vectors go from one of its replicas to a
        graph actor through Ray's object store (never through this process),
        then build_knn_graph (GNND per shard, pair merges on Ray). Returns
        (ids, D, I): ids sorted, and row r of D / I the k nearest other
        vectors of vector ids[r] (their ids, best first). Each shard that holds
        vectors needs more than k of them (empty shards are left out). use_gpu: as the index's (None) or forced; actor_options:
        for the graph actors (e.g. {"num_gpus": 0.25})."""
        use_gpu = self._use_gpu if use_gpu is None else bool(use_gpu)
        ids = [np.asarray(self._call_all(s, "id_array"), dtype=np.int64)
               for s in range(self.n_shards)]
        held = [s for s in range(self.n_shards) if len(ids[s]) > 0]  # empty shards add nothing
        ids = [ids[s] for s in held]
        parts = [self._submit_one(s, "vectors")[1] for s in held]
        graph = build_knn_graph(parts, k, metric=self.metric, use_gpu=use_gpu,
                                actor_options=actor_options, progress=progress)
        D, positions = graph.gather()
        id_of = np.concatenate(ids)
        I = np.where(positions >= 0, id_of[np.maximum(positions, 0)], -1)
        order = np.argsort(id_of, kind="stable")
        return id_of[order], D[order], I[order]

    def range_search(self, x, radius):
        """Every stored vector within `radius` of each query, over all shards:
        (lims, D, I) as faiss.Index.range_search (query i: D[lims[i]:lims[i+1]]),
        each query's results in shard order (sort them by D for a ranking). The
        shard's index must support range_search (QSFlat's CPU twin does)."""
        x = self._queries(x, "range_search")
        nq = len(x)
        pending = []
        for s in range(self.n_shards):
            actor, ref = self._submit_one(s, "range_search", x, float(radius))
            pending.append((s, actor, ref))
        parts = [self._get_with_retry(s, actor, ref, "range_search", x, float(radius))
                 for s, actor, ref in pending]
        counts = sum(np.diff(lims) for lims, _, _ in parts)
        lims = np.concatenate([[0], np.cumsum(counts)]).astype(np.uint64)
        D = np.empty(int(lims[-1]), dtype=np.float32)
        I = np.empty(int(lims[-1]), dtype=np.int64)
        at = lims[:-1].astype(np.int64).copy()
        for plims, pD, pI in parts:
            for q in range(nq):
                a, b = int(plims[q]), int(plims[q + 1])
                D[at[q]:at[q] + b - a] = pD[a:b]
                I[at[q]:at[q] + b - a] = pI[a:b]
                at[q] += b - a
        return lims, D, I

    def remove_ids(self, sel):
        """Removes the ids that `sel` ((lo, hi), an id array, an IDSelectorRange) keeps."""
        spec = _selector_spec(sel)
        if spec is None:
            raise ValueError("remove_ids: sel must not be None")
        return sum(self._logged_call(s, "remove", spec) for s in range(self.n_shards))

    def reset(self):
        for s in range(self.n_shards):
            self._logged_call(s, "reset")
        self.next_id = 0

    # -- save and restore ----------------------------------------------------
    def save(self, directory):
        """Each shard's index (faiss_ext.write_index format) and ids, and the layout."""
        os.makedirs(directory, exist_ok=True)
        for s in range(self.n_shards):
            data, ids = self._call_all(s, "state")
            with open(os.path.join(directory, "shard%d.index" % s), "wb") as f:
                f.write(np.asarray(data, dtype=np.uint8).tobytes())
            np.save(os.path.join(directory, "shard%d.ids.npy" % s), ids)
        seqs = [log.seq for log in self._logs] if self._logs is not None else [0] * self.n_shards
        with open(os.path.join(directory, "layout.json"), "w") as f:
            json.dump({"d": self.d, "description": self.description, "metric": self.metric,
                       "n_shards": self.n_shards, "next_id": self.next_id, "log_seq": seqs}, f)
        # the log's records up to seqs are in this snapshot now
        self._snapshot, self._snapshot_seq = directory, seqs

    @classmethod
    def load(cls, directory, replicas=1, use_gpu=True, actor_options=None, log_dir=None,
             compiled_search=False, shared_memory=True):
        """A ShardedIndex with the shards `save` wrote (new actors); with
        ``log_dir``, the write-ahead log's records after the snapshot are
        replayed (and logging goes on there)."""
        with open(os.path.join(directory, "layout.json")) as f:
            layout = json.load(f)
        index = cls(layout["d"], layout["description"], layout["n_shards"], layout["metric"],
                    replicas, use_gpu, actor_options, log_dir, compiled_search, shared_memory)
        index._snapshot = directory
        index._snapshot_seq = list(layout.get("log_seq", [0] * index.n_shards))
        for s in range(index.n_shards):
            index._call_all(s, "restore", *_read_shard(directory, s))
        index.next_id = layout["next_id"]
        if index._logs is not None:
            index._replay_logs()
        return index

    def _replay_logs(self):
        """Replays the logs' records after the snapshot on every shard; the
        next id follows the adds after the last reset (resets reach every shard)."""
        base, top = self.next_id, 0
        for s in range(self.n_shards):
            records = self._logs[s].records(after=self._snapshot_seq[s])
            for _, method, args in records:
                self._call_all(s, method, *args)
            resets = [i for i, (_, m, _) in enumerate(records) if m == "reset"]
            if resets:
                base = 0
            for _, method, args in records[(resets[-1] + 1) if resets else 0:]:
                if method == "add" and len(args[1]):
                    top = max(top, int(np.max(args[1])) + 1)
        self.next_id = max(base, top)


def _read_shard(directory, shard):
    """(index bytes, ids) of one shard of a snapshot written by save()."""
    with open(os.path.join(directory, "shard%d.index" % shard), "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    return data, np.load(os.path.join(directory, "shard%d.ids.npy" % shard))
