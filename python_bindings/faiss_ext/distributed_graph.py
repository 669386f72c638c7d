"""k-NN graphs of data spread over Ray actors (``faiss_ext.distributed.build_knn_graph``).

Each part of the data lives on its own actor (a *graph shard*), which builds
the k-NN graph of its part (GNND on its GPU; exact lists on the CPU twin).
Then every pair of shards is merged, as the out-of-core file build does
(``gnnd_build_from_file``'s all-pairs schedule), with Ray as the scheduler:
the pairs run in rounds of disjoint pairs (the circle method), so each round
keeps every shard busy once; shard j's vectors travel to shard i through
Ray's object store, shard i computes the candidates of both sides (a GGM
merge of the two parts on the GPU, exact cross lists on the CPU) and keeps
the best k of its own rows, and shard j merges the candidates of its rows.
No process ever holds more than two parts. With exact shards the result is
the exact k-NN graph of all the data (ties aside).

    import ray, faiss_ext.distributed as fd
    ray.init()
    g = fd.build_knn_graph([x0, x1, x2, x3], k=32)   # one shard per part
    D, I = g.gather()        # (n, k): global ids = rows of the concatenated parts
    D1, I1 = g.shard(1)      # one shard's rows only
"""

import faiss
import numpy as np

try:
    import ray
except ImportError as e:  # pragma: no cover - exercised where Ray is absent
    raise ImportError("faiss_ext.distributed_graph needs Ray: pip install 'ray>=2'") from e

__all__ = ["build_knn_graph", "ShardedKnnGraph", "pair_rounds", "merge_neighbour_lists"]


def pair_rounds(n):
    """Every pair (i, j), i < j, of n shards, in rounds of disjoint pairs (the
    circle method: n - 1 rounds for even n, n for odd n)."""
    if n < 2:
        return []
    ring = list(range(n)) + ([None] if n % 2 else [])
    m = len(ring)
    rounds = []
    for _ in range(m - 1):
        pairs = [(ring[i], ring[m - 1 - i]) for i in range(m // 2)]
        rounds.append([tuple(sorted(p)) for p in pairs if None not in p])
        ring = [ring[0], ring[-1]] + ring[1:-1]
    return rounds


def merge_neighbour_lists(I, D, candI, candD, k, larger_is_better):
    """The best k distinct neighbours per row of two lists (I, D) and
    (candI, candD), best first; -1 ids are padding. Returns (I, D)."""
    I = np.concatenate([I, candI], axis=1)
    D = np.concatenate([D, candD], axis=1).astype(np.float32)
    worst = np.float32(-np.inf if larger_is_better else np.inf)
    D = np.where(I < 0, worst, D)
    order = np.argsort(-D if larger_is_better else D, axis=1, kind="stable")
    I = np.take_along_axis(I, order, axis=1)
    D = np.take_along_axis(D, order, axis=1)
    # Drop repeated ids (keep the first, best, occurrence): a stable sort by
    # id keeps the distance order among equal ids.
    by_id = np.argsort(I, axis=1, kind="stable")
    ids = np.take_along_axis(I, by_id, axis=1)
    repeat_sorted = np.zeros(ids.shape, dtype=bool)
    repeat_sorted[:, 1:] = ids[:, 1:] == ids[:, :-1]
    repeat = np.empty_like(repeat_sorted)
    np.put_along_axis(repeat, by_id, repeat_sorted, axis=1)
    drop = repeat | (I < 0)
    D = np.where(drop, worst, D)
    I = np.where(drop, -1, I)
    order = np.argsort(-D if larger_is_better else D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(I, order, axis=1), np.take_along_axis(D, order, axis=1)


class _GraphShard:
    """One part of the data and the k-NN lists of its rows (global ids)."""

    def __init__(self, x, k, metric, use_gpu):
        import faiss_ext
        self.x = np.asarray(x)
        self.problem = _part_problem(self.x, k)
        if self.problem is None:
            self.x = np.ascontiguousarray(self.x, dtype=np.float32)
        self.base, self.k, self.metric = 0, int(k), int(metric)
        self.larger_is_better = self.metric == faiss.METRIC_INNER_PRODUCT
        self.res = faiss_ext.StandardGpuResources() if use_gpu and faiss_ext.get_num_gpus() > 0 \
            else None
        self.I = np.full((len(self.x), self.k), -1, dtype=np.int64)
        self.D = np.full((len(self.x), self.k), -np.inf if self.larger_is_better else np.inf,
                         dtype=np.float32)

    def describe(self):
        """(rows, d, what is wrong with the part or None)."""
        shape = self.x.shape if self.x.ndim == 2 else (0, 0)
        return int(shape[0]), int(shape[1]), self.problem

    def set_base(self, base):
        """The global id of this part's first row."""
        self.base = int(base)
        return True

    def placement(self):
        return {"on_gpu": self.res is not None, "gpu_ids": [int(g) for g in ray.get_gpu_ids()]}

    def vectors(self):
        return self.x

    def build(self):
        """The k-NN lists of this part alone."""
        if self.res is not None:
            D, I = self._gnnd([self.x])
        else:
            D, I = self._exact(self.x, self.x, exclude_self=True)
        self._merge(I + self.base, D, I >= 0)
        return len(self.x)

    def cross(self, other, other_base):
        """Candidates between this part and `other` (rows starting at global
        id other_base): keeps the best of its own rows, returns (I, D) of the
        other part's rows for that shard to merge."""
        other = np.ascontiguousarray(other, dtype=np.float32)
        n = len(self.x)
        if self.res is not None:
            D, I = self._gnnd([self.x, other])   # a GGM merge of the two parts
            glob = np.where(I < n, I + self.base, I - n + other_base)
            self._merge(glob[:n], D[:n], I[:n] >= 0)
            return np.where(I[n:] >= 0, glob[n:], -1), D[n:]
        Dm, Im = self._exact(self.x, other)
        self._merge(Im + other_base, Dm, Im >= 0)
        Do, Io = self._exact(other, self.x)
        return np.where(Io >= 0, Io + self.base, -1), Do

    def merge(self, candidates):
        """Merges (I, D) candidates of this part's rows (global ids)."""
        I, D = candidates
        self._merge(I, D, I >= 0)
        return True

    def graph(self):
        return self.D, self.I

    def _merge(self, I, D, valid):
        I = np.where(valid, I, -1).astype(np.int64)
        self.I, self.D = merge_neighbour_lists(self.I, self.D, I, D, self.k, self.larger_is_better)

    def _exact(self, queries, base, exclude_self=False):
        index = faiss.IndexFlat(base.shape[1], self.metric)
        index.add(base)
        kk = min(len(base), self.k + (1 if exclude_self else 0))
        D, I = index.search(queries, kk)
        if exclude_self:
            rows = np.arange(len(queries))[:, None]
            keep = I != rows
            # drop each row's own entry (or the last when it is not listed)
            order = np.argsort(~keep, axis=1, kind="stable")[:, :kk - 1]
            I, D = np.take_along_axis(I, order, 1), np.take_along_axis(D, order, 1)
        return D, I

    def _gnnd(self, parts):
        """GNND's graph of the parts added in turn (the second add is a GGM
        merge into the first's graph), with distances."""
        import faiss_ext
        g = faiss_ext.GpuKnnGraphGNND(self.res, self.x.shape[1], self.k, self.metric)
        for p in parts:
            g.add(p)
        D, I = g.get_graph(with_distances=True)
        return D, I


class ShardedKnnGraph:
    """The k-NN graph that build_knn_graph made, kept on its shard actors."""

    def __init__(self, actors, sizes):
        self.actors, self.sizes = actors, list(sizes)
        self.n_shards = len(actors)

    def shard(self, s):
        """(D, I) of shard s's rows (global ids), best first."""
        return _get(self.actors[s].graph.remote(), self.actors, [s])

    def gather(self):
        """(D, I) of every row, in the order of the parts given."""
        parts = [self.shard(s) for s in range(self.n_shards)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def placements(self):
        return [ray.get(a.placement.remote()) for a in self.actors]


def _get(ref, actors, shards):
    """ray.get(ref); when an actor of `shards` has died, a ShardUnavailableError
    naming the graph shard whose actor no longer answers."""
    try:
        return ray.get(ref)
    except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as e:
        from faiss_ext.distributed import ShardUnavailableError
        dead = []
        for s in shards:
            try:
                ray.get(actors[s].placement.remote(), timeout=10)
            except Exception:  # noqa: BLE001 - any failure to answer means gone
                dead.append(s)
        if not dead:
            raise
        raise ShardUnavailableError("build_knn_graph: the actor of graph shard %s failed (%s)"
                                    % (", ".join(map(str, dead)), e)) from e


def _part_problem(a, k):
    """What makes array `a` unusable as a part at degree k, or None."""
    if a.ndim != 2 or a.shape[1] < 1:
        return "has shape %s, expected (n, d)" % (a.shape,)
    if a.shape[0] <= k:
        return "has %d rows; each part needs more than k = %d" % (a.shape[0], k)
    if not np.issubdtype(a.dtype, np.number) or not np.isfinite(a).all():
        return "holds NaN, infinite or non-numeric values"
    return None


def _check_parts(described, k):
    """Raises ValueError naming the first bad part: described[s] is
    (rows, d, problem) of part s."""
    for s, (_, d, problem) in enumerate(described):
        if problem is not None:
            raise ValueError("build_knn_graph: part %d %s" % (s, problem))
        if d != described[0][1]:
            raise ValueError("build_knn_graph: part %d has d = %d, part 0 d = %d"
                             % (s, d, described[0][1]))


def _start_shards(parts, k, metric, use_gpu, actor_options):
    """One actor per part (arrays, or ObjectRefs already in the cluster,
    which never pass through this process), checked and numbered."""
    if not isinstance(parts, (list, tuple)) or len(parts) == 0:
        raise ValueError("build_knn_graph: parts must be a non-empty list of (n, d) arrays "
                         "or ray.ObjectRefs of them")
    # Arrays here are checked before any actor starts.
    local = [None if isinstance(p, ray.ObjectRef) else np.asarray(p) for p in parts]
    if all(a is not None for a in local):
        _check_parts([(a.shape[0] if a.ndim == 2 else 0, a.shape[1] if a.ndim == 2 else 0,
                       _part_problem(a, k)) for a in local], k)
    cls = ray.remote(_GraphShard).options(**dict(actor_options or {"num_cpus": 0.1}))
    actors = [cls.remote(p, k, int(metric), bool(use_gpu)) for p in parts]
    described = [_get(a.describe.remote(), actors, [s]) for s, a in enumerate(actors)]
    try:
        _check_parts(described, k)
    except ValueError:
        for a in actors:
            ray.kill(a, no_restart=True)
        raise
    sizes = [rows for rows, _, _ in described]
    bases = [int(b) for b in np.cumsum([0] + sizes)[:-1]]
    ray.get([a.set_base.remote(b) for a, b in zip(actors, bases)])
    return actors, sizes, bases


def build_knn_graph(parts, k, metric=faiss.METRIC_L2, use_gpu=True, actor_options=None,
                    progress=None):
    """The k-NN graph (k neighbours of every row, itself excluded) of the
    concatenated `parts`, one Ray actor per part (see the module docstring).
    Each part is an (n, d) array or a ray.ObjectRef of one (data already in
    the cluster, e.g. made by tasks that read files on other nodes: it then
    goes to its actor without passing through this process).

    ``metric``: faiss.METRIC_L2 (squared distances, smallest first) or
    faiss.METRIC_INNER_PRODUCT (similarities, largest first); ``use_gpu``:
    GNND on each actor's GPU where it has one (``actor_options``, e.g.
    ``{"num_gpus": 0.25}``), exact lists on the CPU otherwise; ``progress``:
    called as ``progress(done, total)`` after the builds and after each
    round of pair merges. ``ray.init`` must have been called. Returns a
    ShardedKnnGraph (``gather()`` for (D, I) of all rows)."""
    k = int(k)
    if k < 1:
        raise ValueError("build_knn_graph: k must be >= 1, got %d" % k)
    if metric not in (faiss.METRIC_L2, faiss.METRIC_INNER_PRODUCT):
        raise ValueError("build_knn_graph: metric must be faiss.METRIC_L2 or "
                         "faiss.METRIC_INNER_PRODUCT, got %r" % (metric,))
    if not ray.is_initialized():
        raise RuntimeError("build_knn_graph: call ray.init(...) first")
    actors, sizes, bases = _start_shards(parts, k, metric, use_gpu, actor_options)
    rounds = pair_rounds(len(actors))
    total = 1 + len(rounds)
    for s, ref in enumerate([a.build.remote() for a in actors]):
        _get(ref, actors, [s])
    if progress:
        progress(1, total)
    for r, pairs in enumerate(rounds):
        # shard j's vectors go to shard i through the object store; the
        # candidates of j's rows come back to j the same way
        merges = [(i, j, actors[j].merge.remote(
                      actors[i].cross.remote(actors[j].vectors.remote(), bases[j])))
                  for i, j in pairs]
        for i, j, ref in merges:
            _get(ref, actors, [i, j])
        if progress:
            progress(2 + r, total)
    return ShardedKnnGraph(actors, sizes)
