"""bench.perf.tree's learner figures: flat against tree-packed steps on the same trajectories."""

import pytest

from bench.perf import tree as bench_tree
from tests.trainer.test_tree_training import patr_batch


def test_learner_figures_count_the_packed_tokens_and_match_the_losses(monkeypatch):
    monkeypatch.setattr(bench_tree, "STEPS", 1)
    figures = bench_tree.learner_figures("trees", patr_batch())
    assert figures["trees_learner_tokens_flat"] == 6 * 49  # six rows padded to the longest
    assert figures["trees_learner_tokens_tree"] == 87
    assert figures["trees_learner_token_ratio"] == pytest.approx(87 / 294)
    assert figures["trees_loss_max_abs_diff"] < 1e-5
    assert figures["trees_learner_speedup"] == pytest.approx(
        figures["trees_learner_seconds_flat"] / figures["trees_learner_seconds_tree"]
    )
