"""bench_timing.py: the timing helper of the Python benches (vdb_ops.py,
distributed_bench.py, anchor_ann.py): a call's median wall time over `reps`
runs after one untimed warm-up run. Plain numpy, so that it imports in the
anchors' environments too (scripts run as `python3 bench/NAME.py` find it
beside them)."""
import time

import numpy as np


def timed(f, reps=3):
    """Median seconds of `reps` calls of f(), after one untimed call."""
    f()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return float(np.median(t))
