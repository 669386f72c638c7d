#!/usr/bin/env python3
"""vdb_ops.py: the vector-database operations of docs/filters.md, measured
through the Python module as a FAISS user calls it, with FAISS CPU anchors in
the same process (16 threads):

  range    exact range search, GpuIndexQuickSelectFlat against
           faiss.IndexFlatL2.range_search (sets compared on --check queries);
  delete   remove_ids on GpuIndexSearchGraph (1%, 10%, then up to 50% removed):
           seconds, recall@10 and q/s after, against a fresh build of the
           survivors;
  filter   filtered search on GpuIndexSearchGraph (defaults) against FAISS
           CPU IndexHNSWFlat (M 32) with the same IDSelector, recall@10 against
           the filtered exact ground truth (our exact index with the selector);
           --metric ip: the mixture's rows normalized, inner product.

Data: a seeded Gaussian mixture made here (not the bench's seeds). One JSON
line per figure (DESIGN.md's schema); medians of --reps runs after a warm-up.
  python3 bench/vdb_ops.py --parts range,delete,filter --n 1000000 --d 128 --git SHA
"""
import argparse
import json
import time

import numpy as np

import faiss
import faiss_ext

from bench_timing import timed
from vdb_data import dataset, dataset_name, selectors


def recall(I, gt):
    k = gt.shape[1]
    return float(np.mean([len(np.intersect1d(a[a >= 0], b[b >= 0])) / max(1, (b >= 0).sum())
                          for a, b in zip(I, gt)]))


def gpu_name():
    try:
        import subprocess
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.splitlines()[0].strip()
    except Exception:  # the name only labels the lines
        return "GPU 0"


class Out:
    def __init__(self, a, dataset, nb, d):
        self.base = dict(device=gpu_name(), dataset=dataset, nb=nb, d=d, git=a.git)

    def emit(self, **rec):
        r = dict(self.base)
        r.update(rec)
        print(json.dumps(r), flush=True)


def range_part(a, res, xb, xq, out):
    d = xb.shape[1]
    ours = faiss_ext.GpuIndexQuickSelectFlat(res, d, faiss_ext.FlatMetric.L2)
    ours.add(xb)
    Dk, _ = ours.search(xq[:500], 100)
    radius = float(np.median(Dk[:, -1]))  # about 100 results per query
    got = {}
    s = timed(lambda: got.__setitem__("r", ours.range_search(xq, radius)), a.reps)
    lims = got["r"][0]
    out.emit(suite="range", method="ours:range_search", nq=len(xq), k=0,
             params={"radius": radius, "results": int(lims[-1]), "queries": "numpy"},
             seconds=s, qps=len(xq) / s)
    cpu = faiss.IndexFlatL2(d)
    cpu.add(xb)
    faiss.omp_set_num_threads(16)
    m = min(len(xq), a.cpu_queries)
    ref = {}
    s_cpu = timed(lambda: ref.__setitem__("r", cpu.range_search(xq[:m], radius)), max(1, a.reps // 2))
    out.emit(suite="range", method="faiss-cpu:IndexFlatL2.range_search", device="CPU (16 threads)",
             nq=m, k=0, params={"radius": radius}, seconds=s_cpu, qps=m / s_cpu)
    ol, oD, oI = got["r"]
    rl, rD, rI = ref["r"]
    differ = 0
    for i in range(min(m, a.check)):
        A = dict(zip(oI[ol[i]:ol[i + 1]].tolist(), oD[ol[i]:ol[i + 1]].tolist()))
        B = dict(zip(rI[rl[i]:rl[i + 1]].tolist(), rD[rl[i]:rl[i + 1]].tolist()))
        differ += sum(1 for j in set(A) ^ set(B)
                      if abs(A.get(j, B.get(j)) - radius) > 1e-4 * max(1.0, radius))
    out.emit(suite="range", method="ours:range_search-check", nq=min(m, a.check), k=0,
             params={"pairs_differing_beyond_rounding": differ, "speedup_vs_faiss_cpu":
                     (len(xq) / s) / (m / s_cpu)}, seconds=0.0)


def graph_qps(index, xq, gt, reps):
    got = {}
    s = timed(lambda: got.__setitem__("r", index.search(xq, 10)), reps)
    return len(xq) / s, recall(got["r"][1], gt)


METRICS = {"l2": (faiss_ext.FlatMetric.L2, faiss.METRIC_L2),
           "ip": (faiss_ext.FlatMetric.InnerProduct, faiss.METRIC_INNER_PRODUCT)}


def exact_gt(res, x, xq, k=10, sel=None, flat=None):
    if flat is None:
        flat = faiss_ext.GpuIndexQuickSelectFlat(res, x.shape[1], faiss_ext.FlatMetric.L2)
        flat.add(x)
    if sel is None:
        return flat.search(xq, k)[1]
    p = faiss.SearchParameters()
    p.sel = sel
    return flat.search(xq, k, params=p)[1]


def graph_config(n):
    if n <= 2_000_000:
        return None
    gnnd = faiss_ext.GpuKnnGraphGNNDConfig(max_iterations=12, add_build="one-shot")
    return faiss_ext.GpuIndexSearchGraphConfig(knn_build=gnnd)


def delete_part(a, res, xb, xq, out):
    n, d = xb.shape
    index = faiss_ext.GpuIndexSearchGraph(res, d, faiss_ext.FlatMetric.L2, graph_config(n))
    t0 = time.perf_counter()
    index.add(xb)
    out.emit(suite="delete", method="ours:graph-build", nq=0, k=0, params={}, seconds=time.perf_counter() - t0)
    alive = np.ones(n, dtype=bool)
    rng = np.random.default_rng(a.seed + 7)
    for target in (0.01, 0.10, 0.50):
        want = int(target * n) - int((~alive).sum())
        pos_alive = np.flatnonzero(alive)
        drop_pos = np.sort(rng.choice(len(pos_alive), want, replace=False)).astype(np.int64)
        sel = faiss.IDSelectorBatch(len(drop_pos), faiss.swig_ptr(drop_pos))  # positions now
        t0 = time.perf_counter()
        gone = index.remove_ids(sel)
        secs = time.perf_counter() - t0
        alive[pos_alive[drop_pos]] = False
        kept = xb[alive]
        gt = exact_gt(res, kept, xq)
        qps, r = graph_qps(index, xq, gt, a.reps)
        out.emit(suite="delete", method="ours:graph-remove_ids", nq=len(xq), k=10,
                 params={"removed_now": int(gone), "removed_total_fraction": target,
                         # patched below 5% since the last pruning (docs/filters.md)
                         "graph_update": "patched" if index.removed_since_prune else "pruned",
                         "compact_and_graph_seconds": index.optimize_seconds},
                 seconds=secs, qps=qps, recall=r)
        if target in (0.01, 0.10, 0.50):
            fresh = faiss_ext.GpuIndexSearchGraph(res, d, faiss_ext.FlatMetric.L2, graph_config(len(kept)))
            t0 = time.perf_counter()
            fresh.add(kept)
            build = time.perf_counter() - t0
            fq, fr = graph_qps(fresh, xq, gt, a.reps)
            out.emit(suite="delete", method="ours:graph-fresh-build-of-survivors", nq=len(xq), k=10,
                     params={"removed_total_fraction": target, "build_seconds": build},
                     seconds=len(xq) / fq, qps=fq, recall=fr)
            del fresh


def filter_part(a, res, xb, xq, out):
    n, d = xb.shape
    ours_metric, faiss_metric = METRICS[a.metric]
    graph = faiss_ext.GpuIndexSearchGraph(res, d, ours_metric, graph_config(n))
    t0 = time.perf_counter()
    graph.add(xb)
    out.emit(suite="filter", method="ours:graph-build", nq=0, k=0, params={"metric": a.metric},
             seconds=time.perf_counter() - t0)
    faiss.omp_set_num_threads(16)
    hnsw = faiss.IndexHNSWFlat(d, 32, faiss_metric) if a.hnsw else None
    if hnsw is not None:
        t0 = time.perf_counter()
        hnsw.add(xb)
        out.emit(suite="filter", method="faiss-cpu:HNSWFlat-build", device="CPU (16 threads)", nq=0, k=0,
                 params={"M": 32, "efConstruction": hnsw.hnsw.efConstruction},
                 seconds=time.perf_counter() - t0)
    m = min(len(xq), a.cpu_queries)
    xq_dev = None
    if a.device_queries:
        import torch
        xq_dev = torch.from_numpy(xq).cuda()
    flat = faiss_ext.GpuIndexQuickSelectFlat(res, d, ours_metric)
    flat.add(xb)
    for name, s, mask in selectors(xb, np.random.default_rng(a.seed + 11)):
        bits = np.packbits(mask, bitorder="little")
        sel = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
        gt = exact_gt(res, xb, xq, 10, sel, flat)
        p = faiss.SearchParameters()
        p.sel = sel
        got = {}
        sec = timed(lambda: got.__setitem__("r", graph.search(xq, 10, params=p)), a.reps)
        prm = {"filter": name, "selectivity": s, "selected": int(mask.sum()), "metric": a.metric}
        extra = {}
        if xq_dev is not None:  # the same search with the queries already on the GPU (torch)
            sec_dev = timed(lambda: (graph.search(xq_dev, 10, params=p), torch.cuda.synchronize()),
                            a.reps)
            extra = {"qps_device_queries": len(xq) / sec_dev}
        out.emit(suite="filter", method="ours:graph-filtered", nq=len(xq), k=10, params=prm,
                 seconds=sec, qps=len(xq) / sec, recall=recall(got["r"][1], gt), **extra)
        for ef in ((64, 256, 1024) if s >= 0.01 else (64, 256)) if hnsw is not None else ():
            hp = faiss.SearchParametersHNSW()
            hp.sel = sel
            hp.efSearch = ef
            hnsw.hnsw.efSearch = ef  # FAISS 1.7.3's IndexHNSW::search reads this, not hp.efSearch
            hr = {}
            hs = timed(lambda: hr.__setitem__("r", hnsw.search(xq[:m], 10, params=hp)), 1)
            out.emit(suite="filter", method="faiss-cpu:HNSWFlat-filtered", device="CPU (16 threads)",
                     nq=m, k=10, params=dict(prm, efSearch=ef), seconds=hs, qps=m / hs,
                     recall=recall(hr["r"][1], gt[:m]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="range,delete,filter")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--nq", type=int, default=10_000)
    ap.add_argument("--cpu-queries", type=int, default=1000)
    ap.add_argument("--check", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=9090)
    ap.add_argument("--metric", choices=sorted(METRICS), default="l2",
                    help="filter part only: ip normalizes the mixture's rows")
    ap.add_argument("--hnsw", type=int, default=1, help="filter part: 0 leaves FAISS CPU HNSW out")
    ap.add_argument("--device-queries", type=int, default=0,
                    help="filter part: 1 also times torch CUDA queries (qps_device_queries)")
    ap.add_argument("--git", default="unknown")
    a = ap.parse_args()
    parts = a.parts.split(",")
    if a.metric != "l2" and parts != ["filter"]:
        ap.error("--metric ip applies to --parts filter only")
    res = faiss_ext.StandardGpuResources()
    xb = dataset(a.seed, a.n, a.d, a.seed + 1, a.metric)
    xq = dataset(a.seed, a.nq, a.d, a.seed + 2, a.metric)
    out = Out(a, dataset_name(a.seed, a.n, a.d, a.metric), a.n, a.d)
    if "range" in parts:
        range_part(a, res, xb, xq, out)
    if "delete" in parts:
        delete_part(a, res, xb, xq, out)
    if "filter" in parts:
        filter_part(a, res, xb, xq, out)


if __name__ == "__main__":
    main()
