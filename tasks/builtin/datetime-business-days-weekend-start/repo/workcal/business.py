"""Business days: Monday to Friday, minus holidays.

Offsets count business days strictly after (or, for negative offsets, strictly
before) the start date, so the start itself never counts and need not be a
business day: one business day after a Saturday is the following Monday, and
``add_business_days(d, 0)`` is ``d``. Both functions jump over whole weeks
arithmetically, so large offsets cost no more than small ones; holidays are kept
sorted so that the ones inside a span are found by bisection.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from datetime import date, timedelta

_WEEK = timedelta(weeks=1)
_DAY = timedelta(days=1)


def _is_weekday(d: date) -> bool:
    return d.weekday() < 5


class BusinessCalendar:
    """A set of holidays. Holidays falling on a weekend are ignored.

    >>> cal = BusinessCalendar([date(2024, 12, 25), date(2024, 12, 26)])
    >>> cal.add(date(2024, 12, 24), 1)
    datetime.date(2024, 12, 27)
    """

    def __init__(self, holidays: Iterable[date] = ()) -> None:
        self._holidays = sorted({h for h in holidays if _is_weekday(h)})
        self._lookup = frozenset(self._holidays)

    def is_business_day(self, d: date) -> bool:
        return _is_weekday(d) and d not in self._lookup

    def _holidays_in(self, first: date, last: date) -> int:
        """Number of (weekday) holidays ``h`` with ``first <= h <= last``."""
        return bisect_right(self._holidays, last) - bisect_left(self._holidays, first)

    def between(self, start: date, end: date) -> int:
        """Business days ``d`` with ``start <= d < end`` (negative if *end* is earlier)."""
        if end < start:
            return -self.between(end, start)
        weeks, extra = divmod((end - start).days, 7)
        count = 5 * weeks
        first = start.weekday()
        count += sum(1 for i in range(extra) if (first + i) % 7 < 5)
        if end > start:
            count -= self._holidays_in(start, end - _DAY)
        return count

    def add(self, start: date, n: int) -> date:
        """The *n*-th business day after *start* (before it when *n* is negative)."""
        if n == 0:
            return start
        step = _DAY if n > 0 else -_DAY
        weeks, rest = divmod(abs(n), 5)
        # Every run of seven consecutive days holds exactly five weekdays.
        current = start + weeks * (_WEEK if n > 0 else -_WEEK)
        while rest:
            current += step
            if _is_weekday(current):
                rest -= 1
        # Each holiday passed over costs one more business day.
        if n > 0:
            pending = self._holidays_in(start + _DAY, current)
        else:
            pending = self._holidays_in(current, start - _DAY)
        while pending:
            current += step
            if _is_weekday(current):
                if current in self._lookup:
                    continue
                pending -= 1
        return current

    def next_business_day(self, d: date) -> date:
        """*d* itself if it is a business day, otherwise the next one."""
        while not self.is_business_day(d):
            d += _DAY
        return d


_NO_HOLIDAYS = BusinessCalendar()


def is_business_day(d: date, holidays: Iterable[date] = ()) -> bool:
    return BusinessCalendar(holidays).is_business_day(d) if holidays else _NO_HOLIDAYS.is_business_day(d)


def business_days_between(start: date, end: date, holidays: Iterable[date] = ()) -> int:
    """Business days in ``[start, end)``; see :meth:`BusinessCalendar.between`."""
    return (BusinessCalendar(holidays) if holidays else _NO_HOLIDAYS).between(start, end)


def add_business_days(start: date, n: int, holidays: Iterable[date] = ()) -> date:
    """See :meth:`BusinessCalendar.add`."""
    return (BusinessCalendar(holidays) if holidays else _NO_HOLIDAYS).add(start, n)
