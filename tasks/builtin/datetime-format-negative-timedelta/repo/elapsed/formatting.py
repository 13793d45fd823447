"""Formatting :class:`datetime.timedelta` values.

All functions accept negative spans and show them with a leading minus sign (or as
"... ago" for :func:`relative`); the magnitude is always the same as for the
positive span.
"""

from __future__ import annotations

from datetime import timedelta
from typing import NamedTuple


class Parts(NamedTuple):
    """A span split into a sign (``1`` or ``-1``) and non-negative components."""

    sign: int
    days: int
    hours: int
    minutes: int
    seconds: int
    microseconds: int


def split_timedelta(value: timedelta) -> Parts:
    """Split *value* into a sign and components.

    >>> split_timedelta(timedelta(days=1, hours=2, seconds=5))
    Parts(sign=1, days=1, hours=2, minutes=0, seconds=5, microseconds=0)
    """
    sign = -1 if value < timedelta(0) else 1
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return Parts(sign, abs(value.days), hours, minutes, seconds, value.microseconds)


def as_clock(value: timedelta, show_micro: bool = False) -> str:
    """``[-]H:MM:SS`` with hours accumulated across days (like a stopwatch).

    >>> as_clock(timedelta(days=1, minutes=5, seconds=7))
    '24:05:07'
    """
    p = split_timedelta(value)
    text = f"{p.days * 24 + p.hours}:{p.minutes:02d}:{p.seconds:02d}"
    if show_micro:
        text += f".{p.microseconds:06d}"
    return ("-" if p.sign < 0 else "") + text


_SPAN_UNITS = ("d", "h", "m", "s")


def as_span(value: timedelta, max_units: int = 2) -> str:
    """Compact text with at most *max_units* non-zero units, largest first.

    Smaller units are truncated, not rounded. Spans under a second are ``0s``.

    >>> as_span(timedelta(hours=26, minutes=3, seconds=9))
    '1d 2h'
    """
    if max_units < 1:
        raise ValueError("max_units must be at least 1")
    p = split_timedelta(value)
    pieces = [f"{n}{unit}" for n, unit in zip((p.days, p.hours, p.minutes, p.seconds), _SPAN_UNITS) if n]
    if not pieces:
        return "0s"
    text = " ".join(pieces[:max_units])
    return "-" + text if p.sign < 0 else text


_RELATIVE_STEPS = (
    (timedelta(days=365), "year"),
    (timedelta(days=30), "month"),
    (timedelta(days=7), "week"),
    (timedelta(days=1), "day"),
    (timedelta(hours=1), "hour"),
    (timedelta(minutes=1), "minute"),
)


def relative(value: timedelta, now_threshold: timedelta = timedelta(seconds=45)) -> str:
    """A phrase such as ``"in 3 hours"`` or ``"2 days ago"`` (negative spans are in the past).

    The count is the number of whole units; anything shorter than *now_threshold*
    is ``"just now"``.
    """
    magnitude = abs(value)
    if magnitude < now_threshold:
        return "just now"
    for length, name in _RELATIVE_STEPS:
        if magnitude >= length:
            count = magnitude // length
            break
    else:
        count, name = magnitude // timedelta(seconds=1), "second"
    phrase = f"{count} {name}{'' if count == 1 else 's'}"
    return f"{phrase} ago" if value < timedelta(0) else f"in {phrase}"
