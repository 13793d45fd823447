"""Exceptions raised by statkit."""


class StatisticsError(ValueError):
    """Raised when a statistic is undefined for the given data (e.g. an empty sample)."""
