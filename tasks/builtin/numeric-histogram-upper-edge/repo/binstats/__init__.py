"""binstats: fixed-width histograms with under/overflow tracking."""

from .histogram import Histogram

__all__ = ["Histogram"]
