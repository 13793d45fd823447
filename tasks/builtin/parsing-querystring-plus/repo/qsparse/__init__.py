"""qsparse: a small, dependency-free parser and builder for URL query strings."""

from .decode import decode_component, percent_decode
from .query import build_query, parse_qs, parse_qsl

__all__ = [
    "build_query",
    "decode_component",
    "parse_qs",
    "parse_qsl",
    "percent_decode",
]

__version__ = "0.4.1"
