"""Version ranges: ``>=1.2.0 <2.0.0``, ``^1.2.3``, ``~1.4``, ``1.x`` and ``||`` unions."""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable

from .version import InvalidVersion, Version

_OPS = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
    "": operator.eq,
}
_COMPARATOR = re.compile(r"^(>=|<=|>|<|=|\^|~)?\s*v?(.+)$")


def _partial(text: str) -> tuple[int, ...]:
    """``"1.2"`` -> ``(1, 2)``; ``x`` and ``*`` end the tuple."""
    parts: list[int] = []
    for piece in text.split("."):
        if piece in ("x", "X", "*"):
            break
        if not piece.isdigit():
            raise InvalidVersion(f"bad version in range: {text!r}")
        parts.append(int(piece))
    return tuple(parts)


def _upper(parts: tuple[int, ...]) -> Version:
    """Smallest release above every version matching the partial *parts*."""
    if len(parts) == 1:
        return Version(parts[0] + 1, 0, 0)
    return Version(parts[0], parts[1] + 1, 0)


def _expand(token: str) -> list[tuple[str, Version]]:
    """Turn one comparator token into plain ``(op, version)`` pairs."""
    match = _COMPARATOR.match(token)
    if match is None:
        raise InvalidVersion(f"bad comparator: {token!r}")
    op, rest = match[1] or "", match[2]
    if "-" in rest or rest.count(".") == 2 and not any(c in rest for c in "xX*"):
        version = Version.parse(rest)
        if op == "^":
            if version.major:
                upper = Version(version.major + 1, 0, 0)
            elif version.minor:
                upper = Version(0, version.minor + 1, 0)
            else:
                upper = Version(0, 0, version.patch + 1)
            return [(">=", version), ("<", upper)]
        if op == "~":
            return [(">=", version), ("<", Version(version.major, version.minor + 1, 0))]
        return [(op, version)]
    parts = _partial(rest)
    if not parts:
        return []
    lower = Version(*(parts + (0, 0, 0))[:3])
    if len(parts) == 3:
        return [(op, lower)]
    if op in ("", "=", "^", "~"):
        if op == "^" and len(parts) == 2 and parts[0] > 0:
            parts = parts[:1]
        return [(">=", lower), ("<", _upper(parts))]
    if op in ("<", ">="):
        return [(op, lower)]
    # ">1.2" means ">=1.3.0" and "<=1.2" means "<1.3.0".
    return [(">=" if op == ">" else "<", _upper(parts))]


class Range:
    """A set of versions described by a range string.

    >>> Range("^1.2.0").contains(Version.parse("1.9.9"))
    True
    """

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._sets: list[list[tuple[str, Version]]] = []
        for alternative in spec.split("||"):
            comparators: list[tuple[str, Version]] = []
            for token in alternative.split():
                comparators.extend(_expand(token))
            self._sets.append(comparators)

    def __repr__(self) -> str:
        return f"Range({self.spec!r})"

    def contains(self, version: Version, include_prerelease: bool = False) -> bool:
        """Whether *version* is in the range; pre-releases only on request."""
        if version.is_prerelease and not include_prerelease:
            return False
        return any(all(_OPS[op](version, bound) for op, bound in group) for group in self._sets)


def _coerce(version: Version | str) -> Version:
    return version if isinstance(version, Version) else Version.parse(version)


def satisfies(version: Version | str, spec: str, include_prerelease: bool = False) -> bool:
    """Whether *version* matches the range *spec*."""
    return Range(spec).contains(_coerce(version), include_prerelease)


def sort_versions(versions: Iterable[Version | str], reverse: bool = False) -> list[Version]:
    """Sort versions by precedence."""
    return sorted((_coerce(v) for v in versions), reverse=reverse)


def max_satisfying(
    versions: Iterable[Version | str], spec: str, include_prerelease: bool = False
) -> Version | None:
    """The highest version matching *spec*, or ``None``."""
    rng = Range(spec)
    matching = [v for v in map(_coerce, versions) if rng.contains(v, include_prerelease)]
    return max(matching, default=None)
