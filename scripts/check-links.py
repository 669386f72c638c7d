#!/usr/bin/env python3
"""Checks the relative links of the Markdown pages (scripts/test.sh, step
"links"): README.md and docs/*.md by default, or the pages named.

Every inline link or image [text](target) and every reference definition
"[label]: target" whose target is relative (no scheme such as http:, https:,
mailto:) is resolved against the page's folder and must name a file or
folder that exists. A target "page.md#anchor" (or "#anchor", the page
itself) must also name a heading of that Markdown page by its GitHub slug:
the heading's text lower-cased, punctuation other than "-" and "_" removed,
each space a "-", repeats numbered "-1", "-2", ...; an explicit
<a name="..."> or id="..." counts too. Anchors into files other than
Markdown (source line anchors such as #L10) are not checked. Code spans and
fenced code blocks are skipped.

Prints each broken link as "file:line: target", then a summary line; exit
status 1 when any link is broken, else 0. Python 3 standard library only.

Usage: scripts/check-links.py [PAGE.md ...]
"""
import glob
import os
import re
import sys
import urllib.parse

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target "title"); the text may hold one level of brackets (an image
# inside a link: [![alt](img.png)](page.md)); the target may be <...> or hold
# balanced parentheses
INLINE = re.compile(
    r"(?<!\\)!?\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]"
    r"\(\s*(<[^<>\n]*>|(?:[^\s()\\]|\\.|\([^\s()]*\))*)"
    r"""(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?\s*\)""")
REF_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^<>]*>|\S+)")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"""<[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def blank_code_spans(line):
    """The line with the contents of its code spans replaced by spaces (the
    columns kept), so that no link is found inside code."""
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fence = None
    for no, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                continue
            yield no, line
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and not line[m.end():].strip():
            fence = None


def heading_text(raw):
    """The text GitHub renders for a heading's Markdown: links and images
    give their text, code spans their contents, emphasis markers and HTML
    tags go."""
    parts = []
    pos = 0
    for m in CODE_SPAN.finditer(raw):  # code spans are kept verbatim
        parts.append((raw[pos:m.start()], True))
        parts.append((m.group(2).strip(), False))
        pos = m.end()
    parts.append((raw[pos:], True))
    out = []
    for text, markdown in parts:
        if markdown:
            for _ in range(3):  # nested: [![alt](img)](page)
                text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", text)
            text = re.sub(r"<[^>]+>", "", text)
            text = re.sub(r"(?<![\w\\])[*_]+|[*_]+(?![\w])", "", text)
            text = re.sub(r"\\(.)", r"\1", text)
        out.append(text)
    return "".join(out)


def slug(text):
    """GitHub's anchor of a heading's rendered text (github-slugger)."""
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    """The anchors of a Markdown page: its headings' slugs (repeats numbered)
    and explicit <a name>/id anchors."""
    path = os.path.realpath(path)
    if path in _anchors:
        return _anchors[path]
    found, seen = set(), {}
    prev = None
    for _, line in prose_lines(path):
        for m in HTML_ANCHOR.finditer(line):
            found.add(m.group(1))
        text = None
        m = ATX.match(line)
        if m:
            text = m.group(2) or ""
        elif prev is not None and prev.strip() and SETEXT.match(line) \
                and not ATX.match(prev) and not prev.lstrip().startswith(("|", ">", "-", "*")):
            text = prev.strip()
        prev = line
        if text is None:
            continue
        base = slug(heading_text(text))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else "%s-%d" % (base, n))
    _anchors[path] = found
    return found


def links(path):
    """(line number, target) of every link, image and reference definition."""
    for no, line in prose_lines(path):
        text = blank_code_spans(line)
        m = REF_DEF.match(text)
        if m:
            yield no, line[m.start(2):m.end(2)]
        todo = [text]
        while todo:
            s = todo.pop()
            for m in INLINE.finditer(s):
                todo.append(m.group(1))  # an image inside the link text
                yield no, m.group(2)


def problem(page, target):
    """Why target, a link of page, is broken, or None."""
    t = target.strip()
    if t.startswith("<") and t.endswith(">"):
        t = t[1:-1]
    if SCHEME.match(t):
        return None
    if not t:
        return "empty target"
    path, _, anchor = t.partition("#")
    path = urllib.parse.unquote(path.split("?", 1)[0])
    dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
    if not os.path.exists(dest):
        return "no such file"
    if anchor and dest.endswith(".md") and os.path.isfile(dest):
        if urllib.parse.unquote(anchor) not in anchors(dest) and \
                urllib.parse.unquote(anchor).lower() not in anchors(dest):
            return "no heading with this anchor"
    return None


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if len(argv) > 1:
        pages = argv[1:]
    else:
        os.chdir(root)
        pages = ["README.md"] + sorted(glob.glob("docs/*.md"))
    broken = checked = 0
    for page in pages:
        for no, target in links(page):
            if SCHEME.match(target.strip().lstrip("<")):
                continue
            checked += 1
            if problem(page, target):
                print("%s:%d: %s" % (page, no, target))
                broken += 1
    print("check-links: %d pages, %d relative links, %s" %
          (len(pages), checked, "%d broken" % broken if broken else "all resolve"))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
