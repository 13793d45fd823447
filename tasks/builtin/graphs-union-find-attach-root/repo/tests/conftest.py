import pytest

from disjoint import DisjointSet


@pytest.fixture
def ds():
    """An empty DisjointSet: elements are added as the test uses them."""
    return DisjointSet()
