"""Parsing, formatting and splitting of amounts held as integer minor units."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .currency import Currency, get_currency

_NUMBER = re.compile(r"^(?P<sign>[-+])?(?P<major>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<minor>\d+))?$")


def parse_amount(text: str, currency: str | Currency = "USD") -> int:
    """Parse a human-written amount into minor units.

    Accepts an optional sign, the currency symbol, thousands separators and
    accounting-style parentheses for negatives. More decimal places than the
    currency has is an error rather than a silent rounding.

    >>> parse_amount("$1,234.5")
    123450
    >>> parse_amount("(12.00)")
    -1200
    >>> parse_amount("-¥500", "JPY")
    -500
    """
    cur = get_currency(currency)
    s = text.strip()
    negative = False
    if s.startswith("(") and s.endswith(")"):
        negative = True
        s = s[1:-1].strip()
    if cur.symbol:
        s = s.replace(cur.symbol, "", 1)
    match = _NUMBER.match(s.replace(" ", ""))
    if match is None:
        raise ValueError(f"not an amount: {text!r}")
    minor_text = match.group("minor") or ""
    if len(minor_text) > cur.exponent:
        raise ValueError(f"{text!r} has more than {cur.exponent} decimal places for {cur.code}")
    value = int(match.group("major").replace(",", "")) * cur.factor
    value += int(minor_text.ljust(cur.exponent, "0") or 0)
    if match.group("sign") == "-":
        negative = not negative
    return -value if negative else value


def _group_thousands(digits: str, separator: str) -> str:
    head = len(digits) % 3 or 3
    parts = [digits[:head]] + [digits[i : i + 3] for i in range(head, len(digits), 3)]
    return separator.join(parts)


def format_amount(
    minor_units: int,
    currency: str | Currency = "USD",
    grouping: bool = True,
    symbol: bool = False,
) -> str:
    """Format an amount of minor units in the conventional decimal notation.

    >>> format_amount(123450)
    '1,234.50'
    >>> format_amount(123450, symbol=True, grouping=False)
    '$1234.50'
    >>> format_amount(7, "KWD")
    '0.007'
    """
    if not isinstance(minor_units, int):
        raise TypeError(f"amounts are integers of minor units, got {type(minor_units).__name__}")
    cur = get_currency(currency)
    sign = "-" if minor_units < 0 else ""
    major, minor = divmod(minor_units, cur.factor)
    digits = str(abs(major))
    text = _group_thousands(digits, ",") if grouping else digits
    if cur.exponent:
        text += "." + str(minor).zfill(cur.exponent)
    return f"{sign}{cur.symbol if symbol else ''}{text}"


def allocate(total: int, ratios: Sequence[float]) -> list[int]:
    """Split *total* minor units in proportion to *ratios* without losing any.

    Each share is rounded down, then the leftover units go one by one to the
    shares with the largest remainders (ties go to the earlier share). The result
    always sums to *total*; a negative total is split like its absolute value.

    >>> allocate(100, [1, 1, 1])
    [34, 33, 33]
    """
    if not ratios or any(r < 0 for r in ratios) or sum(ratios) <= 0:
        raise ValueError("ratios must be non-negative with a positive sum")
    sign = -1 if total < 0 else 1
    remaining = abs(total)
    weight = sum(ratios)
    exact = [remaining * r / weight for r in ratios]
    shares = [int(x) for x in exact]
    leftover = remaining - sum(shares)
    order = sorted(range(len(ratios)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[:leftover]:
        shares[i] += 1
    return [sign * share for share in shares]
