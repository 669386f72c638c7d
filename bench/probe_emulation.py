#!/usr/bin/env python3
"""probe_emulation.py: recall of the probe that answers a search graph's
queries unlike the data (gpu/impl/graph/ProbeSearch.h), emulated on the CPU
with FAISS: the same k-means as flat/DeviceKMeans.h (8 Lloyd steps on an
evenly strided sample of 64 vectors a list, started from evenly strided
sample rows), round(4 sqrt(n)) lists as graph/ProbeLists.h makes them, then
IVF-Flat's exact scan of each query's nearest lists. Prints, per number of
lists probed, recall@k against exact search and the share of the vectors
scanned. Evidence for the default of unlike_query_probes, not a test.

  bench/gen_hard --nb 1000000 --nq 2000 --ood-seed 777 --out /tmp/hard1m   (a build-bench program)
  /usr/bin/python3 bench/probe_emulation.py --base /tmp/hard1m_base.fbin --query /tmp/hard1m_ood.fbin
"""
import argparse

import faiss
import numpy as np

LLOYD_STEPS = 8
SAMPLE_PER_LIST = 64


def read_fbin(path):
    n, d = np.fromfile(path, dtype=np.int32, count=2)
    return np.fromfile(path, dtype=np.float32, offset=8).reshape(int(n), int(d))


def device_kmeans(xb, lists):
    """The centres flat/DeviceKMeans.h computes (up to FP32 summation order)."""
    nb, d = xb.shape
    count = min(nb, SAMPLE_PER_LIST * lists)
    sample = xb[(np.arange(count, dtype=np.int64) * nb) // count]
    centres = sample[np.arange(lists) * (count // lists)].copy()
    for _ in range(LLOYD_STEPS):
        index = faiss.IndexFlatL2(d)
        index.add(centres)
        _, assign = index.search(sample, 1)
        assign = assign[:, 0]
        sums = np.zeros((lists, d))
        np.add.at(sums, assign, sample)
        held = np.bincount(assign, minlength=lists)
        centres[held > 0] = (sums[held > 0] / held[held > 0, None]).astype(np.float32)
    return centres


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help=".fbin of the vectors")
    ap.add_argument("--query", required=True, help=".fbin of the queries")
    ap.add_argument("--nq", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--probes", default="16,32,48,64,96,128")
    a = ap.parse_args()
    xb, xq = read_fbin(a.base), read_fbin(a.query)[:a.nq]
    nb, d = xb.shape
    exact = faiss.IndexFlatL2(d)
    exact.add(xb)
    _, truth = exact.search(xq, a.k)
    lists = max(1, min(int(round(4 * np.sqrt(nb))), nb, 65536))
    centres = device_kmeans(xb, lists)
    coarse = faiss.IndexFlatL2(d)
    coarse.add(centres)
    ivf = faiss.IndexIVFFlat(coarse, d, lists)
    ivf.is_trained = True
    ivf.add(xb)
    sizes = np.array([ivf.invlists.list_size(i) for i in range(lists)])
    print(f"{nb} x {d}, {len(xq)} queries, {lists} lists: vectors a list p50 "
          f"{int(np.median(sizes))} p99 {int(np.percentile(sizes, 99))} max {sizes.max()}")
    probes = [int(p) for p in a.probes.split(",")]
    _, nearest = coarse.search(xq, max(probes))
    for p in probes:
        ivf.nprobe = p
        _, found = ivf.search(xq, a.k)
        recall = np.mean([len(np.intersect1d(f, t)) / a.k for f, t in zip(found, truth)])
        scanned = sizes[nearest[:, :p]].sum(1).mean() / nb
        print(f"probes {p}: recall@{a.k} {recall:.4f}, vectors scanned {100 * scanned:.2f}%")


if __name__ == "__main__":
    main()
