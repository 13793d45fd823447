"""A min-priority queue whose items can be re-prioritised or removed in O(log n).

Each item may appear at most once. Entries are ``[priority, seq, item]`` lists kept
in a binary min-heap; ``seq`` is an insertion counter, so items with equal priority
come out first-in, first-out. ``_where`` maps every item to the index of its entry
in ``_heap`` and is updated on every move.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from itertools import count
from typing import Any


class PriorityQueue:
    """Smallest priority first.

    >>> q = PriorityQueue([("write", 2), ("test", 3), ("plan", 1)])
    >>> q.update("test", 0)
    >>> [q.pop() for _ in range(len(q))]
    ['test', 'plan', 'write']
    """

    def __init__(self, items: Iterable[tuple[Hashable, Any]] = ()) -> None:
        self._heap: list[list[Any]] = []
        self._where: dict[Hashable, int] = {}
        self._seq = count()
        for item, priority in items:
            self.push(item, priority)

    # -- inspection ------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __contains__(self, item: Hashable) -> bool:
        return item in self._where

    def priority(self, item: Hashable) -> Any:
        """The current priority of *item* (``KeyError`` if absent)."""
        return self._heap[self._where[item]][0]

    def peek(self) -> tuple[Hashable, Any]:
        """``(item, priority)`` of the next item, without removing it."""
        if not self._heap:
            raise IndexError("peek at an empty PriorityQueue")
        priority, _, item = self._heap[0]
        return item, priority

    def __iter__(self) -> Iterator[Hashable]:
        """Items in priority order (a sorted snapshot; the queue is not consumed)."""
        return (entry[2] for entry in sorted(self._heap))

    # -- heap plumbing ---------------------------------------------------------

    def _swap(self, i: int, j: int) -> None:
        heap = self._heap
        heap[i], heap[j] = heap[j], heap[i]
        self._where[heap[i][2]] = i
        self._where[heap[j][2]] = j

    def _less(self, i: int, j: int) -> bool:
        a, b = self._heap[i], self._heap[j]
        return (a[0], a[1]) < (b[0], b[1])

    def _sift_up(self, pos: int) -> None:
        while pos > 0:
            parent = (pos - 1) // 2
            if not self._less(pos, parent):
                break
            self._swap(pos, parent)
            pos = parent

    def _sift_down(self, pos: int) -> None:
        n = len(self._heap)
        while True:
            smallest = pos
            for child in (2 * pos + 1, 2 * pos + 2):
                if child < n and self._less(child, smallest):
                    smallest = child
            if smallest == pos:
                return
            self._swap(pos, smallest)
            pos = smallest

    def _restore(self, pos: int) -> None:
        """Re-establish the heap property after the entry at *pos* was replaced or changed."""
        self._sift_down(pos)

    # -- mutation --------------------------------------------------------------

    def push(self, item: Hashable, priority: Any) -> None:
        """Insert *item*; if it is already queued, this is :meth:`update`."""
        if item in self._where:
            self.update(item, priority)
            return
        self._heap.append([priority, next(self._seq), item])
        self._where[item] = len(self._heap) - 1
        self._sift_up(len(self._heap) - 1)

    def update(self, item: Hashable, priority: Any) -> None:
        """Change the priority of a queued *item*, keeping its place among equals."""
        pos = self._where[item]
        self._heap[pos][0] = priority
        self._restore(pos)

    def remove(self, item: Hashable) -> Any:
        """Remove *item* from anywhere in the queue and return its priority."""
        pos = self._where.pop(item)
        entry = self._heap[pos]
        last = self._heap.pop()
        if pos < len(self._heap):
            self._heap[pos] = last
            self._where[last[2]] = pos
            self._restore(pos)
        return entry[0]

    def pop(self) -> Hashable:
        """Remove and return the item with the smallest priority."""
        if not self._heap:
            raise IndexError("pop from an empty PriorityQueue")
        item = self._heap[0][2]
        self.remove(item)
        return item

    def pop_with_priority(self) -> tuple[Hashable, Any]:
        item, priority = self.peek()
        self.pop()
        return item, priority

    def clear(self) -> None:
        self._heap.clear()
        self._where.clear()
