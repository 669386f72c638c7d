#!/usr/bin/env python3
"""ood_probe.py: can a graph index tell queries unlike its data (issue 38) from
the rest, on the CPU with FAISS? For each query, the squared distance to its
nearest vector v over v's own squared distance to its k-th neighbour (a
statistic a graph index has at hand after a search: its first result and the
k-NN lists), and, for comparison, the distance to the nearest of a random
sample of the data (what an entry-point sample sees). Prints the statistics'
percentiles for the in-distribution queries and for the queries unlike the
data, and the share of each above a few thresholds. Evidence for the design
of a detector, not a test.

  bench/gen_hard --nb 200k --nq 2000 --ood-seed 777 --out /tmp/hard   (a build-bench program)
  /usr/bin/python3 bench/ood_probe.py --prefix /tmp/hard [--k 10] [--sample 4096]

--shared-data DIR instead reads the shared real data sets (Fashion-MNIST, SIFT
small, and a point cloud queried with another scan of the scene) and their
exact k-NN lists and ground truth from DIR (../shared/data), skipping those
absent: no search is run.
"""
import argparse

import faiss
import numpy as np


def read_fbin(path):
    n, d = np.fromfile(path, dtype=np.int32, count=2)
    return np.fromfile(path, dtype=np.float32, offset=8).reshape(int(n), int(d))


def own_radius(index, xb, ids, k):
    """Squared distance of each vector ids[i] to its k-th neighbour (itself excluded)."""
    D, _ = index.search(xb[ids], k + 1)
    return D[:, k]


def read_vecs(path, dtype):
    raw = np.fromfile(path, dtype=np.int32)
    d = int(raw[0])
    return raw.reshape(-1, d + 1)[:, 1:].copy().view(dtype)


# (name, base prefix, query prefix, K of the base's k-NN lists), under --shared-data
SHARED_SETS = (
    ("Fashion-MNIST, held-out queries", "fashion-mnist/fashion-mnist_base",
     "fashion-mnist/fashion-mnist_query", 100),
    ("SIFT small, its queries", "siftsmall/siftsmall_base", "siftsmall/siftsmall_query", 100),
    ("point cloud rs1, queried with scan rs22", "pointcloud-rs/rs1_base",
     "pointcloud-rs/rs22_query", 32),
)


def shared_data(root, k, thresholds):
    import os
    for name, base, query, K in SHARED_SETS:
        lists = os.path.join(root, "%s_knn%d_l2" % (base, K))
        gt = os.path.join(root, query + "_gt100_l2")
        if not os.path.exists(lists + ".ivecs"):
            print("%s: absent under %s, skipped" % (name, root))
            continue
        dist = read_vecs(lists + "_dist.fvecs", np.float32)
        nn = read_vecs(gt + ".ivecs", np.int32)[:, 0]
        nn_dist = read_vecs(gt + "_dist.fvecs", np.float32)[:, 0]
        ratio = nn_dist / dist[nn, min(k, K) - 1]
        print("%s (%d queries): d2(q, v1) / r_k(v1) p50 %.2f p99 %.2f p99.9 %.2f max %.2f" %
              ((name, len(ratio)) + tuple(np.percentile(ratio, [50, 99, 99.9, 100]))))
        for t in thresholds:
            print("  ratio > %g: %.4f of the queries" % (t, float(np.mean(ratio > t))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prefix", help="gen_hard's --out")
    ap.add_argument("--shared-data", help="the shared real data sets' directory")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--sample", type=int, default=4096, help="entry-point sample size")
    ap.add_argument("--thresholds", default="2,3,4,6")
    a = ap.parse_args()
    if a.shared_data:
        shared_data(a.shared_data, a.k, [float(v) for v in a.thresholds.split(",")])
        return
    if not a.prefix:
        ap.error("--prefix or --shared-data is required")
    xb = read_fbin(a.prefix + "_base.fbin")
    sets = (("in-distribution", read_fbin(a.prefix + "_query.fbin")),
            ("unlike the data", read_fbin(a.prefix + "_ood.fbin")))
    index = faiss.IndexFlatL2(xb.shape[1])
    index.add(xb)
    rng = np.random.default_rng(1)
    sample = faiss.IndexFlatL2(xb.shape[1])
    sample.add(xb[rng.choice(len(xb), min(a.sample, len(xb)), replace=False)])
    print("%d x %d vectors; k %d; sample %d" % (xb.shape[0], xb.shape[1], a.k, sample.ntotal))
    for name, q in sets:
        D, I = index.search(q, a.k)
        ratio = D[:, 0] / own_radius(index, xb, I[:, 0], a.k)
        ds, _ = sample.search(q, 1)
        print("%s (%d queries): d2(q, v1) / r_k(v1) p1 %.2f p50 %.2f p99 %.2f max %.2f; "
              "nearest sample d2 p1 %.1f p50 %.1f p99 %.1f" %
              ((name, len(q)) + tuple(np.percentile(ratio, [1, 50, 99, 100])) +
               tuple(np.percentile(ds[:, 0], [1, 50, 99]))))
        for t in (float(v) for v in a.thresholds.split(",")):
            print("  ratio > %g: %.3f of the queries" % (t, float(np.mean(ratio > t))))


if __name__ == "__main__":
    main()
