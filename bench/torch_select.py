#!/usr/bin/env python3
"""torch_select.py: the PyTorch anchor of the select suite (DESIGN.md, "Benchmarks").

torch.topk(x, k, dim=1, largest=False, sorted=True) on nq x nb float32
matrices already on the GPU: the same shapes, the same values (bench_select's
hash generator, reproduced bit for bit in int64 arithmetic), the same timing
rules (one warm-up, up to --reps timed runs with the L2 cache flushed before
each, CUDA events, median; stop once one run took > --guard s or all of them
> --budget s) and the same memory rule (skip matrices above --max-mem-frac of
the free GPU memory at start) as bench/bench_select. Prints one JSON object a
line; `recall` is the fraction of checked (row, j) whose value equals the
j-th smallest of the row (a sort) and whose id points at it.

    python3 bench/torch_select.py [--nq 1,64,2048,8192] [--nb-log2 13-20]
        [--k 1,32,256,1024,2048,8192] [--reps 5] [--seed 1] [--quick]
"""
import argparse
import os
import statistics
import sys
import time
import json

MASK = 0xFFFFFFFF


def hash32(x):
    """bench_select.cu's hash32 on an int64 tensor of values in [0, 2^32)."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & MASK  # x < 2^32 and the multiplier < 2^31: no int64 overflow
    x = x ^ (x >> 15)
    x = (x * 0x2C1B3C6D) & MASK
    x = x ^ (x >> 16)
    return x


def fill_uniform(x, seed, torch):
    """x[row][col] = (hash32(hash32(col + seed) ^ hash32(row * 0x9E3779B1 + seed + 0x632BE5AB)) >> 8) / 2^24, mod 2^32."""
    nq, nb = x.shape
    dev = x.device
    c = hash32((torch.arange(nb, dtype=torch.int64, device=dev) + seed) & MASK)
    r = hash32((torch.arange(nq, dtype=torch.int64, device=dev) * 0x9E3779B1 + seed + 0x632BE5AB) & MASK)
    step = max(1, (1 << 27) // nb)  # rows per chunk: 1 GiB of int64 temporaries
    for r0 in range(0, nq, step):
        v = hash32(c[None, :] ^ r[r0:r0 + step, None])
        x[r0:r0 + step] = (v >> 8).to(torch.float32) * (1.0 / 16777216.0)
        del v


def parse_list(s):
    out = []
    for item in s.split(","):
        item = item.strip()
        if not item:
            continue
        mult = 1
        if item[-1] in "kK":
            mult, item = 1000, item[:-1]
        elif item[-1] == "M":
            mult, item = 1000000, item[:-1]
        out.append(int(item) * mult)
    return out


def check_rows(x, V, I, k, n_rows, torch):
    """Fraction of checked (row, j) with V == the row's sorted j-th value and x[row, I] == V, ids distinct."""
    nq = x.shape[0]
    rows = sorted({(nq - 1) * i // (n_rows - 1) if n_rows > 1 else 0 for i in range(n_rows)})
    good = total = 0
    for r in rows:
        ref = torch.sort(x[r])[0][:k]
        ids = I[r]
        ok = (V[r] == ref) & (x[r][ids.clamp(0, x.shape[1] - 1)] == V[r]) & (ids >= 0) & (ids < x.shape[1])
        distinct = torch.unique(ids).numel() == k
        good += int(ok.sum().item()) if distinct else 0
        total += k
    return good / total if total else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nq", default=None, help="rows (default 1,64,2048,8192)")
    ap.add_argument("--nb", default=None, help="columns (default: from --nb-log2)")
    ap.add_argument("--nb-log2", default=None, help="LO-HI: columns 2^LO .. 2^HI (default 13-20)")
    ap.add_argument("--k", default=None, help="k values (default 1,32,256,1024,2048,8192)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--guard", type=float, default=2.0)
    ap.add_argument("--budget", type=float, default=3.0)
    ap.add_argument("--max-mem-frac", type=float, default=0.4)
    ap.add_argument("--check-rows", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-flush", action="store_true")
    ap.add_argument("--quick", action="store_true", help="nq 64,2048 x nb 2^16,2^20 x k 32,1024")
    ap.add_argument("--git", default=os.environ.get("FAISS_EXT_GIT", "unknown"))
    args = ap.parse_args()

    nqs = parse_list(args.nq or ("64,2048" if args.quick else "1,64,2048,8192"))
    if args.nb:
        nbs = parse_list(args.nb)
    elif args.quick and not args.nb_log2:
        nbs = [1 << 16, 1 << 20]
    else:
        lo, _, hi = (args.nb_log2 or "13-20").partition("-")
        nbs = [1 << e for e in range(int(lo), int(hi or lo) + 1)]
    ks = parse_list(args.k or ("32,1024" if args.quick else "1,32,256,1024,2048,8192"))

    import torch
    if not torch.cuda.is_available():
        print("[torch_select] no GPU visible to torch: skipped", file=sys.stderr)
        return 0
    dev = torch.device("cuda:0")
    props = torch.cuda.get_device_properties(0)
    device_name = torch.cuda.get_device_name(0)
    free_mem, total_mem = torch.cuda.mem_get_info(0)
    l2 = int(getattr(props, "L2_cache_size", 0) or (50 << 20))
    flush = not args.no_flush
    flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device=dev) if flush else None
    stream = torch.cuda.current_stream()
    print(f"[torch_select] {device_name}: {free_mem / 2**30:.1f} GiB free of {total_mem / 2**30:.1f} GiB; "
          f"L2 {l2 >> 20} MiB (flush {'on' if flush else 'off'}); torch {torch.__version__}", file=sys.stderr)
    dataset = f"uniform-hash-seed{args.seed}"
    status = 0
    t_start = time.time()

    def time_it(fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        warm = time.perf_counter() - t0
        n = 1 if warm > args.guard else max(1, args.reps)
        ms, walls, total, early = [], [], 0.0, n < args.reps
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for r in range(n):
            if flush:
                flush_buf.zero_()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start.record(stream)
            fn()
            stop.record(stream)
            stop.synchronize()
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
            ms.append(start.elapsed_time(stop))
            walls.append(wall * 1e3)
            total += wall
            if r + 1 < n and (wall > args.guard or total > args.budget):
                early = True
                break
        return ms, walls, warm * 1e3, early

    for nq in nqs:
        for nb in nbs:
            nbytes = nq * nb * 4
            if nbytes > args.max_mem_frac * free_mem:
                print(f"[torch_select] nq={nq} nb={nb}: skipped ({nbytes / 2**30:.1f} GiB > "
                      f"{args.max_mem_frac * 100:.0f}% of the {free_mem / 2**30:.1f} GiB free at start)", file=sys.stderr)
                continue
            try:
                x = torch.empty((nq, nb), dtype=torch.float32, device=dev)
                fill_uniform(x, args.seed, torch)
                torch.cuda.synchronize()
            except Exception as e:
                status = 1
                print(f"[torch_select] nq={nq} nb={nb}: data failed: {e}", file=sys.stderr)
                x = None
                torch.cuda.empty_cache()
                continue
            for k in ks:
                if k < 1 or k > nb:
                    continue
                out = {}

                def run():
                    out["V"], out["I"] = torch.topk(x, k, dim=1, largest=False, sorted=True)

                params = {"torch": torch.__version__, "io": "device", "sorted": True, "largest": False,
                          "l2_flush": flush, "check_rows": args.check_rows}
                line = {"suite": "select", "dataset": dataset, "method": "torch:topk", "algo": "torch-topk",
                        "device": device_name, "nb": nb, "d": None, "nq": nq, "k": k}
                try:
                    ms, walls, warm, early = time_it(run)
                    med = statistics.median(ms)
                    exact = check_rows(x, out["V"], out["I"], k, args.check_rows, torch) if args.check_rows > 0 else None
                    params.update({"reps": len(ms), "stat": "median", "min_ms": min(ms),
                                   "wall_ms": statistics.median(walls), "warmup_ms": warm, "stopped_early": early})
                    line.update({"params": params, "seconds": med / 1e3, "ms": med, "qps": nq / (med / 1e3),
                                 "gbps": nbytes / (med / 1e3) / 1e9, "recall": exact, "auto_pick": None,
                                 "git": args.git})
                    print(f"[torch_select] nq={nq} nb={nb} k={k}: {med:.4f} ms ({len(ms)} runs), exact {exact}",
                          file=sys.stderr)
                except Exception as e:  # out of memory, say: record it and go on
                    status = 1
                    print(f"[torch_select] nq={nq} nb={nb} k={k} failed: {e}", file=sys.stderr)
                    params["error"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                    line.update({"params": params, "seconds": None, "ms": None, "qps": None, "gbps": None,
                                 "recall": None, "auto_pick": None, "git": args.git})
                print(json.dumps(line), flush=True)
                out.clear()
                torch.cuda.empty_cache()
            del x
            torch.cuda.empty_cache()
    print(f"[torch_select] done in {time.time() - t_start:.1f} s", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
