"""disjoint: union-find and the graph algorithms that rely on it."""

from .algorithms import components, minimum_spanning_tree
from .unionfind import DisjointSet

__all__ = ["DisjointSet", "components", "minimum_spanning_tree"]
