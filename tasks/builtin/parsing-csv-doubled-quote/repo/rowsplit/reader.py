"""Reading delimited text.

The dialect is the usual one: fields are separated by *delimiter*; a field that
starts with *quote* runs until the matching closing quote and may contain the
delimiter, line breaks, and the quote character itself written twice (``""``).
A quote character in the middle of an unquoted field is kept as an ordinary
character.
"""

from __future__ import annotations

from collections.abc import Iterator


class RowError(ValueError):
    """Raised for malformed input, such as an unterminated quoted field."""


def split_row(line: str, delimiter: str = ",", quote: str = '"', skip_initial_space: bool = False) -> list[str]:
    """Split one logical record into its fields.

    >>> split_row('a,"b,c",d')
    ['a', 'b,c', 'd']
    >>> split_row('x, y', skip_initial_space=True)
    ['x', 'y']
    """
    if len(delimiter) != 1 or len(quote) != 1:
        raise ValueError("delimiter and quote must be single characters")
    fields: list[str] = []
    field: list[str] = []
    in_quotes = False
    quoted = False  # the current field opened with a quote
    i, n = 0, len(line)
    if skip_initial_space:
        while i < n and line[i] == " ":
            i += 1
    while i < n:
        ch = line[i]
        if in_quotes:
            if ch == quote:
                if i + 1 < n and line[i + 1] == quote:
                    i += 1  # doubled quote: step over the second one
                else:
                    in_quotes = False
            else:
                field.append(ch)
        elif ch == delimiter:
            fields.append("".join(field))
            field = []
            quoted = False
            if skip_initial_space:
                while i + 1 < n and line[i + 1] == " ":
                    i += 1
        elif ch == quote and not field and not quoted:
            in_quotes = quoted = True
        else:
            field.append(ch)
        i += 1
    if in_quotes:
        raise RowError(f"unterminated quoted field in {line!r}")
    fields.append("".join(field))
    return fields


def _balanced(text: str, quote: str) -> bool:
    """Whether every quoted field opened in *text* is closed (doubled quotes count twice)."""
    return text.count(quote) % 2 == 0


def _records(text: str, quote: str) -> Iterator[str]:
    """Join physical lines into logical records, keeping line breaks inside quotes."""
    pending: list[str] = []
    for line in text.splitlines():
        pending.append(line)
        record = "\n".join(pending)
        if _balanced(record, quote):
            yield record
            pending = []
    if pending:
        raise RowError(f"unterminated quoted field starting at {pending[0]!r}")


def read_rows(text: str, delimiter: str = ",", quote: str = '"', skip_blank: bool = True) -> list[list[str]]:
    """Parse *text* into a list of rows. Blank lines are skipped unless told otherwise."""
    rows = []
    for record in _records(text, quote):
        if skip_blank and not record.strip():
            continue
        rows.append(split_row(record, delimiter, quote))
    return rows


def read_dicts(text: str, delimiter: str = ",", quote: str = '"') -> list[dict[str, str]]:
    """Parse *text* whose first row is a header into one dict per following row.

    Missing trailing fields become ``""``; extra fields raise :class:`RowError`.
    """
    rows = read_rows(text, delimiter, quote)
    if not rows:
        return []
    header, *body = rows
    result = []
    for number, row in enumerate(body, start=2):
        if len(row) > len(header):
            raise RowError(f"row {number} has {len(row)} fields, header has {len(header)}")
        row = row + [""] * (len(header) - len(row))
        result.append(dict(zip(header, row)))
    return result
