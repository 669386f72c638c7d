#!/usr/bin/env python3
"""anchor_ann.py: the FAISS anchors of the ann suite, run in their own process
on the data that bench_ann --write-dir wrote (base.fbin, query.fbin, gt.ivecs
in one folder per data set).

  FAISS GPU GpuIndexIVFFlat (nlist about 4 sqrt(n), nprobe sweep), through the
  faiss-gpu 1.15.1 anchor kit (its env script sets PYTHONPATH);
  FAISS CPU IndexHNSWFlat (M 32, efConstruction 40, efSearch sweep, all cores);
  FAISS CPU IndexLSH (random-rotation binary codes, nbits 256 and 1024,
  exhaustive Hamming scan of the first --lsh-queries queries, all cores).
--anchors picks them (default ivf,hnsw).

Prints one JSON line per setting (suite "ann", DESIGN.md's schema). Recall@k is
the fraction of the exact ids found (ties are not re-checked here).
  python3 bench/anchor_ann.py --dirs /tmp/ann/clustered,... [--git SHA] [--hnsw-max-n N]
"""
import argparse
import json
import os
import time

import numpy as np

from bench_timing import timed


def read_fbin(path):
    with open(path, "rb") as f:
        n, d = np.fromfile(f, dtype=np.int32, count=2)
        return np.fromfile(f, dtype=np.float32, count=int(n) * int(d)).reshape(int(n), int(d))


def read_ivecs(path):
    a = np.fromfile(path, dtype=np.int32)
    d = a[0]
    return a.reshape(-1, d + 1)[:, 1:]


def recall(I, gt, k):
    hits = sum(len(set(I[i, :k]) & set(gt[i, :k])) for i in range(len(gt)))
    return hits / float(len(gt) * k)


def latency(index, xq, k, m=200):
    t = []
    for i in range(min(m, len(xq))):
        t0 = time.perf_counter()
        index.search(xq[i:i + 1], k)
        t.append(time.perf_counter() - t0)
    return float(np.median(t))


def emit(rec):
    print(json.dumps(rec), flush=True)


def main():
    import faiss
    ap = argparse.ArgumentParser()
    ap.add_argument("--dirs", required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--git", default="unknown")
    ap.add_argument("--hnsw-max-size", type=float, default=2e8, help="skip HNSW past n x d floats")
    ap.add_argument("--skip-hnsw", action="store_true")
    ap.add_argument("--anchors", default="ivf,hnsw", help="ivf, hnsw and/or lsh")
    ap.add_argument("--suite", default="ann", help="suite written in every line (run_lsh_device.sh: ann-lsh)")
    ap.add_argument("--lsh-queries", type=int, default=1000, help="queries of the IndexLSH anchor")
    a = ap.parse_args()
    anchors = set(a.anchors.split(","))
    gpu_name = "GPU"
    try:
        import subprocess
        gpu_name = subprocess.check_output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).decode().split("\n")[0]
    except Exception:
        pass
    threads = os.cpu_count()
    faiss.omp_set_num_threads(threads)
    folders = a.dirs.split(",")
    if "ivf" in anchors:
        for folder in folders:
            ivf_anchor(faiss, folder, a, gpu_name)
    if "lsh" in anchors:
        for folder in folders:
            lsh_anchor(faiss, folder, a, threads)
    if "hnsw" in anchors and not a.skip_hnsw:
        for folder in folders:
            hnsw_anchor(faiss, folder, a, threads)


def load(folder, a):
    name = os.path.basename(folder.rstrip("/"))
    xb, xq, gt = read_fbin(folder + "/base.fbin"), read_fbin(folder + "/query.fbin"), read_ivecs(folder + "/gt.ivecs")
    n, d = xb.shape
    base = {"suite": a.suite, "dataset": name, "nb": int(n), "d": int(d), "nq": int(len(xq)), "k": a.k, "git": a.git}
    return xb, xq, gt, base


def ivf_anchor(faiss, folder, a, gpu_name):
    xb, xq, gt, base = load(folder, a)
    n, d = xb.shape
    k = a.k
    res = faiss.StandardGpuResources()
    nlist = 4096 if n >= 500000 else 1024
    t0 = time.perf_counter()
    ivf = faiss.GpuIndexIVFFlat(res, d, nlist, faiss.METRIC_L2)
    ivf.train(xb)
    ivf.add(xb)
    build = time.perf_counter() - t0
    emit(dict(base, method="faiss-gpu:IVFFlat-build", device=gpu_name, params={"nlist": nlist}, seconds=build))
    for nprobe in [1, 2, 4, 8, 16, 32, 64, 128, 256]:
        ivf.nprobe = nprobe
        out = {}
        s = timed(lambda: out.__setitem__("r", ivf.search(xq, k)))
        emit(dict(base, method="faiss-gpu:IVFFlat", device=gpu_name, params={"nlist": nlist, "nprobe": nprobe},
                  seconds=s, qps=len(xq) / s, recall=recall(out["r"][1], gt, k),
                  latency_ms_nq1=latency(ivf, xq, k) * 1e3))


def lsh_anchor(faiss, folder, a, threads):
    xb, xq, gt, base = load(folder, a)
    n, d = xb.shape
    m = min(a.lsh_queries, len(xq))
    xq, gt = xq[:m], gt[:m]
    base = dict(base, nq=m)
    cpu = "CPU (%d threads)" % threads
    for nbits in (256, 1024):
        t0 = time.perf_counter()
        lsh = faiss.IndexLSH(d, nbits, True, True)  # random rotation, trained thresholds
        lsh.train(xb)
        lsh.add(xb)
        build = time.perf_counter() - t0
        emit(dict(base, method="faiss-cpu:IndexLSH-build", device=cpu, params={"nbits": nbits}, seconds=build))
        out = {}
        s = timed(lambda: out.__setitem__("r", lsh.search(xq, a.k)), reps=1)
        emit(dict(base, method="faiss-cpu:IndexLSH", device=cpu, params={"nbits": nbits},
                  seconds=s, qps=m / s, recall=recall(out["r"][1], gt, a.k)))


def hnsw_anchor(faiss, folder, a, threads):
    xb, xq, gt, base = load(folder, a)
    n, d = xb.shape
    if n * d > a.hnsw_max_size:
        print("# HNSW skipped on %s: %d x %d is past --hnsw-max-size" % (base["dataset"], n, d), flush=True)
        return
    k = a.k
    t0 = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(d, 32)
    hnsw.add(xb)
    build = time.perf_counter() - t0
    cpu = "CPU (%d threads)" % threads
    emit(dict(base, method="faiss-cpu:HNSWFlat-build", device=cpu, params={"M": 32, "efConstruction": 40}, seconds=build))
    for ef in [16, 32, 64, 128, 256, 512]:
        hnsw.hnsw.efSearch = ef
        out = {}
        s = timed(lambda: out.__setitem__("r", hnsw.search(xq, k)), reps=1)
        emit(dict(base, method="faiss-cpu:HNSWFlat", device=cpu, params={"M": 32, "efSearch": ef},
                  seconds=s, qps=len(xq) / s, recall=recall(out["r"][1], gt, k)))


if __name__ == "__main__":
    main()
