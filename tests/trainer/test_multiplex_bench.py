"""bench.perf.multiplex's simulated half: the configuration the real runs are validated against,
its figures, and the command line."""

import json

import pytest

from bench.perf import multiplex as bench
from trainer.orchestrator.multiplex import EmpiricalLengths, SimConfig, TimeModel, simulate


def tiny_model() -> TimeModel:
    return TimeModel(
        generation_tokens_per_s=50.0,
        learner_seconds_per_token=1 / 100,
        episodes=EmpiricalLengths(((100, 1),)),
        switch_to_learner_s=0.5,
        switch_to_rollout_s=0.5,
    )


def test_simulate_configuration_is_simulate_on_the_planned_split():
    results = bench.simulate_configuration(
        tiny_model(), 4, episodes_per_step=4, episodes_per_unit=2, steps=12, window_s=4.0
    )
    assert list(results) == ["static", "colocated", "bidirectional"]
    config = SimConfig(units=4, episodes_per_step=4, episodes_per_unit=2, max_staleness=1, steps=12)
    config = SimConfig(**{**config.__dict__, "rollout_units": 2, "window_s": 4.0})
    for policy, result in results.items():
        assert result == simulate(tiny_model(), config, policy, rule=bench.Rule(min_window_steps=4))
    assert results["static"].steps_per_s == 0.5  # balanced 2 + 2: a step every 2 s


def test_figures_are_flat_and_relative_to_static():
    results = bench.simulate_configuration(tiny_model(), 4, episodes_per_step=4, episodes_per_unit=2, steps=12)
    flat = bench.figures("x", results, predicted=2.0)
    assert flat["x_static_vs_static"] == 1.0
    assert flat["x_colocated_vs_static"] == round(
        results["colocated"].trajectories_per_s / results["static"].trajectories_per_s, 4
    )
    assert flat["x_static_over_planner_prediction"] == 1.0  # 2 trajectories/s, as planned
    assert (flat["x_planned_rollout_units"], flat["x_planned_learner_units"]) == (2, 2)
    assert all(isinstance(value, int | float) for value in flat.values())
    assert "x_static_over_planner_prediction" not in bench.figures("x", results, predicted=None)


def test_the_published_run_writes_its_table_and_json(tmp_path, capsys):
    out = tmp_path / "multiplex.json"
    flat = bench.main(["--steps-per-phase", "3", "--episodes-per-step", "64", "--json", str(out)])
    assert json.loads(out.read_text()) == flat
    assert flat["units"] == 32 and flat["drift_static_vs_static"] == 1.0
    assert {"drift_bidirectional_vs_static", "forced_colocated_switches_to_learner"} <= set(flat)
    captured = capsys.readouterr()
    assert "SIMULATED: published shape, 32 units" in captured.out
    assert "| forced | bidirectional |" in captured.out
    assert "bench.perf.multiplex drift: static simulated in" in captured.err


def test_a_measured_time_model_from_a_file(tmp_path, capsys):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(tiny_model().to_dict()))
    flat = bench.main(
        ["--time-model", str(path), "--units", "4", "--steps-per-phase", "6", "--json", str(tmp_path / "o.json")]
    )
    assert flat["measured_static_over_planner_prediction"] == pytest.approx(1.0, abs=0.2)
    assert "| measured | static |" in capsys.readouterr().out
    path.write_text(json.dumps({"generation_tokens_per_s": 1.0}))
    with pytest.raises(SystemExit, match=f"{path}: field 'learner_seconds_per_token': missing"):
        bench.main(["--time-model", str(path), "--units", "4"])
    with pytest.raises(SystemExit):
        bench.main(["--time-model", str(path)])  # the run's units are required
