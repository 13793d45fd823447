"""Environment variables to nested settings, and back.

Variables are selected by a prefix (``MYAPP_``); the rest of the name is
lower-cased and split on a double underscore to build nested sections:
``MYAPP_DB__HOST=x`` becomes ``{"db": {"host": "x"}}``. Single underscores are
kept, so ``MYAPP_LOG_LEVEL`` is the key ``log_level``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def coerce(raw: str) -> Any:
    """Best-effort conversion of an environment string.

    Booleans (``true``/``no``/...), integers, floats, ``null`` and JSON arrays or
    objects are recognised; anything else stays a string (surrounding whitespace
    removed).

    >>> coerce(" 42 "), coerce("Yes"), coerce("[1, 2]"), coerce("3.5"), coerce("hello")
    (42, True, [1, 2], 3.5, 'hello')
    """
    text = raw.strip()
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    if lowered in ("null", "none"):
        return None
    if text[:1] in "[{" and text:
        try:
            return json.loads(text)
        except ValueError:
            return text
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def from_environ(
    prefix: str,
    environ: Mapping[str, str] | None = None,
    separator: str = "__",
    typed: bool = True,
) -> dict[str, Any]:
    """Collect the variables starting with *prefix* into a nested dict.

    >>> from_environ("APP_", {"APP_DB__HOST": "db", "APP_DEBUG": "1", "HOME": "/root"})
    {'db': {'host': 'db'}, 'debug': True}
    """
    if not prefix:
        raise ValueError("a prefix is required")
    source = os.environ if environ is None else environ
    result: dict[str, Any] = {}
    for name in sorted(source):
        if not name.startswith(prefix):
            continue
        key = name.lstrip(prefix)
        path = [part.lower() for part in key.split(separator)]
        if not all(path):
            raise ValueError(f"malformed variable name {name!r}")
        node = result
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"{name!r} conflicts with the value of {part!r}")
            node = child
        if isinstance(node.get(path[-1]), dict):
            raise ValueError(f"{name!r} conflicts with section {path[-1]!r}")
        value = source[name]
        node[path[-1]] = coerce(value) if typed else value
    return result


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def to_environ(settings: Mapping[str, Any], prefix: str, separator: str = "__") -> dict[str, str]:
    """The inverse of :func:`from_environ`: flatten *settings* into variables.

    >>> to_environ({"db": {"port": 5432}, "debug": False}, "APP_")
    {'APP_DB__PORT': '5432', 'APP_DEBUG': 'false'}
    """
    out: dict[str, str] = {}

    def walk(node: Mapping[str, Any], parts: list[str]) -> None:
        for key, value in node.items():
            if isinstance(value, Mapping) and value:
                walk(value, parts + [key])
            else:
                out[prefix + separator.join(p.upper() for p in parts + [key])] = _render(value)

    walk(settings, [])
    return out
