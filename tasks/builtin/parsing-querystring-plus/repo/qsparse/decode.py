"""Percent-decoding of URL components (RFC 3986, with the form-encoding extension)."""

from __future__ import annotations

_HEX = "0123456789abcdefABCDEF"


def percent_decode(text: str, encoding: str = "utf-8", errors: str = "replace") -> str:
    """Decode ``%XX`` escapes in *text*.

    Escapes are collected as raw bytes and decoded together, so multi-byte UTF-8
    sequences such as ``%C3%A9`` become a single character. A ``%`` that is not
    followed by two hex digits is kept literally, as browsers do.

    >>> percent_decode("caf%C3%A9")
    'café'
    >>> percent_decode("100%")
    '100%'
    """
    if "%" not in text:
        return text
    out: list[str] = []
    pending = bytearray()
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "%" and i + 2 < n and text[i + 1] in _HEX and text[i + 2] in _HEX:
            pending.append(int(text[i + 1 : i + 3], 16))
            i += 3
            continue
        if pending:
            out.append(pending.decode(encoding, errors))
            pending.clear()
        out.append(ch)
        i += 1
    if pending:
        out.append(pending.decode(encoding, errors))
    return "".join(out)


def decode_component(text: str, plus_is_space: bool = True, encoding: str = "utf-8") -> str:
    """Decode one key or value of a query string.

    In ``application/x-www-form-urlencoded`` data a literal ``+`` stands for a
    space, while a real plus sign is sent as ``%2B``. Pass ``plus_is_space=False``
    for plain RFC 3986 components, where ``+`` is an ordinary character.
    """
    decoded = percent_decode(text, encoding=encoding)
    if plus_is_space:
        decoded = decoded.replace("+", " ")
    return decoded
