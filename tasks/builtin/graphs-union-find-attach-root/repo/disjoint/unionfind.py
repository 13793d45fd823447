"""Union-find (disjoint-set forest) with union by size and path halving."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator


class DisjointSet:
    """A partition of elements into disjoint groups.

    Elements are added implicitly the first time they are used.

    >>> ds = DisjointSet()
    >>> ds.union("a", "b")
    True
    >>> ds.connected("a", "b"), ds.connected("a", "c")
    (True, False)
    """

    def __init__(self, elements: Iterable[Hashable] = ()) -> None:
        self._parent: dict[Hashable, Hashable] = {}
        self._size: dict[Hashable, int] = {}
        self._groups = 0
        for element in elements:
            self.add(element)

    def add(self, element: Hashable) -> None:
        if element not in self._parent:
            self._parent[element] = element
            self._size[element] = 1
            self._groups += 1

    def find(self, element: Hashable) -> Hashable:
        """The representative of *element*'s group."""
        self.add(element)
        parent = self._parent
        while parent[element] != element:
            parent[element] = parent[parent[element]]  # path halving
            element = parent[element]
        return element

    def union(self, a: Hashable, b: Hashable) -> bool:
        """Merge the groups of *a* and *b*; return ``False`` if they were already one."""
        root_a, root_b = self.find(a), self.find(b)
        if root_a == root_b:
            return False
        if self._size[root_a] < self._size[root_b]:
            root_a, root_b = root_b, root_a
            a, b = b, a
        # Attach the smaller tree below the larger one.
        self._parent[b] = root_a
        self._size[root_a] += self._size[root_b]
        self._groups -= 1
        return True

    def connected(self, a: Hashable, b: Hashable) -> bool:
        return self.find(a) == self.find(b)

    def size_of(self, element: Hashable) -> int:
        """Number of elements in *element*'s group."""
        return self._size[self.find(element)]

    def __len__(self) -> int:
        """Number of elements."""
        return len(self._parent)

    @property
    def group_count(self) -> int:
        return self._groups

    def groups(self) -> Iterator[list[Hashable]]:
        """Each group as a list, in order of first appearance of its elements."""
        by_root: dict[Hashable, list[Hashable]] = {}
        for element in self._parent:
            by_root.setdefault(self.find(element), []).append(element)
        return iter(by_root.values())
