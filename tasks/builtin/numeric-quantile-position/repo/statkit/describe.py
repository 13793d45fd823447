"""Location and spread of a sample.

Quantiles follow the conventions of NumPy's ``percentile`` (the default ``linear``
method is Hyndman & Fan's definition 7, also used by R and by spreadsheets'
``PERCENTILE.INC``): the q-th quantile of ``n`` sorted values sits at the
fractional index ``q * (n - 1)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import StatisticsError

METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _sorted_sample(data: Iterable[float]) -> list[float]:
    values = sorted(data)
    if not values:
        raise StatisticsError("statistic of an empty sample")
    for x in values:
        if isinstance(x, float) and math.isnan(x):
            raise StatisticsError("sample contains NaN")
    return values


def mean(data: Iterable[float]) -> float:
    """Arithmetic mean."""
    values = list(data)
    if not values:
        raise StatisticsError("mean of an empty sample")
    return math.fsum(values) / len(values)


def median(data: Iterable[float]) -> float:
    """Middle value; the mean of the two middle values for an even-sized sample."""
    values = _sorted_sample(data)
    mid = len(values) // 2
    if len(values) % 2:
        return values[mid]
    return (values[mid - 1] + values[mid]) / 2


def _position(n: int, q: float) -> float:
    """Fractional index of the *q*-th quantile among *n* sorted values."""
    return min(q * n, n - 1)


def _pick(values: Sequence[float], pos: float, method: str) -> float:
    lo = math.floor(pos)
    hi = math.ceil(pos)
    frac = pos - lo
    if method == "lower":
        return values[lo]
    if method == "higher":
        return values[hi]
    if method == "nearest":
        # Ties go to the even index, like NumPy.
        if frac == 0.5:
            return values[lo if lo % 2 == 0 else hi]
        return values[round(pos)]
    if method == "midpoint":
        return (values[lo] + values[hi]) / 2
    return values[lo] + (values[hi] - values[lo]) * frac


def quantile(data: Iterable[float], q: float, method: str = "linear") -> float:
    """The *q*-th quantile of *data*, for ``0 <= q <= 1``.

    >>> quantile([1, 2, 3, 4, 5], 0.25)
    2.0
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {q!r}")
    values = _sorted_sample(data)
    return float(_pick(values, _position(len(values), q), method))


def quantiles(data: Iterable[float], qs: Iterable[float], method: str = "linear") -> list[float]:
    """Several quantiles of the same sample (sorted once)."""
    values = _sorted_sample(data)
    return [quantile(values, q, method) for q in qs]


def iqr(data: Iterable[float]) -> float:
    """Interquartile range: the 75th minus the 25th percentile."""
    q1, q3 = quantiles(data, (0.25, 0.75))
    return q3 - q1


@dataclass(frozen=True)
class Summary:
    """Count, mean and the five-number summary of a sample."""

    count: int
    mean: float
    minimum: float
    q1: float
    median: float
    q3: float
    maximum: float

    def outlier_fences(self, k: float = 1.5) -> tuple[float, float]:
        """Tukey's fences: values outside ``[q1 - k*IQR, q3 + k*IQR]`` are outliers."""
        spread = self.q3 - self.q1
        return (self.q1 - k * spread, self.q3 + k * spread)


def describe(data: Iterable[float]) -> Summary:
    """Summarise *data*.

    >>> describe([4, 1, 3, 2, 5]).q3
    4.0
    """
    values = _sorted_sample(data)
    q1, q3 = quantiles(values, (0.25, 0.75))
    return Summary(
        count=len(values),
        mean=mean(values),
        minimum=float(values[0]),
        q1=q1,
        median=float(median(values)),
        q3=q3,
        maximum=float(values[-1]),
    )
