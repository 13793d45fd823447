"""Human-friendly durations.

A duration is one or more ``<number><unit>`` terms, optionally separated by spaces,
commas or the word ``and``, with an optional leading sign that applies to the whole
duration: ``90s``, ``1h30m``, ``-2 days, 4 hours``, ``1.5 hours``, ``250ms``.
Unit names are case-insensitive.
"""

from __future__ import annotations

import re
from datetime import timedelta

# Every accepted spelling of every unit, mapped to its length.
UNITS: dict[str, timedelta] = {}
for _names, _length in (
    (("w", "wk", "wks", "week", "weeks"), timedelta(weeks=1)),
    (("d", "day", "days"), timedelta(days=1)),
    (("h", "hr", "hrs", "hour", "hours"), timedelta(hours=1)),
    (("m", "min", "mins", "minute", "minutes"), timedelta(minutes=1)),
    (("s", "sec", "secs", "second", "seconds"), timedelta(seconds=1)),
    (("ms", "msec", "millisecond", "milliseconds"), timedelta(milliseconds=1)),
    (("us", "\u00b5s", "microsecond", "microseconds"), timedelta(microseconds=1)),
):
    for _name in _names:
        UNITS[_name] = _length

_TERM = re.compile(
    r"\s*(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>" + "|".join(map(re.escape, UNITS)) + r")\s*(?:,|\band\b)?",
    re.IGNORECASE,
)


class DurationError(ValueError):
    """Raised for text that is not a valid duration."""


def parse_duration(text: str) -> timedelta:
    """Parse *text* into a :class:`~datetime.timedelta`.

    >>> parse_duration("1h30m")
    datetime.timedelta(seconds=5400)
    >>> parse_duration("-1.5d")
    datetime.timedelta(days=-2, seconds=43200)
    """
    body = text.strip()
    sign = 1
    if body[:1] in "+-" and body:
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if not body:
        raise DurationError(f"empty duration: {text!r}")
    total = timedelta()
    pos = 0
    while pos < len(body):
        match = _TERM.match(body, pos)
        if match is None or match.end() == pos:
            raise DurationError(f"cannot parse {body[pos:]!r} in duration {text!r}")
        unit = UNITS[match["unit"].lower()]
        total += unit * float(match["number"])
        pos = match.end()
    return sign * total


_FORMAT_UNITS = (
    ("d", "day", timedelta(days=1)),
    ("h", "hour", timedelta(hours=1)),
    ("m", "minute", timedelta(minutes=1)),
    ("s", "second", timedelta(seconds=1)),
    ("ms", "millisecond", timedelta(milliseconds=1)),
)


def format_duration(value: timedelta, long: bool = False, max_terms: int | None = None) -> str:
    """Write *value* as terms from days down to milliseconds (sub-millisecond parts dropped).

    >>> format_duration(timedelta(hours=1, minutes=30))
    '1h 30m'
    >>> format_duration(timedelta(hours=1, minutes=30), long=True)
    '1 hour, 30 minutes'
    """
    negative = value < timedelta(0)
    rest = abs(value)
    terms: list[str] = []
    for short, name, length in _FORMAT_UNITS:
        count, rest = divmod(rest, length)
        if count:
            terms.append(f"{count} {name}{'s' if count != 1 else ''}" if long else f"{count}{short}")
    if max_terms is not None:
        terms = terms[:max_terms]
    if not terms:
        return "0 seconds" if long else "0s"
    text = ", ".join(terms) if long else " ".join(terms)
    return "-" + text if negative else text
