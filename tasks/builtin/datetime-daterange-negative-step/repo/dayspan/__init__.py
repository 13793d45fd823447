"""dayspan: ``range()`` for calendar dates."""

from .ranges import DateRange, date_range, weeks_in

__all__ = ["DateRange", "date_range", "weeks_in"]
