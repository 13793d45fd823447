"""Training metrics as they happen: one JSON line per step, TensorBoard scalars, and a PNG.

`metrics.jsonl` is the record (append-only, flushed every step, so a crash loses nothing
already written); TensorBoard gets every numeric field of the same records under `train/`
(and `reward_hack_blocked/<rule>` counts); `metrics.png` plots success rate, value loss,
masked-token fractions, staleness, throughput, the learner's idle fraction and the sandbox
cost (sandbox-seconds, the share of episode time waiting on the sandbox vs the engine, cold
vs warm starts: `trainer.inference.cost`), redrawn from the JSONL so it always matches it.

With `run.tracker=wandb` or `run.tracker=mlflow` the same scalars also go to that experiment
tracker (the `tracking` extra installs both), with the run's config logged once. Both stay
offline unless the user says otherwise: wandb runs in `offline` mode (unless `WANDB_MODE` is
set) under `<run>/wandb/`, to upload later with `wandb sync`; MLflow writes a file store at
`<run>/mlruns` (unless `MLFLOW_TRACKING_URI` is set), browsed with
`mlflow ui --backend-store-uri <run>/mlruns`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from trainer.config import ConfigError
from trainer.inference.cost import cost_summary, episode_cost

logger = logging.getLogger(__name__)

TRACKERS = {"wandb": "wandb", "mlflow": "mlflow-skinny"}  # tracker: the pip package that provides it

PLOTTED = (
    ("success_rate", "success rate"),
    ("gold_probability", "P(gold actions) at the training temperature"),
    ("turns_mean", "turns per episode (mean)"),
    ("sampled_entropy", "entropy per action token (estimated from the samples)"),
    ("grad_norm", "policy gradient norm (before clipping)"),
    ("value_loss", "value loss"),
    ("masked_low_fraction", "masked low (r <= 1 - eps_low)"),
    ("masked_high_fraction", "masked high (r >= 1 + eps_high)"),
    ("staleness_mean", "staleness (versions behind the learner, mean per batch)"),
    ("tokens_per_s", "throughput (tokens/s)"),
    ("learner_idle_fraction", "learner idle fraction (since the first batch)"),
    ("sandbox_seconds", "sandbox-seconds per step (agent sandboxes and grading)"),
    (
        ("sandbox_wait_fraction", "engine_wait_fraction"),
        "share of episode wall time waiting on the sandbox / the engine",
    ),
    (("cold_starts", "warm_starts"), "sandbox starts per step: cold / warm (from the pool)"),
    ("memo_verdicts", "verdicts per step from the grading memo (no sandbox ran)"),
)
"""Panels of `metrics.png`: a field, or a tuple of fields drawn as lines of one panel."""


class MetricsWriter:
    def __init__(
        self,
        run_dir: Path,
        tracker: str = "none",
        project: str = "agentic-rl",
        run_name: str | None = None,
        config: dict | None = None,
    ) -> None:
        """`tracker`: `none`, `wandb` or `mlflow` (`run.tracker`); a tracker whose package is
        missing is a `ConfigError` before anything is written. `project` is the wandb project
        or MLflow experiment, `run_name` the run's name there (default: the run folder's)."""
        self._tracker = None
        if tracker != "none":  # first: a tracker that cannot start fails the run at once, in one line
            _import_tracker(tracker)
            kind = _WandbTracker if tracker == "wandb" else _MlflowTracker
            self._tracker = kind(run_dir, project, run_name or run_dir.name, config or {})
        from torch.utils.tensorboard import SummaryWriter  # lazy: pulls in tensorboard

        self.path = run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._board = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        values = scalars(record)
        for key, value in values.items():
            self._board.add_scalar(key, value, record["step"])
        self._board.flush()
        if self._tracker is not None:
            self._tracker.log(values, record["step"])

    def close(self) -> None:
        self._file.close()
        self._board.close()
        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None


def scalars(record: dict) -> dict[str, int | float]:
    """What TensorBoard and the tracker get of a record: every numeric field but `step` as
    `train/<field>`, and the grading rules tripped as `reward_hack_blocked/<rule>`."""
    out = {
        f"train/{key}": value
        for key, value in record.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step"
    }
    for kind, count in (record.get("reward_hack_blocked") or {}).items():
        out[f"reward_hack_blocked/{kind}"] = count
    return out


def require_tracker(tracker: str) -> None:
    """Fail now, in one line, when `run.tracker` names a package that is not installed (a
    run should not find out after minutes of set-up)."""
    if tracker != "none":
        _import_tracker(tracker)


def _import_tracker(tracker: str):
    if tracker not in TRACKERS:
        raise ConfigError(f"run.tracker={tracker}: not one of none, {', '.join(TRACKERS)}")
    try:
        return __import__(tracker)
    except ModuleNotFoundError as exc:
        if exc.name != tracker:  # installed but broken: let its own error show
            raise
        raise ConfigError(
            f"run.tracker={tracker} needs the {tracker} package: pip install {TRACKERS[tracker]}"
        ) from None


class _WandbTracker:
    """A wandb run, offline under `<run>/wandb/` unless `WANDB_MODE` (or `WANDB_DIR`) says otherwise."""

    def __init__(self, run_dir: Path, project: str, run_name: str, config: dict) -> None:
        import wandb

        where = {} if os.environ.get("WANDB_DIR") else {"dir": str(run_dir)}
        mode = {} if os.environ.get("WANDB_MODE") else {"mode": "offline"}
        quiet = {} if os.environ.get("WANDB_SILENT") else {"settings": wandb.Settings(silent=True)}  # we log
        self._run = wandb.init(project=project, name=run_name, config=config, **where, **mode, **quiet)
        self._folder = Path(self._run.dir).parent
        logger.info("wandb run %s (%s) in %s", self._run.id, self._run.settings.mode, self._folder)

    def log(self, values: dict, step: int) -> None:
        self._run.log(values, step=step)

    def close(self) -> None:
        offline = self._run.settings.mode == "offline"
        self._run.finish()
        if offline:
            logger.info("wandb: upload the offline run with `wandb sync %s`", self._folder)


class _MlflowTracker:
    """An MLflow run in the experiment `project`, in a file store at `<run>/mlruns` unless
    `MLFLOW_TRACKING_URI` names another. (MLflow 3 refuses file stores unless
    `MLFLOW_ALLOW_FILE_STORE` is set; it is set for this process when the default store is used.)"""

    _BAD_KEY = re.compile(r"[^\w./\- ]")  # what MLflow accepts in metric and param names

    def __init__(self, run_dir: Path, project: str, run_name: str, config: dict) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = (run_dir / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._client = MlflowClient(tracking_uri=uri)
        experiment = self._client.get_experiment_by_name(project)
        experiment_id = experiment.experiment_id if experiment else self._client.create_experiment(project)
        self._run_id = self._client.create_run(experiment_id, run_name=run_name).info.run_id
        params = [Param(self._key(key), str(value)[:6000]) for key, value in _flatten(config)]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            self._client.log_batch(self._run_id, params=params[start : start + 100])
        logger.info("mlflow run %s in experiment %r at %s", self._run_id, project, uri)

    def _key(self, key: str) -> str:
        return self._BAD_KEY.sub("_", key)

    def log(self, values: dict, step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(self._key(key), float(value), now, step) for key, value in values.items()]
        for start in range(0, len(metrics), 1000):  # and at most 1000 metrics
            self._client.log_batch(self._run_id, metrics=metrics[start : start + 1000])

    def close(self) -> None:
        self._client.set_terminated(self._run_id)


def _flatten(config: dict, prefix: str = "") -> Iterable[tuple[str, object]]:
    """`{"run": {"seed": 0}}` as `("run.seed", 0)`: the dotted names `section.field=value` uses."""
    for key, value in config.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def reward_hacks_blocked(trajectories: Iterable) -> dict[str, int]:
    """How many of a step's episodes tripped each rule of the grading contract
    (`agent_env.grading`: `protected_files`, `canary_passed`, `agent_broke_sandbox`, ...),
    so a user sees when a policy starts probing the grader. Rules no episode tripped are left out."""
    counts: Counter[str] = Counter()
    for trajectory in trajectories:
        counts.update(set(trajectory.reward_hack_blocked))
    return dict(sorted(counts.items()))


def plot(metrics_path: Path, out: Path, summary: dict | None = None) -> Path:
    """A PNG of the plotted metrics over steps (fields a run lacks are left out) and, when
    `summary` holds the evaluations, a last panel of evaluation success by the number of
    turns an episode took, before and after RL."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    panels = [
        (keys, title)
        for key, title in PLOTTED
        if (keys := key if isinstance(key, tuple) else (key,)) and any(k in r for r in records for k in keys)
    ] or [(("step",), "no steps yet")]
    evaluations = [(when, (summary or {}).get(f"eval_{when}")) for when in ("before", "after")]
    evaluations = [(when, result) for when, result in evaluations if result and result.get("by_turns")]
    rows = len(panels) + bool(evaluations)
    figure, axes = plt.subplots(rows, 1, figsize=(7, 2.0 * max(rows, 1)), squeeze=False)
    spans = phase_spans(records)
    for index, (axis, (keys, title)) in enumerate(zip(axes[:, 0], panels, strict=False)):
        for key in keys:
            points = [(r["step"], r[key]) for r in records if key in r]
            axis.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=key)
        if len(keys) > 1:
            axis.legend(fontsize=7)
        axis.set_title(title, fontsize=9, pad=14 if spans and index == 0 else 6)
        axis.grid(alpha=0.3)
        shade_phases(axis, spans, names=index == 0)
    axes[len(panels) - 1, 0].set_xlabel("step")
    if evaluations:
        _plot_success_by_turns(axes[-1, 0], evaluations)
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def phase_spans(records: list[dict]) -> list[tuple[int, int, str]]:
    """(first step, last step, "N. name") of each phase a task-stream run went through, from
    its records' `phase_index` and `phase` (none for a run without a stream)."""
    spans: list[tuple[int, int, str]] = []
    for record in sorted((r for r in records if "phase_index" in r), key=lambda r: r["step"]):
        name = f"{record['phase_index'] + 1}. {record['phase']}"
        if spans and spans[-1][2] == name:
            spans[-1] = (spans[-1][0], record["step"], name)
        else:
            spans.append((record["step"], record["step"], name))
    return spans


def shade_phases(axis, spans: list[tuple[int, int, str]], names: bool = True) -> None:
    """Every other phase shaded on `axis`, each named above the plot when `names`."""
    for number, (first, last, name) in enumerate(spans):
        if number % 2:
            axis.axvspan(first - 0.5, last + 0.5, color="grey", alpha=0.12)
        if names:
            axis.text((first + last) / 2, 1.01, name, ha="center", va="bottom", fontsize=6,
                      transform=axis.get_xaxis_transform())  # fmt: skip


def _plot_success_by_turns(axis, evaluations: list[tuple[str, dict]]) -> None:
    """Bars of evaluation success per turn count (before and after RL side by side), each
    labelled with its episode count."""
    turn_counts = sorted({int(k) for _, result in evaluations for k in result["by_turns"]})
    width = 0.8 / len(evaluations)
    for offset, (when, result) in enumerate(evaluations):
        xs, heights, counts = [], [], []
        for index, turns in enumerate(turn_counts):
            if cell := result["by_turns"].get(str(turns)):
                xs.append(index + (offset - (len(evaluations) - 1) / 2) * width)
                heights.append(cell["success_rate"])
                counts.append(cell["episodes"])
        bars = axis.bar(xs, heights, width=width, label=f"{when} RL (mean {result.get('turns_mean', 0):.1f} turns)")
        axis.bar_label(bars, labels=[f"n={n}" for n in counts], fontsize=7)
    axis.set_xticks(range(len(turn_counts)), [str(t) for t in turn_counts])
    axis.set_xlabel("turns in the episode")
    axis.set_ylim(0, 1.15)
    axis.set_title("evaluation: success by turns per episode", fontsize=9)
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3)


def sampled_entropy(trajectories) -> float:
    """The policy's per-token entropy at the sampling temperature, estimated from the
    episodes themselves: the mean of -log p(token) over every sampled action token (an
    unbiased estimate of the expected entropy under the behaviour policy, free of any extra
    forward pass). A policy collapsing onto one answer drives it to 0; 0.0 for no tokens."""
    values = [-lp for t in trajectories for lp, own in zip(t.logprobs, t.policy_mask, strict=True) if own]
    return round(sum(values) / len(values), 6) if values else 0.0


def step_record(
    *, step: int, learner: dict, batch, seconds: float, infra_errors: int, schedule_counters: dict, orchestrator
) -> dict:
    """One line of `metrics.jsonl`: the learner's metrics, what the batch's episodes did
    (reward, success, turns, format errors, grading rules tripped, tokens, staleness;
    episodes and success per task), what they cost (`trainer.inference.cost.cost_summary`:
    sandbox-seconds, start, tool, grading, engine and wall seconds, cold/warm/fork starts,
    the sandbox and engine wait fractions), how
    its rollouts were spread over its prompts (`rollouts_per_prompt_mean`/`_max`,
    `nonzero_variance_fraction`, `budget_spent`: see `schedule.allocation_metrics`), and the
    orchestrator's counters (drops, waits, retries, restarts, idle fraction)."""
    trajectories = batch.trajectories
    out = {"step": step, "episodes": len(trajectories), **learner, "infra_errors": infra_errors}
    if trajectories:
        count = len(trajectories)
        tokens = sum(len(t) for t in trajectories)
        out.update(
            reward_mean=sum(t.reward for t in trajectories) / count,
            success_rate=sum(t.resolved for t in trajectories) / count,
            turns_mean=sum(t.turns for t in trajectories) / count,
            sampled_entropy=sampled_entropy(trajectories),
            format_errors=sum(t.format_errors for t in trajectories),
            reward_hack_blocked=reward_hacks_blocked(trajectories),
            tokens=tokens,
            tokens_per_s=round(tokens / max(seconds, 1e-9), 1),
            staleness_mean=sum(batch.staleness) / len(batch.staleness),
            staleness_max=max(batch.staleness),
            episode_seconds=[t.episode_seconds for t in trajectories],
        )
        out.update(cost_summary(episode_cost(t) for t in trajectories))
        by_task: dict[str, list[bool]] = {}
        for trajectory in trajectories:
            by_task.setdefault(trajectory.task_id, []).append(trajectory.resolved)
        out["episodes_by_task"] = {task: len(v) for task, v in sorted(by_task.items())}
        out["success_by_task"] = {task: round(sum(v) / len(v), 4) for task, v in sorted(by_task.items())}
    out.update(batch.allocation)
    out.update(
        step_seconds=round(seconds, 3),
        stale_dropped=schedule_counters["stale_dropped"],
        admission_waits=schedule_counters["admission_waits"],
        infra_retries=schedule_counters["infra_retries"],
        infra_dropped=schedule_counters["infra_dropped"],
        worker_restarts=orchestrator.counters.worker_restarts,
        worker_nodes=orchestrator.node_count(),
        hung_episodes=orchestrator.counters.hung_episodes,
        learner_idle_fraction=round(orchestrator.learner_idle_fraction(), 4),
        episodes_running=len(orchestrator.running),
    )
    return out
