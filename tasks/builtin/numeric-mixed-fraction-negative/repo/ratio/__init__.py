"""ratio: exact fractions for recipes, woodworking and other human-scale measures.

Values are :class:`fractions.Fraction`; this package adds mixed-number text
(``"2 3/4"``), rounding to practical denominators (sixteenths of an inch) and
unicode vulgar fractions.
"""

from .mixed import Mixed, format_mixed, parse_mixed, to_mixed
from .rounding import nearest, pretty

__all__ = ["Mixed", "format_mixed", "nearest", "parse_mixed", "pretty", "to_mixed"]
