"""Mixed numbers: a sign, a whole part and a proper fraction."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

_MIXED = re.compile(
    r"""^\s*(?P<sign>[-+])?\s*
        (?:
            (?P<whole>\d+)\s+(?P<num>\d+)\s*/\s*(?P<den>\d+)   # 2 3/4
          | (?P<onum>\d+)\s*/\s*(?P<oden>\d+)                   # 3/4
          | (?P<int>\d+)                                         # 2
        )\s*$""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Mixed:
    """``sign * (whole + numerator / denominator)`` with ``0 <= numerator < denominator``.

    The sign applies to the whole value: ``Mixed(-1, 2, 1, 4)`` is minus two and a
    quarter, written ``-2 1/4``.
    """

    sign: int
    whole: int
    numerator: int
    denominator: int

    def to_fraction(self) -> Fraction:
        return self.sign * (self.whole + Fraction(self.numerator, self.denominator))

    def __str__(self) -> str:
        prefix = "-" if self.sign < 0 and (self.whole or self.numerator) else ""
        if not self.numerator:
            return f"{prefix}{self.whole}"
        if not self.whole:
            return f"{prefix}{self.numerator}/{self.denominator}"
        return f"{prefix}{self.whole} {self.numerator}/{self.denominator}"


def to_mixed(value: Rational | int | str) -> Mixed:
    """Split *value* into a :class:`Mixed` number.

    >>> to_mixed(Fraction(11, 4))
    Mixed(sign=1, whole=2, numerator=3, denominator=4)
    """
    fr = Fraction(value)
    sign = -1 if fr < 0 else 1
    whole, rem = divmod(fr.numerator, fr.denominator)
    return Mixed(sign, abs(whole), rem, fr.denominator)


def format_mixed(value: Rational | int | str, max_denominator: int | None = None) -> str:
    """Write *value* as a mixed number, optionally limiting the denominator first.

    >>> format_mixed(Fraction(7, 2))
    '3 1/2'
    """
    fr = Fraction(value)
    if max_denominator is not None:
        fr = fr.limit_denominator(max_denominator)
    return str(to_mixed(fr))


def parse_mixed(text: str) -> Fraction:
    """Parse ``"2 3/4"``, ``"-1/2"``, ``"+3"`` and the like into a :class:`Fraction`.

    >>> parse_mixed("-2 1/4")
    Fraction(-9, 4)
    """
    match = _MIXED.match(text)
    if match is None:
        raise ValueError(f"not a mixed number: {text!r}")
    if match["whole"] is not None:
        num, den = int(match["num"]), int(match["den"])
        if den == 0:
            raise ZeroDivisionError(f"zero denominator in {text!r}")
        if num >= den:
            raise ValueError(f"fraction part of a mixed number must be proper: {text!r}")
        value = int(match["whole"]) + Fraction(num, den)
    elif match["onum"] is not None:
        if int(match["oden"]) == 0:
            raise ZeroDivisionError(f"zero denominator in {text!r}")
        value = Fraction(int(match["onum"]), int(match["oden"]))
    else:
        value = Fraction(int(match["int"]))
    return -value if match["sign"] == "-" else value
