"""bench.experiments.se_rl's figures from recorded runs, its table, and a slow smoke run of the real bench."""

from __future__ import annotations

import json

import pytest

from bench.experiments import se_rl

FAMILY_OF = {"t1": "text", "t2": "text", "c1": "config", "n1": "numeric"}
SUMMARY = {
    "eval_before": {"success_rate": 0.25, "per_task": {"t1": 0.0, "t2": 0.5, "c1": 0.5, "n1": 0.0}},
    "eval_after": {"success_rate": 0.5, "per_task": {"t1": 0.5, "t2": 1.0, "c1": 0.5, "n1": 0.0, "gone": 1.0}},
}
RECORDS = [
    {"step": s, "episodes": 4, "success_rate": r, "family_weight/text": 0.5 + s / 10, "family_weight/config": 1.0}
    for s, r in zip(range(1, 7), [0.0, 0.25, 0.5, 0.5, 0.75, 1.0], strict=True)
]


def test_run_figures_group_the_evaluation_by_family_and_find_the_worst():
    figures = se_rl.run_figures(RECORDS, SUMMARY, FAMILY_OF)
    assert figures["family_after"] == {"config": 0.5, "numeric": 0.0, "text": 0.75}
    assert (figures["eval_before"], figures["eval_after"]) == (0.25, 0.5)
    assert (figures["worst_family_after"], figures["family_spread_after"]) == (0.0, 0.75)
    assert (figures["first_success"], figures["final_success"]) == (0.125, 0.875)
    assert figures["last_weights"] == {"text": 1.1, "config": 1.0}


def test_a_run_without_evaluation_has_no_family_figures():
    figures = se_rl.run_figures(RECORDS, {}, FAMILY_OF)
    assert figures["family_after"] == {} and figures["worst_family_after"] is None and figures["eval_after"] is None


def test_arm_rows_average_over_seeds_and_the_table_shows_each_family():
    other = dict(SUMMARY, eval_after={"success_rate": 1.0, "per_task": {"t1": 1.0, "t2": 1.0, "c1": 1.0, "n1": 1.0}})
    runs = {0: se_rl.run_figures(RECORDS, SUMMARY, FAMILY_OF), 1: se_rl.run_figures(RECORDS, other, FAMILY_OF)}
    row = se_rl.arm_row("se_rl", runs)
    assert (row["eval_after_mean"], row["eval_after_std"]) == (0.75, 0.25)
    assert (row["worst_family_after_mean"], row["worst_family_after_std"]) == (0.5, 0.5)
    assert row["family_after"] == {"config": 0.75, "numeric": 0.5, "text": 0.875}
    assert "| se_rl | 0.250 ± 0.000 → 0.750 ± 0.250 | 0.500 ± 0.500 | 0.375 ± 0.375 |" in se_rl.markdown([row])
    assert "config 0.75, numeric 0.50, text 0.88" in se_rl.markdown([row])


def test_the_arms_differ_only_in_the_family_weights():
    uniform, rebalanced = se_rl.arm_settings("uniform"), se_rl.arm_settings("se_rl")
    assert [s for s in uniform if s not in rebalanced] == ["algorithm.family_weights=none"]
    assert [s for s in rebalanced if s not in uniform] == ["algorithm.family_weights=se_rl"]


@pytest.mark.slow
def test_a_one_step_smoke_run_goes_end_to_end(tmp_path):
    """The real bench on the quick config with two families: a 2-step warm start, one RL step
    of each arm, an evaluation of 2 episodes before and after, the table and figures. Over 60 s
    (70-140 s in a full suite on 2 cores): a real training run per arm."""
    out = tmp_path / "out"
    argv = ["--config", "configs/train_swe_quick.yaml", "--steps", "1", "--seeds", "1", "--out", str(out),
            "--json", str(tmp_path / "se_rl.json"), "tasks.ids=[config-env-prefix-strip,numeric-histogram-upper-edge]",
            "warm_start.steps=2", "warm_start.critic_pretrain_steps=0", "evaluation.episodes=2",
            "rollout.max_new_tokens=8"]  # fmt: skip
    assert se_rl.main(argv) == 0
    figures = json.loads((tmp_path / "se_rl.json").read_text())
    assert figures["seeds"] == 1 and figures["uniform_eval_after_mean"] is not None
    assert {"se_rl_eval_after_config", "se_rl_eval_after_numeric"} <= set(figures)
    record = json.loads((out / "runs" / "se_rl-s0" / "metrics.jsonl").read_text().splitlines()[0])
    assert {k for k in record if k.startswith("family_weight/")} <= {"family_weight/config", "family_weight/numeric"}
    uniform = json.loads((out / "runs" / "uniform-s0" / "metrics.jsonl").read_text().splitlines()[0])
    assert not any(k.startswith("family_weight/") for k in uniform)
