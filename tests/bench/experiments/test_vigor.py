"""bench.experiments.vigor's pure parts (figures per run, rows over seeds, the table, the plot) on small
synthetic metrics.jsonl files, and its runs with training replaced."""

import json

import pytest

from bench.experiments.common import read_records
from bench.experiments.vigor import (
    arm_row,
    arm_settings,
    curves,
    markdown,
    parse,
    plot,
    run_figures,
    success_at,
    success_curve,
)

# Fixed: 4 steps of 8 rollouts (G=4, 2 prompts). VIGOR: 8 rollouts, then 6 (two were dropped),
# to check that success is weighted by episodes. A line without a step and a step without
# episodes are ignored; steps come in any order.
FIXED = [
    {"step": 2, "episodes": 8, "success_rate": 0.5, "nonzero_variance_fraction": 1.0,
     "rollouts_per_prompt_mean": 4.0, "rollouts_per_prompt_max": 4, "budget_spent": 1.0},
    {"step": 1, "episodes": 8, "success_rate": 0.25, "nonzero_variance_fraction": 0.5,
     "rollouts_per_prompt_mean": 4.0, "rollouts_per_prompt_max": 4, "budget_spent": 1.0},
    {"step": 3, "episodes": 8, "success_rate": 0.5, "nonzero_variance_fraction": 0.5,
     "rollouts_per_prompt_mean": 4.0, "rollouts_per_prompt_max": 4, "budget_spent": 1.0},
    {"step": 4, "episodes": 8, "success_rate": 0.75, "nonzero_variance_fraction": 0.0,
     "rollouts_per_prompt_mean": 4.0, "rollouts_per_prompt_max": 4, "budget_spent": 1.0},
    {"note": "no step"},
    {"step": 5, "episodes": 0, "version": 5},
]  # fmt: skip
VIGOR = [
    {"step": 1, "episodes": 8, "success_rate": 0.25, "nonzero_variance_fraction": 1.0,
     "rollouts_per_prompt_mean": 4.0, "rollouts_per_prompt_max": 6, "budget_spent": 1.0},
    {"step": 2, "episodes": 6, "success_rate": 0.5, "nonzero_variance_fraction": 0.5,
     "rollouts_per_prompt_mean": 3.0, "rollouts_per_prompt_max": 5, "budget_spent": 0.75},
]  # fmt: skip


def metrics_file(tmp_path, name: str, records: list[dict]):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return read_records(folder)


def test_success_curve_counts_cumulative_rollouts_in_step_order(tmp_path):
    records = metrics_file(tmp_path, "fixed", FIXED)
    assert success_curve(records) == [(8, 0.25, 8), (16, 0.5, 8), (24, 0.5, 8), (32, 0.75, 8)]
    assert curves(records) == {
        "step": [1, 2, 3, 4],
        "rollouts": [8, 16, 24, 32],
        "success_rate": [0.25, 0.5, 0.5, 0.75],
        "nonzero_variance_fraction": [0.5, 1.0, 0.5, 0.0],
    }


def test_success_at_is_the_episode_weighted_trailing_window_where_the_rollouts_are_reached():
    curve = [(8, 0.25, 8), (16, 0.5, 8), (24, 0.5, 8), (32, 0.75, 8)]
    assert success_at(curve, 16) == 0.375  # steps 1-2
    assert success_at(curve, 17) == 0.416667  # step 3 is the first at or past 17: steps 1-3
    assert success_at(curve, 32, window=2) == 0.625  # steps 3-4
    assert success_at(curve, 33) is None
    assert success_at([(8, 0.25, 8), (14, 0.5, 6)], 14) == 0.357143  # (2 + 3) / 14


def test_run_figures_of_a_fixed_run(tmp_path):
    records = metrics_file(tmp_path, "fixed", FIXED)
    summary = {"eval_before": {"success_rate": 0.25}, "eval_after": {"success_rate": 0.5}}
    assert run_figures(records, summary) == {
        "steps": 4,
        "rollouts": 32,
        "informative_fraction": 0.5,  # (0.5 + 1 + 0.5 + 0) / 4
        "success_half": 0.375,  # after 16 rollouts: steps 1-2
        "success_all": 0.5,  # after 32: steps 1-4 (window 5)
        "first_success": 0.25,
        "final_success": 0.75,
        "eval_before": 0.25,
        "eval_after": 0.5,
        "rollouts_per_prompt_mean": 4.0,
        "rollouts_per_prompt_max": 4,
        "budget_spent": 1.0,
    }


def test_run_figures_of_a_vigor_run_without_an_evaluation(tmp_path):
    figures = run_figures(metrics_file(tmp_path, "vigor", VIGOR), {})
    assert figures == {
        "steps": 2,
        "rollouts": 14,
        "informative_fraction": 0.75,
        "success_half": 0.25,  # 7 rollouts: reached at step 1
        "success_all": 0.357143,  # (8 x 0.25 + 6 x 0.5) / 14
        "first_success": 0.25,
        "final_success": 0.5,
        "eval_before": None,
        "eval_after": None,
        "rollouts_per_prompt_mean": 3.5,
        "rollouts_per_prompt_max": 6,
        "budget_spent": 0.875,
    }
    assert run_figures([], {})["success_all"] is None and run_figures([], {})["steps"] == 0


def test_arm_rows_are_means_and_population_stds_over_seeds_and_the_table_shows_them(tmp_path):
    records = metrics_file(tmp_path, "fixed", FIXED)
    runs = {
        seed: run_figures(records, {"eval_before": {"success_rate": 0.25}, "eval_after": {"success_rate": after}})
        for seed, after in ((0, 0.5), (1, 0.75))
    }
    row = arm_row("fixed", runs)
    assert row["seeds"] == [0, 1] and row["rollouts"] == [32]
    assert (row["informative_fraction_mean"], row["informative_fraction_std"]) == (0.5, 0.0)
    assert (row["eval_after_mean"], row["eval_after_std"]) == (0.625, 0.125)
    assert (row["rollouts_per_prompt_max_mean"], row["budget_spent_mean"]) == (4, 1.0)
    vigor = arm_row("vigor", {0: run_figures(metrics_file(tmp_path, "vigor", VIGOR), {})})
    assert (vigor["eval_after_mean"], vigor["eval_after_std"]) == (None, None)
    assert markdown([row, vigor]).splitlines()[2:] == [
        "| fixed | 0.500 ± 0.000 | 0.375 ± 0.000 → 0.500 ± 0.000 (N=32) | 0.250 ± 0.000 → 0.750 ± 0.000 "
        "| 0.250 ± 0.000 → 0.625 ± 0.125 | 4.00 ± 0.00 | 4.0 ± 0.0 | 1.000 ± 0.000 |",
        "| vigor | 0.750 ± 0.000 | 0.250 ± 0.000 → 0.357 ± 0.000 (N=14) | 0.250 ± 0.000 → 0.500 ± 0.000 "
        "| — → — | 3.50 ± 0.00 | 6.0 ± 0.0 | 0.875 ± 0.000 |",
    ]


def test_plot_writes_a_png_with_both_arms(tmp_path):
    fixed = curves(metrics_file(tmp_path, "fixed", FIXED))
    vigor = curves(metrics_file(tmp_path, "vigor", VIGOR))
    path = plot({"fixed": {0: fixed, 1: fixed}, "vigor": {0: vigor}}, tmp_path / "vigor.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_both_arms_are_grpo_at_the_same_rollouts_per_step():
    from trainer.resolve import load_config

    fixed, vigor = (
        load_config("configs/train_swe_oneturn.yaml", arm_settings(arm, 4, 4)) for arm in ("fixed", "vigor")
    )
    for config in (fixed, vigor):
        assert (config.algorithm.name, config.algorithm.group_size, config.orchestrator.episodes_per_step) == (
            "grpo",
            4,
            4,
        )
        assert config.algorithm.loss_aggregation == "sequence_mean"  # null: resolved to GRPO's own
    assert (fixed.algorithm.allocation, vigor.algorithm.allocation) == ("fixed", "vigor")
    v = vigor.algorithm.vigor
    assert (v.m0, v.alpha, v.gamma, v.rounds) == (2, 0.5, 2.0, 4)  # the paper's


def test_parse_refuses_a_group_size_vigor_cannot_allocate():
    assert parse([]).group_size == 4 and parse([]).seeds == 3
    with pytest.raises(SystemExit):
        parse(["--group-size", "2"])


def test_the_bench_warm_starts_once_per_seed_and_keeps_finished_runs(tmp_path, monkeypatch):
    """`bench` with training replaced: each run's config is the real one, a finished run is
    not trained again."""
    import trainer.train
    from bench.experiments import vigor
    from bench.experiments.common import TrainingRunner

    trained, warm = [], []

    def fake_train(config):
        trained.append(config)
        folder = tmp_path / "out" / "runs" / config.run.name
        (folder / "checkpoints" / f"step_{config.run.steps:06d}").mkdir(parents=True)
        (folder / "checkpoints" / f"step_{config.run.steps:06d}" / "state.json").write_text("{}")
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in FIXED))
        return folder

    monkeypatch.setattr(trainer.train, "train", fake_train)
    monkeypatch.setattr(TrainingRunner, "warm_start", lambda self, seed: warm.append(seed) or tmp_path / f"w{seed}")
    args = parse(["--steps", "4", "--seeds", "2", "--out", str(tmp_path / "out")])
    folders = vigor.bench(args)
    assert warm == [0, 1]
    assert [(c.run.name, c.algorithm.allocation, c.model.name) for c in trained] == [
        ("fixed-s0", "fixed", str(tmp_path / "w0")),
        ("vigor-s0", "vigor", str(tmp_path / "w0")),
        ("fixed-s1", "fixed", str(tmp_path / "w1")),
        ("vigor-s1", "vigor", str(tmp_path / "w1")),
    ]
    for config in trained:
        assert config.run.resume == "auto" and config.warm_start.steps == 0 and config.run.steps == 4
        assert config.orchestrator.episodes_per_step * config.algorithm.group_size == 16
    vigor.bench(args)
    assert len(trained) == 4  # all finished: kept
    figures = vigor.write_results(folders, args)
    assert figures["fixed_informative_fraction_mean"] == 0.5 and figures["vigor_budget_spent_std"] == 0.0
    assert (tmp_path / "out" / "vigor.png").is_file()
    saved = json.loads((tmp_path / "out" / "curves.json").read_text())
    assert saved["arms"]["vigor"]["1"]["rollouts"] == [8, 16, 24, 32]


@pytest.mark.slow
def test_a_one_step_smoke_run_goes_end_to_end(tmp_path):
    """The real bench on the one-task quick config: a 2-step warm start, one RL step of each
    arm (2 prompts, 8 rollouts), the table, curves, plot and figures (about 2 minutes on 2 busy cores)."""
    from bench.experiments import vigor

    out = tmp_path / "out"
    argv = ["--config", "configs/train_swe_quick.yaml", "--steps", "1", "--seeds", "1", "--prompts", "2",
            "--out", str(out), "--json", str(tmp_path / "vigor.json"), "warm_start.steps=2", "evaluation.episodes=0"]  # fmt: skip
    assert vigor.main(argv) == 0
    figures = json.loads((tmp_path / "vigor.json").read_text())
    assert figures["fixed_rollouts_per_prompt_max_mean"] == 4 and figures["fixed_budget_spent_mean"] == 1.0
    assert figures["vigor_rollouts_per_prompt_mean_mean"] == 4.0 and figures["vigor_budget_spent_mean"] == 1.0
    assert figures["vigor_eval_after_mean"] is None
    assert (out / "vigor.png").is_file() and (out / "runs" / "vigor-s0" / "metrics.jsonl").is_file()
