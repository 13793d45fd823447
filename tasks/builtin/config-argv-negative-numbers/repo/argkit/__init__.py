"""argkit: a small declarative command-line parser."""

from .parser import ArgError, ArgParser

__all__ = ["ArgError", "ArgParser"]
