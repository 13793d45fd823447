"""A bounded mapping that evicts its least recently used entry."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

_MISSING = object()


@dataclass
class CacheStats:
    """Counters kept by an :class:`LRUCache`."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0

    @property
    def hit_rate(self) -> float:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0


class LRUCache:
    """Mapping of at most *capacity* entries, evicting the least recently used.

    Both :meth:`get` (on a hit) and :meth:`put` mark an entry as most recently
    used; ``in``, :meth:`peek` and iteration do not. When an entry is evicted to
    make room, *on_evict* is called with its key and value.

    >>> cache = LRUCache(2)
    >>> cache.put("a", 1); cache.put("b", 2)
    >>> cache.get("a")
    1
    >>> cache.put("c", 3)          # evicts "b", the least recently used
    >>> list(cache)
    ['a', 'c']
    """

    def __init__(self, capacity: int, on_evict: Callable[[Hashable, Any], None] | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._on_evict = on_evict
        self.stats = CacheStats()

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[Hashable]:
        """Keys from least to most recently used."""
        return iter(list(self._data))

    def get(self, key: Hashable, default: Any = None) -> Any:
        """Return the value for *key* and mark it as most recently used."""
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self.stats.misses += 1
            return default
        self.stats.hits += 1
        self._data.move_to_end(key)
        return value

    def peek(self, key: Hashable, default: Any = None) -> Any:
        """Return the value for *key* without touching recency or statistics."""
        return self._data.get(key, default)

    def put(self, key: Hashable, value: Any) -> None:
        """Insert or replace *key*, making it the most recently used entry."""
        if len(self._data) >= self._capacity:
            self._evict_oldest()
        self._data[key] = value
        self._data.move_to_end(key)

    def pop(self, key: Hashable, default: Any = _MISSING) -> Any:
        """Remove *key* and return its value; this is not counted as an eviction."""
        if default is _MISSING:
            return self._data.pop(key)
        return self._data.pop(key, default)

    def clear(self) -> None:
        """Drop every entry (without calling *on_evict*) and keep the statistics."""
        self._data.clear()

    def resize(self, capacity: int) -> None:
        """Change the capacity, evicting least recently used entries if it shrinks."""
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        while len(self._data) > capacity:
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        key, value = self._data.popitem(last=False)
        self.stats.evictions += 1
        if self._on_evict is not None:
            self._on_evict(key, value)
