"""A value computed once per key for the life of the process, shared by threads.

The control runs (`runs.control_run`, `script_verifier.control_run`) are whole test runs of
the pristine workspace, and a verdict (`memo.GradeMemo`) is a whole grading: the trainer
grades many episodes of one task at once, and each would otherwise start its own. Callers of
one key wait for the first instead; callers of other keys are not held up. A computation that
raises, or whose value `keep` refuses, is not kept: the next caller computes again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class OncePerKey(Generic[V]):
    """`max_entries`: the most values kept, the least recently used going first (None: all)."""

    def __init__(self, max_entries: int | None = None) -> None:
        self.max_entries = max_entries
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], V], keep: Callable[[V], bool] = lambda _: True) -> V:
        """The value kept for `key`, else `compute()`'s, kept when `keep` says so; one
        computation per key at a time."""
        found, value = self.lookup(key)
        if found:
            return value
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            found, value = self.lookup(key)  # computed by the caller this one waited for
            if found:
                return value
            value = compute()
            with self._lock:
                # A value not kept leaves the key's lock in place: later callers queue on it.
                if keep(value):
                    self._values[key] = value
                    while self.max_entries is not None and len(self._values) > self.max_entries:
                        self._values.popitem(last=False)
                    self._key_locks.pop(key, None)
            return value

    def lookup(self, key: Hashable) -> tuple[bool, V | None]:
        """(True, the value) when one is kept for `key` (now the most recently used), else (False, None)."""
        with self._lock:
            if key not in self._values:
                return False, None
            self._values.move_to_end(key)
            return True, self._values[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
