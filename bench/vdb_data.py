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
