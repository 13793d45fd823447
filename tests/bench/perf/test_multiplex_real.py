"""bench.perf.multiplex's real half, without training: the figures read from run folders, the
time model fitted from a static run's metrics, and the side-by-side table."""

import json

import pytest

from bench.perf import multiplex as bench


def _run(folder, records, switches=None, profile=()):
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if switches is not None:
        (folder / "multiplex.json").write_text(json.dumps({"switches": switches, "profile": list(profile)}))
    return folder


def _step(step, phase, tokens, wall, learner, seconds, **extra):
    """A metrics line of 4 one-turn episodes, each `tokens` long and `wall` seconds (0.1 s engine)."""
    return {"step": step, "phase": phase, "episodes": 4, "tokens": 4 * tokens, "turns_mean": 1.0,
            "engine_seconds": 0.4, "wall_seconds": 4 * wall, "learner_seconds": learner,
            "step_seconds": seconds, "episode_seconds": [wall] * 4, "stale_dropped": 0, **extra}  # fmt: skip


def test_measured_figures_and_the_fitted_model_of_a_static_run(tmp_path):
    records = [_step(s, "slow", 100, 4.1, 0.5 + 0.002 * 400, 4.0) for s in (1, 2, 3, 4)]
    records += [_step(s, "fast", 300, 1.1, 0.5 + 0.002 * 1200, 2.0) for s in (5, 6, 7, 8)]
    static = _run(tmp_path / "static", records)
    switches = [{"unit": 3, "direction": "to_rollout", "seconds": 1.5, "at_s": 9.0, "reason": "r"},
                {"unit": 3, "direction": "to_learner", "seconds": 2.5, "at_s": 19.0, "reason": "r"}]  # fmt: skip
    bidirectional = _run(tmp_path / "bidirectional", records, switches)

    figures = bench.measured(static)
    assert figures["trajectories_per_s"] == round(24 / 16, 4) and figures["steps_per_s"] == round(6 / 16, 5)
    assert figures["phase0_steps_per_s"] == 0.25 and figures["phase1_steps_per_s"] == 0.5
    assert figures["learner_idle_fraction"] == round(1 - (2 * 1.3 + 4 * 2.9) / 16, 4)
    assert figures["rollout_idle_fraction"] == round(1 - (2 * 4 * 4.1 + 4 * 4 * 1.1) / (2 * 2 * 16), 4)
    assert bench.measured(bidirectional)["switch_to_learner_s"] == 2.5

    model, phases = bench.model_from_run(static, [bidirectional])
    assert model.generation_tokens_per_s == pytest.approx(1000)  # 100 tokens in 0.1 s
    assert model.tool_seconds_per_turn == pytest.approx(4.0)
    assert model.learner_step_overhead_s == pytest.approx(0.5)
    assert model.learner_seconds_per_token == pytest.approx(0.004)  # per unit: the run had 2
    assert (model.switch_to_rollout_s, model.switch_to_learner_s) == (1.5, 2.5)
    assert [p.name for p in phases] == ["slow", "fast"] and phases[0].steps == 4
    assert phases[1].lengths.mean_tokens() == 300
    # The fast phase's episodes take their measured 1.1 s: 0.3 s generating, 0.8 s in tools.
    assert phases[1].tool_slowdown * model.tool_seconds_per_turn == pytest.approx(0.8)

    simulated = bench.simulate_configuration(model, 4, episodes_per_step=4, episodes_per_unit=2, steps=8,
                                             rollout_units=2, phases=phases, window_s=1.0)  # fmt: skip
    real = {policy: figures for policy in simulated}
    table = bench.real_table(real, simulated)
    assert table.count("\n") == 4 and "| static | 1.500 |" in table
    flat = bench.real_figures(real, simulated, model)
    assert flat["real_static_simulator_error"] == round(simulated["static"].trajectories_per_s / 1.5 - 1, 4)
