"""rowsplit: a tiny, forgiving reader and writer for comma-separated values."""

from .reader import RowError, read_dicts, read_rows, split_row
from .writer import join_row, write_rows

__all__ = ["RowError", "join_row", "read_dicts", "read_rows", "split_row", "write_rows"]
