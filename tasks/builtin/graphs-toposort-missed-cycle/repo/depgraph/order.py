"""Topological ordering with Kahn's algorithm.

A dependency map says, for each node, which nodes must come *before* it:
``{"app": ["lib", "config"], "lib": ["config"]}``. Nodes that only appear as
dependencies (``"config"`` above) are nodes too; they simply have no dependencies
of their own. Results are deterministic: among nodes that are ready at the same
time, the smaller one (by ``sorted``) comes first.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Mapping

Graph = Mapping[Hashable, Iterable[Hashable]]


class CycleError(ValueError):
    """The dependencies contain a cycle; ``nodes`` are the nodes left unordered."""

    def __init__(self, nodes: list[Hashable]) -> None:
        super().__init__(f"dependency cycle among: {', '.join(map(str, nodes))}")
        self.nodes = nodes


def _normalise(deps: Graph) -> dict[Hashable, set[Hashable]]:
    """Every node (declared or only depended upon) mapped to its set of dependencies."""
    graph: dict[Hashable, set[Hashable]] = {}
    for node, requirements in deps.items():
        graph.setdefault(node, set()).update(requirements)
        for req in graph[node]:
            graph.setdefault(req, set())
    return graph


def _layers(deps: Graph) -> list[list[Hashable]]:
    """Kahn's algorithm, one layer of simultaneously-ready nodes at a time."""
    graph = _normalise(deps)
    waiting = {node: len(reqs) for node, reqs in graph.items()}
    users: dict[Hashable, list[Hashable]] = {node: [] for node in graph}
    for node, reqs in graph.items():
        for req in reqs:
            users[req].append(node)
    ready = sorted(node for node, count in waiting.items() if count == 0)
    layers: list[list[Hashable]] = []
    done = 0
    while ready:
        layers.append(ready)
        done += len(ready)
        following: list[Hashable] = []
        for node in ready:
            for user in users[node]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    following.append(user)
        ready = sorted(following)
    if done < len(deps):
        stuck = sorted(node for node, count in waiting.items() if count > 0)
        raise CycleError(stuck)
    return layers


def batches(deps: Graph) -> list[list[Hashable]]:
    """Groups of nodes that can be processed in parallel, in order.

    >>> batches({"app": ["lib", "config"], "lib": ["config"], "docs": []})
    [['config', 'docs'], ['lib'], ['app']]
    """
    return _layers(deps)


def toposort(deps: Graph) -> list[Hashable]:
    """All nodes, each after its dependencies; ties broken by ``sorted`` order.

    >>> toposort({"b": ["a"], "c": ["a"], "a": []})
    ['a', 'b', 'c']
    """
    graph = _normalise(deps)
    waiting = {node: len(reqs) for node, reqs in graph.items()}
    users: dict[Hashable, list[Hashable]] = {node: [] for node in graph}
    for node, reqs in graph.items():
        for req in reqs:
            users[req].append(node)
    heap = [node for node, count in waiting.items() if count == 0]
    heapq.heapify(heap)
    order: list[Hashable] = []
    while heap:
        node = heapq.heappop(heap)
        order.append(node)
        for user in users[node]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(heap, user)
    if len(order) < len(deps):
        raise CycleError(sorted(node for node, count in waiting.items() if count > 0))
    return order


def dependents_of(deps: Graph, node: Hashable) -> set[Hashable]:
    """Every node that depends on *node*, directly or transitively."""
    graph = _normalise(deps)
    result: set[Hashable] = set()
    frontier = [node]
    while frontier:
        current = frontier.pop()
        for other, reqs in graph.items():
            if current in reqs and other not in result:
                result.add(other)
                frontier.append(other)
    return result
