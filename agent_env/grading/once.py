"""A value computed once per key for the life of the process, shared by threads.

The control runs (`runs.control_run`, `script_verifier.control_run`) are whole test runs of
the pristine workspace: the trainer grades many episodes of one task at once, and each would
otherwise start its own. Callers of one key wait for the first instead; callers of other keys
are not held up. A computation that raises is not kept: the next caller tries again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class OncePerKey(Generic[V]):
    def __init__(self) -> None:
        self._values: dict[Hashable, V] = {}
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The value kept for `key`, else `compute()`'s, kept; one computation per key at a time."""
        with self._lock:
            if key in self._values:
                return self._values[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._values:  # computed by the caller this one waited for
                    return self._values[key]
            value = compute()
            with self._lock:
                self._values[key] = value
                self._key_locks.pop(key, None)
            return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
