"""gridtext: render rows of data as aligned plain-text, grid or Markdown tables."""

from .cells import cell_text, clip, pad
from .table import Table

__all__ = ["Table", "cell_text", "clip", "pad"]
