"""Template syntax.

``$name``              the value of ``name``
``${name}``            the same, delimited (``${name}s``)
``${user.email}``      attribute or key lookup, one dotted step at a time
``${name|upper}``      the value passed through a filter (filters can be chained)
``${name:-fallback}``  *fallback* when ``name`` is missing or ``None``
``$$``                 a literal dollar sign

A ``$`` that is not followed by a name, ``{`` or another ``$`` is kept as is, so
prices such as ``5$`` need no escaping.

A template is parsed once into literal text and placeholder parts, then rendered
any number of times.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

FILTERS: dict[str, Callable[[Any], Any]] = {
    "upper": lambda v: str(v).upper(),
    "lower": lambda v: str(v).lower(),
    "title": lambda v: str(v).title(),
    "strip": lambda v: str(v).strip(),
    "len": lambda v: len(v),
}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")


class TemplateError(ValueError):
    """A syntax error in a template, or a missing value while rendering."""


@dataclass(frozen=True)
class _Placeholder:
    path: tuple[str, ...]
    filters: tuple[str, ...] = ()
    default: str | None = None
    source: str = ""


@dataclass
class Template:
    """A parsed template.

    >>> Template("Hi $name, you owe $$${amount}").render(name="Ann", amount=3)
    'Hi Ann, you owe $3'
    """

    text: str
    parts: list[str | _Placeholder] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.parts = _parse(self.text)

    @property
    def names(self) -> list[str]:
        """Top-level names the template refers to, in order of first use."""
        seen: list[str] = []
        for part in self.parts:
            if isinstance(part, _Placeholder) and part.path[0] not in seen:
                seen.append(part.path[0])
        return seen

    def render(self, context: Mapping[str, Any] | None = None, /, **values: Any) -> str:
        """Render with *context* and keyword *values* (keywords win)."""
        scope = {**(context or {}), **values}
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                out.append(str(_evaluate(part, scope)))
        return "".join(out)


def _parse(text: str) -> list[str | _Placeholder]:
    parts: list[str | _Placeholder] = []
    literal: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "$":
            literal.append(ch)
            i += 1
            continue
        if text.startswith("$$", i):
            literal.append("$")
            i += 1
            continue
        match = _IDENT.match(text, i + 1)
        if match is None and not text.startswith("${", i):
            literal.append("$")
            i += 1
            continue
        if literal:
            parts.append("".join(literal))
            literal = []
        if text.startswith("${", i):
            end = text.find("}", i + 2)
            if end < 0:
                raise TemplateError(f"unclosed '${{' at offset {i}")
            parts.append(_parse_braced(text[i + 2 : end], text[i : end + 1]))
            i = end + 1
            continue
        parts.append(_Placeholder((match.group(),), source=text[i : match.end()]))
        i = match.end()
    if literal:
        parts.append("".join(literal))
    return parts


def _parse_braced(body: str, source: str) -> _Placeholder:
    default = None
    if ":-" in body:
        body, default = body.split(":-", 1)
    expr, *filters = (piece.strip() for piece in body.split("|"))
    if not _PATH.fullmatch(expr):
        raise TemplateError(f"invalid placeholder {source!r}")
    for name in filters:
        if name not in FILTERS:
            raise TemplateError(f"unknown filter {name!r} in {source!r}")
    return _Placeholder(tuple(expr.split(".")), tuple(filters), default, source)


def _lookup(scope: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = scope
    for step in path:
        if isinstance(value, Mapping):
            if step not in value:
                raise KeyError(step)
            value = value[step]
        elif hasattr(value, step):
            value = getattr(value, step)
        else:
            raise KeyError(step)
    return value


def _evaluate(part: _Placeholder, scope: Mapping[str, Any]) -> Any:
    try:
        value = _lookup(scope, part.path)
    except KeyError:
        value = None
        if part.default is None:
            raise TemplateError(f"no value for {part.source!r}") from None
    if value is None and part.default is not None:
        return part.default
    for name in part.filters:
        value = FILTERS[name](value)
    return value


def render(text: str, context: Mapping[str, Any] | None = None, /, **values: Any) -> str:
    """Parse and render *text* in one go."""
    return Template(text).render(context, **values)
