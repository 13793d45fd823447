"""Word wrapping.

Whitespace between words is collapsed; every output line, *including* its indent,
is at most ``width`` characters long, except that a word longer than the room on a
line is kept whole when ``break_long_words`` is false.
"""

from __future__ import annotations

import re

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def wrap(
    text: str,
    width: int = 70,
    initial_indent: str = "",
    subsequent_indent: str = "",
    break_long_words: bool = True,
) -> list[str]:
    """Wrap *text* into a list of lines of at most *width* characters.

    *initial_indent* starts the first line and *subsequent_indent* every other
    line (a "hanging indent" when only the latter is set).

    >>> wrap("The quick brown fox jumps over the lazy dog", 15)
    ['The quick brown', 'fox jumps over', 'the lazy dog']
    >>> wrap("- one two three four", 10, subsequent_indent="  ")
    ['- one two', '  three', '  four']
    """
    for indent in (initial_indent, subsequent_indent):
        if len(indent) >= width:
            raise ValueError(f"indent {indent!r} leaves no room in width {width}")
    words = text.split()
    lines: list[str] = []
    indent = initial_indent
    room = width - len(indent)
    current: list[str] = []
    used = 0

    def flush() -> None:
        nonlocal indent, current, used
        lines.append(indent + " ".join(current))
        indent = subsequent_indent
        current = []
        used = 0

    for word in words:
        needed = len(word) + (1 if current else 0)
        if used + needed <= room:
            current.append(word)
            used += needed
            continue
        if current:
            flush()
        while break_long_words and len(word) > room:
            current = [word[:room]]
            flush()
            word = word[room:]
        current = [word]
        used = len(word)
    if current:
        flush()
    return lines


def fill(text: str, width: int = 70, **kwargs) -> str:
    """Wrap every paragraph of *text* and join them with one blank line.

    Paragraphs are separated by blank (or whitespace-only) lines; line breaks inside
    a paragraph are treated as ordinary spaces.
    """
    paragraphs = [p for p in _PARAGRAPH_BREAK.split(text.strip()) if p.strip()]
    return "\n\n".join("\n".join(wrap(p, width, **kwargs)) for p in paragraphs)


def shorten(text: str, width: int, placeholder: str = " [...]") -> str:
    """Collapse whitespace and cut *text* at a word boundary to fit in *width*.

    >>> shorten("Hello  world, how are you?", 18)
    'Hello world, [...]'
    """
    words = text.split()
    joined = " ".join(words)
    if len(joined) <= width:
        return joined
    if len(placeholder.lstrip()) > width:
        raise ValueError("placeholder too large for width")
    kept: list[str] = []
    length = 0
    for word in words:
        extra = len(word) + (1 if kept else 0)
        if length + extra + len(placeholder) > width:
            break
        kept.append(word)
        length += extra
    if not kept:
        return placeholder.lstrip()
    return " ".join(kept) + placeholder
