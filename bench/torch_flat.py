#!/usr/bin/env python3
"""torch_flat.py: the PyTorch anchor of the flat suite (DESIGN.md, "Benchmarks").

Exact L2 k-NN with torch.mm + torch.topk on the GPU, tiled over queries so the
distance tile fits in memory, on the same data files as bench/bench_flat.
Prints one JSON object a line (the keys of DESIGN.md). Recall is scored on the
first rows against the exact reference that bench_flat wrote (--ref, FAISS on
the CPU), ties counted as hits by distances recomputed in float64.

    python3 bench/torch_flat.py --base B.fbin --query Q.fbin --dataset NAME \
        [--k 1,10,100,1024,4096] [--reps 3] [--ref REF.ivecs] [--tile-gib 4]
        [--single-query N]

--single-query N adds, per k, the latency of one-query searches (the median of
N calls on one query each, synchronised), as a line with nq 1 and
params.mode "single-query", like bench_flat --single-query.
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np


def read_vectors(path, max_rows=0):
    """Reads .fvecs, .bvecs, .fbin or an IDX image file (optionally .gz) as float32."""
    p = path.lower()
    if p.endswith(".fbin"):
        n, d = np.fromfile(path, dtype=np.int32, count=2)
        if max_rows > 0:
            n = min(n, max_rows)
        return np.fromfile(path, dtype=np.float32, count=int(n) * int(d), offset=8).reshape(n, d)
    if "idx3-ubyte" in p:
        opener = gzip.open if p.endswith(".gz") else open
        with opener(path, "rb") as f:
            raw = f.read()
        n, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
        x = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows * cols)
        return x[:max_rows or n].astype(np.float32)
    if p.endswith(".gz"):  # .fvecs.gz / .bvecs.gz / .ivecs.gz (as bench/stage.sh writes them)
        with gzip.open(path, "rb") as f:
            raw = np.frombuffer(f.read(), dtype=np.uint8)
        p = p[:-3]
    elif p.endswith((".bvecs", ".fvecs", ".ivecs")):
        raw = np.fromfile(path, dtype=np.uint8)
    else:
        raise ValueError(f"{path}: unknown vector format")
    d = int(raw[:4].view(np.int32)[0])
    if p.endswith(".bvecs"):
        x = raw.reshape(-1, d + 4)[:, 4:]
        return x[:max_rows or len(x)].astype(np.float32)
    if p.endswith((".fvecs", ".ivecs")):
        x = raw.view(np.int32).reshape(-1, d + 1)[:, 1:]
        x = x[:max_rows or len(x)]
        return np.ascontiguousarray(x.view(np.float32) if p.endswith(".fvecs") else x)
    raise ValueError(f"{path}: unknown vector format")


def recall_at_k(I, ref, k, base, query, rel_tol=1e-5):
    """Recall@k of ids I (n x >=k) against reference ids ref (n x >=k), ties as hits."""
    hits = total = 0
    for q in range(len(ref)):
        r = ref[q, :k]
        r = r[r >= 0]
        if len(r) == 0:
            continue
        got = I[q, :len(r)]
        got = got[got >= 0]
        qv = query[q].astype(np.float64)
        kth = float(((base[r[-1]].astype(np.float64) - qv) ** 2).sum())
        tol = rel_tol * max(1.0, abs(kth))
        rs = set(r.tolist())
        extra = [i for i in got.tolist() if i not in rs]
        h = len(got) - len(extra)
        if extra:
            dd = ((base[extra].astype(np.float64) - qv) ** 2).sum(axis=1)
            h += int((dd <= kth + tol).sum())
        hits += h
        total += len(r)
    return hits / total if total else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--query", required=True)
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--suite", default="flat", help="suite written in every line")
    ap.add_argument("--nq", type=int, default=0, help="at most this many queries (0: all)")
    ap.add_argument("--k", default="1,10,100,1024,4096")
    ap.add_argument("--reps", type=int, default=3, help="timed runs after one warm-up; median reported")
    ap.add_argument("--ref", default=None, help="exact reference ids (.ivecs) from bench_flat --ref-out")
    ap.add_argument("--tile-gib", type=float, default=4.0, help="size of one distance tile")
    ap.add_argument("--single-query", type=int, default=0,
                    help="also time this many one-query searches per k (median latency)")
    ap.add_argument("--git", default=os.environ.get("FAISS_EXT_GIT", "unknown"))
    args = ap.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("[torch_flat] no GPU visible to torch: skipped", file=sys.stderr)
        return 0
    # Plain FP32 products (no TF32), like ours and the cuBLAS floor.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda:0")

    t0 = time.time()
    base = read_vectors(args.base)
    query = read_vectors(args.query, args.nq)
    nb, d = base.shape
    nq = query.shape[0]
    print(f"[torch_flat] {args.dataset}: nb={nb} nq={nq} d={d} (read in {time.time() - t0:.1f} s)",
          file=sys.stderr)
    ref = read_vectors(args.ref) if args.ref else None

    xb = torch.from_numpy(base).to(dev)
    xq = torch.from_numpy(query).to(dev)
    xb_norm = (xb * xb).sum(dim=1)
    tile = max(1, min(nq, int(args.tile_gib * 2**30 / (4 * nb))))
    device_name = torch.cuda.get_device_name(0)

    def search(k):
        D = torch.empty((nq, k), dtype=torch.float32, device=dev)
        I = torch.empty((nq, k), dtype=torch.int64, device=dev)
        for q0 in range(0, nq, tile):
            q = xq[q0:q0 + tile]
            # ||q - b||^2 = ||q||^2 - 2 q.b + ||b||^2, then the k smallest.
            dist = torch.mm(q, xb.t())
            dist.mul_(-2.0).add_(xb_norm[None, :]).add_((q * q).sum(dim=1, keepdim=True))
            vals, ids = torch.topk(dist, k, dim=1, largest=False, sorted=True)
            D[q0:q0 + tile] = vals
            I[q0:q0 + tile] = ids
            del dist
        return D, I

    def single_query_latency(k, calls):
        """Median seconds of `calls` searches of one query each, synchronised."""
        def one(i):
            q = xq[i % nq:i % nq + 1]
            dist = torch.mm(q, xb.t())
            dist.mul_(-2.0).add_(xb_norm[None, :]).add_((q * q).sum(dim=1, keepdim=True))
            return torch.topk(dist, k, dim=1, largest=False, sorted=True)
        one(0)  # warm-up
        torch.cuda.synchronize()
        times = []
        for i in range(calls):
            t0 = time.perf_counter()
            one(i)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    status = 0
    for k in [int(s) for s in args.k.split(",") if s]:
        if k < 1 or k > nb:
            continue
        if args.single_query > 0:
            try:
                sec = single_query_latency(k, args.single_query)
                line = {"suite": args.suite, "dataset": args.dataset or os.path.basename(args.base),
                        "method": "torch:mm+topk", "device": device_name, "nb": nb, "d": d, "nq": 1,
                        "k": k, "params": {"mode": "single-query", "calls": args.single_query,
                                           "io": "device", "torch": torch.__version__, "tf32": False},
                        "seconds": sec, "qps": 1.0 / sec, "recall": None, "git": args.git}
                print(json.dumps(line), flush=True)
                print(f"[torch_flat] single-query k={k}: {sec * 1e3:.4f} ms", file=sys.stderr)
            except Exception as e:  # report and go on
                status = 1
                print(f"[torch_flat] single-query k={k} failed: {e}", file=sys.stderr)
        try:
            search(k)  # warm-up
            torch.cuda.synchronize()
            times = []
            for _ in range(max(1, args.reps)):
                t0 = time.perf_counter()
                D, I = search(k)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            sec = statistics.median(times)
            recall = None
            params = {"reps": max(1, args.reps), "tile_nq": tile, "io": "device",
                      "torch": torch.__version__, "tf32": False}
            if ref is not None and ref.shape[1] >= k:
                n_rec = min(len(ref), nq)
                recall = recall_at_k(I[:n_rec].cpu().numpy(), ref[:n_rec], k, base, query)
                params.update({"recall_nq": n_rec, "recall_ref": "faiss-cpu:IndexFlatL2"})
            line = {"suite": args.suite, "dataset": args.dataset or os.path.basename(args.base),
                    "method": "torch:mm+topk", "device": device_name, "nb": nb, "d": d, "nq": nq,
                    "k": k, "params": params, "seconds": sec, "qps": nq / sec, "recall": recall,
                    "git": args.git}
            print(json.dumps(line), flush=True)
            print(f"[torch_flat] k={k}: {sec:.4f} s, {nq / sec:.0f} q/s, recall {recall}", file=sys.stderr)
            del D, I
            torch.cuda.empty_cache()
        except Exception as e:  # report and go on with the next k
            status = 1
            print(f"[torch_flat] k={k} failed: {e}", file=sys.stderr)
            torch.cuda.empty_cache()
    return status


if __name__ == "__main__":
    sys.exit(main())
