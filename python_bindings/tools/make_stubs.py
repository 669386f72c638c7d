"""Writes the type stubs of the faiss_ext package (faiss_ext/__init__.pyi)
from the built package itself, so that they always match the code.

Run at build time (python_bindings/CMakeLists.txt) with the build tree's
package first on sys.path:  make_stubs.py OUTPUT.pyi
Signatures come from pybind11's docstrings (their first line, or one per
overload) and from inspect.signature for Python functions; our proxy classes
are written as subclasses of faiss.Index / faiss.SearchParameters.
"""

import inspect
import re
import sys

import faiss_ext
from faiss_ext import _faiss_ext as native

_NATIVE_PREFIX = re.compile(r"\bfaiss_ext\._faiss_ext\.")
_ARRAY = re.compile(r"numpy\.ndarray\[[^\]]*\]")


def _clean(text):
    """A pybind11 signature's types made valid in our stub."""
    text = _NATIVE_PREFIX.sub("", text)
    text = _ARRAY.sub("numpy.ndarray", text)
    # pybind11's py::handle / py::object arguments take any Python object
    text = re.sub(r"\b(handle|object)\b", "Any", text)
    text = text.replace("NativeIndex", "faiss.Index").replace(
        "NativeSearchParameters", "faiss.SearchParameters")
    # pybind11 prints defaults it cannot render as "<...>" or "None"; stubs
    # write every default as "..."
    return re.sub(r"=\s*(<[^>]*>|[^,)\[]+)", "= ...", text)


def _pybind_signatures(name, obj):
    """The signatures "(args) -> result" of a pybind11 function from its
    docstring, one per overload."""
    doc = getattr(obj, "__doc__", None) or ""
    found = re.findall(r"^(?:\d+\. )?%s(\(.*\) -> .*)$" % re.escape(name), doc, re.M)
    return [_clean(s) for s in found]


def _python_signature(obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(*args, **kwargs) -> Any"
    params = []
    for p in sig.parameters.values():
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text = "*" + text
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + text
        if p.default is not p.empty:
            text += "=..."
        params.append(text)
    if any(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values()):
        first_kw = next(i for i, p in enumerate(sig.parameters.values())
                        if p.kind is p.KEYWORD_ONLY)
        params.insert(first_kw, "*")
    return "(%s) -> Any" % ", ".join(params)


def _function_lines(name, obj, indent=""):
    sigs = _pybind_signatures(name, obj)
    if not sigs:
        return ["%sdef %s%s: ..." % (indent, name, _python_signature(obj))]
    if len(sigs) == 1:
        return ["%sdef %s%s: ..." % (indent, name, sigs[0])]
    return sum([["%s@overload" % indent, "%sdef %s%s: ..." % (indent, name, s)] for s in sigs], [])


def _class_lines(name, cls):
    if issubclass(cls, faiss_ext.faiss.Index) or issubclass(cls, faiss_ext.faiss.SearchParameters):
        base = "faiss.Index" if issubclass(cls, faiss_ext.faiss.Index) else "faiss.SearchParameters"
        native_cls = cls._native_class
    else:
        bases = [b for b in cls.__bases__ if b.__module__ == native.__name__]
        base = bases[0].__name__ if bases else "object"
        native_cls = cls
    lines = ["class %s(%s):" % (name, base)]
    members = {}
    for klass in reversed(native_cls.__mro__):
        if klass.__module__ == native.__name__:
            members.update(vars(klass))
    members.update({k: v for k, v in vars(cls).items() if not k.startswith("_")})
    for attr, value in sorted(members.items()):
        if attr.startswith("_") and attr != "__init__":
            continue
        if isinstance(value, property):
            getter = _pybind_signatures("", value.fget) if value.fget else []
            result = getter[0].split("-> ", 1)[1] if getter else "Any"
            lines.append("    %s: %s" % (attr, result))
        elif isinstance(value, staticmethod):
            lines.append("    @staticmethod")
            lines += _function_lines(attr, value.__func__, "    ")
        elif callable(value):
            lines += _function_lines(attr, value, "    ")
        elif hasattr(value, "__int__") and type(value).__module__ == native.__name__:
            lines.append("    %s: %s" % (attr, name))  # enum members
    if len(lines) == 1:
        lines.append("    ...")
    return lines


def main(output):
    out = ["# Type stubs of faiss_ext, generated from the built package by",
           "# python_bindings/tools/make_stubs.py: do not edit.",
           "from typing import Any, Dict, List, Optional, Tuple, Union, overload",
           "",
           "import faiss",
           "import numpy",
           ""]
    for name in sorted(faiss_ext.__all__):
        obj = getattr(faiss_ext, name)
        if inspect.isclass(obj):
            out += _class_lines(name, obj)
        else:
            out += _function_lines(name, obj)
        out.append("")
    text = "\n".join(out)
    compile(text, output, "exec")  # a stub must at least parse
    with open(output, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1])
