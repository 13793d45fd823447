"""A lazy, indexable sequence of dates with a fixed step in days.

:class:`DateRange` mirrors the built-in :class:`range`: the stop date is excluded,
the step may be negative (counting backwards), and a range whose step points away
from its stop is empty. Length, indexing, membership and reversal are all computed
arithmetically, without materialising the dates.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date, timedelta


def _as_days(step: int | timedelta) -> int:
    if isinstance(step, timedelta):
        if step % timedelta(days=1):
            raise ValueError("step must be a whole number of days")
        return step.days
    return int(step)


class DateRange(Sequence):
    """Dates from *start* (inclusive) to *stop* (exclusive) every *step* days.

    >>> list(DateRange(date(2024, 1, 30), date(2024, 2, 2)))
    [datetime.date(2024, 1, 30), datetime.date(2024, 1, 31), datetime.date(2024, 2, 1)]
    """

    __slots__ = ("start", "stop", "step")

    def __init__(self, start: date, stop: date, step: int | timedelta = 1) -> None:
        days = _as_days(step)
        if days == 0:
            raise ValueError("step must not be zero")
        self.start = start
        self.stop = stop
        self.step = days

    def __repr__(self) -> str:
        return f"DateRange({self.start.isoformat()}, {self.stop.isoformat()}, step={self.step})"

    def __len__(self) -> int:
        span = (self.stop - self.start).days
        return max(0, (span + self.step - 1) // self.step)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("DateRange index out of range")
        return self.start + timedelta(days=index * self.step)

    def __iter__(self) -> Iterator[date]:
        for i in range(len(self)):
            yield self.start + timedelta(days=i * self.step)

    def __reversed__(self) -> Iterator[date]:
        for i in reversed(range(len(self))):
            yield self.start + timedelta(days=i * self.step)

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, date):
            return False
        offset = (value - self.start).days
        index, remainder = divmod(offset, self.step)
        return remainder == 0 and 0 <= index < len(self)

    def index(self, value: date) -> int:  # type: ignore[override]
        if value not in self:
            raise ValueError(f"{value!r} is not in range")
        return (value - self.start).days // self.step

    def count(self, value: object) -> int:
        return int(value in self)

    @property
    def last(self) -> date | None:
        """The final date produced, or ``None`` for an empty range."""
        return self[-1] if len(self) else None


def date_range(start: date, end: date, step: int | timedelta = 1, inclusive: bool = True) -> DateRange:
    """Convenience constructor that includes *end* by default (unlike :class:`DateRange`).

    >>> len(date_range(date(2024, 1, 1), date(2024, 1, 31)))
    31
    >>> date_range(date(2024, 1, 3), date(2024, 1, 1), step=-1)[-1]
    datetime.date(2024, 1, 1)
    """
    days = _as_days(step)
    stop = end + timedelta(days=1 if days > 0 else -1) if inclusive else end
    return DateRange(start, stop, days)


def weeks_in(start: date, end: date, weekday: int = 0) -> DateRange:
    """Every date with the given *weekday* (0 = Monday) between *start* and *end*, inclusive."""
    first = start + timedelta(days=(weekday - start.weekday()) % 7)
    return date_range(first, end, 7)
