#!/usr/bin/env python3
"""ann_summary.py FILE.jsonl...: one line per ann-suite record (quick reading of a run)."""
import json
import sys

for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        print("#", e)
        continue
    for l in lines:
        if not l.startswith("{"):
            continue
        r = json.loads(l)
        p = r.get("params", {})
        keys = ",".join("%s=%s" % (k, v) for k, v in p.items() if not isinstance(v, float))
        print("%-15s %-26s %-44s qps=%9.0f rec=%.4f lat=%6.3fms s=%.3f" % (
            r["dataset"][:15], r["method"], keys[:44], r.get("qps") or 0, r.get("recall") or 0,
            r.get("latency_ms_nq1") or 0, r.get("seconds") or 0))
