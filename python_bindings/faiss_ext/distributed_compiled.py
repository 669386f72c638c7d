"""The search of a ShardedIndex through a Ray Compiled Graph
(``ShardedIndex(..., compiled_search=True)``).

A normal actor call costs a task submission and a result fetched through
Ray: about 1.4-1.7 ms a search on an H200 host with the queries in a
shared-memory segment (distributed_shm.py). A Compiled Graph (Ray's
``experimental_compile``) binds each replica's ``search`` once and then
passes its inputs (query slices, or the segment's tickets) and outputs
through its own channels: 0.4-0.8 ms a call there (docs/distributed.md).

The graph is made on first use for the replicas then alive (replica r of
every shard takes the r-th slice of the queries, as the normal path splits
them) and made again whenever the replicas change (a failure, ``heal()``).
Actors in the graph still take normal calls (adds, removals). Any error of
the graph (a dead actor closes its channels) tears it down and returns None:
the caller then searches the normal way, which retries on the live replicas
and drops the dead ones, and the next search compiles the graph again. One
search runs through the graph at a time; a concurrent one takes the normal
path instead of waiting. With the queries in a shared-memory segment the
driver merges each shard as its results flag goes up, as the normal path
does; the graph's outputs (row counts) are read in the background and
before the next execution, off the search's critical path.
"""

import threading

import numpy as np
import ray
from ray.dag import InputNode, MultiOutputNode

# How long a teardown waits for an unread execution's fetch to end.
_TEARDOWN_READ_SECONDS = 10.0


class CompiledSearch:
    """A compiled graph of every live replica's ``search``, kept while the
    replicas stay the same."""

    def __init__(self):
        self._lock = threading.Lock()
        self._graph = None
        self._key = None
        self._unread = None  # the last execution's GraphOutputs, read before the next one
        self.served = 0  # searches answered through the graph (tests, benches)

    def run(self, shards, inputs, k, spec, consume):
        """consume(outputs), outputs being a GraphOutputs of this execution
        (replica r of shard s returned outputs.get()[s * replicas + r] for
        inputs[r], its slice of the queries or a SearchTicket), called while
        the graph is held; returns what consume returns. None where the
        graph cannot serve this search (replica counts that differ between
        shards or from the inputs, a search already in flight, a graph
        error, consume raising GraphFailed): search the normal way then.
        A consume that merged from the segment's flags may return before
        the outputs are read: they are read before the next execution."""
        replicas = len(shards[0])
        if replicas == 0 or any(len(r) != replicas for r in shards) or len(inputs) != replicas:
            return None
        if not self._lock.acquire(blocking=False):
            return None
        try:
            try:
                self._read_previous_locked()
                graph = self._graph_for(shards)
                # read before the next execution, whatever consume does
                self._unread = outputs = GraphOutputs(graph.execute(*inputs, k, spec))
            except Exception:  # noqa: BLE001 - any graph failure: the normal path answers
                self._close_locked()
                return None
            try:
                out = consume(outputs)
            except GraphFailed:
                self._close_locked()
                return None
            self.served += 1
            return out
        finally:
            self._lock.release()

    def close(self):
        """Tears the graph down (the actors return to normal calls only)."""
        with self._lock:
            self._close_locked()

    def _read_previous_locked(self):
        """Reads the last execution's outputs (the graph takes no new one
        before); a failure there tears the graph down, to compile anew."""
        unread, self._unread = self._unread, None
        if unread is not None:
            try:
                unread.get()
            except GraphFailed:
                self._close_locked()

    def _graph_for(self, shards):
        key = tuple(tuple(a._actor_id.hex() for a in of_shard) for of_shard in shards)
        if key != self._key:
            self._close_locked()
            replicas = len(shards[0])
            with InputNode() as inp:  # inputs: the query slices, then k and the filter
                nodes = [actor.search.bind(inp[r], inp[replicas], inp[replicas + 1])
                         for of_shard in shards for r, actor in enumerate(of_shard)]
                dag = MultiOutputNode(nodes)
            self._graph = dag.experimental_compile()
            self._key = key
        return self._graph

    def _close_locked(self):
        graph, self._graph, self._key = self._graph, None, None
        unread, self._unread = self._unread, None
        if graph is not None:
            try:
                graph.teardown()
            except Exception:  # noqa: BLE001 - a graph whose actor died may fail to tear down
                pass
        if unread is not None:  # its fetch ends with the teardown
            try:
                unread.get(timeout=_TEARDOWN_READ_SECONDS)
            except (GraphFailed, TimeoutError):
                pass


class GraphFailed(RuntimeError):
    """The compiled graph failed during a search (an actor died, a channel
    closed): the search goes the normal way."""


class GraphOutputs:
    """The outputs of one execution, fetched by a background thread, so that
    a search merging from the segment's flags need not wait for them."""

    def __init__(self, ref):
        self._done = threading.Event()
        self._value = self._error = None
        threading.Thread(target=self._fetch, args=(ref,), daemon=True,
                         name="faiss_ext-compiled-outputs").start()

    def _fetch(self, ref):
        try:
            self._value = ray.get(ref)
        except BaseException as e:  # noqa: BLE001 - handed to get()
            self._error = e
        finally:
            self._done.set()

    def done(self):
        """Whether the outputs (or the graph's error) are in."""
        return self._done.is_set()

    def get(self, timeout=None):
        """The replicas' outputs; GraphFailed where the execution failed,
        TimeoutError after timeout seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError("the compiled graph's outputs did not arrive in %s s" % timeout)
        if self._error is not None:
            raise GraphFailed("the compiled graph failed: %r" % (self._error,)) from self._error
        return self._value


def stacked_results(results):
    """One shard's replica results (D, I) joined in query order (both search
    paths of ShardedIndex)."""
    if len(results) == 1:
        return results[0]
    return tuple(np.concatenate(a) for a in zip(*results))
