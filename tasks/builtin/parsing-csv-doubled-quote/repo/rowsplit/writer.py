"""Writing delimited text that :mod:`rowsplit.reader` (and spreadsheets) read back."""

from __future__ import annotations

from collections.abc import Iterable


def _needs_quotes(field: str, delimiter: str, quote: str) -> bool:
    return (
        field == ""
        or delimiter in field
        or quote in field
        or "\n" in field
        or "\r" in field
        or field != field.strip()
    )


def join_row(fields: Iterable[object], delimiter: str = ",", quote: str = '"') -> str:
    """Format one row. ``None`` is written as an empty unquoted field.

    Fields containing the delimiter, the quote character, a line break, or
    surrounding spaces are quoted, with quote characters doubled inside.

    >>> join_row(["a", "b,c", None])
    'a,"b,c",'
    """
    out = []
    for value in fields:
        if value is None:
            out.append("")
            continue
        text = str(value)
        if _needs_quotes(text, delimiter, quote):
            text = quote + text.replace(quote, quote * 2) + quote
        out.append(text)
    return delimiter.join(out)


def write_rows(rows: Iterable[Iterable[object]], delimiter: str = ",", quote: str = '"') -> str:
    """Format several rows, each terminated by ``\\n``."""
    return "".join(join_row(row, delimiter, quote) + "\n" for row in rows)
