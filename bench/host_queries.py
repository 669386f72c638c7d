#!/usr/bin/env python3
"""host_queries.py: q/s of numpy queries against torch CUDA queries through
the Python module, as a FAISS user calls it (issue 38: numpy queries ran at
half the q/s of device queries). For GpuIndexSearchGraph (default build) and
GpuIndexQuickSelectFlat on clustered data, at several batch sizes; the
median of --runs timed searches after two warm-up searches each. One JSON
line per (index, d, batch, setting), suite "host-queries" (DESIGN.md's
schema): qps numpy queries and results, qps_device_queries torch CUDA
tensors in and out, ratio = qps / qps_device_queries.

  python3 bench/host_queries.py [--n 1000000] [--dims 128,784] [--batches 1,100,1000,10000,100000]
"""
import argparse
import json

import numpy as np

from anchor_cagra import gpu_name, median_seconds


def clustered(n, d, clusters, seed):
    """n rows around `clusters` Gaussian centres (std 4), unit noise: float32."""
    rng = np.random.default_rng(seed)
    centres = (4 * rng.standard_normal((clusters, d))).astype(np.float32)
    x = centres[rng.integers(0, clusters, n)]
    x += rng.standard_normal((n, d), dtype=np.float32)
    return x


def measure(index, name, params, xq, k, a, base, torch):
    qd = torch.from_numpy(xq).cuda()
    for nq in [int(b) for b in a.batches.split(",")]:
        if nq > len(xq):
            continue
        host, dev = xq[:nq], qd[:nq]

        def numpy_search():
            index.search(host, k, params=params) if params is not None else index.search(host, k)

        def device_search():
            r = index.search(dev, k, params=params) if params is not None else index.search(dev, k)
            torch.cuda.synchronize()
            return r

        runs = a.runs if nq >= 1000 else a.runs * 5
        s_host = median_seconds(numpy_search, runs)
        s_dev = median_seconds(device_search, runs)
        print(json.dumps(dict(base, method=name, nq=nq, params=dict(base["params"], batch=nq),
                              seconds=s_host, qps=nq / s_host, qps_device_queries=nq / s_dev,
                              ratio=s_dev / s_host)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000000)
    ap.add_argument("--dims", default="128,784")
    ap.add_argument("--batches", default="1,100,1000,10000,100000")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--itopk", type=int, default=32)
    ap.add_argument("--git", default="unknown")
    ap.add_argument("--methods", default="graph,exact")
    a = ap.parse_args()
    import faiss  # noqa: F401  (the FAISS the module is built against)
    import faiss_ext
    import torch
    res = faiss_ext.StandardGpuResources()
    device = gpu_name()
    for d in [int(v) for v in a.dims.split(",")]:
        xb = clustered(a.n, d, 1000, 1)
        xq = clustered(max(int(b) for b in a.batches.split(",")), d, 1000, 2)
        dataset = "numpy-clustered-%dx%d" % (a.n, d)
        base = {"suite": "host-queries", "device": device, "dataset": dataset, "nb": a.n, "d": d,
                "k": a.k, "git": a.git}
        if "graph" in a.methods:
            g = faiss_ext.GpuIndexSearchGraph(res, d)
            g.add(xb)
            p = faiss_ext.SearchParametersSearchGraph(itopk=a.itopk)
            measure(g, "ours:graph", p, xq, a.k, a, dict(base, params={"itopk": a.itopk}), torch)
            del g
        if "exact" in a.methods:
            f = faiss_ext.GpuIndexQuickSelectFlat(res, d)
            f.add(xb)
            measure(f, "ours:exact", None, xq, a.k, a, dict(base, params={}), torch)
            del f


if __name__ == "__main__":
    main()
