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
path instead of waiting.
"""

import threading

import numpy as np
import ray
from ray.dag import InputNode, MultiOutputNode


class CompiledSearch:
    """A compiled graph of every live replica's ``search``, kept while the
    replicas stay the same."""

    def __init__(self):
        self._lock = threading.Lock()
        self._graph = None
        self._key = None
        self.served = 0  # searches answered through the graph (tests, benches)

    def run(self, shards, inputs, k, spec, consume):
        """consume(outs), outs[s * replicas + r] being what replica r of
        shard s returned for inputs[r] (its slice of the queries, or a
        SearchTicket), called while the graph is held (the arrays may be
        views of its channels, valid until its next search); returns what
        consume returns. None where the graph cannot serve this search
        (replica counts that differ between shards or from the inputs, a
        search already in flight, a graph error): search the normal way
        then."""
        replicas = len(shards[0])
        if replicas == 0 or any(len(r) != replicas for r in shards) or len(inputs) != replicas:
            return None
        if not self._lock.acquire(blocking=False):
            return None
        try:
            graph = self._graph_for(shards)
            outs = ray.get(graph.execute(*inputs, k, spec))
        except Exception:  # noqa: BLE001 - any graph failure: the normal path answers
            self._close_locked()
            self._lock.release()
            return None
        try:
            out = consume(outs)
            self.served += 1
            return out
        finally:
            self._lock.release()

    def close(self):
        """Tears the graph down (the actors return to normal calls only)."""
        with self._lock:
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
        if graph is not None:
            try:
                graph.teardown()
            except Exception:  # noqa: BLE001 - a graph whose actor died may fail to tear down
                pass


def stacked_results(results):
    """One shard's replica results (D, I) joined in query order (both search
    paths of ShardedIndex)."""
    if len(results) == 1:
        return results[0]
    return tuple(np.concatenate(a) for a in zip(*results))
