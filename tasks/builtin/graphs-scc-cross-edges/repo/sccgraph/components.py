"""Tarjan's strongly connected components algorithm and what is built on it.

Graphs are mappings from a node to the nodes it has edges to; nodes that only
appear as edge targets are nodes too. Component lists come out in reverse
topological order of the condensation (a component is listed before every
component that has an edge into it), with the nodes inside a component in
discovery order.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable, Mapping

Graph = Mapping[Hashable, Iterable[Hashable]]


def _adjacency(graph: Graph) -> dict[Hashable, list[Hashable]]:
    adj: dict[Hashable, list[Hashable]] = {}
    for node, targets in graph.items():
        adj.setdefault(node, [])
        for target in targets:
            adj[node].append(target)
            adj.setdefault(target, [])
    return adj


def strongly_connected_components(graph: Graph) -> list[list[Hashable]]:
    """Partition the nodes of *graph* into strongly connected components.

    >>> strongly_connected_components({"a": ["b"], "b": ["a", "c"], "c": []})
    [['c'], ['a', 'b']]
    """
    adj = _adjacency(graph)
    index: dict[Hashable, int] = {}
    low: dict[Hashable, int] = {}
    stack: list[Hashable] = []
    on_stack: set[Hashable] = set()
    components: list[list[Hashable]] = []

    def visit(node: Hashable) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in adj[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            else:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            # `node` is the root of a component: everything above it on the stack.
            start = stack.index(node)
            component = stack[start:]
            del stack[start:]
            on_stack.difference_update(component)
            components.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 2 * len(adj) + 100))
    try:
        for node in adj:
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return components


def cyclic_nodes(graph: Graph) -> set[Hashable]:
    """Nodes that lie on at least one cycle (self-loops included)."""
    adj = _adjacency(graph)
    result: set[Hashable] = set()
    for component in strongly_connected_components(adj):
        if len(component) > 1 or component[0] in adj[component[0]]:
            result.update(component)
    return result


def has_cycle(graph: Graph) -> bool:
    """Whether *graph* contains a directed cycle."""
    return bool(cyclic_nodes(graph))


def condensation(graph: Graph) -> tuple[list[list[Hashable]], dict[int, set[int]]]:
    """The components and the DAG between them (edges between component indices).

    >>> comps, dag = condensation({"a": ["b"], "b": ["a", "c"], "c": []})
    >>> comps, dag
    ([['c'], ['a', 'b']], {0: set(), 1: {0}})
    """
    adj = _adjacency(graph)
    components = strongly_connected_components(adj)
    owner = {node: i for i, component in enumerate(components) for node in component}
    dag: dict[int, set[int]] = {i: set() for i in range(len(components))}
    for node, targets in adj.items():
        for target in targets:
            if owner[node] != owner[target]:
                dag[owner[node]].add(owner[target])
    return components, dag
