"""Every Python example of README.md and docs/*.md runs as written (issue 37).

Each ```python block is a test. On every machine: it parses, and it names no
variable it does not define (the check that caught `index64` in
docs/python.md). Then it runs, in a fresh namespace inside a temporary
directory: blocks that use a GPU class run where there is a GPU (they are
marked `gpu` and skip visibly elsewhere), blocks that import Ray where it is
installed; a block preceded by
`<!-- doc-test: skip (reason) -->` is skipped with that reason."""

import ast
import builtins
import re

import pytest

from doc_blocks import ROOT, fenced_blocks

SKIP = re.compile(r"<!--\s*doc-test:\s*skip\s*\((.*)\)\s*-->\s*$")


def _blocks():
    for page, line, body, before in fenced_blocks(("```python",)):
        skip = SKIP.match(before.strip())
        yield page, line, "\n".join(body) + "\n", skip.group(1) if skip else None


BLOCKS = list(_blocks())


def _undefined_names(code):
    tree = ast.parse(code)
    defined = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            defined.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    return sorted({n.id for n in ast.walk(tree)
                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in defined})


def _needs_gpu(code):
    return "StandardGpuResources" in code or "Gpu" in code


def _param(block):
    page, line, code, _ = block
    marks = [pytest.mark.gpu] if _needs_gpu(code) else []
    return pytest.param(block, id="%s:%d" % (page, line), marks=marks)


def test_the_pages_have_examples():
    assert len(BLOCKS) >= 9, [b[:2] for b in BLOCKS]


@pytest.mark.parametrize("block", [pytest.param(b, id="%s:%d" % b[:2]) for b in BLOCKS])
def test_example_is_complete(block):
    page, line, code, _ = block
    compile(code, "%s:%d" % (page, line), "exec")
    assert _undefined_names(code) == [], "%s:%d uses names it never defines" % (page, line)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_example_runs(block, tmp_path, monkeypatch):
    page, line, code, skip = block
    if skip:
        pytest.skip("%s:%d: %s" % (page, line, skip))
    if re.search(r"^\s*import ray\b|^\s*import .*\bray\b", code, re.M):
        pytest.importorskip("ray", reason="%s:%d needs Ray (pip install 'ray>=2')" % (page, line))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "%s:%d" % (page, line), "exec"), {"__name__": "__doc_example__"})
