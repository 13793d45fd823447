"""Formatting single cells: converting values to text, padding and clipping.

Widths are measured in terminal columns, so that columns line up when printed.
"""

from __future__ import annotations

ALIGNMENTS = ("left", "right", "center")


def cell_text(value: object, float_format: str = ".2f") -> str:
    """Text for one cell. ``None`` is empty; floats use *float_format*; line breaks
    become spaces so that a cell never spans several lines."""
    if value is None:
        return ""
    if isinstance(value, float):
        text = format(value, float_format)
    else:
        text = str(value)
    return " ".join(text.splitlines()) if "\n" in text or "\r" in text else text


def pad(text: str, width: int, align: str = "left") -> str:
    """Pad *text* with spaces to *width* columns.

    >>> pad("ab", 5, "right")
    '   ab'
    >>> pad("ab", 5, "center")
    ' ab  '
    """
    if align not in ALIGNMENTS:
        raise ValueError(f"unknown alignment {align!r}")
    gap = max(width - len(text), 0)
    if align == "right":
        return " " * gap + text
    if align == "center":
        left = gap // 2
        return " " * left + text + " " * (gap - left)
    return text + " " * gap


def clip(text: str, width: int, ellipsis: str = "\u2026") -> str:
    """Shorten *text* to at most *width* columns, marking the cut with *ellipsis*.

    >>> clip("abcdefgh", 5)
    'abcd…'
    """
    if width < len(ellipsis):
        raise ValueError("width is smaller than the ellipsis")
    if len(text) <= width:
        return text
    return text[: width - len(ellipsis)] + ellipsis
