"""bench.learning's per-method figures: means and spreads over seeds, evaluations optional."""

import pytest

from bench.learning import method_figures


def test_figures_average_over_seeds_and_report_the_evaluation_rise():
    figures = method_figures(
        {"sao": [(0.25, 0.5), (0.25, 0.75)], "grpo": [(0.5, 0.25)]},
        {"sao": [(0.25, 0.5), (0.25, 0.75)], "grpo": []},
    )
    assert figures["sao_first_success"] == 0.25
    assert figures["sao_final_success"] == 0.625
    assert figures["sao_final_std"] == pytest.approx(0.125)
    assert figures["sao_rise"] == 0.375
    assert figures["sao_eval_before"] == 0.25 and figures["sao_eval_after"] == 0.625
    assert figures["sao_eval_rise"] == 0.375
    assert figures["sao_eval_rise_std"] == pytest.approx(0.125)
    assert figures["grpo_rise"] == -0.25
    assert not any(key.startswith("grpo_eval") for key in figures)  # no evaluation, no figure


def test_a_method_that_never_ran_has_no_figures():
    assert method_figures({"ppo": []}, {}) == {}
