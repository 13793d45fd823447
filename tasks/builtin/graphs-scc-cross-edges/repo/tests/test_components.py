import unittest

from sccgraph import condensation, cyclic_nodes, has_cycle, strongly_connected_components as scc


class SccTests(unittest.TestCase):
    def test_single_cycle_and_tail(self):
        self.assertEqual(scc({"a": ["b"], "b": ["a", "c"], "c": []}), [["c"], ["a", "b"]])

    def test_chain(self):
        self.assertEqual(scc({1: [2], 2: [3], 3: []}), [[3], [2], [1]])

    def test_two_cycles_linked(self):
        graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": ["d"]}
        self.assertEqual(scc(graph), [["d", "e"], ["a", "b", "c"]])

    def test_targets_only_nodes(self):
        self.assertEqual(scc({"x": ["y"]}), [["y"], ["x"]])

    def test_deep_chain_does_not_hit_recursion_limit(self):
        graph = {i: [i + 1] for i in range(3000)}
        self.assertEqual(len(scc(graph)), 3001)


class CycleTests(unittest.TestCase):
    def test_self_loop(self):
        self.assertEqual(cyclic_nodes({"a": ["a", "b"], "b": []}), {"a"})

    def test_has_cycle(self):
        self.assertTrue(has_cycle({"a": ["b"], "b": ["a"]}))
        self.assertFalse(has_cycle({"a": ["b"], "b": ["c"]}))


class CondensationTests(unittest.TestCase):
    def test_condensation(self):
        comps, dag = condensation({"a": ["b"], "b": ["a", "c"], "c": []})
        self.assertEqual((comps, dag), ([["c"], ["a", "b"]], {0: set(), 1: {0}}))


if __name__ == "__main__":
    unittest.main()
