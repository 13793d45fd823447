"""Python source as the grader reads it: parsed under one lock, split into lines where
Python itself breaks them.

`ast.parse` is not safe to call from several threads at once on CPython 3.11: the AST
constructor keeps its recursion depth in interpreter-wide state, and two parses that
interleave raise `SystemError: AST constructor recursion depth mismatch` (CPython
gh-106905). An evaluation grades in several threads, each building canary twins, so every
parse of the grader goes through `parse`.

`str.splitlines` also breaks at characters Python does not (form feed, \\x1c-\\x1e, \\x85,
\\u2028, \\u2029): offsets taken from the AST (line numbers and columns) must index the lines
`lines` gives."""

from __future__ import annotations

import ast
import re
import threading

_PARSING = threading.Lock()
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def parse(source: str | bytes) -> ast.Module:
    """`ast.parse(source)`, one at a time in this process (raises what it raises)."""
    with _PARSING:
        return ast.parse(source)


def lines(text: str) -> list[str]:
    """`text` split after each line break Python counts (\\n, \\r\\n, \\r), each line with its
    break: the lines an AST's `lineno` numbers, from 1."""
    return _LINE.findall(text)
