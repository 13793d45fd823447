"""Tokenizer for POSIX-style command lines."""

from __future__ import annotations

_WHITESPACE = " \t\r\n"
# Inside double quotes a backslash only escapes these characters; elsewhere it is literal.
_DQ_ESCAPABLE = '$`"\\\n'


class SplitError(ValueError):
    """Raised for an unterminated quote or a trailing backslash."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.position = position


def split(line: str, comments: bool = False) -> list[str]:
    """Split *line* into arguments following POSIX shell quoting rules.

    * Unquoted whitespace separates arguments.
    * Single quotes preserve everything up to the next single quote.
    * Double quotes preserve everything except ``\\`` before ``$ ` " \\`` or newline.
    * An unquoted backslash escapes the next character; backslash-newline is a
      line continuation and disappears.
    * Quoted and unquoted parts written next to each other form one argument:
      ``--name="a b"`` is the single argument ``--name=a b``.
    * With *comments*, an unquoted ``#`` at the start of an argument ends the line.

    >>> split('cp "my file.txt" backup/')
    ['cp', 'my file.txt', 'backup/']
    """
    tokens: list[str] = []
    buf: list[str] = []
    state: str | None = None  # None outside quotes, otherwise the open quote character
    quote_start = 0
    i = 0
    n = len(line)
    while i < n:
        ch = line[i]
        if state is None:
            if ch in _WHITESPACE:
                if buf:
                    tokens.append("".join(buf))
                    buf = []
            elif ch == "\\":
                if i + 1 >= n:
                    raise SplitError("trailing backslash", i)
                if line[i + 1] != "\n":
                    buf.append(line[i + 1])
                i += 1
            elif ch in "'\"":
                state = ch
                quote_start = i
            elif ch == "#" and comments and not buf:
                break
            else:
                buf.append(ch)
        elif state == "'":
            if ch == "'":
                state = None
            else:
                buf.append(ch)
        else:
            if ch == '"':
                state = None
            elif ch == "\\" and i + 1 < n and line[i + 1] in _DQ_ESCAPABLE:
                if line[i + 1] != "\n":
                    buf.append(line[i + 1])
                i += 1
            else:
                buf.append(ch)
        i += 1
    if state is not None:
        raise SplitError(f"unterminated {state} quote", quote_start)
    if buf:
        tokens.append("".join(buf))
    return tokens
