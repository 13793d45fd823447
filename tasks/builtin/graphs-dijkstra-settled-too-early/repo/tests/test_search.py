import pytest

from routefind import Graph, NoPath, shortest_path, shortest_paths, within


@pytest.fixture
def tree():
    return Graph([("r", "x", 2), ("r", "y", 4), ("x", "z", 1)])


class TestGraph:
    def test_cheaper_duplicate_edge_wins(self):
        g = Graph([("a", "b", 5), ("a", "b", 2), ("a", "b", 9)])
        assert list(g.neighbours("a")) == [("b", 2)]

    def test_negative_weight_rejected(self):
        with pytest.raises(ValueError):
            Graph().add_edge("a", "b", -1)

    def test_both_ways(self):
        g = Graph()
        g.add_edge("x", "y", 3, both_ways=True)
        assert (list(g.neighbours("y")), len(g)) == ([("x", 3)], 2)


class TestSearch:
    def test_line(self):
        g = Graph([("a", "b", 1), ("b", "c", 2), ("c", "d", 3)])
        assert shortest_path(g, "a", "d") == (6, ["a", "b", "c", "d"])

    def test_source_to_itself(self):
        g = Graph([("a", "b", 1)])
        assert shortest_path(g, "a", "a") == (0, ["a"])

    @pytest.mark.parametrize(
        ("target", "error"),
        [
            pytest.param("c", NoPath, id="no-route"),
            pytest.param("zzz", KeyError, id="unknown-node"),
        ],
    )
    def test_unreachable(self, target, error):
        g = Graph([("a", "b", 1), ("c", "a", 1)])
        with pytest.raises(error):
            shortest_path(g, "a", target)

    def test_tree_distances(self, tree):
        assert shortest_paths(tree, "r")[0] == {"r": 0, "x": 2, "y": 4, "z": 3}

    def test_within_tree(self, tree):
        assert within(tree, "r", 3) == {"r": 0, "x": 2, "z": 3}
