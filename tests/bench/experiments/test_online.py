"""bench.experiments.online's figures (phases, recovery, forgetting) from recorded step lines, its table
and plot, and a slow smoke run of the real bench on a two-phase stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.experiments import online


def _records(phases: list[tuple[str, list[float]]], episodes: int = 4) -> list[dict]:
    records, step = [], 0
    for index, (name, successes) in enumerate(phases):
        for success in successes:
            step += 1
            records.append({"step": step, "phase": name, "phase_index": index, "episodes": episodes,
                            "success_rate": success})  # fmt: skip
    return records


RUN = _records([("a", [0.0, 0.5, 1.0, 1.0]), ("b", [0.0, 0.25, 1.0, 1.0]), ("a", [0.5, 0.5, 1.0, 1.0])])


def test_each_phase_occurrence_gets_success_end_recovery_and_forgetting():
    rows = online.run_figures(RUN, window=2)
    assert [r["phase"] for r in rows] == ["1. a", "2. b", "3. a"]
    assert [r["success"] for r in rows] == [0.625, 0.5625, 0.75]
    assert [r["end"] for r in rows] == [1.0, 1.0, 1.0]
    # 0.9 x the previous phase's end (1.0) over a 2-step trailing mean: phase 2 gets
    # 0, 0.125, 0.625, 1.0 (its 4th step); phase 3 gets 0.5, 0.5, 0.75, 1.0 (its 4th)
    assert [r["recovery"] for r in rows] == [None, 4, 4]
    assert [r["forgetting"] for r in rows] == [None, None, 0.5]  # 1.0 at the end of phase 1, 0.5 on return


def test_a_phase_that_never_recovers_is_none_and_counted_per_seed():
    slow = _records([("a", [1.0, 1.0]), ("b", [0.0, 0.0])])
    assert online.run_figures(slow, window=2)[1]["recovery"] is None
    rows = online.method_rows("sao", {0: online.run_figures(RUN, 2), 1: online.run_figures(slow + [], 2)})
    assert len(rows) == 2  # the shorter run's phases
    assert rows[1]["not_recovered"] == 1 and rows[1]["recovery_mean"] == 4.0 and rows[1]["recovery_std"] == 0.0
    assert rows[0]["success_mean"] == 0.8125 and rows[0]["success_std"] == 0.1875
    table = online.markdown(rows, window=2)
    assert "| sao | 2. b | 0.281 ± 0.281 | 0.500 ± 0.500 | 4.0 ± 0.0 (1/2 never) | — |" in table


def test_after_a_phase_that_ended_at_zero_nothing_is_to_recover_and_tasks_are_split():
    records = _records([("a", [0.0, 0.0]), ("b", [0.5, 0.5])])
    records[2].update(episodes_by_task={"x": 2, "y": 2}, success_by_task={"x": 1.0, "y": 0.0})
    records[3].update(episodes_by_task={"x": 4}, success_by_task={"x": 0.5})
    rows = online.run_figures(records, window=2)
    assert rows[1]["recovery"] is None and rows[1]["nothing_to_recover"]
    assert rows[1]["tasks"] == {"x": 0.666667, "y": 0.0} and rows[0]["tasks"] == {}
    method = online.method_rows("grpo", {0: rows})
    assert method[1]["not_recovered"] == 0 and method[1]["nothing_to_recover"] == 1
    assert "| grpo | 2. b | 0.500 ± 0.000 | 0.500 ± 0.000 | — (1/1 from 0) | — |" in online.markdown(method, 2)
    assert "| grpo | 2. b | `x` 0.67, `y` 0.00 |" in online.task_table(method)


def test_records_without_phases_give_no_rows_and_episodes_weigh_success():
    assert online.run_figures([{"step": 1, "episodes": 4, "success_rate": 1.0}]) == []
    assert online.weighted([(1.0, 1), (0.0, 3)]) == 0.25 and online.weighted([]) is None
    assert online.recovery_steps([(0.0, 2), (1.0, 2)], target=0.5, window=2) == 2


def test_equal_budget_settings():
    assert online.method_settings("sao", 8, 4)[:3] == ["algorithm.name=sao", "algorithm.group_size=1",
                                                      "orchestrator.episodes_per_step=8"]  # fmt: skip
    assert online.method_settings("grpo", 8, 4)[:3] == ["algorithm.name=grpo", "algorithm.group_size=4",
                                                       "orchestrator.episodes_per_step=2"]  # fmt: skip


def test_the_plot_shades_phases(tmp_path):
    path = online.plot({"sao": {0: RUN}, "grpo": {0: RUN}}, tmp_path / "online.png")
    assert path.is_file() and path.stat().st_size > 10_000


def test_bad_arguments_are_one_line_errors(capsys):
    with pytest.raises(SystemExit):
        online.parse(["--group-size", "1"])
    assert "--group-size must be at least 2" in capsys.readouterr().err
    for methods, message in [("sao,ppo", "unknown method 'ppo'"), ("grpo@x", "'grpo@x': the learning rate after"),
                             ("sao,sao", "give each method once"), ("grpo@-1", "must be above 0")]:  # fmt: skip
        with pytest.raises(SystemExit):
            online.parse(["--methods", methods])
        assert message in capsys.readouterr().err


def test_methods_run_at_the_configs_learning_rate_or_their_own():
    assert online.parse([]).methods == [("sao", None), ("grpo", None)]
    methods = online.parse(["--methods", "sao, grpo, grpo@2.5e-4"]).methods
    assert methods == [("sao", None), ("grpo", None), ("grpo", 0.00025)]
    assert [online.arm_name(m, lr) for m, lr in methods] == ["sao", "grpo", "grpo-lr0.00025"]


STREAM = """\
source: builtin
variants:
  - {id: config-env-prefix-strip.renamed, base: config-env-prefix-strip, rename: {from_environ: read_env}}
phases:
  - {name: plain, steps: 1, tasks: [config-env-prefix-strip]}
  - {name: renamed, steps: 1, tasks: [config-env-prefix-strip.renamed]}
"""


@pytest.mark.slow
def test_a_two_phase_smoke_run_goes_end_to_end(tmp_path):
    """The real bench on a two-phase stream with the quick config: a 2-step warm start, one RL
    step per phase for each method (4 rollouts each), the table, plot and figures. Over 60 s
    (87-137 s in a full suite on 2 cores): a real training run per method."""
    (tmp_path / "stream.yaml").write_text(STREAM)
    out = tmp_path / "out"
    argv = ["--config", "configs/train_swe_quick.yaml", "--stream", str(tmp_path / "stream.yaml"), "--seeds", "1",
            "--out", str(out), "--json", str(tmp_path / "online.json"), "warm_start.steps=2",
            "warm_start.critic_pretrain_steps=0", "evaluation.episodes=0", "rollout.max_new_tokens=8"]  # fmt: skip
    assert online.main(argv) == 0
    figures = json.loads((tmp_path / "online.json").read_text())
    assert figures["stream"].endswith("stream.yaml") and figures["sao_p1_recovery_mean"] is None
    assert {"sao_p2_success_mean", "grpo_p2_forgetting_mean", "grpo_p2_not_recovered"} <= set(figures)
    for method in ("sao", "grpo"):
        records = [
            json.loads(line) for line in (out / "runs" / f"{method}-s0" / "metrics.jsonl").read_text().splitlines()
        ]
        assert [(r["step"], r["phase"], r["episodes"]) for r in records] == [(1, "plain", 4), (2, "renamed", 4)]
    assert (out / "online.png").is_file() and Path(out / "phases.json").is_file()
