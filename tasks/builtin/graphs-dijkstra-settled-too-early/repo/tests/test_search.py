import unittest

from routefind import Graph, NoPath, shortest_path, shortest_paths, within


class GraphTests(unittest.TestCase):
    def test_cheaper_duplicate_edge_wins(self):
        g = Graph([("a", "b", 5), ("a", "b", 2), ("a", "b", 9)])
        self.assertEqual(list(g.neighbours("a")), [("b", 2)])

    def test_negative_weight_rejected(self):
        with self.assertRaises(ValueError):
            Graph().add_edge("a", "b", -1)

    def test_both_ways(self):
        g = Graph()
        g.add_edge("x", "y", 3, both_ways=True)
        self.assertEqual((list(g.neighbours("y")), len(g)), ([("x", 3)], 2))


class SearchTests(unittest.TestCase):
    def test_line(self):
        g = Graph([("a", "b", 1), ("b", "c", 2), ("c", "d", 3)])
        self.assertEqual(shortest_path(g, "a", "d"), (6, ["a", "b", "c", "d"]))

    def test_source_to_itself(self):
        g = Graph([("a", "b", 1)])
        self.assertEqual(shortest_path(g, "a", "a"), (0, ["a"]))

    def test_unreachable(self):
        g = Graph([("a", "b", 1), ("c", "a", 1)])
        with self.assertRaises(NoPath):
            shortest_path(g, "a", "c")
        with self.assertRaises(KeyError):
            shortest_path(g, "a", "zzz")

    def test_tree_distances(self):
        g = Graph([("r", "x", 2), ("r", "y", 4), ("x", "z", 1)])
        self.assertEqual(shortest_paths(g, "r")[0], {"r": 0, "x": 2, "y": 4, "z": 3})

    def test_within_tree(self):
        g = Graph([("r", "x", 2), ("r", "y", 4), ("x", "z", 1)])
        self.assertEqual(within(g, "r", 3), {"r": 0, "x": 2, "z": 3})


if __name__ == "__main__":
    unittest.main()
