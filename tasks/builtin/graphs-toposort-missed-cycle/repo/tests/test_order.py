import pytest

from depgraph import CycleError, batches, dependents_of, toposort


class TestToposort:
    def test_simple_chain(self):
        assert toposort({"c": ["b"], "b": ["a"], "a": []}) == ["a", "b", "c"]

    @pytest.mark.parametrize(
        ("deps", "expected"),
        [
            pytest.param({"b": ["a"], "c": ["a"], "a": []}, ["a", "b", "c"], id="shared-dependency"),
            pytest.param({"z": [], "y": [], "x": []}, ["x", "y", "z"], id="no-dependencies"),
        ],
    )
    def test_ties_are_sorted(self, deps, expected):
        assert toposort(deps) == expected

    def test_undeclared_dependencies_are_nodes(self):
        assert toposort({"app": ["lib", "config"], "lib": ["config"]}) == ["config", "lib", "app"]

    def test_cycle(self):
        with pytest.raises(CycleError) as excinfo:
            toposort({"a": ["b"], "b": ["c"], "c": ["a"], "d": []})
        assert excinfo.value.nodes == ["a", "b", "c"]

    def test_self_dependency(self):
        with pytest.raises(CycleError):
            toposort({"a": ["a"]})

    def test_empty(self):
        assert toposort({}) == []


class TestBatches:
    def test_batches(self):
        assert batches({"app": ["lib", "config"], "lib": ["config"], "docs": []}) == [
            ["config", "docs"],
            ["lib"],
            ["app"],
        ]

    def test_batches_cycle(self):
        with pytest.raises(CycleError):
            batches({"x": ["y"], "y": ["x"]})


class TestDependents:
    def test_transitive(self):
        deps = {"app": ["lib"], "lib": ["core"], "cli": ["core"], "docs": []}
        assert dependents_of(deps, "core") == {"lib", "cli", "app"}
        assert dependents_of(deps, "docs") == set()
