"""Recursive merging of configuration mappings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DELETE = object()
"""Sentinel: an override value of ``DELETE`` removes the key from the result."""


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Return a new dict with *override* merged into *base*.

    Nested mappings are merged key by key; any other value in *override* (lists
    included) replaces the one in *base*. Neither argument is modified, and the
    result shares no mutable state with them, so it can be edited freely.

    >>> deep_merge({"db": {"host": "localhost", "port": 5432}}, {"db": {"port": 6543}})
    {'db': {'host': 'localhost', 'port': 6543}}
    """
    result: dict[str, Any] = dict(base)
    for key, value in override.items():
        if value is DELETE:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = value
    return result


def merge_all(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge *layers* left to right (later layers win); ``None`` layers are skipped."""
    result: dict[str, Any] = {}
    for layer in layers:
        if layer:
            result = deep_merge(result, layer)
    return result
