"""``@memoize``: cache a function's results in an :class:`LRUCache`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .cache import LRUCache

F = TypeVar("F", bound=Callable[..., Any])
_SENTINEL = object()


def _make_key(args: tuple, kwargs: dict) -> tuple:
    if not kwargs:
        return args
    return args + (_SENTINEL,) + tuple(sorted(kwargs.items()))


def memoize(maxsize: int = 128) -> Callable[[F], F]:
    """Decorator caching up to *maxsize* results, keyed by the call's arguments.

    All arguments must be hashable. The wrapper exposes ``cache`` (the underlying
    :class:`LRUCache`) and ``cache_clear()``.

    >>> @memoize(maxsize=2)
    ... def square(x):
    ...     return x * x
    >>> square(3), square(3), square.cache.stats.hits
    (9, 9, 1)
    """

    def decorator(func: F) -> F:
        cache = LRUCache(maxsize)
        missing = object()

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = _make_key(args, kwargs)
            result = cache.get(key, missing)
            if result is missing:
                result = func(*args, **kwargs)
                cache.put(key, result)
            return result

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorator
