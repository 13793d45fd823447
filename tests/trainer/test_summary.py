"""summary.json's evaluation figures and the plot's turn panels, from known episodes."""

import json

from trainer.inference.trajectory import Trajectory
from trainer.metrics import plot, sampled_entropy
from trainer.recipes.phases import describe, success_summary


def _episode(task: str, turns: int, resolved: bool) -> Trajectory:
    trajectory = Trajectory(task_id=task, turns=turns, resolved=resolved)
    trajectory.extend([1, 2, 3], policy=False)
    trajectory.extend([4, 5], policy=True, logprobs=[-0.5, -1.5], version=0)
    return trajectory


EPISODES = [_episode("a", 5, True), _episode("a", 6, False), _episode("b", 5, True), _episode("b", 3, False)]


def test_success_summary_reports_turns_and_success_per_turn_count():
    summary = success_summary(EPISODES)
    assert summary == {
        "episodes": 4,
        "success_rate": 0.5,
        "per_task": {"a": 0.5, "b": 0.5},
        "turns_mean": 4.75,
        "by_turns": {
            "3": {"episodes": 1, "success_rate": 0.0},
            "5": {"episodes": 2, "success_rate": 1.0},
            "6": {"episodes": 1, "success_rate": 0.0},
        },
    }
    assert describe(summary) == "2/4 episodes resolved (0.50), 4.8 turns per episode"


def test_sampled_entropy_is_the_mean_negative_logprob_of_action_tokens_only():
    assert sampled_entropy(EPISODES) == 1.0  # (0.5 + 1.5) / 2 per episode; observation tokens left out
    assert sampled_entropy([]) == 0.0


def test_the_plot_adds_the_success_by_turns_panel_when_the_run_evaluated(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    records = [{"step": s, "success_rate": 0.25 * s, "turns_mean": 5.0, "sampled_entropy": 0.2} for s in (1, 2)]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    import matplotlib.image

    plain = plot(metrics, tmp_path / "plain.png")
    with_turns = plot(metrics, tmp_path / "turns.png", {"eval_before": success_summary(EPISODES)})
    # One more panel (2 inches at 100 dpi) for the evaluation's success by turns.
    assert matplotlib.image.imread(with_turns).shape[0] - matplotlib.image.imread(plain).shape[0] == 200


def test_a_stream_runs_phases_become_spans_and_shade_the_plot(tmp_path):
    from trainer.metrics import phase_spans

    records = [
        {"step": s, "phase": name, "phase_index": index, "success_rate": 0.5}
        for s, (name, index) in enumerate([("a", 0), ("a", 0), ("b", 1), ("a", 2), ("a", 2)], start=1)
    ]
    assert phase_spans(records) == [(1, 2, "1. a"), (3, 3, "2. b"), (4, 5, "3. a")]
    assert phase_spans([{"step": 1, "success_rate": 0.5}]) == []
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    import matplotlib.image

    shaded = matplotlib.image.imread(plot(metrics, tmp_path / "shaded.png"))
    metrics.write_text("".join(json.dumps({"step": r["step"], "success_rate": 0.5}) + "\n" for r in records))
    plain = matplotlib.image.imread(plot(metrics, tmp_path / "plain.png"))
    assert shaded.shape == plain.shape and (shaded != plain).any()  # the shading and names are drawn
