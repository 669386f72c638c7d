#!/usr/bin/env python3
"""torch_knngraph.py: the PyTorch anchor of the knngraph suite (DESIGN.md, "Benchmarks").

The exact k-NN graph of a set (each vector's k nearest others, itself
excluded) with torch on the GPU, tiled over query rows, no torch.cdist:
for each tile of --tile-rows rows, d = |y|^2 - 2 x.y by one torch.addmm
(FP32, TF32 off), torch.topk(k + 1, largest=False), then |x|^2 added to the
k + 1 kept values only (it does not change the order) and the row itself
dropped (the last of the k + 1 when the row is not among them). Vectors and
results in device memory; timing: a one-tile warm-up, then up to --reps full
runs (stopping once they took > --budget s together), median.

Recall is scored on the rows i * n / --recall-rows against an exact
float64 brute force on the GPU, ties counted as hits (a returned id counts
when its float64 distance is within a relative 1e-5 of the k-th exact one).
Those rows of torch's graph are written to --ids-out (.ivecs) for
bench_knngraph, which scores ours against them.

    python3 bench/torch_knngraph.py --base B.fbin --dataset NAME [--k 10] [--reps 3]
        [--budget 30] [--tile-rows 4096] [--recall-rows 512] [--ids-out T.ivecs]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_flat import read_vectors  # noqa: E402


def write_ivecs(path, x):
    x = np.ascontiguousarray(x, dtype=np.int32)
    n, d = x.shape
    out = np.empty((n, d + 1), dtype=np.int32)
    out[:, 0] = d
    out[:, 1:] = x
    out.tofile(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--n", type=int, default=0, help="at most this many vectors (0: all)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3, help="timed full runs after a one-tile warm-up; median")
    ap.add_argument("--budget", type=float, default=30.0, help="stop once the timed runs took this long")
    ap.add_argument("--tile-rows", type=int, default=4096, help="query rows per distance tile")
    ap.add_argument("--recall-rows", type=int, default=512)
    ap.add_argument("--ids-out", default=None, help="write the sampled rows of the graph here (.ivecs)")
    ap.add_argument("--git", default=os.environ.get("FAISS_EXT_GIT", "unknown"))
    args = ap.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("[torch_knngraph] no GPU visible to torch: skipped", file=sys.stderr)
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda:0")
    device_name = torch.cuda.get_device_name(0)

    t0 = time.time()
    base = read_vectors(args.base, args.n)
    n, d = base.shape
    k = args.k
    if not 1 <= k <= n - 1:
        print(f"[torch_knngraph] k={k} must be within 1 .. n - 1", file=sys.stderr)
        return 2
    print(f"[torch_knngraph] {args.dataset}: n={n} d={d} k={k} (read in {time.time() - t0:.1f} s)", file=sys.stderr)
    x = torch.from_numpy(base).to(dev)
    tile = max(1, min(n, args.tile_rows))
    free_mem, _ = torch.cuda.mem_get_info(0)
    while tile > 256 and 3 * tile * n * 4 > 0.8 * free_mem:  # the tile, topk's and addmm's temporaries
        tile //= 2

    def graph(n_rows=n):
        xn = (x * x).sum(dim=1)
        D = torch.empty((n_rows, k), dtype=torch.float32, device=dev)
        I = torch.empty((n_rows, k), dtype=torch.int64, device=dev)
        for q0 in range(0, n_rows, tile):
            q1 = min(n_rows, q0 + tile)
            q = x[q0:q1]
            # |y|^2 - 2 x.y for every y, then the k + 1 smallest; |x|^2 afterwards.
            dist = torch.addmm(xn[None, :], q, x.t(), beta=1.0, alpha=-2.0)
            vals, ids = torch.topk(dist, k + 1, dim=1, largest=False, sorted=True)
            del dist
            vals.add_(xn[q0:q1, None])
            self_id = torch.arange(q0, q1, device=dev)[:, None]
            drop = ids == self_id
            # Rows whose own id is not among the k + 1: drop the last instead.
            drop[:, k] |= ~drop.any(dim=1)
            keep = ~drop
            keep &= keep.cumsum(dim=1) <= k  # exactly k kept per row, even with a repeated self id
            D[q0:q1] = vals[keep].view(-1, k)
            I[q0:q1] = ids[keep].view(-1, k)
        return D, I

    params = {"tile_rows": tile, "io": "device", "torch": torch.__version__, "tf32": False,
              "exclude_self": True, "form": "addmm(|y|^2 - 2x.y) + topk(k+1), |x|^2 added to the kept"}
    line = {"suite": "knngraph", "dataset": args.dataset or os.path.basename(args.base),
            "method": "torch:mm+topk-tiles", "algo": "torch", "device": device_name, "nb": n, "d": d, "nq": n,
            "k": k}
    try:
        graph(min(n, tile))  # warm-up: one tile
        torch.cuda.synchronize()
        times, total = [], 0.0
        for _ in range(max(1, args.reps)):
            t0 = time.perf_counter()
            D, I = graph()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            total += times[-1]
            if total > args.budget:
                break
        sec = statistics.median(times)
        print(f"[torch_knngraph] graph: {sec:.3f} s ({len(times)} runs, tile {tile} rows)", file=sys.stderr)

        # Recall on the sampled rows against a float64 brute force on the GPU.
        m = min(n, max(1, args.recall_rows))
        rows = torch.tensor([i * n // m for i in range(m)], dtype=torch.int64, device=dev)
        x64 = x.double()
        xn64 = (x64 * x64).sum(dim=1)
        got = I[rows]
        hits = 0
        for s0 in range(0, m, 64):
            r = rows[s0:s0 + 64]
            q = x64[r]
            # Squared distances to every vector, then the exact ones of the k nearest.
            dd = torch.addmm(xn64[None, :], q, x64.t(), beta=1.0, alpha=-2.0)
            dd[torch.arange(len(r), device=dev), r] = float("inf")  # itself excluded
            ref_ids = torch.topk(dd, k, dim=1, largest=False, sorted=True)[1]
            del dd
            kth = ((x64[ref_ids] - q[:, None, :]) ** 2).sum(dim=-1).max(dim=1, keepdim=True)[0]
            g = got[s0:s0 + 64]
            gd = ((x64[g] - q[:, None, :]) ** 2).sum(dim=-1)
            ok = (gd <= kth + 1e-5 * kth.abs().clamp(min=1.0)) & (g != r[:, None])
            # A repeated id counts once.
            srt, order = torch.sort(g, dim=1)
            ok = ok.gather(1, order)
            ok[:, 1:] &= srt[:, 1:] != srt[:, :-1]
            hits += int(ok.sum().item())
        recall = hits / (m * k)
        params.update({"reps": len(times), "recall_nq": m, "recall_ref": "float64 brute force (torch, GPU)"})
        if args.ids_out:
            write_ivecs(args.ids_out, got.cpu().numpy())
        line.update({"params": params, "seconds": sec, "ms": sec * 1e3, "qps": n / sec, "recall": recall,
                     "git": args.git})
        print(json.dumps(line), flush=True)
        print(f"[torch_knngraph] recall {recall:.4f} on {m} rows", file=sys.stderr)
        return 0
    except Exception as e:
        print(f"[torch_knngraph] failed: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
