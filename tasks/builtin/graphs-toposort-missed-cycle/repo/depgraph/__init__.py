"""depgraph: order tasks, packages or build targets by their dependencies."""

from .order import CycleError, batches, dependents_of, toposort

__all__ = ["CycleError", "batches", "dependents_of", "toposort"]
