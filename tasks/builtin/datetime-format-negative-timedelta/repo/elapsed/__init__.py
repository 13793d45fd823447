"""elapsed: present time spans to people: clocks, compact spans and relative phrases."""

from .formatting import as_clock, as_span, relative, split_timedelta

__all__ = ["as_clock", "as_span", "relative", "split_timedelta"]
