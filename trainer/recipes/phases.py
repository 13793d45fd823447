"""The pieces of a training run's phases as plain functions (the recipe in
`trainer.recipes.rl` calls them): loading the tasks, the schedule, gold
demonstrations, evaluation summaries, the run folder's files, and the progress bars of
the phases before RL (one open at a time, log lines written above it)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from tasks import Task, TaskError
from trainer.config import TrainConfig

logger = logging.getLogger(__name__)


def load_tasks(config: TrainConfig) -> list[Task]:
    """The configured tasks that can run on this machine (environments built when needed);
    each one left out is named with the reason."""
    from agent_env import needs_environment, prepare_environments
    from tasks import load_task_set
    from tasks.streams import load_stream, stream_path

    if (stream := stream_path(config.tasks.source)) is not None:
        if config.tasks.ids:
            logger.info("tasks.ids (%d ids) does not apply to the task stream %s: its phases choose the tasks",
                        len(config.tasks.ids), stream)  # fmt: skip
        tasks = list(load_stream(stream, repo_cache=config.tasks.repo_cache).tasks)
    else:
        tasks = load_task_set(config.tasks.source, config.tasks.ids or None, repo_cache=config.tasks.repo_cache)
    if any(needs_environment(t) for t in tasks):  # SWE-bench rows from a repo cache: pip-built envs
        tasks = prepare_environments(tasks, config.tasks.sandbox_backend)
    usable = [t for t in tasks if t.workspace is not None and not t.unavailable]
    for task in tasks:
        if task not in usable:
            logger.warning("task %s left out: %s", task.id, task.unavailable or "no workspace")
    if not usable:
        reasons = sorted({t.unavailable for t in tasks})
        raise TaskError(f"no task of tasks.source can run on this machine: {'; '.join(reasons)}")
    return usable


def stream_phases(config: TrainConfig) -> list[tuple[str, int, int, list[str]]] | None:
    """The phases (name, first batch, steps, task ids) of the configured task stream, or None."""
    from tasks.streams import load_stream, stream_path

    if (stream := stream_path(config.tasks.source)) is None:
        return None
    loaded = load_stream(stream, repo_cache=config.tasks.repo_cache)
    return [(p.name, p.first_step, p.steps, list(p.task_ids)) for p in loaded.phases]


def build_schedule(config: TrainConfig, tasks: list[Task]):
    """(schedule, PAC controller or None) for the configured orchestrator and curriculum."""
    from trainer.algorithms.curriculum import PACController
    from trainer.orchestrator.schedule import Schedule, TaskPicker

    orchestration = config.orchestrator
    pac = PACController(sorted({t.family for t in tasks})) if config.tasks.curriculum == "pac" else None
    picker = TaskPicker([(t.id, t.family) for t in tasks], seed=config.run.seed, pac=pac, phases=stream_phases(config))
    schedule = Schedule(
        picker,
        groups_per_batch=orchestration.episodes_per_step,
        group_size=config.algorithm.group_size,
        gated=orchestration.mode == "sync" or orchestration.deterministic,
        max_staleness=orchestration.max_staleness,
        staleness_policy=orchestration.staleness_policy,
        batch_tokens=orchestration.batch_tokens,
        max_attempts=orchestration.max_attempts,
        seed=config.run.seed,
        vigor=config.algorithm.vigor.model_dump() if config.algorithm.allocation == "vigor" else None,
    )
    return schedule, pac


def demonstrations(tasks: list[Task], config: TrainConfig, sandbox_factory, progress: bool = False) -> list:
    """Gold trajectories: each task's gold patch applied through the agent's own tools
    (`progress`: a bar over the tasks)."""
    from agent_env import ToolEnv
    from trainer.inference.engines.scripted import ScriptedEngine
    from trainer.inference.models import load_tokenizer
    from trainer.inference.rollout import ChatFormat, run_episode

    chat = ChatFormat(load_tokenizer(config.model.name))
    gold = [task for task in tasks if task.gold_patch]
    trajectories = []
    with progress_bar(len(gold), "gold trajectories", "task", disable=not progress) as bar:
        for task in gold:
            trajectories.append(
                run_episode(
                    ToolEnv(task, sandbox_factory=sandbox_factory),
                    ScriptedEngine(_gold_actions(task, config.warm_start.style), chat.encode, chat.end_id),
                    chat,
                    max_new_tokens=config.rollout.max_total_tokens,
                    max_total_tokens=1 << 20,
                )
            )
            bar.update(1)
    return trajectories


def _gold_actions(task: Task, style: str) -> list[str]:
    """The task's gold actions in the warm start's style, or in the `patch` style (one
    `git apply`) when its gold cannot be written that way (a mode change, a binary file, a
    rename: the editor cannot make them), said once per task."""
    from agent_env import gold_actions
    from agent_env.gold import GoldEditError

    try:
        return gold_actions(task, style=style)
    except GoldEditError as exc:
        logger.info("task %s: its gold is not %s-able (%s); its demonstration applies the patch", task.id, style, exc)
        return gold_actions(task, style="patch")


@contextlib.contextmanager
def progress_bar(total: int, label: str, unit: str, disable: bool = False) -> Iterator:
    """A tqdm bar on stderr for one phase, closed when the block ends; log lines printed
    while it is open go above it (`tqdm.write`), so bar and log never share a line."""
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    redirect = contextlib.nullcontext() if disable else logging_redirect_tqdm()
    with tqdm(total=total, desc=label, unit=unit, disable=disable) as bar, redirect:
        yield bar


def chunked_steps(take: Callable[[int], list[float]], steps: int, bar, chunks: int = 50) -> list[float]:
    """`steps` updates made by `take(n)` (n more steps, each one's loss) in at most about
    `chunks` calls, the bar advanced (and the last loss shown) after each; all the losses."""
    size = max(1, steps // chunks)
    losses: list[float] = []
    while len(losses) < steps:
        part = take(min(size, steps - len(losses)))
        if not part:
            break
        losses.extend(part)
        bar.set_postfix(loss=f"{part[-1]:.4f}", refresh=False)  # drawn by the update
        bar.update(len(part))
    return losses


def reap_sandboxes() -> None:
    """Remove what the killed workers' sandboxes left (their owners are dead now)."""
    from sandboxes.reaper import reap

    try:
        reap()
    except Exception as exc:  # noqa: BLE001 - best effort: `python -m sandboxes reap` does it later
        logger.warning("reaping the workers' sandboxes failed: %s", exc)


def success_summary(trajectories: list) -> dict:
    """Episodes, success rate, per-task success, mean turns per episode, and success by the
    number of turns an episode took (`by_turns`: turns -> episodes and success rate), of
    evaluation trajectories."""
    per_task: dict[str, list[bool]] = {}
    by_turns: dict[int, list[bool]] = {}
    for trajectory in trajectories:
        per_task.setdefault(trajectory.task_id, []).append(trajectory.resolved)
        by_turns.setdefault(trajectory.turns, []).append(trajectory.resolved)
    solved = sum(sum(v) for v in per_task.values())
    count = max(len(trajectories), 1)
    return {
        "episodes": len(trajectories),  # fewer than asked when infrastructure failed
        "success_rate": round(solved / count, 4),
        "per_task": {k: round(sum(v) / len(v), 4) for k, v in sorted(per_task.items())},
        "turns_mean": round(sum(t.turns for t in trajectories) / count, 4),
        "by_turns": {
            str(turns): {"episodes": len(v), "success_rate": round(sum(v) / len(v), 4)}
            for turns, v in sorted(by_turns.items())
        },
    }


def describe(result: dict) -> str:
    solved = round(result["success_rate"] * result["episodes"])
    turns = f", {result['turns_mean']:.1f} turns per episode" if "turns_mean" in result else ""
    return f"{solved}/{result['episodes']} episodes resolved ({result['success_rate']:.2f}){turns}"


def read_summary(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def write_summary(path: Path, summary: dict) -> None:
    if "eval_before" in summary and "eval_after" in summary:
        summary["eval_rise"] = round(summary["eval_after"]["success_rate"] - summary["eval_before"]["success_rate"], 4)
    path.write_text(json.dumps(summary, indent=2) + "\n")


def truncate_metrics(path: Path, step: int) -> None:
    """A resumed run rewrites the steps after its checkpoint: drop their old records."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in kept))
