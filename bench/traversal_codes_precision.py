#!/usr/bin/env python3
"""What the search graph's traversal codes cost in precision, without a GPU.

The beam search scores candidates on a copy of the vectors (graph/TraversalCopy.h):
FP16 (x minus the vectors' mean, times a power of two; also uncentred, as it
was before 2026-12-05), then re-scores its final buffer in FP32. 8-bit codes
(per dimension, code c stands for lo + step c over the dimension's range) are
scored too: a candidate measured on the GPU and dropped for its speed
(docs/search-graph.md).
This script isolates the scoring from the graph: for each query it ranks the
whole base by the distance to each copy's decoded vectors (float64), keeps the
first T, re-ranks them exactly, and scores recall@10 against the exact ground
truth (a returned id counts when its distance is within the 10th true one: ties).
T = 10 is the copy's own order; T = 32 / 64 is a search whose buffer holds that
many candidates at the end. Data: the real sets of ../shared/data (Fashion-MNIST
784-d bytes and PCA to 128-d floats, SIFT small, the point cloud), and a
generated set of anisotropic clusters far from the origin.

    /usr/bin/python3 bench/traversal_codes_precision.py [--shared-data DIR] [--nq N]
"""
import argparse
import json
import os
import sys

import numpy as np


def read_vecs(path, dtype):
    if dtype == np.uint8:
        raw = np.fromfile(path, np.uint8)
        d = raw[:4].view(np.int32)[0]
        return raw.reshape(-1, d + 4)[:, 4:].astype(np.float32)
    raw = np.fromfile(path, np.int32)
    d = raw[0]
    return raw.reshape(-1, d + 1)[:, 1:].view(np.float32).copy()


def half_copy(x, centred=True):
    """corpusMean, graph::halfScaleFor and toHalf: (x - mean) * scale in FP16,
    max |x - mean| * scale in [2^13, 2^14); centred=False: the copy before
    it was centred (mean 0)."""
    mean = x.astype(np.float64).mean(axis=0).astype(np.float32) if centred else np.zeros(
        x.shape[1], np.float32)
    c = x - mean
    m = float(np.abs(c).max())
    scale = np.float32(2.0 ** min(14 - np.frexp(m)[1], 100)) if m > 0 else np.float32(1)
    h = (c * scale).astype(np.float16).astype(np.float64) / float(scale)
    return h + mean.astype(np.float64)


def byte_copy(x):
    """graph::byteCodeRanges and toBytes, in float32 as the kernels compute."""
    lo = x.min(axis=0).astype(np.float32)
    hi = x.max(axis=0).astype(np.float32)
    step = np.where(hi > lo, (hi - lo) / np.float32(255), np.float32(1)).astype(np.float32)
    c = np.clip(np.rint((x - lo) / step), 0, 255)
    return lo.astype(np.float64) + step.astype(np.float64) * c


def exact_gt(base, queries, k):
    return top_by_distance(base.astype(np.float64), queries.astype(np.float64), k)


def top_by_distance(base, queries, t, chunk=256):
    """Ids of the t nearest base rows of each query (float64 squared L2)."""
    bn = (base * base).sum(axis=1)
    out = np.empty((len(queries), t), np.int64)
    for i in range(0, len(queries), chunk):
        q = queries[i:i + chunk]
        dist = bn[None, :] - 2.0 * q @ base.T
        part = np.argpartition(dist, t - 1, axis=1)[:, :t]
        order = np.take_along_axis(dist, part, axis=1).argsort(axis=1)
        out[i:i + chunk] = np.take_along_axis(part, order, axis=1)
    return out


def recall_after_rerank(base, queries, cand, gt_dist10, k=10):
    """recall@k of the candidates re-ranked exactly, ties by distance."""
    hits = 0
    for i, q in enumerate(queries.astype(np.float64)):
        c = cand[i]
        d = ((base[c].astype(np.float64) - q) ** 2).sum(axis=1)
        best = d[np.argsort(d)[:k]]
        hits += int((best <= gt_dist10[i] * (1 + 1e-9) + 1e-12).sum())
    return hits / (k * len(queries))


def far_clusters(n, nq, d, clusters, seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, d)) * 20 + 50.0
    sizes = 1.0 / np.arange(1, clusters + 1)
    sizes /= sizes.sum()
    axes = rng.uniform(0.2, 3.0, size=(clusters, d))
    def draw(m):
        lab = rng.choice(clusters, size=m, p=sizes)
        return (centres[lab] + rng.normal(size=(m, d)) * axes[lab]).astype(np.float32)
    return draw(n), draw(nq)


def sets(shared, nq):
    out = []
    fm = os.path.join(shared, "fashion-mnist")
    if os.path.isdir(fm):
        b = read_vecs(os.path.join(fm, "fashion-mnist_base.bvecs"), np.uint8)
        q = read_vecs(os.path.join(fm, "fashion-mnist_query.bvecs"), np.uint8)[:nq]
        out.append(("fashion-mnist 60k x 784 (bytes)", b, q))
        mean = b.mean(axis=0)
        _, _, vt = np.linalg.svd(b[:20000] - mean, full_matrices=False)
        p = vt[:128].T.astype(np.float32)
        out.append(("fashion-mnist PCA 60k x 128", (b - mean) @ p, (q - mean) @ p))
    else:
        print(f"absent: {fm} (skipped)", file=sys.stderr)
    for name, folder, base, query in (
            ("siftsmall 10k x 128", "siftsmall", "siftsmall_base.fvecs", "siftsmall_query.fvecs"),
            ("point cloud 114k x 3", "pointcloud-rs", "rs1_base.fvecs", "rs22_query.fvecs")):
        path = os.path.join(shared, folder)
        if not os.path.isdir(path):
            print(f"absent: {path} (skipped)", file=sys.stderr)
            continue
        out.append((name, read_vecs(os.path.join(path, base), np.float32),
                    read_vecs(os.path.join(path, query), np.float32)[:nq]))
    b, q = far_clusters(100000, nq, 96, 300, 6161)
    out.append(("generated far clusters 100k x 96", b, q))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--shared-data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--out", help="also write one JSON line per set and copy here")
    a = ap.parse_args()
    lines = []
    for name, base, queries in sets(a.shared_data, a.nq):
        gt = exact_gt(base, queries, 10)
        b64 = base.astype(np.float64)
        gt_d10 = ((b64[gt[:, 9]] - queries.astype(np.float64)) ** 2).sum(axis=1)
        row = {"set": name, "nb": len(base), "nq": len(queries), "d": base.shape[1]}
        copies = (("fp16", half_copy(base)), ("fp16_uncentred", half_copy(base, False)),
                  ("bytes", byte_copy(base)))
        for copy_name, decoded in copies:
            cand = top_by_distance(decoded, queries.astype(np.float64), 64)
            for t in (10, 32, 64):
                row[f"{copy_name}_T{t}"] = round(recall_after_rerank(base, queries, cand[:, :t], gt_d10), 4)
        print(json.dumps(row), flush=True)
        lines.append(row)
    if a.out:
        with open(a.out, "a") as f:
            for r in lines:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
