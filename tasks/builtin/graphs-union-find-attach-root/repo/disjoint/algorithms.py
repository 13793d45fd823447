"""Connected components and Kruskal's minimum spanning tree."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from .unionfind import DisjointSet


def components(nodes: Iterable[Hashable], edges: Iterable[tuple[Hashable, Hashable]]) -> list[list[Hashable]]:
    """Connected components of an undirected graph, each in order of first appearance.

    >>> components("abcde", [("a", "b"), ("d", "c")])
    [['a', 'b'], ['c', 'd'], ['e']]
    """
    ds = DisjointSet(nodes)
    for u, v in edges:
        ds.union(u, v)
    return list(ds.groups())


def minimum_spanning_tree(
    edges: Iterable[tuple[Hashable, Hashable, float]],
) -> tuple[float, list[tuple[Hashable, Hashable, float]]]:
    """Kruskal's algorithm: total weight and edges of a minimum spanning forest.

    Edges of equal weight are considered in input order.

    >>> minimum_spanning_tree([("a", "b", 4), ("b", "c", 1), ("a", "c", 2)])
    (3, [('b', 'c', 1), ('a', 'c', 2)])
    """
    ds = DisjointSet()
    chosen: list[tuple[Hashable, Hashable, float]] = []
    total: float = 0
    for u, v, w in sorted(edges, key=lambda e: e[2]):
        if ds.union(u, v):
            chosen.append((u, v, w))
            total += w
    return total, chosen
