"""Training metrics as they happen: one JSON line per step, TensorBoard scalars, and a PNG.

`metrics.jsonl` is the record (append-only, flushed every step, so a crash loses nothing
already written); TensorBoard gets every numeric field of the same records under `train/`;
`metrics.png` plots success rate, value loss, masked-token fractions, staleness, throughput
and the learner's idle fraction, redrawn from the JSONL so it always matches it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

PLOTTED = (
    ("success_rate", "success rate"),
    ("gold_probability", "P(gold actions) at the training temperature"),
    ("value_loss", "value loss"),
    ("masked_low_fraction", "masked low (r <= 1 - eps_low)"),
    ("masked_high_fraction", "masked high (r >= 1 + eps_high)"),
    ("staleness_mean", "staleness (versions behind the learner, mean per batch)"),
    ("tokens_per_s", "throughput (tokens/s)"),
    ("learner_idle_fraction", "learner idle fraction (since the first batch)"),
)


class MetricsWriter:
    def __init__(self, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter  # lazy: pulls in tensorboard

        self.path = run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._board = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        for key, value in record.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step":
                self._board.add_scalar(f"train/{key}", value, record["step"])
        for kind, count in (record.get("reward_hack_blocked") or {}).items():
            self._board.add_scalar(f"reward_hack_blocked/{kind}", count, record["step"])
        self._board.flush()

    def close(self) -> None:
        self._file.close()
        self._board.close()


def reward_hacks_blocked(trajectories: Iterable) -> dict[str, int]:
    """How many of a step's episodes tripped each rule of the grading contract
    (`agent_env.grading`: `protected_files`, `runner_tampered`, `agent_broke_sandbox`, ...),
    so a user sees when a policy starts probing the grader. Rules no episode tripped are left out."""
    counts: Counter[str] = Counter()
    for trajectory in trajectories:
        counts.update(set(trajectory.reward_hack_blocked))
    return dict(sorted(counts.items()))


def plot(metrics_path: Path, out: Path) -> Path:
    """A PNG of the plotted metrics over steps (fields a run lacks are left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    panels = [(key, title) for key, title in PLOTTED if any(key in r for r in records)] or [("step", "no steps yet")]
    figure, axes = plt.subplots(len(panels), 1, figsize=(7, 2.0 * max(len(panels), 1)), sharex=True, squeeze=False)
    for axis, (key, title) in zip(axes[:, 0], panels, strict=True):
        points = [(r["step"], r[key]) for r in records if key in r]
        axis.plot([p[0] for p in points], [p[1] for p in points], marker=".")
        axis.set_title(title, fontsize=9)
        axis.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def step_record(
    *, step: int, learner: dict, batch, seconds: float, infra_errors: int, schedule_counters: dict, orchestrator
) -> dict:
    """One line of `metrics.jsonl`: the learner's metrics, what the batch's episodes did
    (reward, success, turns, format errors, grading rules tripped, tokens, staleness), and
    the orchestrator's counters (drops, waits, retries, restarts, idle fraction)."""
    trajectories = batch.trajectories
    out = {"step": step, "episodes": len(trajectories), **learner, "infra_errors": infra_errors}
    if trajectories:
        count = len(trajectories)
        tokens = sum(len(t) for t in trajectories)
        out.update(
            reward_mean=sum(t.reward for t in trajectories) / count,
            success_rate=sum(t.resolved for t in trajectories) / count,
            turns_mean=sum(t.turns for t in trajectories) / count,
            format_errors=sum(t.format_errors for t in trajectories),
            reward_hack_blocked=reward_hacks_blocked(trajectories),
            tokens=tokens,
            tokens_per_s=round(tokens / max(seconds, 1e-9), 1),
            staleness_mean=sum(batch.staleness) / len(batch.staleness),
            staleness_max=max(batch.staleness),
            episode_seconds=[t.episode_seconds for t in trajectories],
        )
    out.update(
        step_seconds=round(seconds, 3),
        stale_dropped=schedule_counters["stale_dropped"],
        admission_waits=schedule_counters["admission_waits"],
        infra_retries=schedule_counters["infra_retries"],
        infra_dropped=schedule_counters["infra_dropped"],
        worker_restarts=orchestrator.counters.worker_restarts,
        hung_episodes=orchestrator.counters.hung_episodes,
        learner_idle_fraction=round(orchestrator.learner_idle_fraction(), 4),
        episodes_running=len(orchestrator.running),
    )
    return out
