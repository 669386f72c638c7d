#!/usr/bin/env python3
"""gen_far_clusters.py: a hard set far from the origin, generated on the GPU.

Issue 39's shape of data: Zipf-sized anisotropic clusters whose centres lie
far from the origin (vector norms about --centre-norm), neighbour distances
of a few units, so that the TF32 error bound (which grows with the norms)
is loose and the exact path's GEMM tiles are large. Cluster c has a centre
drawn on the sphere of radius --centre-norm around a common offset and
maps N(0, I) samples through its own random orthogonal matrix times
per-axis scales log-uniform in [0.1, 1]; weights fall as (rank + 1)^-1.1.
Base rows and queries come from the same mixture (independent draws).
Deterministic for a seed on one device type; written as .fbin (int32 n, d,
then float32 rows) in chunks, so 100M x 96 (38 GB) needs no more host
memory than one chunk.

    python3 bench/gen_far_clusters.py --nb 10000000 --nq 10000 --d 96 \
        --clusters 3000 --out /tmp/far10m     # -> /tmp/far10m_base.fbin, _query.fbin
"""
import argparse
import sys
import time

import numpy as np
import torch


def mixture(d, clusters, centre_norm, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    offset = torch.randn(d, generator=g, device=device)
    offset *= centre_norm / offset.norm() / 2 ** 0.5
    dirs = torch.randn(clusters, d, generator=g, device=device)
    centres = offset + dirs / dirs.norm(dim=1, keepdim=True) * (centre_norm / 2 ** 0.5)
    rot, _ = torch.linalg.qr(torch.randn(clusters, d, d, generator=g, device=device))
    scales = torch.exp(torch.empty(clusters, d, device=device).uniform_(np.log(0.1), 0.0, generator=g))
    weights = (torch.arange(clusters, device=device, dtype=torch.float64) + 1) ** -1.1
    return centres, rot * scales[:, None, :], weights / weights.sum()


def write_rows(path, n, d, chunk, mix, seed, device):
    centres, maps, weights = mix
    g = torch.Generator(device=device).manual_seed(seed)
    with open(path, "wb") as f:
        np.array([n, d], dtype=np.int32).tofile(f)
        for r0 in range(0, n, chunk):
            m = min(chunk, n - r0)
            cid = torch.multinomial(weights, m, replacement=True, generator=g)
            z = torch.randn(m, d, generator=g, device=device)
            # (z @ maps[c]^T) per row, batched by cluster.
            x = torch.empty(m, d, device=device)
            order = torch.argsort(cid)
            counts = torch.bincount(cid, minlength=len(weights)).tolist()
            start = 0
            for c, cnt in enumerate(counts):
                if cnt:
                    rows = order[start:start + cnt]
                    x[rows] = z[rows] @ maps[c].T + centres[c]
                    start += cnt
            x.cpu().numpy().astype(np.float32).tofile(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nb", type=int, required=True)
    ap.add_argument("--nq", type=int, default=10000)
    ap.add_argument("--d", type=int, default=96)
    ap.add_argument("--clusters", type=int, default=3000)
    ap.add_argument("--centre-norm", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=2039)
    ap.add_argument("--chunk", type=int, default=5_000_000)
    ap.add_argument("--out", required=True, help="prefix of PREFIX_base.fbin and PREFIX_query.fbin")
    a = ap.parse_args()
    if a.nb < 1 or a.nq < 1 or a.d < 1 or a.clusters < 1 or a.chunk < 1:
        sys.exit("gen_far_clusters: --nb, --nq, --d, --clusters and --chunk must be positive")
    if not torch.cuda.is_available():
        sys.exit("gen_far_clusters: needs a GPU (torch.cuda)")
    dev = torch.device("cuda")
    t0 = time.time()
    mix = mixture(a.d, a.clusters, a.centre_norm, a.seed, dev)
    write_rows(a.out + "_base.fbin", a.nb, a.d, a.chunk, mix, a.seed + 1, dev)
    write_rows(a.out + "_query.fbin", a.nq, a.d, a.chunk, mix, a.seed + 2, dev)
    print(f"[gen_far_clusters] {a.nb} x {a.d} + {a.nq} queries, {a.clusters} clusters, "
          f"centre norm {a.centre_norm}: {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
