"""Merging the shards' search results of a ShardedIndex as they arrive.

A search waits for the slowest shard; merging only after it answered puts the
whole k-way merge (about 1.4 ms for 4 x 10,000 x 10 on one thread of an H200
host) on top of that wait. Here each shard's results are merged as soon as
they arrive with the neighbouring shards already in, so that after the last
shard only one merge of its rows with the rest is left.

The merge keeps ties in shard order (``faiss_ext.merge_knn_results`` takes a
tie from its earlier input), and a stable merge of adjacent runs of shards is
associative: merging runs [0, 2) and [2, 4) in any order gives what one merge
of shards 0..3 gives. So only adjacent runs are merged, and the result does
not depend on the order of arrival.
"""


class ArrivalOrderMerge:
    """Runs of adjacent shards whose results are in, merged as they grow.

    ``merge(Ds, Is)`` merges lists of sorted (D, I) blocks (same shape) into
    one; ``add({shard: (D, I), ...})`` takes the shards that just arrived,
    ``result()`` the merge of all shards once every shard was added."""

    def __init__(self, n_shards, merge):
        self.n_shards = n_shards
        self._merge = merge
        self._runs = {}  # first shard of a run -> (end, D, I)

    def add(self, arrived):
        """Adds shards (a dict shard -> (D, I)) and merges every run they
        extend, each with one k-way merge."""
        for s, (D, I) in arrived.items():
            if not 0 <= s < self.n_shards or self._covered(s):
                raise ValueError("ArrivalOrderMerge: shard %r added twice or out of range" % (s,))
            self._runs[s] = (s + 1, D, I)
        starts = sorted(self._runs)
        group = []
        for start in starts + [None]:
            if group and (start is None or start != self._runs[group[-1]][0]):
                self._merge_group(group, arrived)
                group = []
            if start is not None:
                group.append(start)

    def _covered(self, s):
        return any(start <= s < end for start, (end, _, _) in self._runs.items())

    def _merge_group(self, group, arrived):
        """Merges adjacent runs (first shards `group`) into one where one of
        them has just arrived (older runs were merged when they arrived)."""
        if len(group) == 1 or not any(start in arrived for start in group):
            return
        runs = [self._runs.pop(start) for start in group]
        D, I = self._merge([r[1] for r in runs], [r[2] for r in runs])
        self._runs[group[0]] = (runs[-1][0], D, I)

    def result(self):
        """(D, I) of every shard, merged."""
        if list(self._runs) != [0] or self._runs[0][0] != self.n_shards:
            raise RuntimeError("ArrivalOrderMerge: not every shard has arrived")
        _, D, I = self._runs[0]
        return D, I
