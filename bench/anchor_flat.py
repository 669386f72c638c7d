#!/usr/bin/env python3
"""anchor_flat.py: FAISS GPU GpuIndexFlatL2 as the anchor of the flat suite.

Runs in the faiss-gpu anchor kit's Python (../shared/tools/faiss-gpu-anchor)
on the same files as bench/bench_flat and bench/torch_flat.py; prints one JSON
object a line (DESIGN.md keys). Batch times are the median of --reps searches
of all queries (host arrays in and out, as FAISS users call it); with
--single-query N, also the median latency of N one-query searches. FAISS GPU
refuses k > 2048: such k are reported as refused on stderr and skipped.

    python3 bench/anchor_flat.py --base B.fbin --query Q.fbin --dataset NAME \
        [--nq N] [--k 10,2048] [--reps 5] [--single-query N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_flat import read_vectors  # noqa: E402  (one reader for both anchors)


def median_seconds(f, reps):
    f()  # warm-up
    times = []
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--query", required=True)
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--suite", default="flat", help="suite written in every line")
    ap.add_argument("--nq", type=int, default=0, help="at most this many queries (0: all)")
    ap.add_argument("--k", default="10")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--single-query", type=int, default=0)
    ap.add_argument("--git", default=os.environ.get("FAISS_EXT_GIT", "unknown"))
    a = ap.parse_args()

    import faiss
    xb = read_vectors(a.base)
    xq = np.ascontiguousarray(read_vectors(a.query, a.nq))
    nb, d = xb.shape
    nq = xq.shape[0]
    res = faiss.StandardGpuResources()
    index = faiss.GpuIndexFlatL2(res, d)
    index.add(xb)
    name = a.dataset or os.path.basename(a.base)
    try:  # the GPU's name, as the other suites write it
        device = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        device = "unknown GPU"
    base = {"suite": a.suite, "dataset": name, "method": "faiss-gpu:GpuIndexFlatL2", "device": device,
            "nb": nb, "d": d, "git": a.git}
    for k in [int(s) for s in a.k.split(",") if s]:
        if k > 2048:
            print(f"[anchor_flat] k={k}: GpuIndexFlatL2 refuses k > 2048", file=sys.stderr)
            continue
        if a.single_query > 0:
            calls = [0]

            def one():
                i = calls[0] % nq
                calls[0] += 1
                index.search(xq[i:i + 1], k)
            sec = median_seconds(one, a.single_query)
            print(json.dumps(dict(base, nq=1, k=k, params={"mode": "single-query", "calls": a.single_query,
                                                            "io": "host", "faiss": faiss.__version__}, seconds=sec, qps=1.0 / sec,
                                  recall=None)), flush=True)
            print(f"[anchor_flat] {name} single-query k={k}: {sec * 1e3:.3f} ms", file=sys.stderr)
        sec = median_seconds(lambda: index.search(xq, k), a.reps)
        print(json.dumps(dict(base, nq=nq, k=k, params={"reps": a.reps, "io": "host", "faiss": faiss.__version__}, seconds=sec,
                              qps=nq / sec, recall=None)), flush=True)
        print(f"[anchor_flat] {name} nq={nq} k={k}: {sec * 1e3:.3f} ms, {nq / sec:.0f} q/s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
