"""Dijkstra's algorithm and helpers built on it."""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from itertools import count

from .graph import Graph


class NoPath(LookupError):
    """There is no route between the requested nodes."""


def shortest_paths(graph: Graph, source: Hashable) -> tuple[dict[Hashable, float], dict[Hashable, Hashable]]:
    """Cheapest cost from *source* to every reachable node, and each node's predecessor.

    >>> g = Graph([("a", "b", 1), ("b", "c", 1), ("a", "c", 5)])
    >>> shortest_paths(g, "a")[0]
    {'a': 0, 'b': 1, 'c': 2}
    """
    if source not in graph:
        raise KeyError(source)
    dist: dict[Hashable, float] = {source: 0}
    prev: dict[Hashable, Hashable] = {}
    tie = count()  # never compare nodes themselves
    heap = [(0, next(tie), source)]
    settled = {source}
    while heap:
        d, _, node = heapq.heappop(heap)
        for nxt, weight in graph.neighbours(node):
            if nxt in settled:
                continue
            settled.add(nxt)
            dist[nxt] = d + weight
            prev[nxt] = node
            heapq.heappush(heap, (d + weight, next(tie), nxt))
    return dist, prev


def _walk_back(prev: dict[Hashable, Hashable], source: Hashable, target: Hashable) -> list[Hashable]:
    path = [target]
    while path[-1] != source:
        path.append(prev[path[-1]])
    path.reverse()
    return path


def shortest_path(graph: Graph, source: Hashable, target: Hashable) -> tuple[float, list[Hashable]]:
    """``(cost, [source, ..., target])`` of a cheapest route; :class:`NoPath` if none."""
    if target not in graph:
        raise KeyError(target)
    dist, prev = shortest_paths(graph, source)
    if target not in dist:
        raise NoPath(f"no path from {source!r} to {target!r}")
    return dist[target], _walk_back(prev, source, target)


def within(graph: Graph, source: Hashable, budget: float) -> dict[Hashable, float]:
    """Nodes reachable from *source* at a cost of at most *budget*, with their costs."""
    dist, _ = shortest_paths(graph, source)
    return {node: cost for node, cost in dist.items() if cost <= budget}
