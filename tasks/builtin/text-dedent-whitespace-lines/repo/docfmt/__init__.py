"""docfmt: helpers for reformatting indented text blocks and docstrings."""

from .blocks import common_indent, dedent, indent, strip_margin
from .docstrings import clean_docstring, summary_line

__all__ = ["clean_docstring", "common_indent", "dedent", "indent", "strip_margin", "summary_line"]
