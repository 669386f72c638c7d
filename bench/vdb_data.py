"""The data of the vector-database benchmarks (bench/vdb_ops.py and the cuVS
anchor bench/anchor_cagra_filtered.py, which run in different processes and
must see the same vectors and filters): numpy only."""

import numpy as np


def mixture(seed, n, d, point_seed, clusters=1000):
    """n points of a mixture of `clusters` Gaussians whose centres come from
    `seed` (data and queries share them; point_seed draws the points)."""
    centres = np.random.default_rng(seed).standard_normal((clusters, d), dtype=np.float32) * 3.0
    rng = np.random.default_rng(point_seed)
    x = rng.standard_normal((n, d), dtype=np.float32)
    x += centres[rng.integers(0, clusters, n)]
    return x


def dataset(seed, n, d, point_seed, metric):
    """The mixture for "l2"; for "ip" its rows normalized (an embedding-like
    set searched by inner product, as cosine similarity)."""
    x = mixture(seed, n, d, point_seed)
    if metric == "ip":
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def dataset_name(seed, n, d, metric):
    return "mixture-%dx%d-seed%d%s" % (n, d, seed, "-normalized-ip" if metric == "ip" else "")


def selectors(xb, rng):
    """(name, selectivity, mask) of random and attribute-like filters."""
    n = len(xb)
    out = []
    u = rng.random(n)
    for s in (0.001, 0.01, 0.1, 0.5, 0.9):
        out.append(("random", s, u < s))
    first = xb[:, 0]
    for s in (0.01, 0.1, 0.5):
        out.append(("attribute", s, first > np.quantile(first, 1 - s)))
    return out


def write_fbin(path, x):
    """x as .fbin (int32 n, int32 d, then float32 rows), as bench_ann reads it."""
    with open(path, "wb") as f:
        np.array(x.shape, dtype=np.int32).tofile(f)
        np.ascontiguousarray(x, dtype=np.float32).tofile(f)


def main():
    """Writes base.fbin and query.fbin of one mixture for bench_ann --data files
    (and bench/anchor_cagra.py through bench_ann --write-dir): the vectors and
    queries vdb_ops.py draws for the same seed, size and metric."""
    import argparse
    import os

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--write", required=True, help="folder for base.fbin and query.fbin")
    ap.add_argument("--n", type=int, default=1000000)
    ap.add_argument("--nq", type=int, default=10000)
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--seed", type=int, default=9090)  # vdb_ops.py's
    ap.add_argument("--metric", choices=["l2", "ip"], default="ip")
    a = ap.parse_args()
    os.makedirs(a.write, exist_ok=True)
    write_fbin(os.path.join(a.write, "base.fbin"), dataset(a.seed, a.n, a.d, a.seed + 1, a.metric))
    write_fbin(os.path.join(a.write, "query.fbin"), dataset(a.seed, a.nq, a.d, a.seed + 2, a.metric))
    print(dataset_name(a.seed, a.n, a.d, a.metric))


if __name__ == "__main__":
    main()
