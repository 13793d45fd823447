"""calmath: calendar arithmetic on :class:`datetime.date` (months, quarters, month ends)."""

from .months import add_months, add_years, month_end, month_start, months_between, quarter, quarter_start

__all__ = [
    "add_months",
    "add_years",
    "month_end",
    "month_start",
    "months_between",
    "quarter",
    "quarter_start",
]
