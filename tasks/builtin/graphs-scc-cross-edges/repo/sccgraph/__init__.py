"""sccgraph: strongly connected components, cycle checks and condensation of directed graphs."""

from .components import condensation, cyclic_nodes, has_cycle, strongly_connected_components

__all__ = ["condensation", "cyclic_nodes", "has_cycle", "strongly_connected_components"]
