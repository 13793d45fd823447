"""The RL math as small pure functions over tensors (see each module's docstring)."""

from trainer.algorithms.sao import (
    CODING_EPS,
    MATH_EPS,
    PolicyLossStats,
    aggregate,
    double_sided_mask,
    gae,
    length_adaptive_lambda,
    sao_policy_loss,
    value_loss,
)

__all__ = [
    "CODING_EPS",
    "MATH_EPS",
    "PolicyLossStats",
    "aggregate",
    "double_sided_mask",
    "gae",
    "length_adaptive_lambda",
    "sao_policy_loss",
    "value_loss",
]
