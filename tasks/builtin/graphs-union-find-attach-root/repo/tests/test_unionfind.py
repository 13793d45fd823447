import unittest

from disjoint import DisjointSet, components, minimum_spanning_tree


class DisjointSetTests(unittest.TestCase):
    def test_singletons(self):
        ds = DisjointSet("abc")
        self.assertEqual((len(ds), ds.group_count), (3, 3))
        self.assertFalse(ds.connected("a", "b"))

    def test_union_of_singletons(self):
        ds = DisjointSet()
        self.assertTrue(ds.union(1, 2))
        self.assertFalse(ds.union(2, 1))
        self.assertTrue(ds.connected(1, 2))
        self.assertEqual((ds.size_of(1), ds.group_count), (2, 1))

    def test_growing_one_group(self):
        ds = DisjointSet()
        for i in range(1, 10):
            ds.union(0, i)
        self.assertEqual(ds.size_of(5), 10)
        self.assertEqual(ds.group_count, 1)

    def test_implicit_add(self):
        ds = DisjointSet()
        self.assertEqual(ds.find("x"), "x")
        self.assertEqual(len(ds), 1)


class AlgorithmTests(unittest.TestCase):
    def test_components_simple(self):
        self.assertEqual(components("abcde", [("a", "b"), ("d", "c")]), [["a", "b"], ["c", "d"], ["e"]])

    def test_mst_triangle(self):
        self.assertEqual(minimum_spanning_tree([("a", "b", 4), ("b", "c", 1), ("a", "c", 2)]), (3, [("b", "c", 1), ("a", "c", 2)]))

    def test_mst_forest(self):
        total, edges = minimum_spanning_tree([("a", "b", 1), ("c", "d", 2)])
        self.assertEqual((total, len(edges)), (3, 2))


if __name__ == "__main__":
    unittest.main()
