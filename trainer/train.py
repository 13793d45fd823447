"""`make train-swe`: SAO on software-engineering tasks, end to end, on Ray.

    python -m trainer.train [CONFIG.yaml] [key=value ...]

Rollout workers (Ray actors, each with its own inference engine and a few episode slots)
play episodes of the tasks in sandboxes; each finished episode is graded by the task's
hidden tests and streams to the learner (a group of Ray actors, one per FSDP2 rank). The
learner makes one SAO update (a policy step with the double-sided token mask, then
`critic_steps` critic steps) as soon as `episodes_per_step` trajectories are ready, and its
weights are published to the workers with a version number while episodes keep running
(`mode=async`, with `max_staleness` bounding how old a consumed token may be).
`mode=sync` is the baseline: generate a whole batch, then train. `algorithm=` selects a
baseline update rule instead (PPO, decoupled PPO, or GRPO / Dr.GRPO / DAPO with
`group_size` rollouts per task); `rollout=tree` grows PATR trees instead of linear episodes.

Before RL, an optional supervised warm start on gold trajectories (each task's gold patch
played through the agent's own tools) and critic pre-training on one batch.

Where this departs from SAO: on CPU the rollout engines are transformers models that
generate one turn at a time; tokens produced across a weight update carry each version,
and the learner's importance ratios use the logprobs recorded at generation time, as the
paper prescribes. Episodes that fail for infrastructure reasons are retried and, after
`max_attempts`, dropped and counted, never scored 0.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import yaml
from tqdm import tqdm

from agent_env import needs_environment, prepare_environments
from tasks import Task, load_task_set
from trainer.config import ConfigError, TrainConfig, load_config
from trainer.metrics import MetricsWriter, plot, reward_hacks_blocked
from trainer.orchestrator.loop import Orchestrator, latest_checkpoint, start_ray
from trainer.orchestrator.schedule import Batch, EpisodeJob, Schedule, TaskPicker


def _available(tasks: list[Task]) -> list[Task]:
    usable = [t for t in tasks if t.workspace is not None and not t.unavailable]
    for task in tasks:
        if task not in usable:
            print(f"task {task.id} left out: {task.unavailable or 'no workspace'}")
    if not usable:
        reasons = sorted({t.unavailable for t in tasks})
        raise SystemExit(f"no task can run on this machine: {'; '.join(reasons)}")
    return usable


def _demonstrations(tasks: list[Task], config: TrainConfig, sandbox_factory) -> list:
    """Gold trajectories: each task's gold patch applied through the agent's own tools."""
    from agent_env import ToolEnv, gold_actions
    from trainer.inference.engines.scripted import ScriptedEngine
    from trainer.inference.models import load_tokenizer
    from trainer.inference.rollout import ChatFormat, run_episode

    chat = ChatFormat(load_tokenizer(config.model))
    return [
        run_episode(
            ToolEnv(task, sandbox_factory=sandbox_factory),
            ScriptedEngine(gold_actions(task, style=config.warm_start_style), chat.encode, chat.end_id),
            chat,
            max_new_tokens=config.max_total_tokens,
            max_total_tokens=1 << 20,
        )
        for task in tasks
        if task.gold_patch
    ]


EVAL_SEED = 1_000_000  # evaluation episodes draw seeds no training episode uses


def _evaluate(orchestrator: Orchestrator, tasks: list[Task], episodes: int) -> dict:
    """Success of `episodes` episodes (the tasks in turn, fixed seeds) with the newest weights."""
    jobs = [
        EpisodeJob(
            job_id=-EVAL_SEED - i, group=-EVAL_SEED - i, task_id=t.id, family=t.family, seed=EVAL_SEED + i, batch=-1
        )
        for i, t in enumerate(tasks[i % len(tasks)] for i in range(episodes))
    ]
    trajectories = orchestrator.play(jobs)
    per_task: dict[str, list[bool]] = {}
    for trajectory in trajectories:
        per_task.setdefault(trajectory.task_id, []).append(trajectory.resolved)
    solved = sum(sum(v) for v in per_task.values())
    return {
        "episodes": len(trajectories),  # fewer than asked when infrastructure failed
        "success_rate": round(solved / max(len(trajectories), 1), 4),
        "per_task": {k: round(sum(v) / len(v), 4) for k, v in sorted(per_task.items())},
    }


def _describe(result: dict) -> str:
    solved = round(result["success_rate"] * result["episodes"])
    return f"{solved}/{result['episodes']} episodes resolved ({result['success_rate']:.2f})"


def _read_summary(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _write_summary(path: Path, summary: dict) -> None:
    if "eval_before" in summary and "eval_after" in summary:
        summary["eval_rise"] = round(summary["eval_after"]["success_rate"] - summary["eval_before"]["success_rate"], 4)
    path.write_text(json.dumps(summary, indent=2) + "\n")


def _truncate_metrics(path: Path, step: int) -> None:
    """A resumed run rewrites the steps after its checkpoint: drop their old records."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in kept))


def train(config: TrainConfig, *, sandbox_factory=None) -> Path:
    """Run training; returns the run folder (metrics.jsonl, metrics.png, checkpoints/).
    `sandbox_factory` replaces the configured backend's (tests inject failing sandboxes)."""
    import ray

    from trainer.algorithms import PACController
    from trainer.build import sandbox_factory as build_sandbox_factory
    from trainer.orchestrator.learner_group import LearnerGroup

    run_dir = Path(config.output_dir) / config.run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.model_dump(), sort_keys=False))
    tasks = load_task_set(config.tasks, config.task_ids or None, repo_cache=config.repo_cache)
    if any(needs_environment(t) for t in tasks):  # SWE-bench rows from a repo cache: pip-built envs
        tasks = prepare_environments(tasks, config.sandbox_backend)
    tasks = _available(tasks)
    resume = latest_checkpoint(run_dir) if config.resume == "auto" else config.resume
    factory = sandbox_factory or build_sandbox_factory(config.sandbox_backend)

    started_ray = start_ray(config.ray_address, workers=config.rollout_workers + config.learner_ranks)
    learner = orchestrator = metrics = None
    checkpoint = None
    try:
        learner = LearnerGroup(config, config.learner_ranks, num_gpus=config.learner_gpus)
        resumed = learner.get("load", str(resume)) if resume else {}
        pac = PACController(sorted({t.family for t in tasks})) if config.curriculum == "pac" else None
        picker = TaskPicker([(t.id, t.family) for t in tasks], seed=config.seed, pac=pac)
        gated = config.mode == "sync" or config.deterministic
        schedule = Schedule(
            picker,
            groups_per_batch=config.episodes_per_step,
            group_size=config.group_size,
            gated=gated,
            max_staleness=0 if config.mode == "sync" else config.max_staleness,
            staleness_policy=config.staleness_policy,
            batch_tokens=config.batch_tokens,
            max_attempts=config.max_attempts,
            seed=config.seed,
        )
        if resumed:
            schedule.load_state_dict(resumed["schedule"])
            _truncate_metrics(run_dir / "metrics.jsonl", schedule.steps_done)
            print(f"resumed from {resume}: step {schedule.steps_done}, version {resumed['version']}")

        demonstrations = _demonstrations(tasks, config, factory) if config.warm_start_steps else []
        if demonstrations:  # each step then reports the probability of the gold actions
            learner.get("set_probes", demonstrations)
        if config.warm_start_steps and not resumed:
            losses = learner.get("warm_start", demonstrations, config.warm_start_steps, config.warm_start_lr)
            solved = sum(t.reward for t in demonstrations)
            print(
                f"warm start on {len(demonstrations)} gold trajectories ({solved:.0f} resolved): "
                f"loss {losses[0]:.3f} -> {losses[-1]:.4f} in {len(losses)} steps"
            )

        metrics = MetricsWriter(run_dir)
        summary = _read_summary(run_dir / "summary.json") if resumed else {}
        progress = tqdm(total=config.steps, initial=schedule.steps_done, desc="train-swe", unit="step")
        last = {
            "time": time.monotonic(),
            "infra": schedule.counters["infra_retries"] + schedule.counters["infra_dropped"],
        }

        def on_step(record: dict, batch: Batch) -> None:
            trajectories = batch.trajectories
            now = time.monotonic()
            infra = schedule.counters["infra_retries"] + schedule.counters["infra_dropped"]
            out = {"step": schedule.steps_done, "episodes": len(trajectories), **record}
            out["infra_errors"] = infra - last["infra"]  # failures since the previous step
            last["infra"] = infra
            if trajectories:
                tokens = sum(len(t) for t in trajectories)
                out.update(
                    reward_mean=sum(t.reward for t in trajectories) / len(trajectories),
                    success_rate=sum(t.resolved for t in trajectories) / len(trajectories),
                    turns_mean=sum(t.turns for t in trajectories) / len(trajectories),
                    format_errors=sum(t.format_errors for t in trajectories),
                    reward_hack_blocked=reward_hacks_blocked(trajectories),
                    tokens=tokens,
                    tokens_per_s=round(tokens / max(now - last["time"], 1e-9), 1),
                    staleness_mean=sum(batch.staleness) / len(batch.staleness),
                    staleness_max=max(batch.staleness),
                    episode_seconds=[t.episode_seconds for t in trajectories],
                )
            if pac is not None:
                out["curriculum"] = {f: round(pac.posterior(f)[0], 4) for f in pac.families}
            out.update(
                step_seconds=round(now - last["time"], 3),
                stale_dropped=schedule.counters["stale_dropped"],
                admission_waits=schedule.counters["admission_waits"],
                infra_retries=schedule.counters["infra_retries"],
                infra_dropped=schedule.counters["infra_dropped"],
                worker_restarts=orchestrator.counters.worker_restarts,
                hung_episodes=orchestrator.counters.hung_episodes,
                learner_idle_fraction=round(orchestrator.learner_idle_fraction(), 4),
                episodes_running=len(orchestrator.running),
            )
            last["time"] = now
            metrics.write(out)
            progress.update(1)
            progress.set_postfix(
                reward=f"{out.get('reward_mean', 0.0):.2f}",
                success=f"{out.get('success_rate', 0.0):.2f}",
                stale=out.get("staleness_max", 0),
            )

        def save(step: int) -> None:
            nonlocal checkpoint
            extra = {"step": step, "schedule": schedule.state_dict()}
            if pac is not None:
                extra["curriculum"] = pac.state_dict()
            checkpoint = Path(learner.get("save", str(run_dir / "checkpoints" / f"step_{step:06d}"), extra))

        orchestrator = Orchestrator(
            config, schedule, learner, tasks, sandbox_factory=sandbox_factory, on_step=on_step, save=save
        )
        orchestrator.publish(learner.get("version"), wait=True)  # every worker is up
        if config.critic_pretrain_steps and not resumed and learner.get("has_critic"):
            # One batch's worth of episodes, cycling over the tasks (a single task still gets
            # `episodes_per_step` rollouts: the value of one outcome is no baseline).
            picks = [tasks[i % len(tasks)] for i in range(config.episodes_per_step * config.group_size)]
            jobs = [
                EpisodeJob(job_id=-1 - i, group=-1 - i, task_id=t.id, family=t.family, seed=-1 - i, batch=-1)
                for i, t in enumerate(picks)
            ]
            losses = learner.get("pretrain_critic", orchestrator.play(jobs), config.critic_pretrain_steps)
            print(f"critic pre-training: value loss {losses[0]:.4f} -> {losses[-1]:.4f} in {len(losses)} steps")
        if config.eval_episodes and not resumed:
            summary["eval_before"] = _evaluate(orchestrator, tasks, config.eval_episodes)
            print(f"evaluation before RL: {_describe(summary['eval_before'])}")
            _write_summary(run_dir / "summary.json", summary)  # kept by a resumed run
        last["time"] = time.monotonic()
        if config.steps == 0:
            save(0)  # the warm-started weights, for other runs to start from
        orchestrator.run(config.steps)
        progress.close()
        if config.eval_episodes:
            orchestrator.publish(learner.get("version"), wait=True)  # the final weights everywhere
            summary["eval_after"] = _evaluate(orchestrator, tasks, config.eval_episodes)
            print(f"evaluation after RL:  {_describe(summary['eval_after'])}")
            _write_summary(run_dir / "summary.json", summary)
    finally:
        if orchestrator is not None:
            orchestrator.shutdown()
        elif learner is not None:
            learner.kill()
        if metrics is not None:
            metrics.close()
        if started_ray:
            ray.shutdown()
    chart = plot(run_dir / "metrics.jsonl", run_dir / "metrics.png")
    print(
        f"run folder: {run_dir}  metrics: {run_dir / 'metrics.jsonl'} (+ tensorboard/, {chart.name})  checkpoint: {checkpoint}"
    )
    return run_dir


def usage() -> str:
    """`--help`: what the command does, an example, and every config field with its default."""
    lines = [
        "usage: python -m trainer.train [CONFIG.yaml] [field=value ...]",
        "",
        __doc__.strip().splitlines()[0],
        "",
        "example: python -m trainer.train configs/train_swe.yaml steps=20 lr=3e-4",
        "",
        "fields (default, meaning):",
    ]
    for name, field in TrainConfig.model_fields.items():
        meaning = " ".join((field.description or "").split())
        lines.append(f"  {name}={field.get_default(call_default_factory=True)!r}  {meaning}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        print(usage())
        return
    path = argv[0] if argv and "=" not in argv[0] else None
    overrides = argv[1:] if path else argv
    try:
        config = load_config(path, overrides)
    except ConfigError as exc:  # bad input: one line that names the file or field, no traceback
        sys.exit(f"trainer.train: {exc}")
    train(config)


if __name__ == "__main__":
    main()
