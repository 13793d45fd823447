"""routefind: weighted graphs and cheapest routes through them."""

from .graph import Graph
from .search import NoPath, shortest_path, shortest_paths, within

__all__ = ["Graph", "NoPath", "shortest_path", "shortest_paths", "within"]
