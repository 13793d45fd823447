"""bench.experiments.stability's collapse test, summary and plot, on synthetic metrics records."""

import json
import math

import pytest

from bench.experiments.common import finished, moving_average
from bench.experiments.stability import collapse, curves, find_collapse, plot, run_summary


def records(success: list[float], entropy: list[float] | None = None, **extra) -> list[dict]:
    """One metrics line per step (steps from 1), with a finite gradient norm."""
    entropy = entropy if entropy is not None else [0.5] * len(success)
    return [
        {"step": i + 1, "success_rate": s, "sampled_entropy": e, "grad_norm": 0.01, "skipped_steps": 0, **extra}
        for i, (s, e) in enumerate(zip(success, entropy, strict=True))
    ]


def test_a_steady_noisy_run_has_not_collapsed():
    run = records([0.375, 0.5, 0.625, 0.5] * 75, [0.04, 0.06] * 150)
    assert find_collapse(run) is None
    assert collapse(run) is None


def test_success_collapse_is_named_at_the_step_the_window_falls_below_a_quarter_of_the_best():
    # 0.5 for 100 steps, then 0: the window ending at 100 + k has mean 0.5 (20 - k) / 20,
    # below 0.25 x 0.5 first at k = 16.
    run = records([0.5] * 100 + [0.0] * 50)
    assert find_collapse(run) == 116
    step, why = collapse(run)
    assert step == 116 and why == "success over the last 20 steps 0.100 < 0.25 x the best window 0.500"
    assert find_collapse(run, window=10) == 108  # 0.5 (10 - k) / 10 < 0.125 first at k = 8


def test_entropy_collapse_is_named_at_the_step_the_window_falls_below_a_tenth_of_the_start():
    # Entropy 0.5 for 50 steps, then 0.01: the window ending at 50 + k has mean
    # (0.5 (20 - k) + 0.01 k) / 20, below 0.1 x 0.5 first at k = 19.
    run = records([0.5] * 100, [0.5] * 50 + [0.01] * 50)
    step, why = collapse(run)
    assert step == 69
    assert why == "sampled entropy over the last 20 steps 0.0345 < 0.1 x the first window's 0.5000"


def test_an_entropy_below_the_absolute_floor_is_a_collapse_from_the_start():
    run = records([0.5] * 30, [0.001] * 30)
    assert collapse(run) == (20, "sampled entropy over the last 20 steps 0.0010 < 0.005 nats")


def test_a_run_that_never_learned_has_not_collapsed():
    # Rare successes (best window 0.0625 < 0.1), then none: nothing was there to lose.
    run = records([0.125, 0.0] * 40 + [0.0] * 60)
    assert find_collapse(run) is None
    # With a lower bar the same run counts: below 0.25 x 0.0625 once the window ending at
    # 80 + k holds at most two successes of 0.125 (steps 77 and 79): k = 15.
    assert find_collapse(run, min_best=0.05) == 95


def test_a_non_finite_gradient_or_a_skipped_step_is_a_collapse_at_that_step():
    run = records([0.5] * 30)
    run[6]["grad_norm"] = math.nan
    assert collapse(run) == (7, "non-finite grad_norm")
    run = records([0.5] * 30)
    run[9]["value_loss"] = math.inf
    assert collapse(run) == (10, "non-finite value_loss")
    run = records([0.5] * 30)
    for record in run[11:]:
        record["skipped_steps"] = 1
    assert collapse(run) == (12, "the learner skipped the step (a non-finite loss or gradient)")


def test_records_in_any_order_and_lines_without_a_step_are_read_by_step():
    run = records([0.5] * 100 + [0.0] * 50)
    assert find_collapse([{"note": "no step"}, *reversed(run)]) == 116


def test_summary_reports_final_means_collapse_and_max_grad_norm():
    run = records([0.5] * 100 + [0.0] * 50)
    run[3]["grad_norm"] = 2.5
    summary = run_summary(run)
    assert summary == {
        "steps_done": 150,
        "final_success_ma": 0.0,
        "final_entropy_ma": 0.5,
        "collapse_step": 116,
        "collapse_reason": "success over the last 20 steps 0.100 < 0.25 x the best window 0.500",
        "max_grad_norm": 2.5,
    }
    assert run_summary(records([0.5] * 40))["collapse_step"] == "none"


def test_moving_average_and_curves():
    assert moving_average([1.0, 0.0, 1.0, 1.0], window=2) == [1.0, 0.5, 0.5, 1.0]
    data = curves([{"step": 2, "success_rate": 0.5, "value_loss": 0.1}, {"step": 1, "success_rate": 0.25}])
    assert data["step"] == [1, 2]
    assert data["success_rate"] == [0.25, 0.5]
    assert data["value_loss"] == [None, 0.1]
    assert data["masked_high_fraction"] == [None, None]


def test_plot_writes_a_png_with_both_methods(tmp_path):
    sao = records([0.5] * 60, value_loss=0.1, masked_low_fraction=0.01, masked_high_fraction=0.0)
    grpo = records([0.5] * 30 + [0.0] * 30)  # collapses at step 46: a vertical line
    path = plot({"sao": sao, "grpo": grpo}, tmp_path / "stability.png")
    assert path == tmp_path / "stability.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("checkpoint", "last_step", "done"),
    [("step_000300", 300, True), ("step_000250", 250, False), ("step_000300", 299, False), (None, 0, False)],
)
def test_a_run_is_finished_with_its_final_checkpoint_and_metrics(tmp_path, checkpoint, last_step, done):
    if checkpoint:
        (tmp_path / "checkpoints" / checkpoint).mkdir(parents=True)
        (tmp_path / "checkpoints" / checkpoint / "state.json").write_text("{}")
    lines = [json.dumps({"step": s}) for s in range(1, last_step + 1)]
    (tmp_path / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    assert finished(tmp_path, 300) is done


def test_every_method_plays_the_same_episodes_per_step():
    from bench.experiments.common import method_settings

    grpo = method_settings("grpo", 8)
    assert "algorithm.group_size=2" in grpo and "orchestrator.episodes_per_step=4" in grpo
    sao = method_settings("sao", 8)
    assert "algorithm.group_size=1" in sao and "orchestrator.episodes_per_step=8" in sao
    assert sao[0] == "algorithm.name=sao" and grpo[0] == "algorithm.name=grpo"


def test_the_interrupted_line_says_what_is_kept(tmp_path):
    from argparse import Namespace

    from bench.experiments.stability import kept

    args = Namespace(out=tmp_path, seed=0, methods=["sao", "grpo"], steps=3)
    assert kept(args, "") == "the warm start did not finish (it starts over); run the same command again to continue"
    runs = tmp_path / "runs"
    for run, step in (("warm-s0", 0), ("sao-s0", 3)):
        (runs / run / "checkpoints" / f"step_{step:06d}").mkdir(parents=True)
        (runs / run / "checkpoints" / f"step_{step:06d}" / "state.json").write_text("{}")
    (runs / "sao-s0" / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in (1, 2, 3)))
    trainer_line = "1 of 3 steps finished (DIR; checkpoint step_000001); run the same command with run.resume=auto"
    assert kept(args, trainer_line) == (
        f"warm start and finished runs (sao) kept in {tmp_path}; the run in progress: 1 of 3 steps finished "
        "(DIR; checkpoint step_000001); run the same command again to continue"
    )


def test_the_bench_runs_each_method_from_the_warm_start_and_keeps_finished_runs(tmp_path, monkeypatch):
    """`bench` with training replaced: every run's config is the real one (overrides checked),
    a finished run is not trained again, an unfinished one resumes."""
    import trainer.train
    from bench.experiments import stability
    from bench.experiments.common import TrainingRunner

    trained = []

    def fake_train(config):
        trained.append(config)
        folder = tmp_path / "out" / "runs" / config.run.name
        (folder / "checkpoints" / f"step_{config.run.steps:06d}").mkdir(parents=True)
        (folder / "checkpoints" / f"step_{config.run.steps:06d}" / "state.json").write_text("{}")
        lines = [json.dumps({"step": s, "success_rate": 0.5, "grad_norm": 0.1}) for s in range(1, config.run.steps + 1)]
        (folder / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
        return folder

    monkeypatch.setattr(trainer.train, "train", fake_train)
    monkeypatch.setattr(TrainingRunner, "warm_start", lambda self, seed: tmp_path / "warm" / "policy")
    args = stability.parse(["--steps", "3", "--out", str(tmp_path / "out"), "--lr", "grpo=1e-4"])
    runs = stability.bench(args)
    assert list(runs) == ["sao", "grpo"] and [len(r) for r in runs.values()] == [3, 3]
    sao, grpo = trained
    assert (sao.algorithm.name, sao.algorithm.group_size, sao.orchestrator.episodes_per_step) == ("sao", 1, 8)
    assert (grpo.algorithm.name, grpo.algorithm.group_size, grpo.orchestrator.episodes_per_step) == ("grpo", 2, 4)
    assert grpo.learner.lr == 1e-4 and sao.learner.lr == 2.5e-4  # the --lr one; configs/train_swe.yaml's
    for config in trained:
        assert config.model.name == str(tmp_path / "warm" / "policy") and config.warm_start.steps == 0
        assert config.run.resume == "auto" and config.evaluation.episodes == 0 and config.run.steps == 3
    stability.bench(args)
    assert len(trained) == 2  # both finished: kept
    figures = stability.write_results(runs, args, 8)
    assert figures["sao_collapse_step"] == "none" and figures["grpo_steps_done"] == 3
    assert (tmp_path / "out" / "stability.png").is_file()
    assert json.loads((tmp_path / "out" / "curves.json").read_text())["methods"]["grpo"]["curves"]["step"] == [1, 2, 3]


def test_an_out_folder_holds_one_setting(tmp_path):
    from bench.experiments.stability import check_setting, parse

    check_setting(parse(["--out", str(tmp_path)]))
    check_setting(parse(["--out", str(tmp_path)]))  # the same: fine
    with pytest.raises(SystemExit, match="holds runs made with"):
        check_setting(parse(["--out", str(tmp_path), "learner.lr=1e-4"]))
