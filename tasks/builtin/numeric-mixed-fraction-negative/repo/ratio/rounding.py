"""Rounding to practical denominators and pretty printing."""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Rational

from .mixed import to_mixed

_VULGAR = {
    (1, 2): "\u00bd",
    (1, 3): "\u2153",
    (2, 3): "\u2154",
    (1, 4): "\u00bc",
    (3, 4): "\u00be",
    (1, 8): "\u215b",
    (3, 8): "\u215c",
    (5, 8): "\u215d",
    (7, 8): "\u215e",
}


def nearest(value: Rational | float | str, denominator: int) -> Fraction:
    """Round *value* to the nearest multiple of ``1/denominator``; halves round away from zero.

    >>> nearest(0.30, 16)
    Fraction(5, 16)
    """
    if denominator <= 0:
        raise ValueError("denominator must be positive")
    scaled = Fraction(value) * denominator
    rounded = math.floor(abs(scaled) + Fraction(1, 2))
    return Fraction(rounded if scaled >= 0 else -rounded, denominator)


def pretty(value: Rational | int | str) -> str:
    """Mixed-number text using unicode vulgar fractions where one exists.

    >>> pretty(Fraction(9, 4))
    '2\u00bc'
    """
    m = to_mixed(value)
    glyph = _VULGAR.get((m.numerator, m.denominator))
    if glyph is None:
        return str(m)
    sign = "-" if m.sign < 0 else ""
    return f"{sign}{m.whole or ''}{glyph}"
