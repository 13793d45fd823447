"""bench.experiments.learning's pure parts: the lr choice, one run's figures, the diagnosis, the table over
seeds, and the resumable loop (with a fake runner: no training here)."""

import json

import pytest

from bench.experiments.common import GROUPED, METHODS, algorithm_of, method_settings
from bench.experiments.learning import (
    LRS,
    best_lr,
    diagnose,
    failures,
    load_results,
    markdown,
    method_figures,
    plan_runs,
    run_bench,
    run_figures,
    status,
)


def step(n: int, success: float, **more) -> dict:
    return {"step": n, "episodes": 8, "success_rate": success, "skipped_steps": 0, **more}


def test_the_methods_and_the_sweep_are_fixed_here():
    assert list(METHODS) == ["sao", "ppo", "grpo", "grpo_mask", "dr_grpo", "dapo", "grpo_pos"]
    assert {"grpo", "grpo_mask", "dr_grpo", "dapo", "grpo_pos"} == GROUPED
    assert method_settings("grpo_pos", 8) == [
        "algorithm.name=grpo", "algorithm.positive_advantages_only=true", "algorithm.group_size=2",
        "orchestrator.episodes_per_step=4", "algorithm.loss_aggregation=null",
    ]  # fmt: skip
    from trainer.resolve import load_config

    recipe = load_config("configs/train_swe.yaml").learner.lr
    assert (recipe / 2, recipe, recipe * 2) == LRS  # half, once and twice the recipe's learner.lr
    assert all(f"algorithm.name={algorithm_of(name)}" in settings for name, settings in METHODS.items())
    assert [algorithm_of(name) for name in METHODS if name != "grpo_pos"] == [n for n in METHODS if n != "grpo_pos"]


def test_best_lr_is_the_highest_training_success_and_the_smaller_lr_on_ties():
    assert best_lr({2.5e-4: 0.25, 5e-4: 0.5, 1e-3: 0.375}) == 5e-4
    assert best_lr({1e-3: 0.5, 2.5e-4: 0.5, 5e-4: 0.25}) == 2.5e-4
    assert best_lr({5e-4: 0.0, 1e-3: 0.0}) == 5e-4
    assert best_lr({1e-3: 0.125}) == 1e-3


def test_run_figures_from_metrics_and_summary():
    records = [
        step(1, 0.25, masked_low_fraction=0.01, masked_high_fraction=0.0, sampled_entropy=0.5),
        step(2, 0.5, masked_low_fraction=0.02, masked_high_fraction=0.01, sampled_entropy=0.5),
        step(3, 0.5, masked_low_fraction=0.0, masked_high_fraction=0.0, sampled_entropy=0.5),
        step(4, 0.75, masked_low_fraction=0.03, masked_high_fraction=0.01, sampled_entropy=0.5),
        {"event": "note without a step"},
    ]
    summary = {"eval_before": {"success_rate": 0.25}, "eval_after": {"success_rate": 0.5}}
    assert run_figures(records, summary) == {
        "steps": 4,
        "first_success": 0.25,
        "final_success": 0.75,
        "eval_before": 0.25,
        "eval_after": 0.5,
        "masked_fraction": 0.02,  # per step 0.01, 0.03, 0, 0.04
        "no_signal_steps": None,  # records from before the learner counted them
        "value_mean": None,
        "value_std": None,
        "explained_variance": None,
        "fails": "—",
    }
    # No mask (a clipped loss), no evaluation; no-signal steps counted; a critic's statistics.
    critic = [
        step(1, 0.0, skipped_no_signal=0, value_mean=0.0, value_std=0.0, return_mean=0.5),
        step(2, 1.0, skipped_no_signal=1, value_mean=0.1, value_std=0.2, explained_variance=-0.5),
        step(3, 1.0, skipped_no_signal=3, value_mean=0.3, value_std=0.4, explained_variance=0.25),
    ]
    figures = run_figures(critic, {})
    assert figures["no_signal_steps"] == 3
    # The last third (one step of three); a step whose returns did not vary has no EV.
    assert (figures["value_mean"], figures["value_std"], figures["explained_variance"]) == (0.3, 0.4, 0.25)
    assert figures["masked_fraction"] is None and figures["eval_before"] is None and figures["eval_after"] is None
    assert (figures["first_success"], figures["final_success"]) == (0.0, 1.0)


def test_diagnose_names_each_failure():
    assert diagnose([step(i, 0.5, sampled_entropy=0.4) for i in range(9)]) == "—"
    collapsed = [step(i, 0.5) for i in range(3)] + [step(i, 0.0) for i in range(3, 9)]
    assert diagnose(collapsed) == "collapsed: training success 0 for the last 6 steps"
    assert diagnose([step(i, 0.0) for i in range(4)]) == "—"  # fewer than COLLAPSE_STEPS (5)
    entropy = [step(i, 0.5, sampled_entropy=e) for i, e in enumerate([0.5, 0.5, 0.3, 0.2, 0.05, 0.05])]
    assert diagnose(entropy) == "entropy collapse: 0.5 -> 0.05 nats/token"
    flat = [step(i, 0.5, zero_variance_dropped=d) for i, d in enumerate([8, 4, 4, 0])]  # 16 of 32 episodes
    assert diagnose(flat) == "no learning signal: 50% of episodes in all-equal groups"
    assert diagnose([step(i, 0.5, zero_variance_dropped=d) for i, d in enumerate([8, 4, 2, 0])]) == "—"
    skipped = [step(1, 0.5), {**step(2, 0.5), "skipped_steps": 2}, {**step(3, 0.5), "skipped_steps": 2}]
    assert diagnose(skipped) == "non-finite steps skipped: 2"
    both = [{**r, "skipped_steps": 1} for r in collapsed]
    assert diagnose(both) == "collapsed: training success 0 for the last 6 steps; non-finite steps skipped: 1"


def run(seed: int, first: float, final: float, before, after, masked=None, fails="—", **more) -> dict:
    return {"seed": seed, "first_success": first, "final_success": final, "eval_before": before,
            "eval_after": after, "masked_fraction": masked, "fails": fails, **more}  # fmt: skip


def test_method_figures_over_seeds():
    runs = [
        run(0, 0.25, 0.5, 0.25, 0.5, masked=0.01),
        run(1, 0.25, 0.75, 0.25, 0.75, masked=0.03),
        run(2, 0.5, 0.25, 0.5, 0.5, masked=0.02, fails="collapsed: training success 0 for the last 6 steps"),
    ]
    figures = method_figures("grpo_mask", {1e-3: 0.25, 5e-4: 0.5, 2.5e-4: 0.5}, runs)
    assert figures == {
        "method": "grpo_mask",
        "lr": 2.5e-4,
        "sweep": {"0.00025": 0.5, "0.0005": 0.5, "0.001": 0.25},
        "seeds": [0, 1, 2],
        "eval_rise_mean": 0.25,  # rises 0.25, 0.5, 0.0
        "eval_rise_std": pytest.approx(0.2041, abs=1e-12),  # sqrt(1/24), rounded to 4 places
        "first_success": 0.3333,
        "final_success": 0.5,
        "masked_fraction": 0.02,
        "no_signal_steps": None,
        "value_mean": None,
        "value_std": None,
        "explained_variance": None,
        "fails": "s2: collapsed: training success 0 for the last 6 steps; training success fell 0.50 -> 0.25",
    }
    critic = {"value_mean": 0.01, "value_std": 0.02, "explained_variance": -0.1, "no_signal_steps": 0}
    plain = method_figures("ppo", {5e-4: 0.5}, [run(0, 0.0, 0.5, None, None, **critic)])
    assert plain["eval_rise_mean"] is None and plain["eval_rise_std"] is None and plain["masked_fraction"] is None
    assert {key: plain[key] for key in critic} == critic
    table = markdown([figures, plain]).splitlines()
    assert table[2] == (
        "| grpo_mask | 0.00025 | 0.00025: 0.50, 0.0005: 0.50, 0.001: 0.25 | +0.250 ± 0.204 | 0.33 → 0.50 | 2.00% "
        "| — | — | s2: collapsed: training success 0 for the last 6 steps; training success fell 0.50 -> 0.25 |"
    )
    assert table[3] == "| ppo | 0.0005 | 0.0005: 0.50 | — | 0.00 → 0.50 | — | 0 | 0.010 / 0.020 / -0.100 | — |"


class FakeRunner:
    """Records its calls; training success = lr / 10 (so the largest lr wins) unless a
    `sweep` says otherwise; `fail_on` raises on that call, as a crash or Ctrl-C would."""

    def __init__(self, fail_on=None, sweep=None):
        self.calls, self.fail_on, self.sweep = [], fail_on, sweep or {}

    def __call__(self, method, lr, seed):
        if (method, lr, seed) == self.fail_on:
            raise KeyboardInterrupt
        self.calls.append((method, lr, seed))
        success = self.sweep.get((method, lr), lr / 10) + seed / 100
        return {"first_success": 0.0, "final_success": success, "eval_before": 0.25,
                "eval_after": 0.25 + success, "masked_fraction": None, "fails": "—"}  # fmt: skip


def test_sweep_then_the_best_lr_on_every_seed_reusing_the_sweep_run(tmp_path):
    results = tmp_path / "results.jsonl"
    runner = FakeRunner(sweep={("ppo", 1.0): 0.5, ("ppo", 2.0): 0.5, ("ppo", 3.0): 0.25})
    rows = run_bench(["sao", "ppo"], (1.0, 2.0, 3.0), 3, runner, results)
    assert runner.calls == [
        ("sao", 1.0, 0), ("sao", 2.0, 0), ("sao", 3.0, 0), ("ppo", 1.0, 0), ("ppo", 2.0, 0), ("ppo", 3.0, 0),
        ("sao", 3.0, 1), ("sao", 3.0, 2), ("ppo", 1.0, 1), ("ppo", 1.0, 2),
    ]  # fmt: skip
    assert [(r["method"], r["lr"], r["seeds"]) for r in rows] == [("sao", 3.0, [0, 1, 2]), ("ppo", 1.0, [0, 1, 2])]
    assert rows[1]["sweep"] == {"1.0": 0.5, "2.0": 0.5, "3.0": 0.25}
    assert len(results.read_text().splitlines()) == 10
    assert load_results(results)[("ppo", 1.0, 2)]["final_success"] == 0.52


def test_a_rerun_skips_every_finished_run_and_loses_none(tmp_path):
    results = tmp_path / "out" / "results.jsonl"
    crashing = FakeRunner(fail_on=("grpo", 2.0, 0))
    with pytest.raises(KeyboardInterrupt):
        run_bench(["sao", "grpo"], (1.0, 2.0), 2, crashing, results)
    assert crashing.calls == [("sao", 1.0, 0), ("sao", 2.0, 0), ("grpo", 1.0, 0)]
    assert [json.loads(line)["method"] for line in results.read_text().splitlines()] == ["sao", "sao", "grpo"]
    results.write_text(results.read_text() + '{"method": "grpo", "lr"')  # a write torn by the crash
    again = FakeRunner()
    rows = run_bench(["sao", "grpo"], (1.0, 2.0), 2, again, results)
    assert again.calls == [("grpo", 2.0, 0), ("sao", 2.0, 1), ("grpo", 2.0, 1)]
    assert [r["lr"] for r in rows] == [2.0, 2.0]
    finished = FakeRunner()
    run_bench(["sao", "grpo"], (1.0, 2.0), 2, finished, results)
    assert finished.calls == []  # everything recorded: nothing runs


def test_status_lists_the_recorded_runs_and_the_runs_left_in_the_benchs_order(tmp_path):
    results = tmp_path / "results.jsonl"
    crashing = FakeRunner(sweep={("sao", 1.0): 0.5, ("sao", 2.0): 0.25}, fail_on=("grpo", 2.0, 0))
    with pytest.raises(KeyboardInterrupt):
        run_bench(["sao", "grpo"], (1.0, 2.0), 3, crashing, results)
    done = load_results(results)
    assert plan_runs(["sao", "grpo"], (1.0, 2.0), 3, done) == [("grpo", 2.0, 0), ("sao", 1.0, 1), ("sao", 1.0, 2)]
    report = status(["sao", "grpo"], (1.0, 2.0), 3, done)
    assert report.splitlines()[2:5] == [
        "| sao | 1 | 0 | 0.00 → 0.50 | 0.25 → 0.75 | — | — |",
        "| sao | 2 | 0 | 0.00 → 0.25 | 0.25 → 0.50 | — | — |",
        "| grpo | 1 | 0 | 0.00 → 0.10 | 0.25 → 0.35 | — | — |",
    ]
    assert report.endswith("3 runs recorded; 3 runs known to be left, plus 2 seeds each for grpo once their "
                           "sweeps choose an lr.")  # fmt: skip
    again = FakeRunner(sweep={("sao", 1.0): 0.5, ("sao", 2.0): 0.25})
    run_bench(["sao", "grpo"], (1.0, 2.0), 3, again, results)
    assert again.calls[:3] == plan_runs(["sao", "grpo"], (1.0, 2.0), 3, done)  # the order the bench runs them


def test_failures_add_the_declines_the_figures_show_to_the_metrics_diagnosis():
    assert failures(run(0, 0.45, 0.33, 0.47, 0.27)) == (
        "training success fell 0.45 -> 0.33; evaluation fell 0.47 -> 0.27"
    )  # PPO at 1.25e-4 on the multi-turn default, seed 0
    assert failures(run(0, 0.5, 0.45, 0.5, 0.41)) == "—"  # less than DECLINE either way
    assert (
        failures(run(0, 0.5, 0.0, None, None, fails="collapsed: x"))
        == "collapsed: x; training success fell 0.50 -> 0.00"
    )


def test_the_group_size_changes_the_group_methods_only_at_the_same_episode_budget():
    from bench.experiments.common import method_settings

    assert method_settings("grpo", 8) == ["algorithm.name=grpo", "algorithm.group_size=2",
                                          "orchestrator.episodes_per_step=4", "algorithm.loss_aggregation=null"]  # fmt: skip
    assert method_settings("grpo", 8, 4)[1:3] == ["algorithm.group_size=4", "orchestrator.episodes_per_step=2"]
    assert method_settings("sao", 8, 4)[1:3] == ["algorithm.group_size=1", "orchestrator.episodes_per_step=8"]


def test_an_out_made_with_another_setting_is_refused_and_one_from_before_group_sizes_is_size_2(tmp_path):
    from bench.experiments.learning import check_setting

    setting = {"config": "configs/train_swe.yaml", "overrides": [], "steps": None}
    (tmp_path / "setting.json").write_text(json.dumps(setting))  # written before --group-size existed
    check_setting(tmp_path, {**setting, "group_size": 2})
    with pytest.raises(SystemExit, match=f'{tmp_path}: holds runs made with .*"group_size": 2}}; use another --out'):
        check_setting(tmp_path, {**setting, "group_size": 4})
    with pytest.raises(SystemExit, match="use another --out"):
        check_setting(tmp_path, {**setting, "steps": 3, "group_size": 2})
    check_setting(tmp_path / "fresh", {**setting, "group_size": 4})  # nothing recorded: anything goes
