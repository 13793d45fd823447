"""lrukit: a small least-recently-used cache and a memoizing decorator built on it."""

from .cache import CacheStats, LRUCache
from .memo import memoize

__all__ = ["CacheStats", "LRUCache", "memoize"]
