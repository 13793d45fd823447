"""IntervalSet: a union of disjoint half-open intervals ``[start, end)``."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator


def _check(start: float, end: float) -> None:
    if end < start:
        raise ValueError(f"interval end {end!r} is before its start {start!r}")


class IntervalSet:
    """A set of numbers represented as sorted, disjoint, non-adjacent intervals.

    Intervals are half-open, ``[start, end)``. The set is kept normalised:
    overlapping or touching intervals are merged on insertion, so ``[0, 2)`` and
    ``[2, 5)`` are stored as ``[0, 5)``. Empty intervals are ignored.

    >>> s = IntervalSet([(0, 2), (5, 8), (2, 3)])
    >>> s
    IntervalSet([(0, 3), (5, 8)])
    >>> 2.5 in s, 3 in s
    (True, False)
    """

    def __init__(self, intervals: Iterable[tuple[float, float]] = ()) -> None:
        # Two parallel sorted lists; _ends is sorted too because intervals are disjoint.
        self._starts: list[float] = []
        self._ends: list[float] = []
        for start, end in intervals:
            self.add(start, end)

    # -- queries ---------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return iter(list(zip(self._starts, self._ends)))

    def __len__(self) -> int:
        """Number of disjoint intervals (not the measure; see :meth:`total_length`)."""
        return len(self._starts)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def __contains__(self, x: float) -> bool:
        i = bisect_right(self._starts, x) - 1
        return i >= 0 and x < self._ends[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IntervalSet):
            return NotImplemented
        return self._starts == other._starts and self._ends == other._ends

    def __repr__(self) -> str:
        return f"IntervalSet({list(self)!r})"

    def total_length(self) -> float:
        """Sum of the lengths of all intervals."""
        return sum(e - s for s, e in zip(self._starts, self._ends))

    def overlaps(self, start: float, end: float) -> bool:
        """Whether any point of ``[start, end)`` is in the set."""
        _check(start, end)
        if start == end:
            return False
        i = bisect_left(self._starts, end) - 1
        return i >= 0 and self._ends[i] > start

    def gaps(self, lo: float, hi: float) -> "IntervalSet":
        """The parts of ``[lo, hi)`` that are *not* in the set."""
        _check(lo, hi)
        result = IntervalSet([(lo, hi)])
        for start, end in self:
            result.discard(start, end)
        return result

    def copy(self) -> "IntervalSet":
        clone = IntervalSet()
        clone._starts = list(self._starts)
        clone._ends = list(self._ends)
        return clone

    # -- mutation --------------------------------------------------------------

    def add(self, start: float, end: float) -> None:
        """Add ``[start, end)``, merging it with every interval it overlaps or touches."""
        _check(start, end)
        if start == end:
            return
        lo = bisect_left(self._ends, start)  # first interval ending at or after start
        hi = bisect_right(self._starts, end)  # first interval starting after end
        if lo < hi:
            start = min(start, self._starts[lo])
            end = max(end, self._ends[hi - 1])
        self._starts[lo:hi] = [start]
        self._ends[lo:hi] = [end]

    def discard(self, start: float, end: float) -> None:
        """Remove ``[start, end)`` from the set, splitting intervals where needed."""
        _check(start, end)
        if start == end:
            return
        lo = bisect_left(self._starts, start)
        # Step back when the previous interval encloses the range (punching a hole in it).
        if lo > 0 and self._ends[lo - 1] > end:
            lo -= 1
        hi = bisect_left(self._starts, end)  # first interval starting at or after end
        if lo >= hi:
            return
        new_starts: list[float] = []
        new_ends: list[float] = []
        if self._starts[lo] < start:
            new_starts.append(self._starts[lo])
            new_ends.append(start)
        if self._ends[hi - 1] > end:
            new_starts.append(end)
            new_ends.append(self._ends[hi - 1])
        self._starts[lo:hi] = new_starts
        self._ends[lo:hi] = new_ends

    # -- set algebra -----------------------------------------------------------

    def __or__(self, other: "IntervalSet") -> "IntervalSet":
        result = self.copy()
        for start, end in other:
            result.add(start, end)
        return result

    def __sub__(self, other: "IntervalSet") -> "IntervalSet":
        result = self.copy()
        for start, end in other:
            result.discard(start, end)
        return result

    def __and__(self, other: "IntervalSet") -> "IntervalSet":
        result = IntervalSet()
        mine, theirs = list(self), list(other)
        i = j = 0
        while i < len(mine) and j < len(theirs):
            start = max(mine[i][0], theirs[j][0])
            end = min(mine[i][1], theirs[j][1])
            if start < end:
                result.add(start, end)
            if mine[i][1] < theirs[j][1]:
                i += 1
            else:
                j += 1
        return result
