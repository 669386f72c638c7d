#!/usr/bin/env python3
"""anchor_cagra_filtered.py: cuVS CAGRA with a bitset filter as the anchor of
the `filter` suite (issue 36), in its own process, on the data and filters of
bench/vdb_ops.py (bench/vdb_data.py: the same seeded mixture and the same
random and attribute-like filters).

CAGRA (graph degree 64, intermediate 128, NN-Descent build) searched with
`filters.from_bitset` (bit 1: the vector may be returned) at itopk 64..512,
device queries; cuVS brute force with the same bitset as its prefilter gives
the filtered ground truth and is itself timed (method
"cuvs:brute-force-filtered", recall 1 by definition). Every returned id is checked against the filter
(`outside`: the fraction of returned ids the filter excludes, which must be
0). One JSON line per setting, suite "filter", method "cuvs:cagra-filtered",
dataset named as vdb_ops.py names it.

Through the cuVS anchor kit (../shared/tools/cuvs-anchor/make-kit; source its
cuvs-anchor-env.sh first), in the device session of vdb_ops.py:
  python3 bench/anchor_cagra_filtered.py [--n 1000000] [--d 128] [--metric l2|ip] [--git SHA]
(--metric ip: the mixture's rows normalized, inner product, as vdb_ops.py's.)
"""
import argparse
import json
import time

import numpy as np

from anchor_cagra import gpu_name, load_cuvs, median_seconds, neighbours_of
from vdb_data import dataset, dataset_name, selectors


def bitset_of(mask):
    """The filter's bitset: bit i of 32-bit word i / 32 set where mask[i] (little-endian)."""
    bits = np.packbits(mask, bitorder="little")
    bits = np.concatenate([bits, np.zeros((-len(bits)) % 4, dtype=np.uint8)])
    return bits.view(np.uint32)


def recall(I, gt):
    """The fraction of the filtered ground truth's ids found."""
    return sum(len(set(a[a >= 0].tolist()) & set(b[b >= 0].tolist())) for a, b in zip(I, gt)) / float(
        max(1, int((gt >= 0).sum())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--nq", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=9090)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--itopk", default="64,128,256,512")
    ap.add_argument("--metric", choices=("l2", "ip"), default="l2")
    ap.add_argument("--git", default="unknown")
    a = ap.parse_args()
    cuvs_metric = "sqeuclidean" if a.metric == "l2" else "inner_product"
    cagra, Resources, device_ndarray = load_cuvs()
    from cuvs.neighbors import brute_force, filters
    xb = dataset(a.seed, a.n, a.d, a.seed + 1, a.metric)
    xq = dataset(a.seed, a.nq, a.d, a.seed + 2, a.metric)
    base = {"suite": "filter", "device": gpu_name(), "dataset": dataset_name(a.seed, a.n, a.d, a.metric),
            "nb": a.n, "d": a.d, "nq": a.nq, "k": 10, "git": a.git}
    res = Resources()
    xb_dev, xq_dev = device_ndarray(xb), device_ndarray(xq)
    t0 = time.perf_counter()
    index = cagra.build(cagra.IndexParams(metric=cuvs_metric, intermediate_graph_degree=128,
                                          graph_degree=64, build_algo="nn_descent"), xb_dev, resources=res)
    res.sync()
    print(json.dumps(dict(base, method="cuvs:cagra-build", nq=0, k=0, seconds=time.perf_counter() - t0,
                          params={"graph_degree": 64, "intermediate_graph_degree": 128,
                                  "build_algo": "nn_descent", "metric": a.metric})), flush=True)
    bf = brute_force.build(xb_dev, metric=cuvs_metric, resources=res)
    for name, s, mask in selectors(xb, np.random.default_rng(a.seed + 11)):
        f = filters.from_bitset(device_ndarray(bitset_of(mask)))
        prm = {"filter": name, "selectivity": s, "selected": int(mask.sum()), "metric": a.metric}
        exact = {}

        def brute():
            exact["r"] = brute_force.search(bf, xq_dev, 10, prefilter=f, resources=res)
            res.sync()

        sec = median_seconds(brute, a.reps)
        gt = neighbours_of(exact["r"])
        print(json.dumps(dict(base, method="cuvs:brute-force-filtered", params=prm, seconds=sec,
                              qps=a.nq / sec, recall=1.0)), flush=True)
        for itopk in [int(v) for v in a.itopk.split(",")]:
            sp = cagra.SearchParams(itopk_size=itopk)
            out = {}

            def search():
                out["r"] = cagra.search(sp, index, xq_dev, 10, filter=f, resources=res)
                res.sync()

            sec = median_seconds(search, a.reps)
            I = neighbours_of(out["r"])
            got = I[(I >= 0) & (I < a.n)]
            outside = float((~mask[got]).mean()) if len(got) else 0.0
            print(json.dumps(dict(base, method="cuvs:cagra-filtered", params=dict(prm, itopk=itopk),
                                  seconds=sec, qps=a.nq / sec, recall=recall(I, gt), outside=outside)),
                  flush=True)


if __name__ == "__main__":
    main()
