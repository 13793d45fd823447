"""vercmp: parse, compare and match semantic versions (SemVer 2.0.0)."""

from .ranges import Range, max_satisfying, satisfies, sort_versions
from .version import InvalidVersion, Version

__all__ = ["InvalidVersion", "Range", "Version", "max_satisfying", "satisfies", "sort_versions"]

__version__ = "1.3.0"
