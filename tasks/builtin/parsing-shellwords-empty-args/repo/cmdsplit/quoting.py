"""Quoting arguments for a shell, and reading ``NAME=value cmd args`` lines."""

from __future__ import annotations

import re

from .lexer import split

_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII)
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


def quote(arg: str) -> str:
    """Return *arg* quoted so that :func:`split` reads it back as one argument.

    >>> quote("two words")
    "'two words'"
    """
    if not arg:
        return "''"
    if _UNSAFE.search(arg) is None:
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def join(args: list[str]) -> str:
    """Quote each argument and join them with spaces; the inverse of :func:`split`."""
    return " ".join(quote(arg) for arg in args)


def parse_command(line: str) -> tuple[dict[str, str], list[str]]:
    """Split *line* into leading environment assignments and the argument vector.

    >>> parse_command('LANG=C TZ="Europe/Paris" date +%H')
    ({'LANG': 'C', 'TZ': 'Europe/Paris'}, ['date', '+%H'])
    """
    words = split(line, comments=True)
    env: dict[str, str] = {}
    index = 0
    while index < len(words):
        match = _ASSIGNMENT.match(words[index])
        if match is None:
            break
        env[match.group(1)] = match.group(2)
        index += 1
    return env, words[index:]
