#!/usr/bin/env python3
"""anchor_cagra.py: cuVS CAGRA as the graph-search anchor of the ann suite, in
its own process, on the data bench_ann --write-dir wrote (base.fbin,
query.fbin, gt.ivecs in one folder per data set).

CAGRA (Ootomo et al., ICDE 2024, arXiv 2308.15136) with graph degree 64 and
intermediate degree 128, built by NN-Descent and by IVF-PQ (--builds), then
an itopk sweep with the queries and results in device memory (pylibraft
device arrays, as CuPy arrays would be) and with numpy queries. Prints one
JSON line per setting (suite "ann", DESIGN.md's schema): qps is device
queries, qps_host_arrays numpy queries; recall@k is the fraction of the exact
ids found.

Through the cuVS anchor kit (../shared/tools/cuvs-anchor/make-kit: source its
cuvs-anchor-env.sh first):
  python3 bench/anchor_cagra.py --dirs /tmp/ann/hard,... [--git SHA] [--metric inner_product]
"""
import argparse
import ctypes
import json
import os
import subprocess
import time

import numpy as np

from anchor_ann import read_fbin, read_ivecs, recall


def neighbours_of(result):
    """The integer array of cagra.search's (distances, neighbors) pair, on the host."""
    for arr in result:
        if np.issubdtype(np.dtype(arr.dtype), np.integer):
            return arr.copy_to_host().astype(np.int64)
    raise RuntimeError("cagra.search returned no integer array")


def median_seconds(f, runs):
    f()
    f()
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return float(np.median(t))


def load_cuvs():
    njl = "/tmp/njl/libnvJitLink.so.13"
    if os.path.exists(njl):
        ctypes.CDLL(njl, mode=ctypes.RTLD_GLOBAL)
    import libcuvs
    libcuvs.load_library()
    from cuvs.common import Resources
    from cuvs.neighbors import cagra
    from pylibraft.common import device_ndarray
    return cagra, Resources, device_ndarray


def gpu_name():
    try:
        return subprocess.check_output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).decode().split("\n")[0]
    except Exception:
        return "GPU"


def run_set(folder, a, cagra, Resources, device_ndarray, device):
    name = os.path.basename(folder.rstrip("/"))
    xb, xq, gt = read_fbin(folder + "/base.fbin"), read_fbin(folder + "/query.fbin"), read_ivecs(folder + "/gt.ivecs")
    n, d = xb.shape
    k = a.k
    base = {"suite": a.suite, "dataset": name, "nb": int(n), "d": int(d), "nq": int(len(xq)), "k": k,
            "git": a.git, "device": device}
    res = Resources()
    xb_dev, xq_dev = device_ndarray(xb), device_ndarray(xq)
    res.sync()
    for build_algo in a.builds.split(","):
        extra = {}
        if build_algo == "ivf_pq" and a.metric != "sqeuclidean":
            # cuVS's own inner-product test passes IVF-PQ parameters of the
            # same metric; left out, the IVF-PQ build's graph reached at
            # most recall 0.27 on a normalized inner-product set (2026-12-04)
            from cuvs.neighbors import ivf_pq
            extra["ivf_pq_build_params"] = ivf_pq.IndexParams(metric=a.metric)
        params = cagra.IndexParams(metric=a.metric, intermediate_graph_degree=128, graph_degree=64,
                                   build_algo=build_algo, **extra)
        t0 = time.perf_counter()
        index = cagra.build(params, xb_dev, resources=res)
        res.sync()
        build = time.perf_counter() - t0
        bp = {"graph_degree": 64, "intermediate_graph_degree": 128, "build_algo": build_algo,
              "metric": a.metric, "ivf_pq_metric_set": bool(extra)}
        print(json.dumps(dict(base, method="cuvs:cagra-build", params=bp, seconds=build)), flush=True)
        for itopk in [int(v) for v in a.itopk.split(",")]:
            sp = cagra.SearchParams(itopk_size=itopk)
            out = {}

            def device_queries():
                out["r"] = cagra.search(sp, index, xq_dev, k, resources=res)
                res.sync()

            def host_queries():
                r = cagra.search(sp, index, device_ndarray(xq), k, resources=res)
                out["h"] = neighbours_of(r)

            s = median_seconds(device_queries, a.runs)
            sh = median_seconds(host_queries, a.runs)
            ids = neighbours_of(out["r"])
            single = []
            for i in range(min(a.latency, len(xq))):
                q1 = device_ndarray(xq[i:i + 1])
                t0 = time.perf_counter()
                cagra.search(sp, index, q1, k, resources=res)
                res.sync()
                single.append(time.perf_counter() - t0)
            print(json.dumps(dict(base, method="cuvs:cagra", params=dict(bp, itopk=itopk), seconds=s,
                                  qps=len(xq) / s, qps_host_arrays=len(xq) / sh, recall=recall(ids, gt, k),
                                  latency_ms_nq1=float(np.median(single)) * 1e3 if single else None)),
                  flush=True)
        index = None  # its device memory goes before the next build


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dirs", required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--git", default="unknown")
    ap.add_argument("--suite", default="ann")
    ap.add_argument("--builds", default="nn_descent,ivf_pq")
    ap.add_argument("--itopk", default="32,64,128,256,512")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--latency", type=int, default=100, help="single-query searches for the latency")
    ap.add_argument("--metric", default="sqeuclidean", choices=["sqeuclidean", "inner_product"],
                    help="inner_product for sets bench_ann wrote with --metric ip")
    a = ap.parse_args()
    cagra, Resources, device_ndarray = load_cuvs()
    device = gpu_name()
    for folder in a.dirs.split(","):
        run_set(folder, a, cagra, Resources, device_ndarray, device)


if __name__ == "__main__":
    main()
