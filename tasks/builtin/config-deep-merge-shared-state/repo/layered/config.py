"""A small configuration object with dotted-path access."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from .merge import merge_all

_MISSING = object()


class Config:
    """Configuration assembled from layers, read and written with dotted keys.

    >>> cfg = Config({"db": {"host": "localhost"}}, {"db": {"port": 5432}})
    >>> cfg.get("db.port")
    5432
    >>> cfg.set("db.user", "app")
    >>> cfg.as_dict()
    {'db': {'host': 'localhost', 'port': 5432, 'user': 'app'}}
    """

    def __init__(self, *layers: Mapping[str, Any] | None) -> None:
        self._data = merge_all(*layers)

    @classmethod
    def from_json(cls, defaults: Mapping[str, Any], text: str) -> Config:
        """Defaults overlaid with a JSON document."""
        loaded = json.loads(text) if text.strip() else {}
        if not isinstance(loaded, dict):
            raise ValueError("a JSON configuration must be an object")
        return cls(defaults, loaded)

    def get(self, path: str, default: Any = _MISSING) -> Any:
        node: Any = self._data
        for part in path.split("."):
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif default is _MISSING:
                raise KeyError(path)
            else:
                return default
        return node

    def set(self, path: str, value: Any) -> None:
        """Set *path*, creating intermediate sections as needed."""
        *parents, leaf = path.split(".")
        node = self._data
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[leaf] = value

    def overlay(self, *layers: Mapping[str, Any] | None) -> Config:
        """A new :class:`Config` with *layers* merged on top of this one."""
        return Config(self._data, *layers)

    def __contains__(self, path: str) -> bool:
        try:
            self.get(path)
        except KeyError:
            return False
        return True

    def keys(self) -> Iterator[str]:
        """Dotted paths of every leaf value."""

        def walk(node: Mapping[str, Any], prefix: str) -> Iterator[str]:
            for key, value in node.items():
                if isinstance(value, Mapping) and value:
                    yield from walk(value, f"{prefix}{key}.")
                else:
                    yield prefix + key

        return walk(self._data, "")

    def as_dict(self) -> dict[str, Any]:
        """A deep copy of the merged data."""
        return copy.deepcopy(self._data)
