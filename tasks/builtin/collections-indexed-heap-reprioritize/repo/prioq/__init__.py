"""prioq: an addressable priority queue (a binary heap with a position index)."""

from .heap import PriorityQueue

__all__ = ["PriorityQueue"]
