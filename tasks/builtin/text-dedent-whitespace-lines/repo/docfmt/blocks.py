"""Indentation of text blocks.

Lines consisting solely of whitespace carry no indentation information: they are
ignored when measuring the common indent and are normalised to empty lines on
output, as :func:`textwrap.dedent` does. Tabs and spaces are not interchangeable:
``"\\t"`` and ``"    "`` have no common prefix.
"""

from __future__ import annotations

from collections.abc import Callable


def _leading_whitespace(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def common_indent(text: str) -> str:
    """The longest whitespace prefix shared by all non-blank lines of *text*.

    >>> common_indent("    a\\n      b\\n")
    '    '
    """
    prefix: str | None = None
    for line in text.splitlines():
        if not line:
            continue
        ws = _leading_whitespace(line)
        if prefix is None:
            prefix = ws
            continue
        i = 0
        while i < min(len(prefix), len(ws)) and prefix[i] == ws[i]:
            i += 1
        prefix = prefix[:i]
    return prefix or ""


def dedent(text: str) -> str:
    """Remove the common leading whitespace from every line of *text*.

    >>> dedent("    def f():\\n        return 1\\n")
    'def f():\\n    return 1\\n'
    """
    margin = common_indent(text)
    out = []
    for line in text.splitlines(keepends=True):
        if not line.strip():
            out.append(line[len(line.rstrip("\r\n")) :])  # keep only the line break
        else:
            out.append(line[len(margin) :])
    return "".join(out)


def indent(text: str, prefix: str, predicate: Callable[[str], bool] | None = None) -> str:
    """Add *prefix* to the lines of *text* selected by *predicate* (non-blank lines by default)."""
    if predicate is None:
        predicate = str.strip  # type: ignore[assignment]
    return "".join(prefix + line if predicate(line) else line for line in text.splitlines(keepends=True))


def strip_margin(text: str, margin: str = "|") -> str:
    """Scala-style margins: drop leading whitespace up to and including *margin* on each line.

    Lines without a margin character are kept unchanged.

    >>> strip_margin("  |first\\n  |  second")
    'first\\n  second'
    """
    out = []
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip(" \t")
        out.append(stripped[len(margin) :] if stripped.startswith(margin) else line)
    return "".join(out)
