"""Docstring normalisation following PEP 257's ``trim`` algorithm."""

from __future__ import annotations

from .blocks import dedent


def clean_docstring(doc: str | None) -> str:
    """Normalise a docstring: tabs expanded, first line stripped, the body dedented,
    leading and trailing blank lines removed.

    >>> clean_docstring('''Summary.
    ...
    ...         Details here.
    ...     ''')
    'Summary.\\n\\nDetails here.'
    """
    if not doc:
        return ""
    lines = doc.expandtabs().splitlines()
    first, rest = lines[0].strip(), "\n".join(lines[1:])
    body = dedent(rest).splitlines()
    body = [line.rstrip() for line in body]
    while body and not body[-1]:
        body.pop()
    while body and not body[0]:
        body.pop(0)
    if not first:
        return "\n".join(body)
    if not body:
        return first
    return first + "\n" + ("\n" if not lines[1].strip() else "") + "\n".join(body)


def summary_line(doc: str | None) -> str:
    """The first paragraph of a docstring, joined onto one line."""
    text = clean_docstring(doc)
    paragraph = text.split("\n\n", 1)[0]
    return " ".join(paragraph.split())
