#!/usr/bin/env python3
"""Which GPU tests ran to the end under each compute-sanitizer tool, from the
sanitizer logs that scripts/device/device-sanitize.sh wrote (docs/validation.md).
The logs are not kept in the repository: fetch them from the device run into
a folder (logs/ by default, git-ignored) and point this script at it.

Usage: scripts/device/sanitize-coverage.py TESTS [LOG_DIR (logs)]
TESTS: the full test names, one a line, e.g.
  build/tests/gpu_tests --gtest_list_tests | awk '/^[^ ]/ {s = $1} /^  / {print s $1}' >tests.txt

A test counts for a tool when some log of that tool (file name containing
the tool's name) shows it run to the end: passed, not skipped, and the
tool's summary clean (0 errors, or 0 hazards for racecheck), or, for a test
run in parts (NAME#P/N), every part P of some N so. The logs come in the
formats the scripts wrote over time:
  ===== NAME (rc R) =====  then the process's output (device-sanitize.sh);
  ===== NAME =====         then the process's output (earlier runs);
  === [T:NAME] rc R ...    then the tool's summary only (condensed logs);
  one process running several tests: its "[ OK ]" tests, when the file
                           holds exactly one tool summary and it is clean.
A log that keeps only a printed summary (no per-test output) is not read:
docs/validation.md names those tests by hand. Prints, per tool, the tests not
covered. Exit status 0.
"""
import collections
import glob
import os
import re
import sys

TOOLS = {"memcheck": "ERROR SUMMARY: 0 errors", "synccheck": "ERROR SUMMARY: 0 errors",
         "racecheck": "RACECHECK SUMMARY: 0 hazards"}
SUMMARY = re.compile(r"(ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY): ")
PASSED = re.compile(r"^\[  PASSED  \] 1 test", re.M)
SKIPPED = re.compile(r"^\[  SKIPPED \] [A-Za-z]", re.M)


def blocks(text):
    """(name, passed, clean-summary-text) for every test process in a log."""
    p = re.split(r"^===== (.+?) \(rc (\S+)\) =====$", text, flags=re.M)
    for i in range(1, len(p) - 1, 3):
        body = p[i + 2]
        nocuda = p[i + 1] == "255" and "terminated before first instrumented" in body
        yield p[i], (p[i + 1] == "0" or nocuda) and bool(PASSED.search(body)), body, nocuda
    p = re.split(r"^===== (\S+?) =====$", text, flags=re.M)
    for i in range(1, len(p) - 1, 2):
        yield p[i], bool(PASSED.search(p[i + 1])), p[i + 1], False
    p = re.split(r"^=== \[T:(.+?)\] rc (\S+).*$", text, flags=re.M)
    for i in range(1, len(p) - 1, 3):  # condensed: rc 0 means the test passed
        yield p[i], p[i + 1] == "0", p[i + 2], False
    if len(SUMMARY.findall(text)) == 1 and not re.search(r"^=====? ", text, re.M):
        for name in re.findall(r"^\[       OK \] (\S+)", text, flags=re.M):
            yield name, True, text, False


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tests = [t.strip() for t in open(sys.argv[1]) if t.strip()]
    logdir = sys.argv[2] if len(sys.argv) > 2 else "logs"
    unsafe = {t.replace("/", "_"): t for t in tests}  # names as file-safe strings
    for tool, clean in TOOLS.items():
        parts = collections.defaultdict(lambda: collections.defaultdict(set))
        for path in sorted(glob.glob(os.path.join(logdir, f"*{tool}*.log"))):
            text = open(path, errors="replace").read()
            for name, passed, body, nocuda in blocks(text):
                if not passed or SKIPPED.search(body) or not (clean in body or nocuda):
                    continue
                base, _, part = name.partition("#")
                base = unsafe.get(base, base)
                if part:
                    p, n = part.split("/")
                    parts[base][int(n)].add(int(p))
                else:
                    parts[base][1].add(0)
        done = [t for t in tests if any(len(ps) == n for n, ps in parts[t].items())]
        left = [t for t in tests if t not in done]
        print(f"{tool}: {len(done)} of {len(tests)} tests ran to the end, clean; not in a log: {len(left)}")
        for t in left:
            print(f"  {t}")


if __name__ == "__main__":
    main()
