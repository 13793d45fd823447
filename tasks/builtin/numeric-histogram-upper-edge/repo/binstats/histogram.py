"""A fixed-width, optionally weighted histogram."""

from __future__ import annotations

import math
from collections.abc import Iterable


class Histogram:
    """Equal-width histogram over the closed range ``[lo, hi]``.

    Bin ``i`` covers ``[lo + i*w, lo + (i+1)*w)`` where ``w = (hi - lo) / bins``.
    The last bin is closed on the right, so ``hi`` itself is counted in it, like
    ``numpy.histogram``. Values below ``lo`` go to :attr:`underflow`, values above
    ``hi`` to :attr:`overflow`, and NaNs to :attr:`nan`; none of those are part of
    :attr:`counts`.

    >>> h = Histogram(0, 4, bins=4)
    >>> h.update([0, 0.5, 1, 3.9, -1])
    >>> h.counts, h.underflow
    ([2, 1, 0, 1], 1)
    """

    def __init__(self, lo: float, hi: float, bins: int = 10) -> None:
        if not isinstance(bins, int) or bins < 1:
            raise ValueError(f"bins must be a positive integer, got {bins!r}")
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
            raise ValueError(f"need finite lo < hi, got lo={lo!r}, hi={hi!r}")
        self.lo = lo
        self.hi = hi
        self.bins = bins
        self.counts: list[float] = [0] * bins
        self.underflow: float = 0
        self.overflow: float = 0
        self.nan: float = 0

    @classmethod
    def from_data(cls, values: Iterable[float], bins: int = 10) -> "Histogram":
        """Build a histogram whose range is exactly ``[min(values), max(values)]``."""
        data = [v for v in values if not math.isnan(v)]
        if not data:
            raise ValueError("from_data() needs at least one non-NaN value")
        lo, hi = min(data), max(data)
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        hist = cls(lo, hi, bins)
        hist.update(data)
        return hist

    @property
    def width(self) -> float:
        """Width of every bin."""
        return (self.hi - self.lo) / self.bins

    def bin_index(self, x: float) -> int | None:
        """Index of the bin that holds *x*, or ``None`` when *x* is out of range."""
        if x < self.lo or x >= self.hi:
            return None
        index = int((x - self.lo) / self.width)
        # Rounding in the division can land a value just below an edge one bin too far.
        return min(index, self.bins - 1)

    def add(self, x: float, weight: float = 1) -> None:
        """Count *x* with the given *weight*."""
        if math.isnan(x):
            self.nan += weight
            return
        index = self.bin_index(x)
        if index is not None:
            self.counts[index] += weight
        elif x < self.lo:
            self.underflow += weight
        else:
            self.overflow += weight

    def update(self, values: Iterable[float]) -> None:
        """Count every value of *values* with weight 1."""
        for x in values:
            self.add(x)

    def edges(self) -> list[float]:
        """The ``bins + 1`` bin edges, from ``lo`` to ``hi``."""
        return [self.lo + i * self.width for i in range(self.bins)] + [self.hi]

    def total(self, include_outliers: bool = False) -> float:
        """Sum of the bin counts; with *include_outliers*, also under- and overflow."""
        in_range = sum(self.counts)
        return in_range + self.underflow + self.overflow if include_outliers else in_range

    def mean(self) -> float:
        """Mean estimated from bin centres (outliers are ignored)."""
        total = self.total()
        if total == 0:
            raise ValueError("mean of an empty histogram")
        return sum(c * (self.lo + (i + 0.5) * self.width) for i, c in enumerate(self.counts)) / total

    def quantile(self, q: float) -> float:
        """The *q*-quantile, interpolating linearly inside the bin that contains it."""
        if not 0 <= q <= 1:
            raise ValueError(f"q must be in [0, 1], got {q!r}")
        total = self.total()
        if total == 0:
            raise ValueError("quantile of an empty histogram")
        target = q * total
        seen: float = 0
        for i, count in enumerate(self.counts):
            if count and seen + count >= target:
                return self.lo + (i + (target - seen) / count) * self.width
            seen += count
        return self.hi

    def density(self) -> list[float]:
        """Counts normalised so that the histogram integrates to 1 over ``[lo, hi]``."""
        total = self.total()
        if total == 0:
            return [0.0] * self.bins
        return [c / (total * self.width) for c in self.counts]
