#!/usr/bin/env python3
"""make_report.py: bench/results/*.jsonl -> docs/benchmarks.md (+ PNG plots in docs/).

Reads every suite's JSON lines (DESIGN.md, "Benchmarks"), keeps the latest line
for each (suite, dataset, method, nb, d, nq, k), and writes Markdown tables
(queries/s, seconds, recall, ratios to the anchors) between the markers
<!-- BEGIN GENERATED --> and <!-- END GENERATED --> of docs/benchmarks.md;
text outside the markers (findings, what limits us) is kept as written.
Plots need matplotlib; without it only the tables are written.

    python3 bench/make_report.py [--results bench/results] [--out docs/benchmarks.md]
"""
import argparse
import glob
import json
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
                       r.get("d"), r.get("nq"), r.get("k"))
                rows.pop(key, None)  # the latest line wins, in file order
                rows[key] = r
    return list(rows.values())


def fmt_qps(v):
    if v is None:
        return "–"
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}k" if v >= 1e4 else f"{v:.0f}"


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def human(n):
    return f"{n // 1000000}M" if n % 1000000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def flat_tables(rows, plots_dir, rel_plots, make_plots):
    out = []
    groups = defaultdict(list)
    for r in rows:
        groups[(r.get("dataset", ""), r["nb"], r["d"], r["nq"])].append(r)
    goal = []
    for (ds, nb, d, nq) in sorted(groups, key=lambda g: (g[0] != "clustered", g[0], g[1], g[2])):
        g = groups[(ds, nb, d, nq)]
        floor = next((r for r in g if r["method"].startswith("floor:")), None)
        methods = sorted({r["method"] for r in g if r.get("k") is not None}, key=method_rank)
        ks = sorted({r["k"] for r in g if r.get("k") is not None})
        by = {(r["method"], r.get("k")): r for r in g}
        devices = sorted({f'{r["method"].split(":")[0]}: {r["device"]}' for r in g})
        out.append(f"### {ds}: nb = {human(nb)}, d = {d}, nq = {human(nq)}\n")
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
                goal.append((k, ratio, tgemm))
        out.append("")
        if make_plots:
            png = f"bench_flat_{ds}_{nb}_{d}.png".replace("/", "_")
            plot_group(g, methods, ks, floor, os.path.join(plots_dir, png), f"{ds}: nb={human(nb)}, d={d}, nq={human(nq)}")
            out.append(f"![{ds} nb={human(nb)} d={d}]({rel_plots}/{png})\n")
    if goal:
        out.insert(0, "")
        lines = ["### Goal (issue 2): clustered, nb = 1M, d = 128, nq = 10k\n",
                 "At least 2x torch.mm + torch.topk, and at most 1.5x the GEMM-only time.\n",
                 "| k | ours / torch | met | ours time / GEMM | met |", "|---|---|---|---|---|"]
        for k, ratio, tgemm in goal:
            lines.append(f"| {k} | {fmt(ratio, '.2f')} | {'yes' if ratio and ratio >= 2 else 'no'} | "
                         f"{fmt(tgemm, '.2f')} | {'yes' if tgemm and tgemm <= 1.5 else 'no'} |")
        out[0:0] = lines
    return out


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="bench/results")
    ap.add_argument("--out", default="docs/benchmarks.md")
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
        gen.append(f"{len(srows)} measurements; commits: {', '.join(commits)}. q/s counts queries per second; "
                   "seconds are medians of the timed runs; recall is recall@k against FAISS's exact CPU "
                   "result on the first queries, ties counted as hits. CPU numbers marked (on N) were timed on "
                   "N queries and extrapolated.\n")
        if s == "flat":
            gen += flat_tables(srows, out_dir, ".", make_plots)
        else:
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
        text = ("# Benchmarks\n\nHow to run: bench/README.md. The tables below are generated by "
                "`bench/make_report.py`; findings are written above and below them by hand.\n\n" + generated)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out} ({len(rows)} measurements{', with plots' if make_plots else ''})")


if __name__ == "__main__":
    sys.exit(main())
