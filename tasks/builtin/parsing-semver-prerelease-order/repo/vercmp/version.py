"""The :class:`Version` value type: parsing, ordering and bumping."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

_SEMVER = re.compile(
    r"^v?(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


class InvalidVersion(ValueError):
    """Raised when a string is not a valid semantic version."""


@total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    """A semantic version ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``.

    Versions are ordered by precedence as defined by SemVer 2.0.0: build metadata is
    ignored, and a pre-release sorts before the release it precedes.

    >>> Version.parse("1.2.3-rc.1") < Version.parse("1.2.3")
    True
    """

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse *text*; a leading ``v`` (``v1.2.3``) is accepted."""
        match = _SEMVER.match(text.strip())
        if match is None:
            raise InvalidVersion(f"not a semantic version: {text!r}")
        pre = tuple(match["pre"].split(".")) if match["pre"] else ()
        for ident in pre:
            if ident.isdigit() and len(ident) > 1 and ident.startswith("0"):
                raise InvalidVersion(f"numeric identifier {ident!r} has a leading zero in {text!r}")
        build = tuple(match["build"].split(".")) if match["build"] else ()
        return cls(int(match["major"]), int(match["minor"]), int(match["patch"]), pre, build)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Version('{self}')"

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def core(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    # -- ordering --------------------------------------------------------------

    def _key(self) -> tuple:
        """Precedence key. A release (no pre-release) sorts after all its pre-releases."""
        if not self.prerelease:
            return (self.core, 1, ())
        return (self.core, 0, self.prerelease)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # -- bumping ---------------------------------------------------------------

    def bump(self, part: str, label: str = "rc") -> Version:
        """Return the next version: *part* is ``major``, ``minor``, ``patch`` or ``pre``.

        ``pre`` increments the last numeric pre-release identifier (``rc.1`` ->
        ``rc.2``), or starts ``<label>.1`` on the next patch release when the version
        is not a pre-release. Build metadata is dropped.
        """
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, 0)
        if part == "patch":
            if self.prerelease:
                return Version(*self.core)
            return Version(self.major, self.minor, self.patch + 1)
        if part == "pre":
            if not self.prerelease:
                return Version(self.major, self.minor, self.patch + 1, (label, "1"))
            *head, last = self.prerelease
            if last.isdigit():
                return Version(*self.core, (*head, str(int(last) + 1)))
            return Version(*self.core, (*self.prerelease, "1"))
        raise ValueError(f"unknown version part {part!r}")
