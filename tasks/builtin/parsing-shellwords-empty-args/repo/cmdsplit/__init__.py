"""cmdsplit: split and quote command lines the way a POSIX shell does.

Only quoting is handled: no variable expansion, globbing or redirection.
"""

from .lexer import SplitError, split
from .quoting import join, parse_command, quote

__all__ = ["SplitError", "join", "parse_command", "quote", "split"]
