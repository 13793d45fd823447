"""The :class:`Table` builder and its three output styles."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .cells import ALIGNMENTS, cell_text, clip, pad

STYLES = ("plain", "grid", "markdown")


class Table:
    """Collect rows, then :meth:`render` them.

    Columns whose values are all numbers (ignoring ``None``) are right-aligned
    unless an explicit alignment is given.

    >>> t = Table(["item", "qty"])
    >>> t.add_row("apple", 3)
    >>> print(t.render("grid"))
    +-------+-----+
    | item  | qty |
    +=======+=====+
    | apple |   3 |
    +-------+-----+
    """

    def __init__(
        self,
        headers: Sequence[str],
        align: Sequence[str] | None = None,
        max_col_width: int | None = None,
        float_format: str = ".2f",
    ) -> None:
        self.headers = [str(h) for h in headers]
        if align is not None:
            if len(align) != len(self.headers):
                raise ValueError("one alignment per column is required")
            for a in align:
                if a not in ALIGNMENTS:
                    raise ValueError(f"unknown alignment {a!r}")
        self.align = list(align) if align is not None else None
        self.max_col_width = max_col_width
        self.float_format = float_format
        self.rows: list[list[object]] = []

    def add_row(self, *values: object) -> None:
        if len(values) > len(self.headers):
            raise ValueError(f"row has {len(values)} values for {len(self.headers)} columns")
        self.rows.append(list(values) + [None] * (len(self.headers) - len(values)))

    def add_rows(self, rows: Iterable[Sequence[object]]) -> None:
        for row in rows:
            self.add_row(*row)

    # -- layout ----------------------------------------------------------------

    def _alignments(self) -> list[str]:
        if self.align is not None:
            return self.align
        result = []
        for i in range(len(self.headers)):
            values = [row[i] for row in self.rows if row[i] is not None]
            numeric = values and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
            )
            result.append("right" if numeric else "left")
        return result

    def _cells(self) -> list[list[str]]:
        """Header and body as text, clipped to ``max_col_width``."""
        texts = [list(self.headers)]
        texts += [[cell_text(v, self.float_format) for v in row] for row in self.rows]
        if self.max_col_width is not None:
            texts = [[clip(t, self.max_col_width) for t in row] for row in texts]
        return texts

    @staticmethod
    def _widths(cells: list[list[str]]) -> list[int]:
        return [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]

    # -- output ----------------------------------------------------------------

    def render(self, style: str = "plain") -> str:
        """The table as text in one of :data:`STYLES`."""
        if style not in STYLES:
            raise ValueError(f"unknown style {style!r}; choose from {STYLES}")
        cells = self._cells()
        widths = self._widths(cells)
        if style == "markdown":
            widths = [max(w, 3) for w in widths]
        aligns = self._alignments()
        header, body = cells[0], cells[1:]

        def line(row: list[str], head: bool = False) -> list[str]:
            return [pad(t, w, "left" if head and style != "markdown" else a) for t, w, a in zip(row, widths, aligns)]

        if style == "plain":
            out = ["  ".join(line(header, True))]
            out.append("  ".join("-" * w for w in widths))
            out += ["  ".join(line(row)) for row in body]
            return "\n".join(out)
        if style == "grid":
            rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
            head_rule = rule.replace("-", "=")
            out = [rule, "| " + " | ".join(line(header, True)) + " |", head_rule]
            out += ["| " + " | ".join(line(row)) + " |" for row in body]
            out.append(rule)
            return "\n".join(out)
        seps = []
        for w, a in zip(widths, aligns):
            if a == "left":
                seps.append(":" + "-" * (w - 1))
            elif a == "right":
                seps.append("-" * (w - 1) + ":")
            else:
                seps.append(":" + "-" * (w - 2) + ":")
        out = ["| " + " | ".join(line(header, True)) + " |", "| " + " | ".join(seps) + " |"]
        out += ["| " + " | ".join(line(row)) + " |" for row in body]
        return "\n".join(out)
