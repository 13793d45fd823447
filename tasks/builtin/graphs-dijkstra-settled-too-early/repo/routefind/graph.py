"""A directed graph with non-negative edge weights."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator


class Graph:
    """Adjacency-map graph. Adding an edge twice keeps the cheaper weight.

    >>> g = Graph()
    >>> g.add_edge("a", "b", 2.5, both_ways=True)
    >>> sorted(g.neighbours("b"))
    [('a', 2.5)]
    """

    def __init__(self, edges: Iterable[tuple[Hashable, Hashable, float]] = ()) -> None:
        self._adj: dict[Hashable, dict[Hashable, float]] = {}
        for u, v, w in edges:
            self.add_edge(u, v, w)

    def add_node(self, node: Hashable) -> None:
        self._adj.setdefault(node, {})

    def add_edge(self, u: Hashable, v: Hashable, weight: float = 1.0, both_ways: bool = False) -> None:
        if weight < 0:
            raise ValueError(f"negative weight {weight} on edge {u!r} -> {v!r}")
        self.add_node(u)
        self.add_node(v)
        if weight < self._adj[u].get(v, float("inf")):
            self._adj[u][v] = weight
        if both_ways:
            self.add_edge(v, u, weight)

    def neighbours(self, node: Hashable) -> Iterator[tuple[Hashable, float]]:
        return iter(self._adj.get(node, {}).items())

    def __contains__(self, node: Hashable) -> bool:
        return node in self._adj

    def __len__(self) -> int:
        return len(self._adj)

    def nodes(self) -> list[Hashable]:
        return list(self._adj)
