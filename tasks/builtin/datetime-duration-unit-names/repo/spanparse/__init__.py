"""spanparse: parse and format human-written durations such as ``1h30m`` or ``2 days``."""

from .durations import DurationError, format_duration, parse_duration

__all__ = ["DurationError", "format_duration", "parse_duration"]
