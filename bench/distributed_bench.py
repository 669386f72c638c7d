#!/usr/bin/env python3
"""distributed_bench.py: what faiss_ext.distributed's Ray layer costs, on a
local Ray cluster: search latency and q/s for batches of 1, 100 and 10,000
queries over 1, 2 and 4 shards, against one in-process index and FAISS's
in-process IndexShards over the same shard indexes; add throughput; the time
a search takes when a replica has just been killed (failover) and heal().

--compiled adds the same searches through a Ray Compiled Graph
(ShardedIndex(compiled_search=True); methods "ours:ray-compiled-*").
Shards are CPU twins unless --gpu (actors then ask for 1 / shards of a GPU,
and the in-process baselines hold GpuIndexQuickSelectFlat shards and one
GpuIndexQuickSelectFlat). The Ray layer's own cost per batch,
"ours:ray-layer-overhead", is a search's wall time minus the union of its
shards' spans in their actors (first start to last end of selector, index
search and id mapping): what is left is the queries' trip through Ray's
object store and the calls (params "before_first_shard_seconds"), and the
results' trip back and the merge after the last shard ("after_last_shard_
seconds"; the driver's merges, most of them hidden behind slower shards,
in "merge_seconds").
One JSON line per figure (suite "distributed", DESIGN.md's schema); medians
of --reps runs after a warm-up.
  python3 bench/distributed_bench.py --n 200000 --d 64 --git SHA [--gpu]
"""
import argparse
import json
import os
import time

import numpy as np

import faiss
import ray
from ray.cluster_utils import Cluster

import faiss_ext
from faiss_ext import distributed

from bench_timing import timed


def flat_index(d, gpu, res):
    """An exact index: ours on the GPU (--gpu) or FAISS's flat index."""
    if gpu:
        return faiss_ext.GpuIndexQuickSelectFlat(res, d, faiss_ext.FlatMetric.L2)
    return faiss.IndexFlatL2(d)


def in_process_shards(xb, shards, gpu, res):
    """FAISS's IndexShards over exact shards holding the split of the sharded
    index (vector i on shard i % shards), and the shard indexes to keep alive."""
    n, d = xb.shape
    local = faiss.IndexShards(d, True, True)
    keep = []
    for s in range(shards):
        inner = flat_index(d, gpu, res)
        part = faiss.IndexIDMap(inner)
        ids = np.arange(s, n, shards, dtype=np.int64)
        part.add_with_ids(xb[ids], ids)
        keep += [inner, part]
        local.add_shard(part)
    return local, keep


def ray_layer_seconds(index, q, k, reps):
    """Medians over reps, after a warm-up, of the Ray layer's time in a
    search: its wall time minus the union of its shards' spans in their
    actors (from the first shard's start to the last one's end, one clock
    for every process of the host), split into the part before the first
    shard starts (queries into the object store, the calls) and the part
    after the last one ends (results back, the last merge); and the driver's
    merges within the search (all of them, most hidden behind slower shards)."""
    index.search(q, k)
    layer, before, after, merge = [], [], [], []
    for _ in range(reps):
        t0 = time.monotonic()
        index.search(q, k)
        t1 = time.monotonic()
        spans = ray.get([a.search_span.remote() for replicas in index.shards for a in replicas])
        first, last = min(s[0] for s in spans), max(s[1] for s in spans)
        layer.append((t1 - t0) - (last - first))
        before.append(first - t0)
        after.append(t1 - last)
        merge.append(index.last_merge_seconds)
    return {name: float(np.median(v)) for name, v in
            (("layer", layer), ("before", before), ("after", after), ("merge", merge))}


def ray_searches(a, xb, xq, shards, opts, compiled, emit):
    """A ShardedIndex of `shards` shards (compiled_search=compiled): its add,
    then its searches and its Ray layer at batches of 1, 100 and 10,000."""
    index = distributed.ShardedIndex(a.d, "QSFlat", shards, use_gpu=a.gpu, actor_options=opts,
                                     compiled_search=compiled)
    index.merge_threads = a.merge_threads or None
    tag = "ours:ray-compiled" if compiled else "ours:ray"
    t0 = time.perf_counter()
    index.add(xb)
    add_s = time.perf_counter() - t0
    emit(method=tag + "-add", nq=0, params={"shards": shards}, seconds=add_s, qps=a.n / add_s)
    for nq in (1, 100, 10_000):
        q = xq[:nq]
        s_ray = timed(lambda: index.search(q, a.k), a.reps)
        layer = ray_layer_seconds(index, q, a.k, a.reps)
        prm = {"shards": shards, "batch": nq, "merge_threads": a.merge_threads or "auto"}
        emit(method=tag + "-search", nq=nq, params=prm, seconds=s_ray, qps=nq / s_ray)
        emit(method=tag + "-layer-overhead", nq=nq,
             params=dict(prm, before_first_shard_seconds=layer["before"],
                         after_last_shard_seconds=layer["after"], merge_seconds=layer["merge"]),
             seconds=layer["layer"])
    if compiled:
        # (every search above must have gone through the graph)
        emit(method=tag + "-served", nq=0, params={"shards": shards},
             seconds=0.0, served=index._compiled.served)
    index.shutdown()  # its GPU shares back before the next configuration asks for them


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--compiled", action="store_true",
                    help="also ShardedIndex(compiled_search=True): searches through a Ray Compiled Graph")
    ap.add_argument("--shards", default="1,2,4", help="shard counts to measure")
    ap.add_argument("--merge-threads", type=int, default=0,
                    help="threads of the driver's merge (0: ShardedIndex's rule)")
    ap.add_argument("--git", default="unknown")
    ap.add_argument("--device", default="CPU (%d cores, CPU twins)" % os.cpu_count())
    a = ap.parse_args()
    rng = np.random.default_rng(5150)
    xb = rng.standard_normal((a.n, a.d), dtype=np.float32)
    xq = rng.standard_normal((10_000, a.d), dtype=np.float32)
    base = dict(suite="distributed", device=a.device, dataset="gaussian-%dx%d-seed5150" % (a.n, a.d),
                nb=a.n, d=a.d, k=a.k, git=a.git)

    def emit(**r):
        out = dict(base)
        out.update(r)
        print(json.dumps(out), flush=True)

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 1 if a.gpu else 0})
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    res = faiss_ext.StandardGpuResources() if a.gpu else None
    one = flat_index(a.d, a.gpu, res)
    one.add(xb)
    baseline = "ours:GpuIndexQuickSelectFlat" if a.gpu else "faiss:IndexFlatL2"
    for shards in [int(s) for s in a.shards.split(",")]:
        opts = {"num_cpus": 0.5, "num_gpus": 1.0 / shards} if a.gpu else {"num_cpus": 0.5}
        for compiled in (False, True) if a.compiled else (False,):
            ray_searches(a, xb, xq, shards, opts, compiled, emit)
        local, parts = in_process_shards(xb, shards, a.gpu, res)
        for nq in (1, 100, 10_000):
            q = xq[:nq]
            s_loc = timed(lambda: local.search(q, a.k), a.reps)
            s_one = timed(lambda: one.search(q, a.k), a.reps)
            prm = {"shards": shards, "batch": nq}
            emit(method="faiss:IndexShards-in-process", nq=nq, params=dict(prm, shard_index=baseline),
                 seconds=s_loc, qps=nq / s_loc)
            emit(method=baseline + "-one-index", nq=nq, params=prm, seconds=s_one, qps=nq / s_one)
        del local, parts
    # failover: two replicas of one shard, one killed, the next search
    index = distributed.ShardedIndex(a.d, "QSFlat", 1, replicas=2, use_gpu=a.gpu,
                                     actor_options={"num_cpus": 0.5, "num_gpus": 0.25} if a.gpu
                                     else {"num_cpus": 0.5})
    index.add(xb)
    q = xq[:100]
    steady = timed(lambda: index.search(q, a.k), a.reps)
    victim = index.shards[0][0]
    ray.kill(victim, no_restart=True)
    time.sleep(1.0)  # the kill lands
    t0 = time.perf_counter()
    for _ in range(4):  # a turn reaches the dead replica within two calls
        index.search(q, a.k)
    failover = (time.perf_counter() - t0) / 4
    t0 = time.perf_counter()
    started = index.heal()
    heal_s = time.perf_counter() - t0
    emit(method="ours:ray-failover-search", nq=100, params={"replicas": 2, "steady_seconds": steady},
         seconds=failover, qps=100 / failover)
    emit(method="ours:ray-heal", nq=0, params={"replicas_started": started}, seconds=heal_s)
    index.shutdown()
    ray.shutdown()
    c.shutdown()


if __name__ == "__main__":
    main()
