import unittest

from depgraph import CycleError, batches, dependents_of, toposort


class ToposortTests(unittest.TestCase):
    def test_simple_chain(self):
        self.assertEqual(toposort({"c": ["b"], "b": ["a"], "a": []}), ["a", "b", "c"])

    def test_ties_are_sorted(self):
        self.assertEqual(toposort({"b": ["a"], "c": ["a"], "a": []}), ["a", "b", "c"])
        self.assertEqual(toposort({"z": [], "y": [], "x": []}), ["x", "y", "z"])

    def test_undeclared_dependencies_are_nodes(self):
        self.assertEqual(toposort({"app": ["lib", "config"], "lib": ["config"]}), ["config", "lib", "app"])

    def test_cycle(self):
        with self.assertRaises(CycleError) as ctx:
            toposort({"a": ["b"], "b": ["c"], "c": ["a"], "d": []})
        self.assertEqual(ctx.exception.nodes, ["a", "b", "c"])

    def test_self_dependency(self):
        with self.assertRaises(CycleError):
            toposort({"a": ["a"]})

    def test_empty(self):
        self.assertEqual(toposort({}), [])


class BatchTests(unittest.TestCase):
    def test_batches(self):
        self.assertEqual(
            batches({"app": ["lib", "config"], "lib": ["config"], "docs": []}),
            [["config", "docs"], ["lib"], ["app"]],
        )

    def test_batches_cycle(self):
        with self.assertRaises(CycleError):
            batches({"x": ["y"], "y": ["x"]})


class DependentsTests(unittest.TestCase):
    def test_transitive(self):
        deps = {"app": ["lib"], "lib": ["core"], "cli": ["core"], "docs": []}
        self.assertEqual(dependents_of(deps, "core"), {"lib", "cli", "app"})
        self.assertEqual(dependents_of(deps, "docs"), set())


if __name__ == "__main__":
    unittest.main()
