"""Parsing and building ``key=value&key=value`` query strings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .decode import decode_component

# Characters left as-is when encoding; everything else is percent-escaped.
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def parse_qsl(
    query: str,
    keep_blank_values: bool = False,
    separator: str = "&",
    plus_is_space: bool = True,
) -> list[tuple[str, str]]:
    """Split *query* into a list of ``(key, value)`` pairs, in order.

    A leading ``?`` is ignored. A field without ``=`` has an empty value. Fields
    whose value is empty are dropped unless *keep_blank_values* is true; empty
    fields (``a=1&&b=2``) are always dropped.

    >>> parse_qsl("a=1&b=two+words&a=3")
    [('a', '1'), ('b', 'two words'), ('a', '3')]
    """
    if not separator:
        raise ValueError("separator must be a non-empty string")
    if query.startswith("?"):
        query = query[1:]
    pairs: list[tuple[str, str]] = []
    for field in query.split(separator):
        if not field:
            continue
        key, _, value = field.partition("=")
        if not value and not keep_blank_values:
            continue
        pairs.append(
            (
                decode_component(key, plus_is_space=plus_is_space),
                decode_component(value, plus_is_space=plus_is_space),
            )
        )
    return pairs


def parse_qs(query: str, keep_blank_values: bool = False, separator: str = "&") -> dict[str, list[str]]:
    """Parse *query* into a dict mapping each key to the list of its values.

    >>> parse_qs("tag=a&tag=b&page=2")
    {'tag': ['a', 'b'], 'page': ['2']}
    """
    result: dict[str, list[str]] = {}
    for key, value in parse_qsl(query, keep_blank_values=keep_blank_values, separator=separator):
        result.setdefault(key, []).append(value)
    return result


def _encode(text: str, space_as_plus: bool) -> str:
    out: list[str] = []
    for ch in text:
        if ch in _SAFE:
            out.append(ch)
        elif ch == " " and space_as_plus:
            out.append("+")
        else:
            out.extend(f"%{byte:02X}" for byte in ch.encode("utf-8"))
    return "".join(out)


def build_query(
    params: Mapping[str, object] | Iterable[tuple[str, object]],
    space_as_plus: bool = True,
) -> str:
    """Build a query string from a mapping or an iterable of pairs.

    List and tuple values in a mapping produce one field per item, so
    ``build_query(parse_qs(q))`` reproduces the fields of *q*. ``None`` values are
    skipped; other values are converted with ``str``.

    >>> build_query({"q": "fish & chips", "page": 2})
    'q=fish+%26+chips&page=2'
    """
    items = params.items() if isinstance(params, Mapping) else params
    fields: list[str] = []
    for key, value in items:
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if item is None:
                continue
            fields.append(f"{_encode(str(key), space_as_plus)}={_encode(str(item), space_as_plus)}")
    return "&".join(fields)
