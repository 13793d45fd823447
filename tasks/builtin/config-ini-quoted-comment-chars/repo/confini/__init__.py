"""confini: a strict, dependency-free INI reader with typed getters."""

from .parser import IniError, IniFile, loads

__all__ = ["IniError", "IniFile", "loads"]
