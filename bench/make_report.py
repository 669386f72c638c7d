#!/usr/bin/env python3
"""make_report.py: bench/results/*.jsonl -> docs/benchmark-tables.md (+ PNG plots in docs/).

Reads every suite's JSON lines (keys: docs/benchmarks.md, "What each suite measures"), keeps the latest line
for each (suite, dataset, method, nb, d, nq, k), and writes Markdown tables
(queries/s, seconds, recall, ratios to the anchors; for `select` also which of
our algorithms is fastest per shape, the crossovers behind SelectAlgo::Auto;
for `knngraph` the graph times against torch and the GEMM floor; for `graph` build time and
recall@10 of GNND per setting, GGM, out of core, FAISS NN-Descent and the exact GPU graph,
with a recall-vs-time plot per data set; for `lsh` the goal (best queries/s at recall@10 >= 0.9
of ours against the exact GPU search and the single-thread CPU twin), recall@10 against
queries/s of every method and setting with a plot per data set, build times, and the work
queue against the heap over k) between the markers
<!-- BEGIN GENERATED --> and <!-- END GENERATED --> of docs/benchmark-tables.md
(docs/benchmarks.md holds the same-run comparisons, written by hand);
text outside the markers (findings, what limits us) is kept as written.
Plots need matplotlib; without it only the tables are written.

    python3 bench/make_report.py [--results bench/results] [--out docs/benchmark-tables.md]
"""
import argparse
import glob
import json
import statistics
import os
import sys
from collections import OrderedDict, defaultdict

BEGIN = "<!-- BEGIN GENERATED -->"
END = "<!-- END GENERATED -->"
METHOD_ORDER = ["ours:", "torch", "floor:", "faiss-cpu:", "cpu-twin:"]


def method_rank(m):
    for i, p in enumerate(METHOD_ORDER):
        if m.startswith(p):
            return (i, m)
    return (len(METHOD_ORDER), m)


# Parameters that name a setting (not a measurement) of an lsh line: lines that
# agree on these and on (suite, dataset, method, nb, d, nq, k) are re-runs of
# one measurement, and the latest wins.
SETTING_KEYS = ["sweep", "note", "depth", "tree_depth", "L", "n_tables", "M", "n_projections", "bucket_width",
                "nprobe", "tables", "min_candidates", "group_probes", "short_list", "nbits", "efSearch"]


def setting_identity(r):
    """The setting of a line (lsh suite: its `setting` field or its setting parameters; ann suite: all
    its parameters but timings); None elsewhere."""
    if r.get("suite") in ("ann", "ann-device-queries", "ann-lsh", "flat-tf32", "ann-cagra", "host-queries"):
        p = r.get("params") or {}
        return tuple((k, json.dumps(v, sort_keys=True)) for k, v in sorted(p.items()) if not k.endswith("seconds"))
    if r.get("suite") == "gnnd-schedules":
        return r.get("setting")
    if r.get("suite") == "filter":
        p = r.get("params") or {}
        return (p.get("filter"), p.get("selectivity"), p.get("fraction"), p.get("metric"), p.get("efSearch"))
    if r.get("suite") == "delete":
        return (r.get("params") or {}).get("removed_total_fraction")
    if r.get("suite") != "lsh":
        return None
    if r.get("setting"):
        return r["setting"]
    p = r.get("params") or {}
    return tuple((k, json.dumps(p[k], sort_keys=True)) for k in SETTING_KEYS if k in p)


# Suites whose tables compare ours with anchors measured in the same run: a
# table per device, so that no ratio mixes two GPUs.
PER_DEVICE_SUITES = ("select", "flat", "flat-few-queries", "ann-lsh")


def by_device(rows):
    """(device, its rows) with the device of the most lines first."""
    devices = {}
    for r in rows:
        devices.setdefault(r.get("device", "?"), []).append(r)
    return sorted(devices.items(), key=lambda kv: -len(kv[1]))


def load(results_dir):
    rows = OrderedDict()
    for path in sorted(glob.glob(os.path.join(results_dir, "*.jsonl"))):
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    print(f"{path}:{n}: skipped, not JSON ({e})", file=sys.stderr)
                    continue
                key = (r.get("suite"), r.get("dataset", ""), r.get("method"), r.get("nb", r.get("n")),
                       r.get("d"), r.get("nq"), r.get("k"), setting_identity(r))
                if r.get("suite") in PER_DEVICE_SUITES:  # one table per device: keep each device's lines
                    key += (r.get("device"),)
                prev = rows.pop(key, None)  # the latest line wins, in file order
                if r.get("suite") == "gnnd-schedules":
                    # repeats of one commit's build are kept for their median
                    same = prev is not None and prev.get("git") == r.get("git")
                    r["_repeats"] = (prev["_repeats"] if same else []) + [(r["seconds"], r["recall"])]
                if r.get("suite") == "flat-few-queries" and r.get("seconds") is not None:
                    # repeats of one commit's run are kept for their median
                    same = prev is not None and prev.get("git") == r.get("git")
                    r["_seconds"] = (prev.get("_seconds", []) if same else []) + [r["seconds"]]
                if r.get("suite") == "select" and r.get("ms") is not None:
                    # repeats of one commit's run: the line of the median time stands for them
                    same = prev is not None and prev.get("git") == r.get("git")
                    runs = (prev.get("_runs", [prev]) if same else []) + [r]
                    r = dict(sorted(runs, key=lambda x: x["ms"])[(len(runs) - 1) // 2])
                    r["_runs"] = runs
                rows[key] = r
    return list(rows.values())


def filter_tables(rows):
    """Suite `filter`: per data set, exact and graph search under each filter against the
    unfiltered searches of the same run; recall@k against the exact filtered answer."""
    out = []
    for ds in sorted({r.get("dataset", "") for r in rows}):
        rs = [r for r in rows if r.get("dataset", "") == ds]
        base = {r["method"]: r for r in rs if r["method"] in ("ours:unfiltered", "ours:graph-unfiltered")}
        f = next((r for r in rs if r["method"].startswith("ours:") and r.get("nq")), rs[0])
        out.append(f"### {ds}: nb = {human(f.get('nb'))}, d = {f.get('d')}, nq = {human(f.get('nq'))}, k = {f.get('k')}\n")
        out.append(f"Device: {f.get('device')}; commits: {', '.join(sorted({r.get('git', '?') for r in rs}))}. "
                   f"Unfiltered: exact {fmt_qps(base.get('ours:unfiltered', {}).get('qps'))} q/s, "
                   f"graph {fmt_qps(base.get('ours:graph-unfiltered', {}).get('qps'))} q/s.\n")
        out.append("| filter | selected | exact q/s | exact / unfiltered | exact recall | graph q/s | graph recall "
                   "| FAISS CPU HNSW: best recall (efSearch), q/s there |")
        out.append("|---|---|---|---|---|---|---|---|")
        keyed = defaultdict(dict)
        hnsw = defaultdict(list)
        for r in rs:
            p = r.get("params") or {}
            if r["method"] in ("ours:filtered", "ours:graph-filtered"):
                keyed[(p.get("filter"), p.get("selectivity"))][r["method"]] = r
            elif r["method"] == "faiss-cpu:HNSWFlat-filtered":
                hnsw[(p.get("filter"), p.get("selectivity"))].append(r)
        unf = base.get("ours:unfiltered", {}).get("qps")
        for (kind, sel), m in sorted(keyed.items(), key=lambda x: (x[0][0] or "", x[0][1] or 0)):
            e, g = m.get("ours:filtered", {}), m.get("ours:graph-filtered", {})
            ratio = f"{e['qps'] / unf:.2f}x" if e.get("qps") and unf else "–"
            rec = e.get("recall")
            h = max(hnsw.get((kind, sel), []), key=lambda r: r.get("recall", 0), default=None)
            hcell = (f"{h['recall']:.4f} ({h['params'].get('efSearch')}), {fmt_qps(h.get('qps'))}"
                     if h else "–")
            out.append(f"| {kind} | {sel * 100:g}% | {fmt_qps(e.get('qps'))} | {ratio} | "
                       f"{fmt(rec if rec is not None and rec >= 0 else None, '.4f')} | "
                       f"{fmt_qps(g.get('qps'))} | {fmt(g.get('recall'), '.4f')} | {hcell} |")
        rem = [r for r in rs if r["method"] == "ours:remove_ids"]
        if rem:
            out.append("")
            out.append("| remove_ids of | removed | seconds |")
            out.append("|---|---|---|")
            for r in sorted(rem, key=lambda r: r["params"].get("fraction", 0)):
                out.append(f"| {r['params'].get('fraction', 0) * 100:g}% | {r['params'].get('removed')} | "
                           f"{fmt(r.get('seconds'), '.4f')} |")
        out.append("")
    return out


def delete_tables(rows):
    """Suite `delete`: remove_ids on the search graph, step by step, against a fresh
    build of the survivors in the same run."""
    out = ["| data set | removed in all | remove_ids s | recall@10 after | q/s after | fresh build: "
           "recall@10, q/s, build s |", "|---|---|---|---|---|---|"]
    for ds in sorted({r.get("dataset", "") for r in rows}):
        rs = [r for r in rows if r.get("dataset", "") == ds]
        fresh = {r["params"].get("removed_total_fraction"): r for r in rs
                 if r["method"] == "ours:graph-fresh-build-of-survivors"}
        for r in sorted((r for r in rs if r["method"] == "ours:graph-remove_ids"),
                        key=lambda r: r["params"].get("removed_total_fraction", 0)):
            f = r["params"].get("removed_total_fraction", 0)
            fr = fresh.get(f)
            fcell = (f"{fr['recall']:.4f}, {fmt_qps(fr.get('qps'))}, {fr['params'].get('build_seconds', 0):.1f}"
                     if fr else "–")
            out.append(f"| {ds} | {f * 100:g}% | {r['seconds']:.3f} | {r['recall']:.4f} | "
                       f"{fmt_qps(r.get('qps'))} | {fcell} |")
    out.append("")
    return out


def fmt_qps(v):
    if v is None:
        return "–"
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}k" if v >= 1e4 else f"{v:.0f}"


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def human(n):
    return f"{n // 1000000}M" if n % 1000000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def split_by_gpu(groups):
    """Each group (a data set) keyed again by its GPU: one table per GPU where
    a data set was measured on several, each with the CPU lines (anchors run
    on the host) of its group, so that no ratio mixes two GPUs; "" where one."""
    out = {}
    for key, g in groups.items():
        gpus = sorted({r.get("device", "?") for r in g if "NVIDIA" in str(r.get("device", ""))})
        if len(gpus) <= 1:
            out[key + ("",)] = g
            continue
        for gpu in gpus:
            out[key + (gpu,)] = [r for r in g if r.get("device") == gpu
                                 or "NVIDIA" not in str(r.get("device", ""))]
    return out


def flat_tables(rows, plots_dir, rel_plots, make_plots):
    out = []
    groups = defaultdict(list)
    for r in rows:
        groups[(r.get("dataset", ""), r["nb"], r["d"], r["nq"])].append(r)
    groups = split_by_gpu(groups)
    goal = []
    for (ds, nb, d, nq, dev) in sorted(groups, key=lambda g: (g[0] != "clustered", g[0], g[1], g[2], g[4])):
        g = groups[(ds, nb, d, nq, dev)]
        # The newest SGEMM floor (the TF32 and BF16x3 floors share the prefix).
        sgemm = [r for r in g if r["method"] == "floor:cublas-sgemm"]
        floor = sgemm[-1] if sgemm else next((r for r in g if r["method"].startswith("floor:")), None)
        methods = sorted({r["method"] for r in g if r.get("k") is not None}, key=method_rank)
        ks = sorted({r["k"] for r in g if r.get("k") is not None})
        by = {(r["method"], r.get("k")): r for r in g}
        devices = sorted({f'{r["method"].split(":")[0]}: {r["device"]}' for r in g})
        out.append(f"### {ds}: nb = {human(nb)}, d = {d}, nq = {human(nq)}" + (f" ({dev})" if dev else "") + "\n")
        out.append("Devices: " + "; ".join(devices) + ".  ")
        if floor:
            out.append(f"GEMM floor (cuBLAS SGEMM alone, {floor['params'].get('tflops', 0):.1f} TFLOP/s): "
                       f"{floor['seconds']:.4f} s.\n")
        else:
            out.append("\n")
        head = ["k"] + [f"{m} q/s" for m in methods]
        has_ours = any(m.startswith("ours:") for m in methods)
        has_torch = any(m.startswith("torch") for m in methods)
        if has_ours and has_torch:
            head.append("ours / torch")
        if has_ours and floor:
            head.append("ours time / GEMM")
        recall_methods = [m for m in methods if any(by.get((m, k), {}).get("recall") is not None for k in ks)]
        head += [f"recall {m.split(':')[0]}" for m in recall_methods]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for k in ks:
            cells = [str(k)]
            for m in methods:
                r = by.get((m, k))
                c = fmt_qps(r["qps"]) if r else "–"
                if r and r.get("params", {}).get("extrapolated"):
                    c += f" (on {human(r['params']['nq_timed'])})"
                cells.append(c)
            ours = next((by.get((m, k)) for m in methods if m.startswith("ours:") and by.get((m, k))), None)
            torch = next((by.get((m, k)) for m in methods if m.startswith("torch") and by.get((m, k))), None)
            ratio = ours["qps"] / torch["qps"] if ours and torch else None
            tgemm = ours["seconds"] / floor["seconds"] if ours and floor else None
            if has_ours and has_torch:
                cells.append(fmt(ratio, ".2f") + ("x" if ratio else ""))
            if has_ours and floor:
                cells.append(fmt(tgemm, ".2f") + ("x" if tgemm else ""))
            for m in recall_methods:
                r = by.get((m, k))
                cells.append(fmt(r.get("recall") if r else None, ".4f"))
            out.append("| " + " | ".join(cells) + " |")
            if ds == "clustered" and nb == 1000000 and d == 128 and k in (10, 100, 1024):
                goal.append((dev or (ours or {}).get("device", "?"), k, ratio, tgemm))
        out.append("")
        if make_plots:
            png = f"bench_flat_{ds}_{nb}_{d}_{dev}.png".replace("/", "_").replace(" ", "_")
            plot_group(g, methods, ks, floor, os.path.join(plots_dir, png), f"{ds}: nb={human(nb)}, d={d}, nq={human(nq)}")
            out.append(f"![{ds} nb={human(nb)} d={d}]({rel_plots}/{png})\n")
    if goal:
        out.insert(0, "")
        lines = ["### Goal: clustered, nb = 1M, d = 128, nq = 10k\n",
                 "At least 2x torch.mm + torch.topk, and at most 1.5x the GEMM-only time.\n",
                 "| device | k | ours / torch | met | ours time / GEMM | met |", "|---|---|---|---|---|---|"]
        for dev, k, ratio, tgemm in goal:
            lines.append(f"| {dev} | {k} | {fmt(ratio, '.2f')} | {'yes' if ratio and ratio >= 2 else 'no'} | "
                         f"{fmt(tgemm, '.2f')} | {'yes' if tgemm and tgemm <= 1.5 else 'no'} |")
        out[0:0] = lines
    return out


SELECT_ALGOS = [("ours-qms", "qms"), ("ours-mq", "mq"), ("ours-thheap", "thheap")]
SELECT_PLOT_NQ = 2048


def fmt_ms(v):
    if v is None:
        return "–"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def pow2(n):
    e = n.bit_length() - 1
    return f"2^{e}" if n == 1 << e else human(n)


def select_algo(r):
    """The select line's algorithm: its `algo` field, else derived from `method`."""
    if r.get("algo"):
        return r["algo"]
    m = r.get("method", "")
    return {"torch:topk": "torch-topk", "floor:mem-read": "mem-floor"}.get(m, m.replace("ours:", "ours-"))


def select_tables(rows, plots_dir, rel_plots, make_plots):
    """Tables of the select suite: goal, per-nq timings with the anchors, crossovers, TH-heap."""
    out = []
    by = {}  # (nq, nb, k or None, algo) -> line
    for r in rows:
        by[(r["nq"], r["nb"], r.get("k"), select_algo(r))] = r
    ms = lambda nq, nb, k, a: (by.get((nq, nb, k, a)) or {}).get("ms")  # noqa: E731
    shapes = sorted({(r["nq"], r["nb"], r["k"]) for r in rows if r.get("k") is not None})
    nqs = sorted({s[0] for s in shapes})
    devices = sorted({r["device"] for r in rows if r.get("device")})
    out.append("Devices: " + "; ".join(devices) + ". Data: uniform floats in [0, 1) made on the GPU "
               "(the same values for ours and torch). Times in ms, medians of timed runs with the L2 cache "
               "flushed before each (the floor: the best of its runs), and where a commit ran a shape in several "
               "processes, the median process. *fastest* is the fastest of our "
               "algorithms: the three named, and Auto's pick (the sampled-threshold filter is measured only "
               "through Auto); *vs torch* = torch time / ours (above 1: ours faster); */ floor* = ours "
               "time / memory-read floor. `exact` below 1 means a checked row differed from a sort.\n")

    def fastest(nq, nb, k):
        cands = [(ms(nq, nb, k, a), name) for a, name in SELECT_ALGOS if ms(nq, nb, k, a) is not None]
        # the sampled-threshold filter is measured only as Auto's pick
        au = by.get((nq, nb, k, "ours-auto"))
        if au and au.get("ms") is not None:
            cands.append((au["ms"], au.get("auto_pick") or "auto"))
        return min(cands) if cands else (None, None)

    # ---- goal: 2048 x 2^20, every k up to 2048, at least 3x torch ----
    goal_nb = 1 << 20
    goal_ks = [k for (nq, nb, k) in shapes if nq == 2048 and nb == goal_nb and k <= 2048]
    if goal_ks:
        fl = ms(2048, goal_nb, None, "mem-floor")
        out.append(f"### Goal: nq = 2048, nb = 2^20, k <= 2048: at least 3x torch.topk\n")
        out.append(f"Memory-read floor: {fmt_ms(fl)} ms.\n")
        out.append("| k | torch ms | auto ms (pick) | auto vs torch | met | fastest ms | fastest vs torch | fastest / floor |")
        out.append("|---|---|---|---|---|---|---|---|")
        for k in goal_ks:
            t = ms(2048, goal_nb, k, "torch-topk")
            au = by.get((2048, goal_nb, k, "ours-auto"))
            a = au.get("ms") if au else None
            f, fn = fastest(2048, goal_nb, k)
            ra = t / a if t and a else None
            rf = t / f if t and f else None
            out.append(f"| {k} | {fmt_ms(t)} | {fmt_ms(a)} ({(au or {}).get('auto_pick') or '–'}) | "
                       f"{fmt(ra, '.2f')}{'x' if ra else ''} | {('yes' if ra >= 3 else 'no') if ra else '–'} | "
                       f"{fmt_ms(f)} ({fn or '–'}) | {fmt(rf, '.2f')}{'x' if rf else ''} | "
                       f"{fmt(f / fl if f and fl else None, '.2f')}{'x' if f and fl else ''} |")
        out.append("")

    # ---- per nq: every shape with its anchors ----
    for nq in nqs:
        out.append(f"### nq = {human(nq)}\n")
        out.append("| nb | k | floor ms (GB/s) | torch ms | qms ms | mq ms | thheap ms | auto ms (pick) | fastest | "
                   "fastest vs torch | auto vs torch | fastest / floor | exact |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for (q, nb, k) in shapes:
            if q != nq:
                continue
            flr = by.get((nq, nb, None, "mem-floor"))
            fl = flr.get("ms") if flr else None
            t = ms(nq, nb, k, "torch-topk")
            au = by.get((nq, nb, k, "ours-auto"))
            a = au.get("ms") if au else None
            f, fn = fastest(nq, nb, k)
            exact = [by[(nq, nb, k, x)].get("recall") for x, _ in SELECT_ALGOS + [("ours-auto", "")]
                     if (nq, nb, k, x) in by and by[(nq, nb, k, x)].get("recall") is not None]
            cells = [pow2(nb), str(k),
                     f"{fmt_ms(fl)} ({fmt(flr.get('gbps') if flr else None, '.0f')})" if flr else "–",
                     fmt_ms(t)] + [fmt_ms(ms(nq, nb, k, x)) for x, _ in SELECT_ALGOS]
            cells.append(f"{fmt_ms(a)} ({(au or {}).get('auto_pick') or '–'})")
            cells.append(fn or "–")
            for v in (t / f if t and f else None, t / a if t and a else None, f / fl if f and fl else None):
                cells.append(fmt(v, ".2f") + ("x" if v else ""))
            cells.append(fmt(min(exact), ".4f") if exact else "–")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")

    # ---- crossovers: the fastest of ours per (nq, nb, k) ----
    ks = sorted({s[2] for s in shapes})
    out.append("### Crossovers: which of our algorithms is fastest\n")
    out.append("Per (nq, nb, k): the fastest of qms (quick multi-select), mq (merge queue) and thheap (TH-heap), "
               "with its lead over the second fastest (second's time / fastest's). A `*` marks shapes where "
               "Auto picked another algorithm. SelectAlgo::Auto's rule (chooseSelectAlgo) is derived from this "
               "table.\n")
    for nq in nqs:
        out.append(f"nq = {human(nq)}:\n")
        out.append("| nb \\ k | " + " | ".join(str(k) for k in ks) + " |")
        out.append("|---|" + "---|" * len(ks))
        for nb in sorted({s[1] for s in shapes if s[0] == nq}):
            cells = [pow2(nb)]
            for k in ks:
                cands = sorted((ms(nq, nb, k, a), name) for a, name in SELECT_ALGOS if ms(nq, nb, k, a) is not None)
                if not cands:
                    cells.append("–")
                    continue
                c = cands[0][1]
                if len(cands) > 1 and cands[0][0] > 0:
                    c += f" ({cands[1][0] / cands[0][0]:.2f}x)"
                au = by.get((nq, nb, k, "ours-auto"))
                pick = (au or {}).get("auto_pick")
                short = {"quick-multi-select": "qms", "merge-queue": "mq", "th-heap": "thheap"}.get(pick, pick)
                if pick and short != cands[0][1]:
                    c += f" *{short}"
                cells.append(c)
            out.append("| " + " | ".join(cells) + " |")
        out.append("")

    # ---- TH-heap against the best of the other two ----
    th = [(s, ms(*s, "ours-thheap")) for s in shapes if ms(*s, "ours-thheap") is not None]
    if th:
        out.append("### TH-heap against the best of qms and mq\n")
        out.append("thheap time / min(qms, mq) time: below 1.00 (in bold) TH-heap wins; – : not run (TH-heap is "
                   "skipped where nq x nb > 2^31 or once its time budget is spent).\n")
        for nq in nqs:
            if not any(s[0] == nq for s, _ in th):
                continue
            out.append(f"nq = {human(nq)}:\n")
            out.append("| nb \\ k | " + " | ".join(str(k) for k in ks) + " |")
            out.append("|---|" + "---|" * len(ks))
            for nb in sorted({s[1] for s in shapes if s[0] == nq}):
                cells = [pow2(nb)]
                for k in ks:
                    t = ms(nq, nb, k, "ours-thheap")
                    o = [v for v in (ms(nq, nb, k, "ours-qms"), ms(nq, nb, k, "ours-mq")) if v is not None]
                    cells.append(f"{'**' if t < min(o) else ''}{t / min(o):.2f}{'**' if t < min(o) else ''}"
                                 if t is not None and o else "–")
                out.append("| " + " | ".join(cells) + " |")
            out.append("")

    # ---- plots: time vs nb per k, lines per algorithm, for nq = 2048 ----
    if make_plots:
        links = []
        for k in ks:
            nbs = sorted({nb for (nq, nb, kk) in shapes if nq == SELECT_PLOT_NQ and kk == k})
            if len(nbs) < 2:
                continue
            png = f"select_nq{SELECT_PLOT_NQ}_k{k}.png"
            plot_select(by, SELECT_PLOT_NQ, k, nbs, os.path.join(plots_dir, png))
            links.append(f"![select nq={SELECT_PLOT_NQ} k={k}]({rel_plots}/{png})")
        if links:
            out.append(f"### Plots: time against nb, nq = {SELECT_PLOT_NQ}\n")
            out.append("\n".join(links) + "\n")
    return out


def plot_select(by, nq, k, nbs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    series = [("ours-qms", "ours: quick multi-select", "o", "-"), ("ours-mq", "ours: merge queue", "s", "-"),
              ("ours-thheap", "ours: TH-heap", "^", "-"), ("ours-auto", "ours: auto", "x", ":"),
              ("torch-topk", "torch.topk", "D", "-"), ("mem-floor", "memory-read floor", None, "--")]
    for algo, label, marker, ls in series:
        kk = None if algo == "mem-floor" else k
        pts = [(nb, by[(nq, nb, kk, algo)]["ms"]) for nb in nbs
               if (nq, nb, kk, algo) in by and by[(nq, nb, kk, algo)].get("ms")]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, linestyle=ls, label=label,
                    color="gray" if algo == "mem-floor" else None)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("nb (columns per row)")
    ax.set_ylabel("ms")
    ax.set_title(f"select: nq = {nq}, k = {k}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def knngraph_tables(rows):
    """The knngraph suite: ours against torch's tiled graph and the GEMM floor, per data set."""
    out = []
    groups = defaultdict(list)
    for r in rows:
        groups[(r.get("dataset", ""), r["nb"], r["d"])].append(r)
    devices = sorted({r["device"] for r in rows if r.get("device")})
    out.append("Devices: " + "; ".join(devices) + ". Exact k-NN graph: every vector's k nearest others, itself "
               "excluded. ours: GpuIndexQuickSelectFlat::knnGraph; torch: addmm + topk(k + 1) in query tiles "
               "(FP32); floor: cuBLAS SGEMM of the n x n x d products alone. Seconds are medians of the timed "
               "runs. recall: against an exact reference on sampled rows (ours: FAISS's CPU search; torch: "
               "float64 brute force), ties counted as hits; *ours = torch*: ours scored against torch's graph "
               "on the same rows.\n")
    out.append("| data set | n | d | k | ours s | torch s | GEMM floor s | ours vs torch | ours / floor | "
               "recall ours | ours = torch | recall torch | auto pick |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    goal = None
    for (ds, n, d) in sorted(groups, key=lambda g: (g[0], g[1], g[2])):
        g = groups[(ds, n, d)]
        floor = next((r for r in g if r["method"].startswith("floor:")), None)
        for k in sorted({r["k"] for r in g if r.get("k") is not None}):
            ours = next((r for r in g if r["method"].startswith("ours:") and r.get("k") == k), None)
            torch = next((r for r in g if r["method"].startswith("torch") and r.get("k") == k), None)
            o = ours.get("seconds") if ours else None
            t = torch.get("seconds") if torch else None
            f = floor.get("seconds") if floor else None
            rt = t / o if o and t else None
            rf = o / f if o and f else None
            out.append(f"| {ds} | {human(n)} | {d} | {k} | {fmt(o, '.3f')} | {fmt(t, '.3f')} | {fmt(f, '.3f')} | "
                       f"{fmt(rt, '.2f')}{'x' if rt else ''} | {fmt(rf, '.2f')}{'x' if rf else ''} | "
                       f"{fmt(ours.get('recall') if ours else None, '.4f')} | "
                       f"{fmt((ours or {}).get('params', {}).get('recall_vs_torch'), '.4f')} | "
                       f"{fmt(torch.get('recall') if torch else None, '.4f')} | "
                       f"{(ours or {}).get('params', {}).get('select_algo', '–')} |")
            if n == 1000000 and d == 128 and k == 10:
                goal = o
    out.append("")
    if goal is not None:
        out.insert(0, f"### Goal: exact 10-NN graph of 1M x 128 in at most 10 s: "
                      f"{goal:.2f} s, {'met' if goal <= 10 else 'not met'}\n")
    return out


def graph_setting(r):
    """A short description of a graph line's setting, and its sort key."""
    p = r.get("params", {}) or {}
    m = r["method"]
    if m.startswith("ours:knngraph-exact"):
        return "exact (GPU brute force)", (0, 0, 0)
    if m.startswith("ours:gnnd-ooc"):
        return (f"out of core: {p.get('shards', '?')} shards of {human(p['shard_size']) if p.get('shard_size') else '?'}, "
                f"{p.get('merges', '?')} merges"), (3, r.get("k") or 0, 0)
    if m.startswith("ours:ggm"):
        return f"GGM: add {p.get('split', '?')}", (2, r.get("k") or 0, 0)
    if m.startswith("ours:gnnd"):
        return f"GNND p = {p.get('samples', '?')}", (1, r.get("k") or 0, p.get("samples") or 0)
    if m.startswith("faiss-cpu:"):
        return (f"FAISS NN-Descent K = {p.get('K', r.get('k'))}, iter = {p.get('iter', '?')}",
                (4, r.get("k") or 0, p.get("iter") or 0))
    return m, (5, 0, 0)


def graph_tables(rows, plots_dir, rel_plots, make_plots):
    """The graph suite: per data set, build time and recall@10 of every method, and a recall-vs-time plot."""
    out = []
    groups = defaultdict(list)
    for r in rows:
        groups[(r.get("dataset", ""), r["nb"], r["d"])].append(r)
    devices = sorted({r["device"] for r in rows if r.get("device")})
    out.append("Devices: " + "; ".join(devices) + ". k-NN graphs (each vector's k nearest others). *build s*: "
               "wall time of the build (ours: one add from device memory, the GNND iterations and the exact final "
               "distances; FAISS: IndexNNDescentFlat::add on all cores; out of core: the whole file build, I/O "
               "included). *recall@10*: the first 10 ids of each list against the exact 10 nearest (the data "
               "set's stored exact graph, or the exact GPU graph, checked against FAISS's CPU search), ties "
               "counted by distance. *vs FAISS*: FAISS's time / ours, for the fastest FAISS setting whose recall "
               "ours matches or beats.\n")
    summary = []
    for (ds, n, d) in sorted(groups, key=lambda g: (g[0] != "clustered", g[0], g[1], g[2])):
        g = sorted(groups[(ds, n, d)], key=lambda r: graph_setting(r)[1])
        ref = next((r.get("params", {}).get("recall_ref") for r in g if r.get("params", {}).get("recall_ref")), None)
        exact = next((r for r in g if r["method"].startswith("ours:knngraph-exact")), None)
        faiss = [r for r in g if r["method"].startswith("faiss-cpu:") and r.get("seconds")]
        out.append(f"### {ds}: n = {human(n)}, d = {d}\n")
        if ref:
            out.append(f"Recall reference: {ref}.\n")
        out.append("| method | k | setting | build s | recall@10 | vs exact GPU | vs FAISS | notes |")
        out.append("|---|---|---|---|---|---|---|---|")
        for r in g:
            p = r.get("params", {}) or {}
            setting, _ = graph_setting(r)
            sec, rec = r.get("seconds"), r.get("recall")
            vs_exact = exact["seconds"] / sec if exact and exact.get("seconds") and sec else None
            vs_faiss = None
            if r["method"].startswith("ours:") and not r["method"].startswith("ours:knngraph") and sec and rec is not None:
                beaten = [f for f in faiss if f.get("recall") is not None and rec >= f["recall"]]
                if beaten:
                    f = min(beaten, key=lambda f: f["seconds"])
                    vs_faiss = f["seconds"] / sec
            notes = []
            if p.get("skipped"):
                notes.append(f"skipped: estimated {fmt(p.get('estimate_seconds'), '.0f')} s > allowed "
                             f"{fmt(p.get('max_seconds'), '.0f')} s")
            if r["method"].startswith("ours:gnnd-k") and p.get("iterations") is not None:
                notes.append(f"{p['iterations']} iterations")
            if r["method"].startswith("ours:ggm"):
                notes.append(f"first add {fmt(p.get('first_add_seconds'), '.2f')} s, second "
                             f"{fmt(p.get('second_add_seconds'), '.2f')} s (merge {fmt(p.get('merge_seconds'), '.2f')} s, "
                             f"{p.get('merge_iterations', '?')} iterations); one shot "
                             f"{fmt(p.get('one_shot_seconds'), '.2f')} s at recall {fmt(p.get('one_shot_recall'), '.4f')}")
            if r["method"].startswith("ours:gnnd-ooc"):
                notes.append(f"shard builds {fmt(p.get('build_seconds'), '.2f')} s, merges {fmt(p.get('merge_seconds'), '.2f')} s, "
                             f"limit {fmt(p.get('device_memory_limit', 0) / 2**20 if p.get('device_memory_limit') else None, '.0f')} MiB "
                             f"for {fmt(p.get('data_bytes', 0) / 2**20 if p.get('data_bytes') else None, '.0f')} MiB of vectors; "
                             f"one shot {fmt(p.get('one_shot_seconds'), '.2f')} s at recall {fmt(p.get('one_shot_recall'), '.4f')}")
            if r["method"].startswith("faiss-cpu:") and p.get("omp_threads"):
                notes.append(f"{p['omp_threads']} threads")
            if r["method"].startswith("ours:knngraph-exact") and p.get("check_vs_faiss_cpu") is not None:
                notes.append(f"agrees with FAISS CPU on {p.get('check_rows', '?')} rows: {fmt(p['check_vs_faiss_cpu'], '.4f')}")
            out.append(f"| {r['method'].split(':')[0]} | {r.get('k')} | {setting} | {fmt(sec, '.3f')} | {fmt(rec, '.4f')} | "
                       f"{fmt(vs_exact, '.2f' if vs_exact and vs_exact >= 0.1 else '.2g')}{'x' if vs_exact else ''} | {fmt(vs_faiss, '.1f')}{'x' if vs_faiss else ''} | "
                       f"{'; '.join(notes)} |")
        out.append("")
        # The fastest of ours at recall >= 0.95, per k.
        for k in sorted({r.get("k") for r in g if r["method"].startswith("ours:gnnd-k")}):
            ok = [r for r in g if r["method"].startswith("ours:gnnd-k") and r.get("k") == k and r.get("seconds")
                  and (r.get("recall") or 0) >= 0.95]
            if ok:
                b = min(ok, key=lambda r: r["seconds"])
                summary.append(f"| {ds} | {human(n)} | {k} | {b['params'].get('samples')} | {b['seconds']:.3f} | "
                               f"{b['recall']:.4f} | {fmt(exact['seconds'] if exact else None, '.3f')} |")
        if make_plots:
            png = f"graph_{ds}_{n}_{d}.png".replace("/", "_")
            plot_graph(g, os.path.join(plots_dir, png), f"{ds}: n={human(n)}, d={d}")
            out.append(f"![graph {ds} n={human(n)}]({rel_plots}/{png})\n")
    if summary:
        out[1:1] = ["### Fastest GNND setting at recall@10 >= 0.95\n",
                    "| data set | n | k | p | build s | recall@10 | exact GPU graph s |", "|---|---|---|---|---|---|---|"]
        out[4:4] = summary + [""]
    return out


def plot_graph(g, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for k in sorted({r.get("k") for r in g if r["method"].startswith("ours:gnnd-k")}):
        pts = sorted(((r["seconds"], r["recall"], r["params"].get("samples")) for r in g
                      if r["method"].startswith("ours:gnnd-k") and r.get("k") == k and r.get("seconds")
                      and r.get("recall") is not None), key=lambda t: t[2] or 0)
        if pts:
            ax.plot([t[0] for t in pts], [t[1] for t in pts], marker="o", label=f"ours GNND k={k} (p sweep)")
            for t in pts:
                ax.annotate(f"p{t[2]}", (t[0], t[1]), fontsize=6, xytext=(3, -8), textcoords="offset points")
    fp = sorted(((r["seconds"], r["recall"], r["params"].get("iter")) for r in g
                 if r["method"].startswith("faiss-cpu:") and r.get("seconds") and r.get("recall") is not None))
    if fp:
        ax.plot([t[0] for t in fp], [t[1] for t in fp], marker="s", linestyle="--", label="FAISS NN-Descent K=64 (CPU)")
        for t in fp:
            ax.annotate(f"iter{t[2]}", (t[0], t[1]), fontsize=6, xytext=(3, -8), textcoords="offset points")
    for prefix, marker, color, label in [("ours:ggm", "^", "tab:purple", "ours GGM (half + half)"),
                                         ("ours:gnnd-ooc", "v", "tab:brown", "ours out of core"),
                                         ("ours:knngraph-exact", "*", "black", "exact GPU brute force")]:
        pts = [(r["seconds"], r["recall"]) for r in g if r["method"].startswith(prefix) and r.get("seconds")
               and r.get("recall") is not None]
        if pts:
            ax.scatter([t[0] for t in pts], [t[1] for t in pts], marker=marker, s=60, color=color, label=label,
                       zorder=3)
    ax.set_xscale("log")
    ax.set_xlabel("build seconds")
    ax.set_ylabel("recall@10")
    ax.set_title(f"graph: {title}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


# ---- suite lsh (Bi-level LSH) ----

LSH_GOAL_DATASET_PREFIX = "clustered"   # the 1M x 128 generated set of the goal
LSH_GOAL_NB = 1000000
LSH_GOAL_VS_EXACT = 3.0
LSH_GOAL_VS_TWIN = 40.0


def lsh_p(r, *names):
    """The first of the parameter names present in r's params (the two bench_lsh formats name some differently)."""
    p = r.get("params") or {}
    for n in names:
        if p.get(n) is not None:
            return p[n]
    return None


def lsh_is_ksweep(r):
    p = r.get("params") or {}
    return p.get("sweep") == "k" or p.get("note") == "short-list comparison"


def lsh_build_name(r):
    """depth, L, M, W of an ours / twin line, e.g. 't2 L10 M8 W2'."""
    depth, L = lsh_p(r, "tree_depth", "depth"), lsh_p(r, "n_tables", "L")
    M, W = lsh_p(r, "n_projections", "M"), lsh_p(r, "bucket_width")
    if depth is None:
        return None
    return f"t{depth} L{L} M{M} W{W:g}" if isinstance(W, (int, float)) else f"t{depth} L{L} M{M}"


def lsh_setting_name(r):
    """A short description of a line's search setting."""
    m = r["method"]
    if m.startswith("faiss-cpu:IndexLSH"):
        return f"nbits {lsh_p(r, 'nbits')}"
    if m.startswith("faiss-cpu:IndexHNSW"):
        return f"M {lsh_p(r, 'M')}, efSearch {lsh_p(r, 'efSearch')}" if lsh_p(r, "efSearch") else "skipped"
    if m.startswith("ours:exact"):
        return "exact"
    parts = [lsh_build_name(r) or "?", f"nprobe {lsh_p(r, 'nprobe')}"]
    if lsh_p(r, "group_probes") not in (None, 1):
        parts.append(f"groups {lsh_p(r, 'group_probes')}")
    if lsh_p(r, "tables") not in (None, 0):
        parts.append(f"tables {lsh_p(r, 'tables')}")
    if lsh_p(r, "min_candidates") not in (None, 0):
        parts.append(f"minCand {lsh_p(r, 'min_candidates')}")
    return ", ".join(parts)


def lsh_candidates(r):
    return r.get("candidates_per_query") if r.get("candidates_per_query") is not None else lsh_p(r, "mean_candidates")


def lsh_family(r):
    """Series of the recall / queries-per-second curves."""
    m = r["method"]
    if m.startswith("ours:bilsh") or m.startswith("cpu-twin:"):
        return f"{m} {lsh_build_name(r) or ''}".strip()
    return m


def fastest_reaching(rows, target, keep):
    """The line with the most queries/s among those `keep` accepts whose recall is >= target (None if none)."""
    ok = [r for r in rows if keep(r) and r.get("qps") and r.get("recall") is not None and r["recall"] >= target]
    return max(ok, key=lambda r: r["qps"]) if ok else None


def lsh_best_at(rows, method_prefixes, target=0.9):
    """The line with the most queries/s among those of the methods at recall@10 >= target (k = 10, not the k sweep)."""
    return fastest_reaching(rows, target, lambda r: any(r["method"].startswith(m) for m in method_prefixes)
                            and r.get("k") == 10 and not lsh_is_ksweep(r))


def lsh_tables(rows, plots_dir, rel_plots, make_plots):
    """The lsh suite: the goal, then per data set recall@10 against queries/s of every method, build times, and
    the work queue against the heap over k."""
    out = []
    groups = defaultdict(list)
    for r in rows:
        if r["method"] == "ours:bilsh-build" or r.get("nb") is None:
            groups[(r.get("dataset", ""), r.get("nb"), r.get("d"))].append(r)
        else:
            groups[(r.get("dataset", ""), r["nb"], r["d"])].append(r)
    devices = sorted({r["device"] for r in rows if r.get("device")})
    out.append("Devices: " + "; ".join(devices) + ". Approximate 10-NN search, squared L2. *recall@10*: the first 10 "
               "ids of each result against the exact 10 nearest (ties counted by distance); the reference is our exact "
               "GPU search. *q/s*: queries per second, medians of the timed runs (GPU), or of the queries timed "
               "(CPU: `cpu-twin:1` on one thread on a subset of the queries, FAISS on all cores). *candidates*: "
               "distinct vectors ranked per query (the union over tables and groups).\n")

    # ---- goal: best queries/s at recall@10 >= 0.9, per data set ----
    goal_rows = []
    for key in sorted(groups, key=lambda g: (not str(g[0]).startswith("clustered"), str(g[0]), g[1] or 0)):
        g = groups[key]
        ours = lsh_best_at(g, ["ours:bilsh"])
        twin = lsh_best_at(g, ["cpu-twin:"])
        exact = next((r for r in g if r["method"].startswith("ours:exact") and r.get("k") == 10), None)
        hnsw = lsh_best_at(g, ["faiss-cpu:IndexHNSW"])
        flsh = lsh_best_at(g, ["faiss-cpu:IndexLSH"])
        if not (ours or exact):
            continue
        vs_exact = ours["qps"] / exact["qps"] if ours and exact and exact.get("qps") else None
        vs_twin = ours["qps"] / twin["qps"] if ours and twin else None
        # the twin at ours's own best setting (same candidates): the like-for-like ratio
        same = None
        if ours:
            same = next((r for r in g if r["method"].startswith("cpu-twin:") and lsh_setting_name(r) ==
                         lsh_setting_name(ours) and r.get("qps")), None)
        is_goal = str(key[0]).startswith(LSH_GOAL_DATASET_PREFIX) and key[1] == LSH_GOAL_NB
        goal_rows.append((key, ours, exact, twin, same, hnsw, flsh, vs_exact, vs_twin, is_goal))
    if goal_rows:
        out.append("### Goal: best queries/s at recall@10 >= 0.9\n")
        out.append(f"Per data set, the fastest setting of each method that reaches recall@10 0.9. The goal (H100, "
                   f"clustered {human(LSH_GOAL_NB)} x 128, nq = 10k): ours at least {LSH_GOAL_VS_EXACT:g}x the exact "
                   f"GPU search and at least {LSH_GOAL_VS_TWIN:g}x the single-thread CPU twin, in the same run. "
                   "*twin, same setting*: the twin at ours's best setting (the same candidates). – : no setting of that "
                   "method reached 0.9 (see the tables below for its best recall).\n")
        out.append("| data set | nb | d | ours q/s (setting, recall) | exact GPU q/s | ours / exact | twin (1 thread) "
                   "q/s at >= 0.9 | ours / twin | twin, same setting q/s | FAISS HNSW q/s | FAISS IndexLSH q/s | "
                   "goal met |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for (key, ours, exact, twin, same, hnsw, flsh, vs_exact, vs_twin, is_goal) in goal_rows:
            ds, nb, d = key
            oc = (f"{fmt_qps(ours['qps'])} ({ours['method'].split('-')[-1]}: {lsh_setting_name(ours)}, "
                  f"{ours['recall']:.3f})" if ours else "none reaches 0.9")
            met = "–"
            if is_goal:
                met = "yes" if (vs_exact and vs_exact >= LSH_GOAL_VS_EXACT and vs_twin and
                                vs_twin >= LSH_GOAL_VS_TWIN) else "no"
            out.append(f"| {ds} | {human(nb) if nb else '?'} | {d} | {oc} | {fmt_qps(exact.get('qps') if exact else None)} | "
                       f"{fmt(vs_exact, '.2f')}{'x' if vs_exact else ''} | "
                       f"{fmt_qps(twin['qps']) if twin else '–'} | {fmt(vs_twin, '.1f')}{'x' if vs_twin else ''} | "
                       f"{fmt_qps(same['qps']) if same else '–'} | {fmt_qps(hnsw['qps']) if hnsw else '–'} | "
                       f"{fmt_qps(flsh['qps']) if flsh else '–'} | {met} |")
        out.append("")

    # ---- per data set ----
    for key in sorted(groups, key=lambda g: (not str(g[0]).startswith("clustered"), str(g[0]), g[1] or 0)):
        ds, nb, d = key
        g = groups[key]
        if nb is None:
            continue
        exact = next((r for r in g if r["method"].startswith("ours:exact") and r.get("k") == 10), None)
        nqs = sorted({r.get("nq") for r in g if r["method"].startswith("ours:")})
        out.append(f"### {ds}: nb = {human(nb)}, d = {d}, nq = {', '.join(human(n) for n in nqs if n)}\n")
        ref = next((lsh_p(r, "recall_ref") for r in g if lsh_p(r, "recall_ref")), None)
        if ref:
            out.append(f"Recall reference: {ref}.\n")
        # builds
        builds = []
        for r in g:
            if r["method"] == "ours:bilsh-build" or (r["method"].startswith("ours:bilsh") and lsh_p(r, "train_seconds")
                                                     is not None and not lsh_is_ksweep(r)):
                name = lsh_build_name(r)
                if name and name not in [b[0] for b in builds]:
                    builds.append((name, lsh_p(r, "train_seconds"), lsh_p(r, "add_seconds"), lsh_p(r, "bucket_keys"),
                                   lsh_p(r, "cuckoo_load")))
        hnsw_build = next((lsh_p(r, "build_seconds") for r in g if r["method"].startswith("faiss-cpu:IndexHNSW")
                           and lsh_p(r, "build_seconds")), None)
        if builds or hnsw_build:
            cells = [f"{b[0]}: train {fmt(b[1], '.2f')} s + add {fmt(b[2], '.2f')} s ({b[3] or '?'} bucket keys, "
                     f"cuckoo load {fmt(b[4], '.2f')})" for b in builds]
            if hnsw_build:
                cells.append(f"FAISS HNSW: {hnsw_build:.1f} s")
            out.append("Builds: " + "; ".join(cells) + ".\n")
        skipped = [r for r in g if lsh_p(r, "skipped")]
        for r in skipped:
            out.append(f"Skipped: {r['method']} (estimated {fmt(lsh_p(r, 'estimate_seconds'), '.0f')} s, "
                       f"{fmt(lsh_p(r, 'seconds_left'), '.0f')} s left of the suite's budget).\n")
        out.append("| method | setting | recall@10 | q/s | vs exact GPU | candidates / query | nq timed |")
        out.append("|---|---|---|---|---|---|---|")
        sweep = [r for r in g if r.get("k") == 10 and not lsh_is_ksweep(r) and r["method"] != "ours:bilsh-build"
                 and not lsh_p(r, "skipped")]
        sweep.sort(key=lambda r: (method_rank(r["method"]), lsh_build_name(r) or "", -(r.get("recall") or 0)))
        for r in sweep:
            cand = lsh_candidates(r)
            vs = r["qps"] / exact["qps"] if exact and exact.get("qps") and r.get("qps") else None
            timed = lsh_p(r, "nq_timed") or (r.get("nq") if r["method"].startswith("cpu-twin") else None)
            out.append(f"| {r['method']} | {lsh_setting_name(r)} | {fmt(r.get('recall'), '.4f')} | "
                       f"{fmt_qps(r.get('qps'))} | {fmt(vs, '.2f')}{'x' if vs else ''} | "
                       f"{fmt(cand, '.0f')} | {timed if timed else '–'} |")
        out.append("")
        # the work queue against the heap over k
        ksw = [r for r in g if lsh_is_ksweep(r)]
        if ksw:
            s0 = lsh_setting_name(ksw[0])
            out.append(f"Work queue against the per-query heap over k (setting: {s0}); *wq / heap* above 1: "
                       "the work queue is faster.\n")
            out.append("| k | heap q/s | work queue q/s | wq / heap | recall heap | recall wq | exact GPU q/s |")
            out.append("|---|---|---|---|---|---|---|")
            for k in sorted({r["k"] for r in ksw}):
                h = next((r for r in ksw if r["k"] == k and r["method"] == "ours:bilsh-heap"), None)
                w = next((r for r in ksw if r["k"] == k and r["method"] == "ours:bilsh-wq"), None)
                ex = next((r for r in g if r["method"].startswith("ours:exact") and r.get("k") == k), None)
                ratio = w["qps"] / h["qps"] if h and w and h.get("qps") and w.get("qps") else None
                out.append(f"| {k} | {fmt_qps(h.get('qps') if h else None)} | {fmt_qps(w.get('qps') if w else None)} | "
                           f"{fmt(ratio, '.2f')}{'x' if ratio else ''} | {fmt(h.get('recall') if h else None, '.4f')} | "
                           f"{fmt(w.get('recall') if w else None, '.4f')} | {fmt_qps(ex.get('qps') if ex else None)} |")
            out.append("")
        if make_plots:
            png = f"lsh_{ds}_{nb}_{d}.png".replace("/", "_")
            plot_lsh(g, os.path.join(plots_dir, png), f"{ds}: nb={human(nb)}, d={d}")
            out.append(f"![lsh {ds} nb={human(nb)}]({rel_plots}/{png})\n")
    return out


def plot_lsh(g, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    series = defaultdict(list)
    for r in g:
        if r.get("k") != 10 or lsh_is_ksweep(r) or not r.get("qps") or r.get("recall") is None:
            continue
        if r["method"].startswith("ours:exact"):
            continue
        series[lsh_family(r)].append((r["recall"], r["qps"]))
    styles = {"ours:bilsh-wq": ("o", "-"), "ours:bilsh-heap": ("s", "--"), "cpu-twin:1": ("v", ":"),
              "faiss-cpu:IndexHNSWFlat": ("^", "-."), "faiss-cpu:IndexLSH": ("D", "-.")}
    for name in sorted(series, key=method_rank):
        pts = sorted(series[name], key=lambda p: p[1])
        marker, ls = next((v for k, v in styles.items() if name.startswith(k)), ("x", "-"))
        ax.plot([p[1] for p in pts], [p[0] for p in pts], marker=marker, linestyle=ls, label=name, alpha=0.85)
    exact = next((r for r in g if r["method"].startswith("ours:exact") and r.get("k") == 10 and r.get("qps")), None)
    if exact:
        ax.scatter([exact["qps"]], [1.0], marker="*", s=140, color="black", zorder=4, label="ours:exact (GPU)")
        ax.axvline(exact["qps"] * LSH_GOAL_VS_EXACT, color="gray", linestyle=":", linewidth=1,
                   label=f"{LSH_GOAL_VS_EXACT:g}x exact")
    ax.axhline(0.9, color="gray", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("queries / s")
    ax.set_ylabel("recall@10")
    ax.set_title(f"lsh: {title}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_group(g, methods, ks, floor, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in methods:
        pts = sorted((r["k"], r["qps"]) for r in g if r["method"] == m and r.get("k") and r.get("qps"))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
    if floor and floor.get("qps"):
        ax.axhline(floor["qps"], color="gray", linestyle="--", label="GEMM floor")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("queries / s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ ann suite

ANN_TARGETS = (0.90, 0.95, 0.99)


def ann_label(r):
    p = r.get("params", {})
    m = r["method"]
    if m == "ours:graph":
        return f"SGraph{p.get('graph_degree')} itopk {p.get('itopk')}" + (
            " (no entry points)" if p.get("entry_seeds") == 0 else "")
    if m == "faiss-gpu:IVFFlat":
        return f"nlist {p.get('nlist')} nprobe {p.get('nprobe')}"
    if m == "faiss-cpu:HNSWFlat":
        return f"M {p.get('M')} efSearch {p.get('efSearch')}"
    return ""


def ann_best(rows, method, target):
    """The fastest row of `method` whose recall reaches `target` (our graph search with its entry points on)."""
    return fastest_reaching(rows, target, lambda r: r["method"] == method
                            and r.get("params", {}).get("entry_seeds", 1) != 0)


def ann_single_query(rows):
    """The lowest single-query latency whose recall over the same single-query
    searches reaches 0.95, automatic blocks per query and one block per query
    (ours:graph-nq1 lines); older runs, without them, give the batch recall's
    setting."""
    one = [r for r in rows if r["method"] == "ours:graph-nq1" and r.get("recall_nq1") is not None]
    if not one:
        lat = ann_best(rows, "ours:graph", 0.95)
        if lat and lat.get("latency_ms_nq1"):
            return [f"Single query at recall >= 0.95 ({ann_label(lat)}): {lat['latency_ms_nq1']:.3f} ms.\n"]
        return []
    parts = []
    for blocks, name in ((0, "blocks per query chosen by batch size (16 at nq 1)"), (1, "one block per query")):
        ok = [r for r in one if r["params"].get("blocks_per_query") == blocks and r["recall_nq1"] >= 0.95]
        if not ok:
            parts.append(f"{name}: recall 0.95 not reached")
            continue
        r = min(ok, key=lambda r: r["latency_ms_nq1"])
        p = r["params"]
        parts.append(f"{name}: {r['latency_ms_nq1']:.3f} ms at recall {r['recall_nq1']:.3f} "
                     f"(SGraph{p.get('graph_degree')} itopk {p.get('itopk')})")
    n = one[0].get("nq1_queries", "")
    return [f"Single query (median of {n} one-query searches, recall over them) at recall >= 0.95: "
            + "; ".join(parts) + ".\n"]


def ann_lsh_suite(rows):
    """The ann-lsh suite: per data set, our exact index of the same run and the Bi-level LSH table."""
    out = []
    for ds, device in sorted({(r.get("dataset"), r.get("device", "")) for r in rows}):
        # one table per data set and device: the "x exact" ratios never mix two GPUs
        d = [r for r in rows if r.get("dataset") == ds and r.get("device", "") == device]
        exact = next((r for r in d if r["method"] == "ours:exact"), None)
        out.append(f"### `{ds}` ({d[0].get('nb')} x {d[0].get('d')}, {device})\n")
        if exact:
            out.append(f"Our exact index in the same run: {fmt_qps(exact['qps'])} q/s.\n")
        out += ann_lsh_table(d)
    return out


def flat_tf32_table(rows):
    """The flat-tf32 suite: FP32 and bounded TF32 exact search, the GEMM floors, fallbacks."""
    out = ["| data | method | k | q/s | recall | certified / fallback queries | same ids as FP32 |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r.get("params", {})
        cf = (f"{p['certified_queries']} / {p['fallback_queries']}" if "certified_queries" in p else "")
        out.append(f"| {r.get('dataset')} {r.get('nb')} x {r.get('d')} | {r['method']} | {r.get('k') or ''} | "
                   f"{fmt_qps(r.get('qps'))} | {fmt(r.get('recall'), '.4f')} | {cf} | "
                   f"{fmt(p.get('same_ids_as_fp32'), '.4f')} |")
    out.append("")
    return out


def flat_few_queries_table(rows):
    """The flat-few-queries suite: our exact index (FP32 and bounded TF32) beside torch mm+topk
    and FAISS GPU GpuIndexFlatL2 on the same shapes; single-query lines are latencies."""
    out = ["Ours and torch time device-resident queries and results; FAISS GPU is called with host "
           "arrays (as FAISS users call it). Single-query rows: the median of one-query searches.\n",
           "| data | nq | k | ours FP32 | ours TF32 bounded | torch mm+topk | FAISS GPU GpuIndexFlatL2 | "
           "ours / torch | ours / FAISS |", "|---|---|---|---|---|---|---|---|---|"]

    def value(r):
        single = (r.get("params") or {}).get("mode") == "single-query"
        return (f"{r['seconds'] * 1e3:.3f} ms" if single else f"{fmt_qps(r['qps'])} q/s"), r["seconds"]

    rows = [r for r in rows if r.get("k") is not None]  # floor lines (the GEMM alone) have no k
    shapes = []
    for r in rows:
        key = (r.get("dataset"), r.get("nb"), r.get("d"), r.get("nq"), r.get("k"))
        if key not in shapes:
            shapes.append(key)

    def newest(same, f):
        """The newest commit's line of a method (the last recorded), with the median time of that
        commit's repeats (load keeps them in _seconds)."""
        hits = [r for r in same if f(r)]
        if not hits:
            return None
        r = dict(hits[-1])
        r["seconds"] = statistics.median(r.get("_seconds") or [r["seconds"]])
        if r.get("qps") is not None:
            r["qps"] = (r.get("nq") or 1) / r["seconds"]
        return r

    for ds, nb, d, nq, k in shapes:
        same = [r for r in rows if (r.get("dataset"), r.get("nb"), r.get("d"), r.get("nq"), r.get("k")) ==
                (ds, nb, d, nq, k)]
        pick = lambda f: newest(same, f)
        fp32 = pick(lambda r: r["method"] == "ours:quickselect")
        tf32 = pick(lambda r: r["method"] == "ours:quickselect-tf32-bounded")
        torch = pick(lambda r: r["method"].startswith("torch"))
        faiss = pick(lambda r: r["method"].startswith("faiss-gpu"))
        best = min((r for r in (fp32, tf32) if r), key=lambda r: r["seconds"], default=None)
        cell = lambda r: value(r)[0] if r else "–"
        ratio = lambda a, b: f"{b['seconds'] / a['seconds']:.2f}x" if a and b else "–"
        out.append(f"| {ds} ({nb} x {d}) | {nq} | {k} | {cell(fp32)} | {cell(tf32)} | {cell(torch)} | "
                   f"{cell(faiss) if faiss or k <= 2048 else 'refused (k > 2048)'} | {ratio(best, torch)} | "
                   f"{ratio(best, faiss)} |")
    out.append("")
    return out


def gnnd_schedules_table(rows):
    """The gnnd-schedules suite: k-NN graph builds in memory and from a file (all-pairs and
    partitioned schedules), recall@10 on sampled rows against exact search."""
    out = ["| set | device | build | recall@10 | time | details |", "|---|---|---|---|---|---|"]
    for r in rows:
        p = r.get("params") or {}
        if r["method"] == "ours:gnnd-in-memory":
            build = f"in memory, degree {p.get('build_degree')}"
            if p.get("add_build") == "partitioned":
                build += ", partitioned add (exact clusters)"
            elif p.get("add_build") == "one-shot":
                build += ", one-shot add"
            det = f"at most {p.get('max_iterations')} iterations"
        elif p.get("clusters"):
            build = f"partitioned, {p['clusters']} clusters, overlap {p.get('overlap')}"
            if p.get("cluster_build") == "exact":
                build += f", exact clusters of ~{human(p.get('exact_cluster_rows'))}"
            elif p.get("cluster_build") == "nn-descent":
                build += ", GNND clusters"
            det = (f"largest cluster {p.get('largest_cluster')}; partition {p.get('partition_s', 0):.1f} s, "
                   f"builds {p.get('build_s', 0):.1f} s")
        else:
            build = f"all pairs, {p.get('shards')} shards"
            det = f"{p.get('merges')} merges; builds {p.get('build_s', 0):.1f} s, merges {p.get('merge_s', 0):.1f} s"
        if p.get("device_limit_gib"):
            det += f"; device memory limit {p['device_limit_gib']:g} GiB"
        reps = r.get("_repeats") or [(r["seconds"], r["recall"])]
        seconds = statistics.median(t for t, _ in reps)
        recall = statistics.median(c for _, c in reps)
        if len(reps) > 1:
            det += (f"; median of {len(reps)} runs ({', '.join(f'{t:.1f}' for t, _ in reps)} s; "
                    f"recall {', '.join(f'{c:.4f}' for _, c in reps)})")
        out.append(f"| {r.get('dataset')} {human(r.get('n'))} x {r.get('d')}, k {r.get('k')} | "
                   f"{r.get('device', '')} | {build} | {recall:.4f} | {seconds:.2f} s | {det} ({r.get('git')}) |")
    out.append("")
    return out


def ann_device_query_table(rows):
    """Graph search timed with queries and results in device memory beside the
    same setting with host arrays (one run)."""
    out = ["q/s with queries and results in device memory (`bench_ann --device-queries`) and, from the "
           "same run, with host arrays in and out; nq 10,000, k 10.\n",
           "| data | setting | recall@10 | q/s, device arrays | q/s, host arrays |", "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.get('dataset')} | {ann_label(dict(r, method='ours:graph'))} | {r['recall']:.4f} | "
                   f"{fmt_qps(r['qps'])} | {fmt_qps(r.get('qps_host_arrays'))} |")
    out.append("")
    return out


def fastest_by(rows, target, keep, qps_key):
    """fastest_reaching, ranked by another q/s field (e.g. qps_device_queries)."""
    ok = [r for r in rows if keep(r) and r.get(qps_key) and r.get("recall") is not None and r["recall"] >= target]
    return max(ok, key=lambda r: r[qps_key]) if ok else None


def ann_cagra_tables(rows):
    """Suite `ann-cagra`: per data set, the fastest setting reaching each recall for ours (device and host
    queries, per k-NN build), cuVS CAGRA (NN-Descent and IVF-PQ builds) and FAISS GPU IVF-Flat, one device
    call; builds."""
    out = []
    for ds in sorted({r.get("dataset", "") for r in rows}):
        d = [r for r in rows if r.get("dataset") == ds]
        f = d[0]
        commits = ", ".join(sorted({r.get("git", "?") for r in d}))
        out.append(f"### `{ds}` ({human(f.get('nb'))} x {f.get('d')}, {f.get('device')}, commits {commits})\n")
        out.append("| target | ours, device queries | ours, host queries | CAGRA NN-Descent | CAGRA IVF-PQ | "
                   "FAISS GPU IVF-Flat (host) | ours / CAGRA NN-Descent (device) |")
        out.append("|---|---|---|---|---|---|---|")
        builds = sorted({(r.get("params") or {}).get("add_build") for r in d if r["method"] == "ours:graph"} - {None})
        for t in (0.95, 0.99):
            for b in builds:
                ours = lambda r: r["method"] == "ours:graph" and r["params"].get("add_build") == b
                od = fastest_by(d, t, ours, "qps_device_queries")
                oh = fastest_by(d, t, ours, "qps")
                cn = fastest_by(d, t, lambda r: r["method"] == "cuvs:cagra"
                                and r["params"].get("build_algo") == "nn_descent", "qps")
                cp = fastest_by(d, t, lambda r: r["method"] == "cuvs:cagra"
                                and r["params"].get("build_algo") == "ivf_pq", "qps")
                iv = fastest_by(d, t, lambda r: r["method"] == "faiss-gpu:IVFFlat", "qps")
                def cell(r, key, label):
                    return f"{label(r)}: {r['recall']:.4f}, {fmt_qps(r[key])}" if r else "not reached"
                og = lambda r: f"SGraph{r['params'].get('graph_degree')} itopk {r['params'].get('itopk')}"
                cg = lambda r: f"itopk {r['params'].get('itopk')}"
                ig = lambda r: f"nprobe {r['params'].get('nprobe')}"
                ratio = (f"{od['qps_device_queries'] / cn['qps']:.2f}x" if od and cn else "–")
                name = f"{t:.2f}" + (f" ({b} k-NN lists)" if len(builds) > 1 else "")
                out.append(f"| {name} | {cell(od, 'qps_device_queries', og)} | {cell(oh, 'qps', og)} | "
                           f"{cell(cn, 'qps', cg)} | {cell(cp, 'qps', cg)} | {cell(iv, 'qps', ig)} | {ratio} |")
        out.append("")
        parts = []
        for r in d:
            if r["method"] == "ours:graph-build":
                p = r["params"]
                parts.append(f"ours SGraph{p.get('graph_degree')} ({p.get('add_build')} k-NN lists) "
                             f"{r['seconds']:.2f} s")
            elif r["method"] == "cuvs:cagra-build":
                parts.append(f"CAGRA {r['params'].get('build_algo')} {r['seconds']:.2f} s")
            elif r["method"] == "faiss-gpu:IVFFlat-build":
                parts.append(f"IVF-Flat {r['seconds']:.2f} s")
        exact = [r for r in d if r["method"] == "ours:exact"]
        out.append("Builds: " + "; ".join(parts) + "." + (
            f" Our exact index: {fmt_qps(exact[-1]['qps'])} q/s." if exact else "") + "\n")
    return out


def host_queries_table(rows):
    """Suite `host-queries`: numpy against torch CUDA queries through the Python module."""
    out = ["| data | index | batch | q/s, host queries | q/s, device queries | host / device | commit |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.get('dataset')} | {r['method']} | {r.get('nq')} | {fmt_qps(r['qps'])} | "
                   f"{fmt_qps(r['qps_device_queries'])} | {r['qps'] / r['qps_device_queries']:.2f} | "
                   f"{r.get('git')} |")
    out.append("")
    return out


def ann_tables(rows, plots_dir, rel_plots, make_plots):
    """Per data set: fastest setting reaching each recall target for our graph
    search, FAISS GPU IVF-Flat and FAISS CPU HNSW, our exact index, build times,
    single-query latency; recall / q/s plots."""
    out = ["Recall@10 against exact ground truth (our exact GPU index, same run), nq 10,000, k 10. "
           "Each cell: the fastest setting that reaches the target recall (recall, q/s); ratios are ours "
           "over the anchor. The anchors ran in their own process on the same files, right after ours.\n"]
    datasets = []
    for r in rows:
        if r.get("dataset") not in datasets:
            datasets.append(r.get("dataset"))
    for ds in datasets:
        d = [r for r in rows if r.get("dataset") == ds]
        exact = next((r for r in d if r["method"] == "ours:exact"), None)
        shape = f"{d[0].get('nb')} x {d[0].get('d')}"
        out.append(f"### `{ds}` ({shape}, {d[0].get('device', '')})\n")
        if exact:
            out.append(f"Our exact index: {fmt_qps(exact['qps'])} q/s, single query "
                       f"{fmt(exact.get('latency_ms_nq1'), '.3f')} ms.\n")
        out.append("| target | ours (SGraph) | FAISS GPU IVF-Flat | FAISS CPU HNSW | ours / IVF | ours / HNSW | ours / exact |")
        out.append("|---|---|---|---|---|---|---|")
        for t in ANN_TARGETS:
            o = ann_best(d, "ours:graph", t)
            i = ann_best(d, "faiss-gpu:IVFFlat", t)
            h = ann_best(d, "faiss-cpu:HNSWFlat", t)
            cell = lambda r: (f"{ann_label(r)}: {r['recall']:.4f}, {fmt_qps(r['qps'])}" if r else "not reached")
            ratio = lambda a, b: f"{a['qps'] / b['qps']:.2f}x" if a and b else "–"
            out.append(f"| {t:.2f} | {cell(o)} | {cell(i)} | {cell(h)} | {ratio(o, i)} | {ratio(o, h)} | "
                       f"{ratio(o, exact)} |")
        out.append("")
        builds = [r for r in d if r["method"].endswith("-build")]
        if builds:
            parts = []
            for b in builds:
                p = b.get("params", {})
                if b["method"] == "ours:graph-build":
                    parts.append(f"SGraph{p.get('graph_degree')} {b['seconds']:.2f} s (GNND k-NN graph of degree "
                                 f"{p.get('knn_degree')} {p.get('knn_seconds', 0):.2f} s, optimisation "
                                 f"{p.get('optimize_seconds', 0):.3f} s)")
                else:
                    parts.append(f"{b['method'][:-6]} {b['seconds']:.2f} s")
            out.append("Builds: " + "; ".join(parts) + ".\n")
        out.extend(ann_single_query(d))
        out += ann_lsh_table(d)
        if make_plots:
            name = f"ann_{ds}.png"
            ann_plot(d, ds, os.path.join(plots_dir, name))
            out.append(f"![{ds}]({rel_plots}/{name})\n")
    return out


def ann_lsh_label(r):
    p = r.get("params", {})
    lat = " E8" if p.get("lattice") == "E8" else ""
    groups = (f", {p.get('group_probes')} groups within {p.get('group_margin'):g} W"
              if p.get("group_probes", 1) > 1 else "")
    return (f"depth {p.get('depth')}, L{p.get('L')} M{p.get('M')}{lat}, W {p.get('bucket_width'):g}, "
            f"nprobe {p.get('nprobe')}{groups}")


def ann_lsh_table(d):
    """Bi-level LSH lines of a data set (bench_ann --methods lsh): the defaults and the autotuner's
    choices as measured, beside the tuner's own report; FAISS CPU IndexLSH for reference."""
    chosen = [r for r in d if r["method"] in ("ours:bilsh-default", "ours:bilsh-auto0.90", "ours:bilsh-auto0.95")]
    if not chosen:
        return []
    out = ["Bi-level LSH (`GpuIndexBiLevelLSH`; the autotuner ran on the GPU on 1,000 held-out queries "
           "of the same distribution, kept out of the measured ones):\n",
           "| method | setting | recall@10 | q/s | x exact | tuner: recall / predicted x exact | verdict |",
           "|---|---|---|---|---|---|---|"]
    for r in chosen:
        t = r.get("tuner") or {}
        tuned = (f"{t['tuned_recall']:.4f} / {t['predicted_speedup']:.2f}x" if t else "–")
        out.append(f"| {r['method']} | {ann_lsh_label(r)} | {r['recall']:.4f} | {fmt_qps(r['qps'])} | "
                   f"{r.get('speedup_vs_exact', 0):.2f}x | {tuned} | {t.get('verdict', '') if t else ''} |")
    for t in ANN_TARGETS[:2]:
        best = fastest_reaching(d, t, lambda r: r["method"].startswith("ours:bilsh") and r.get("qps"))
        if best:
            out.append(f"| fastest Bi-level LSH line >= {t:.2f} | {ann_lsh_label(best)} | {best['recall']:.4f} | "
                       f"{fmt_qps(best['qps'])} | {best.get('speedup_vs_exact', 0):.2f}x | | |")
    for r in d:
        if r["method"] == "faiss-cpu:IndexLSH":
            out.append(f"| FAISS CPU IndexLSH (nq {r.get('nq')}) | nbits {r['params'].get('nbits')} | "
                       f"{r['recall']:.4f} | {fmt_qps(r['qps'])} | | | |")
    out.append("")
    return out


def ann_plot(rows, ds, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    series = {}
    for r in rows:
        if not r.get("qps") or r["method"].endswith("-build") or r["method"] == "ours:exact":
            continue
        p = r.get("params", {})
        key = r["method"]
        if r["method"] == "ours:graph":
            key = f"ours SGraph{p.get('graph_degree')}" + (" no entry pts" if p.get("entry_seeds") == 0 else "")
        if r["method"].startswith("ours:bilsh"):  # a chosen setting and its nprobe sweep: one curve
            key = r["method"].replace("-sweep", "")
        series.setdefault(key, []).append((r["recall"], r["qps"]))
    for key, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=key)
    exact = next((r for r in rows if r["method"] == "ours:exact"), None)
    if exact:
        ax.axhline(exact["qps"], color="gray", ls="--", lw=1, label="ours exact")
    ax.set_yscale("log")
    ax.set_xlabel("recall@10")
    ax.set_ylabel("queries / s")
    ax.set_title(ds)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="bench/results")
    ap.add_argument("--out", default="docs/benchmark-tables.md")
    args = ap.parse_args()
    rows = load(args.results)
    try:
        import matplotlib  # noqa: F401
        make_plots = True
    except ImportError:
        make_plots = False
        print("matplotlib not found: tables only, no plots", file=sys.stderr)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)

    gen = [BEGIN, "<!-- written by bench/make_report.py from bench/results/*.jsonl; edit outside the markers -->", ""]
    suites = sorted({r.get("suite") for r in rows if r.get("suite")})
    if not rows:
        gen.append("No results yet: run the suite (bench/README.md), then this script.")
    for s in suites:
        srows = [r for r in rows if r.get("suite") == s]
        commits = sorted({r.get("git", "?") for r in srows})
        gen.append(f"## Suite `{s}`\n")
        if s == "flat":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. q/s counts queries per second; "
                       "seconds are medians of the timed runs; recall is recall@k against FAISS's exact CPU "
                       "result on the first queries, ties counted as hits. CPU numbers marked (on N) were timed on "
                       "N queries and extrapolated.\n")
            gen += flat_tables(srows, out_dir, ".", make_plots)
        elif s == "select":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}.\n")
            for i, (device, drows) in enumerate(by_device(srows)):
                gen.append(f"### On {device}\n")
                # the plots show the device with the most lines (one set of files)
                gen += select_tables(drows, out_dir, ".", make_plots and i == 0)
        elif s == "knngraph":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}.\n")
            gen += knngraph_tables(srows)
        elif s == "graph":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}.\n")
            gen += graph_tables(srows, out_dir, ".", make_plots)
        elif s == "lsh":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}.\n")
            gen += lsh_tables(srows, out_dir, ".", make_plots)
        elif s == "ann":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}.\n")
            gen += ann_tables(srows, out_dir, ".", make_plots)
        elif s == "ann-lsh":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}.\n")
            gen += ann_lsh_suite(srows)
        elif s == "flat-tf32":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. Exact search with "
                       "FP32 distances and with bounded TF32 distances re-scored in FP32 (one run), beside "
                       "the cuBLAS FP32 and TF32 GEMM floors.\n")
            gen += flat_tf32_table(srows)
        elif s == "flat-few-queries":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. Few queries and large k "
                       "(the fused few-query and radix large-k paths), and large batches with bounded TF32, "
                       "beside torch and FAISS GPU in the same runs.\n")
            for device, drows in by_device(srows):
                gen.append(f"### On {device}\n")
                gen += flat_few_queries_table(drows)
        elif s == "gnnd-schedules":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. The bench's 1000-centre "
                       "generator; recall@10 of 2,000 sampled rows against exact search.\n")
            gen += gnnd_schedules_table(srows)
        elif s == "filter":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. `bench_filter`: exact "
                       "(`GpuIndexQuickSelectFlat`) and graph (`GpuIndexSearchGraph`, defaults) search with "
                       "`SearchParameters::sel`; random filters keep a hashed fraction of the ids, attribute "
                       "filters the vectors whose first coordinate is in the top fraction. Exact recall is "
                       "checked against faiss::IndexFlat with the same selector on the first queries (– where "
                       "not checked); graph recall against the exact filtered answer of all queries.\n")
            gen += filter_tables(srows)
        elif s == "delete":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. `bench/vdb_ops.py`: "
                       "GpuIndexSearchGraph (defaults; past 2M vectors a one-shot GNND build of 12 iterations) "
                       "loses random vectors in steps to 1%, 10% and 50% of the data; recall@10 against exact "
                       "search over the survivors.\n")
            gen += delete_tables(srows)
        elif s == "ann-cagra":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. `bench/run_graph_scale_device.sh`: "
                       "ours (`bench_ann`, host and device queries), cuVS CAGRA (graph degree 64, intermediate "
                       "128; `bench/anchor_cagra.py`, device queries) and FAISS GPU IVF-Flat (numpy) in one "
                       "device call on the same files; nq 10,000, k 10, recall@10 against our exact index.\n")
            gen += ann_cagra_tables(srows)
        elif s == "host-queries":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. `bench/host_queries.py`: "
                       "the Python module, numpy queries and results against torch CUDA tensors in and out, "
                       "medians of 7 runs (35 below 1,000 queries); `bench_ann --device-queries` lines: the "
                       "same in C++ (std::vector against device arrays), medians of 7 runs.\n")
            gen += host_queries_table(srows)
        elif s == "ann-device-queries":
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}.\n")
            gen += ann_device_query_table(srows)
        else:
            gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}.\n")
            gen.append("| " + " | ".join(["dataset", "method", "nb", "d", "nq", "k", "q/s", "s", "recall"]) + " |")
            gen.append("|---|---|---|---|---|---|---|---|---|")
            for r in srows:
                gen.append(f"| {r.get('dataset', '')} | {r['method']} | {r.get('nb', r.get('n'))} | {r.get('d')} | "
                           f"{r.get('nq')} | {r.get('k')} | {fmt_qps(r.get('qps'))} | {fmt(r.get('seconds'), '.4f')} | "
                           f"{fmt(r.get('recall'), '.4f')} |")
            gen.append("")
    gen.append(END)
    generated = "\n".join(gen) + "\n"

    if os.path.exists(args.out):
        text = open(args.out).read()
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN)] + generated + text[text.index(END) + len(END) + 1:]
        else:
            text = text.rstrip("\n") + "\n\n" + generated
    else:
        text = ("# Benchmarks\n\nHow to run the suites: bench/README.md. Findings (written by hand) go "
                "above the generated tables and plots; the script keeps all text outside the markers.\n\n"
                + generated)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out} ({len(rows)} measurements{', with plots' if make_plots else ''})")


if __name__ == "__main__":
    sys.exit(main())
