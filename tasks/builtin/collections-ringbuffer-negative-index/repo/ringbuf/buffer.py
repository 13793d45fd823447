"""A ring (circular) buffer backed by a preallocated list."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class RingBuffer(Generic[T]):
    """Keep the most recent *capacity* items, oldest first.

    Appending to a full buffer silently drops the oldest item. Indexing follows
    list semantics: ``buf[0]`` is the oldest item and ``buf[-1]`` the newest.

    >>> buf = RingBuffer(3)
    >>> buf.extend([1, 2, 3, 4])
    >>> list(buf), buf[0], buf[-1]
    ([2, 3, 4], 2, 4)
    """

    __slots__ = ("_capacity", "_items", "_start", "_size")

    def __init__(self, capacity: int, items: Iterable[T] = ()) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._items: list[T | None] = [None] * capacity
        self._start = 0  # physical index of the oldest item
        self._size = 0
        self.extend(items)

    # -- size ------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return self._size

    def is_full(self) -> bool:
        return self._size == self._capacity

    # -- positions -------------------------------------------------------------

    def _physical(self, index: int) -> int:
        """Map a logical index (negative counts from the newest) to a slot in ``_items``."""
        if index < 0:
            index += self._capacity
        if not 0 <= index < self._size:
            raise IndexError("RingBuffer index out of range")
        return (self._start + index) % self._capacity

    def __getitem__(self, index: int) -> T:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]  # type: ignore[return-value]
        return self._items[self._physical(index)]  # type: ignore[return-value]

    def __setitem__(self, index: int, value: T) -> None:
        self._items[self._physical(index)] = value

    def __iter__(self) -> Iterator[T]:
        for i in range(self._size):
            yield self._items[(self._start + i) % self._capacity]  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"RingBuffer({self._capacity}, {list(self)!r})"

    # -- mutation --------------------------------------------------------------

    def append(self, item: T) -> T | None:
        """Add *item* as the newest; return the item it pushed out, if any."""
        end = (self._start + self._size) % self._capacity
        dropped = None
        if self.is_full():
            dropped = self._items[end]
            self._start = (self._start + 1) % self._capacity
        else:
            self._size += 1
        self._items[end] = item
        return dropped

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)

    def popleft(self) -> T:
        """Remove and return the oldest item."""
        if not self._size:
            raise IndexError("pop from an empty RingBuffer")
        item = self._items[self._start]
        self._items[self._start] = None
        self._start = (self._start + 1) % self._capacity
        self._size -= 1
        return item  # type: ignore[return-value]

    def pop(self) -> T:
        """Remove and return the newest item."""
        if not self._size:
            raise IndexError("pop from an empty RingBuffer")
        end = (self._start + self._size - 1) % self._capacity
        item = self._items[end]
        self._items[end] = None
        self._size -= 1
        return item  # type: ignore[return-value]

    def clear(self) -> None:
        self._items = [None] * self._capacity
        self._start = self._size = 0

    # -- convenience -----------------------------------------------------------

    def newest(self, default: T | None = None) -> T | None:
        """The most recently added item, or *default* when empty."""
        return self[-1] if self._size else default

    def oldest(self, default: T | None = None) -> T | None:
        """The oldest item still held, or *default* when empty."""
        return self[0] if self._size else default

    def window_mean(self) -> float:
        """Mean of the held items (for numeric buffers, e.g. moving averages)."""
        if not self._size:
            raise ValueError("mean of an empty RingBuffer")
        return sum(self) / self._size  # type: ignore[arg-type]
