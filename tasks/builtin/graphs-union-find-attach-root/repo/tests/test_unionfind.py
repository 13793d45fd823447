from disjoint import DisjointSet, components, minimum_spanning_tree


class TestDisjointSet:
    def test_singletons(self):
        ds = DisjointSet("abc")
        assert (len(ds), ds.group_count) == (3, 3)
        assert not ds.connected("a", "b")

    def test_union_of_singletons(self, ds):
        assert ds.union(1, 2)
        assert not ds.union(2, 1)
        assert ds.connected(1, 2)
        assert (ds.size_of(1), ds.group_count) == (2, 1)

    def test_growing_one_group(self, ds):
        for i in range(1, 10):
            ds.union(0, i)
        assert ds.size_of(5) == 10
        assert ds.group_count == 1

    def test_implicit_add(self, ds):
        assert ds.find("x") == "x"
        assert len(ds) == 1


class TestAlgorithms:
    def test_components_simple(self):
        assert components("abcde", [("a", "b"), ("d", "c")]) == [["a", "b"], ["c", "d"], ["e"]]

    def test_mst_triangle(self):
        assert minimum_spanning_tree([("a", "b", 4), ("b", "c", 1), ("a", "c", 2)]) == (3, [("b", "c", 1), ("a", "c", 2)])

    def test_mst_forest(self):
        total, edges = minimum_spanning_tree([("a", "b", 1), ("c", "d", 2)])
        assert (total, len(edges)) == (3, 2)
