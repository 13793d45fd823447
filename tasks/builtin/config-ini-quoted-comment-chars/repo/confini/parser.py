"""INI syntax accepted by :func:`loads`.

* ``[section]`` headers; keys before the first header go to the ``""`` section.
* ``key = value`` or ``key: value``; keys are case-insensitive (stored lower-case).
* Full-line comments start with ``#`` or ``;``.
* Inline comments start with ``#`` or ``;`` preceded by whitespace
  (``port = 80  ; http``). A ``#`` or ``;`` that is not preceded by whitespace
  is part of the value (``url = http://host/#top``).
* A value may be wrapped in double quotes to keep leading/trailing spaces or
  comment characters; inside quotes ``\\"`` and ``\\\\`` are escapes.
* Indented lines continue the previous value (joined with a newline).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_SECTION = re.compile(r"^\[(?P<name>[^\]]+)\]\s*(?:[#;].*)?$")
_INLINE_COMMENT = re.compile(r"\s[#;].*$")


class IniError(ValueError):
    """A syntax error, reported with its line number."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


def _strip_comment(value: str) -> str:
    """Remove an inline comment from a raw value."""
    return _INLINE_COMMENT.sub("", value).strip()


def _unquote(value: str, lineno: int) -> str:
    if not value.startswith('"'):
        return value
    if len(value) < 2 or not value.endswith('"'):
        raise IniError(f"unterminated quoted value {value!r}", lineno)
    body = value[1:-1]
    out: list[str] = []
    chars: Iterator[str] = iter(body)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt not in ('"', "\\"):
                raise IniError(f"invalid escape \\{nxt} in {value!r}", lineno)
            out.append(nxt)
        elif ch == '"':
            raise IniError(f"unescaped quote inside {value!r}", lineno)
        else:
            out.append(ch)
    return "".join(out)


class IniFile:
    """Parsed sections: ``ini["server"]["port"]`` or the typed getters."""

    def __init__(self, sections: dict[str, dict[str, str]]) -> None:
        self.sections = sections

    def __getitem__(self, section: str) -> dict[str, str]:
        return self.sections[section]

    def get(self, section: str, key: str, default: str | None = None) -> str | None:
        return self.sections.get(section, {}).get(key.lower(), default)

    def getint(self, section: str, key: str, default: int | None = None) -> int | None:
        value = self.get(section, key)
        return default if value is None else int(value)

    def getbool(self, section: str, key: str, default: bool | None = None) -> bool | None:
        value = self.get(section, key)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in ("1", "yes", "true", "on"):
            return True
        if lowered in ("0", "no", "false", "off"):
            return False
        raise ValueError(f"not a boolean: {value!r}")

    def getlist(self, section: str, key: str, sep: str = ",") -> list[str]:
        value = self.get(section, key)
        if not value:
            return []
        return [item.strip() for item in value.replace("\n", sep).split(sep) if item.strip()]


def loads(text: str) -> IniFile:
    """Parse INI *text*."""
    sections: dict[str, dict[str, str]] = {"": {}}
    current = sections[""]
    last_key: str | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if line[0] in " \t" and last_key is not None:
            current[last_key] += "\n" + _unquote(_strip_comment(stripped), lineno)
            continue
        match = _SECTION.match(stripped)
        if match:
            name = match["name"].strip()
            if name in sections and name:
                raise IniError(f"duplicate section [{name}]", lineno)
            current = sections.setdefault(name, {})
            last_key = None
            continue
        key, sep, raw = _split_assignment(stripped)
        if not sep:
            raise IniError(f"expected 'key = value', got {stripped!r}", lineno)
        key = key.strip().lower()
        if not key:
            raise IniError("empty key", lineno)
        if key in current:
            raise IniError(f"duplicate key {key!r}", lineno)
        current[key] = _unquote(_strip_comment(raw), lineno)
        last_key = key
    if not sections[""]:
        del sections[""]
    return IniFile(sections)


def _split_assignment(line: str) -> tuple[str, str, str]:
    """Split at the first ``=`` or ``:``, whichever comes first."""
    positions = [i for i in (line.find("="), line.find(":")) if i >= 0]
    if not positions:
        return line, "", ""
    i = min(positions)
    return line[:i], line[i], line[i + 1 :]
