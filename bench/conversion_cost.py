"""Cost of moving a large flat index between FAISS and faiss_ext in Python
(issue 20's measurement: 512 MB = 1M x 128 float32), against FAISS's own
copy. Each measurement runs in a fresh process, so that its peak resident
memory (ru_maxrss) is its own; one JSON object a line (bench/README.md keys):

  /usr/bin/python3 bench/conversion_cost.py [--n 1000000] [--d 128] [--repeat 3]

With one FAISS in the process (docs/one-faiss.md) a faiss.IndexFlat reaches
our C++ code as a pointer, and the CPU index our C++ code makes (the twin
that index_gpu_to_cpu or copy_to returns) is handed to Python as the FAISS
object itself: no bytes in between. The GPU part of index_cpu_to_gpu /
index_gpu_to_cpu (host <-> device copies) is measured on the GPU machine
(scripts/device/device-python-tests.sh prints it).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

#: Each measurement: (setup, timed code, whether it needs `flat`, GPU only).
#: Run in its own process, given the index file (`path`) and, where it needs
#: one, the faiss.IndexFlat read from it (`flat`).
CASES = {
    # FAISS's own copies: the anchors
    "faiss:read_index": ("", "out = faiss.read_index(path)", False, False),
    "faiss:clone_index": ("", "out = faiss.clone_index(flat)", True, False),
    # ours: our reader, our cloner's CPU path, and the hand-over of a FAISS
    # index to our C++ code and of our C++ index to Python
    "ours:read_index": ("", "out = faiss_ext.read_index(path)", False, False),
    "ours:index_gpu_to_cpu(cpu index)": ("", "out = faiss_ext.index_gpu_to_cpu(flat)", True, False),
    "ours:hand_over_to_cpp": ("", "out = testing.index_address(flat)", True, False),
    "ours:downcast_index": ("", "out = faiss_ext.downcast_index(flat)", True, False),
    # the GPU conversions: the CPU part is the hand-over above, the rest is
    # host <-> device copies
    "ours:index_cpu_to_gpu": ("res = faiss_ext.StandardGpuResources()",
                              "out = faiss_ext.index_cpu_to_gpu(res, 0, flat)", True, True),
    "ours:index_gpu_to_cpu": ("res = faiss_ext.StandardGpuResources()\n"
                              "gpu = faiss_ext.index_cpu_to_gpu(res, 0, flat)\nflat = None",
                              "out = faiss_ext.index_gpu_to_cpu(gpu)", True, True),
}

CHILD = r"""
import resource, sys, time
import faiss, faiss_ext
from faiss_ext import _faiss_ext_testing as testing
path = sys.argv[1]
flat = faiss.read_index(path) if sys.argv[4] == "1" else None
exec(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
exec(sys.argv[3])
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(seconds, before * 1024, peak * 1024)
"""


WRITE_INDEX = r"""
import sys
import faiss, numpy as np
path, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
flat = faiss.IndexFlatL2(d)
flat.add(np.random.default_rng(0).random((n, d), dtype=np.float32))
faiss.write_index(flat, path)
"""


def git_commit():
    # FAISS_EXT_GIT first: a copy of the tree (the GPU machine's) may carry a stale .git
    if os.environ.get("FAISS_EXT_GIT"):
        return os.environ["FAISS_EXT_GIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=os.path.dirname(__file__)).stdout.strip()
    except OSError:
        return ""


def run_case(path, setup, code, needs_flat):
    done = subprocess.run([sys.executable, "-c", CHILD, path, setup, code,
                           "1" if needs_flat else "0"],
                          capture_output=True, text=True, check=True)
    seconds, before, peak = done.stdout.split()[-3:]
    return float(seconds), int(before), int(peak)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000000)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gpu", action="store_true", help="also CPU -> GPU -> CPU (GPU 0)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "flat.index")
        # written by another process: a child's peak RSS starts from its
        # parent's at fork, so this process stays small
        subprocess.run([sys.executable, "-c", WRITE_INDEX, path, str(args.n), str(args.d)],
                       check=True)
        for method, (setup, code, needs_flat, gpu_only) in CASES.items():
            if gpu_only and not args.gpu:
                continue
            runs = [run_case(path, setup, code, needs_flat) for _ in range(args.repeat)]
            print(json.dumps({
                "suite": "conversion", "method": method,
                "device": "gpu0+cpu" if gpu_only else "cpu",
                "nb": args.n, "d": args.d, "nq": 0, "k": 0,
                # peak resident memory of the process (host), and the peak before the timed
                # code ran (the data and, for the GPU cases, the set-up)
                "params": {"index_bytes": args.n * args.d * 4, "repeat": args.repeat},
                "seconds": statistics.median(r[0] for r in runs),
                "peak_rss_bytes": statistics.median(r[2] for r in runs),
                "rss_before_bytes": statistics.median(r[1] for r in runs),
                "git": git_commit()}), flush=True)


if __name__ == "__main__":
    main()
