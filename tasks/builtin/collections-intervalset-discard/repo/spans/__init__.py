"""spans: sets of numbers stored as sorted, disjoint half-open intervals."""

from .intervalset import IntervalSet

__all__ = ["IntervalSet"]
