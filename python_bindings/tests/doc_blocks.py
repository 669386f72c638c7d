"""The fenced code blocks of README.md and docs/*.md, for the doc-example
tests (test_doc_examples.py: Python; test_doc_examples_cpp.py: C++)."""

import glob
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def fenced_blocks(fences):
    """(page relative to ROOT, number of the block's first line, its lines,
    the last non-blank line before the fence) for every block opened by one
    of `fences` (e.g. ("```cpp", "```c++"))."""
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for page in pages:
        lines = open(page).read().split("\n")
        i = 0
        while i < len(lines):
            if lines[i].strip() in fences:
                j = i + 1
                while lines[j].strip() != "```":
                    j += 1
                before = next((l for l in reversed(lines[:i]) if l.strip()), "")
                yield os.path.relpath(page, ROOT), i + 2, lines[i + 1:j], before
                i = j
            i += 1
