"""statkit: descriptive statistics for small in-memory samples."""

from .describe import Summary, describe, iqr, mean, median, quantile, quantiles
from .errors import StatisticsError

__all__ = ["StatisticsError", "Summary", "describe", "iqr", "mean", "median", "quantile", "quantiles"]
