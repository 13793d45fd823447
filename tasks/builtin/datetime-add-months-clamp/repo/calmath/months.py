"""Month-based arithmetic.

Adding months keeps the day of the month when possible and otherwise clamps it to
the last day of the target month (Jan 31 + 1 month = Feb 28, or Feb 29 in a leap
year), like most spreadsheet ``EDATE`` implementations. Every function accepts
:class:`datetime.datetime` too; the time of day is preserved.
"""

from __future__ import annotations

import calendar
from datetime import date
from typing import TypeVar

D = TypeVar("D", bound=date)


def _days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def add_months(d: D, months: int) -> D:
    """Shift *d* by *months* (may be negative), clamping the day to the target month.

    >>> add_months(date(2023, 10, 15), 4)
    datetime.date(2024, 2, 15)
    """
    index = d.year * 12 + (d.month - 1) + months
    year, month0 = divmod(index, 12)
    if not 1 <= year <= 9999:
        raise OverflowError(f"year {year} is out of range")
    day = min(d.day, _days_in_month(d.year, d.month))
    return d.replace(year=year, month=month0 + 1, day=day)


def add_years(d: D, years: int) -> D:
    """Shift *d* by whole years; Feb 29 becomes Feb 28 in non-leap years."""
    return add_months(d, 12 * years)


def month_start(d: D) -> D:
    """The first day of the month of *d*."""
    return d.replace(day=1)


def month_end(d: D) -> D:
    """The last day of the month of *d*.

    >>> month_end(date(2024, 2, 10))
    datetime.date(2024, 2, 29)
    """
    return d.replace(day=_days_in_month(d.year, d.month))


def months_between(start: date, end: date) -> int:
    """Whole months from *start* to *end* (negative when *end* is earlier).

    A month is complete when the day of the month is reached again, or when the
    end date is the last day of a shorter month: Jan 31 -> Feb 29 is one month.
    """
    if end < start:
        return -months_between(end, start)
    months = (end.year - start.year) * 12 + (end.month - start.month)
    if end.day < start.day and end.day != _days_in_month(end.year, end.month):
        months -= 1
    return months


def quarter(d: date) -> int:
    """Calendar quarter (1-4) of *d*."""
    return (d.month - 1) // 3 + 1


def quarter_start(d: D) -> D:
    """The first day of the quarter of *d*."""
    return d.replace(month=3 * (quarter(d) - 1) + 1, day=1)
