from sccgraph import condensation, cyclic_nodes, has_cycle, strongly_connected_components as scc


class TestScc:
    def test_single_cycle_and_tail(self):
        assert scc({"a": ["b"], "b": ["a", "c"], "c": []}) == [["c"], ["a", "b"]]

    def test_chain(self):
        assert scc({1: [2], 2: [3], 3: []}) == [[3], [2], [1]]

    def test_two_cycles_linked(self):
        graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": ["d"]}
        assert scc(graph) == [["d", "e"], ["a", "b", "c"]]

    def test_targets_only_nodes(self):
        assert scc({"x": ["y"]}) == [["y"], ["x"]]

    def test_deep_chain_does_not_hit_recursion_limit(self):
        graph = {i: [i + 1] for i in range(3000)}
        assert len(scc(graph)) == 3001


class TestCycles:
    def test_self_loop(self):
        assert cyclic_nodes({"a": ["a", "b"], "b": []}) == {"a"}

    def test_has_cycle(self):
        assert has_cycle({"a": ["b"], "b": ["a"]})
        assert not has_cycle({"a": ["b"], "b": ["c"]})


class TestCondensation:
    def test_condensation(self):
        comps, dag = condensation({"a": ["b"], "b": ["a", "c"], "c": []})
        assert (comps, dag) == ([["c"], ["a", "b"]], {0: set(), 1: {0}})
