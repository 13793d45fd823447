"""`make train-swe`: SAO on software-engineering tasks, end to end.

    python -m trainer.train [CONFIG.yaml] [key=value ...]

Each step plays one episode per task (SAO: a single rollout per prompt, no groups) in a
sandbox, grades it with the task's hidden tests, and makes one SAO update: a policy step
with the double-sided token mask and `critic_steps` critic steps; the new weights are then
published to the inference engine with a version number. `algorithm=` selects a baseline
instead (PPO, decoupled PPO, or GRPO / Dr.GRPO / DAPO with `group_size` rollouts per task).

Where this departs from the paper: rollouts and updates alternate (synchronous); the
asynchronous, staleness-bounded orchestrator on Ray is the next layer up and reuses these
parts unchanged. Episodes that fail for infrastructure reasons (sandbox or grading
errors) are counted and left out of the batch, never scored 0.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import torch
import yaml
from tqdm import tqdm

from agent_env import GradingError, ToolEnv, gold_actions
from sandboxes import SandboxError
from tasks import Task, load_task_set
from trainer.algorithms import PACController
from trainer.build import build_engine, build_learner
from trainer.build import sandbox_factory as build_sandbox_factory
from trainer.config import TrainConfig, load_config
from trainer.engines.scripted import ScriptedEngine
from trainer.learner import Learner
from trainer.metrics import MetricsWriter, plot
from trainer.rollout import ChatFormat, HeuristicScorer, JudgeScorer, ValueScorer, run_episode, run_tree
from trainer.trajectory import Trajectory


def _available(tasks: list[Task]) -> list[Task]:
    usable = [t for t in tasks if t.workspace is not None]
    if not usable:
        reasons = sorted({t.unavailable for t in tasks})
        raise SystemExit(f"no task can run on this machine: {'; '.join(reasons)}")
    return usable


def _tree_scorer(name: str, learner: Learner, engine, chat: ChatFormat):
    """The process scorer for tree rollouts. Its scores only allocate branches."""
    if name == "heuristic":
        return HeuristicScorer()
    if name == "judge":
        return JudgeScorer(engine, chat)
    if learner.critic is None:
        raise SystemExit(f"tree_scorer=value needs a critic; algorithm={learner.algorithm} has none")

    @torch.no_grad()
    def value_of(sequences: list[list[int]]) -> list[float]:
        values = []
        for ids in sequences:
            tensor = torch.tensor([ids], device=learner.device)
            values.append(float(learner.critic(tensor, torch.ones_like(tensor))[0, -1]))
        return values

    return ValueScorer(value_of)


def train(config: TrainConfig) -> Path:
    """Run training; returns the run folder (metrics.jsonl, checkpoints/)."""
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    run_dir = Path(config.output_dir) / config.run_name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.model_dump(), sort_keys=False))

    tasks = _available(load_task_set(config.tasks, config.task_ids or None))
    learner, tokenizer = build_learner(config)
    chat = ChatFormat(tokenizer)
    resumed = learner.load(config.resume) if config.resume else {}
    start_step = int(resumed.get("step", 0))
    engine = build_engine(config)
    engine.load_weights(learner.engine_weights(), learner.version)

    sandbox_factory = build_sandbox_factory(config.sandbox_backend)

    order = random.Random(config.seed)
    by_family: dict[str, list[Task]] = {}
    for task in tasks:
        by_family.setdefault(task.family, []).append(task)
    pac = PACController(sorted(by_family)) if config.curriculum == "pac" else None
    if pac is not None and resumed.get("curriculum"):
        pac.load_state_dict(resumed["curriculum"])

    scorer = _tree_scorer(config.tree_scorer, learner, engine, chat) if config.rollout == "tree" else None

    def pick(step: int) -> list[Task]:
        if pac is None:
            return [tasks[(step * config.episodes_per_step + i) % len(tasks)] for i in range(config.episodes_per_step)]
        picked = []
        for family, count in pac.allocate(config.episodes_per_step, order).items():
            members = by_family[family]
            picked += [members[order.randrange(len(members))] for _ in range(count)]
        return picked

    def collect(step: int) -> tuple[list[Trajectory], int]:
        """This step's episodes: `group_size` rollouts of each picked task. Episodes that
        fail for infrastructure reasons are dropped and counted, never scored 0."""
        picked = pick(step)
        order.shuffle(picked)
        trajectories: list[Trajectory] = []
        infra_errors = 0
        for index, task in enumerate(picked):
            for member in range(config.group_size):
                env = ToolEnv(
                    task,
                    sandbox_factory=sandbox_factory,
                    max_turns=min(config.max_turns, task.limits.max_turns),
                    max_output_chars=config.max_observation_chars,
                )
                seed = config.seed * 1_000_003 + step * 1000 + index * config.group_size + member
                group_id = f"{step}:{index}:{task.id}"
                try:
                    if config.rollout == "tree":
                        grown, _ = run_tree(
                            env, engine, chat, scorer, tree_id=f"{group_id}:{member}",
                            max_new_tokens=config.max_new_tokens, max_episode_tokens=config.max_total_tokens,
                            expand_every=config.tree_expand_every, children=config.tree_children,
                            max_branches=config.tree_branches, temperature=config.temperature, seed=seed,
                        )  # fmt: skip
                    else:
                        grown = [
                            run_episode(
                                env,
                                engine,
                                chat,
                                max_new_tokens=config.max_new_tokens,
                                max_total_tokens=config.max_total_tokens,
                                temperature=config.temperature,
                                seed=seed,
                            )  # fmt: skip
                        ]
                except (SandboxError, GradingError) as exc:
                    infra_errors += 1
                    tqdm.write(f"step {step}: episode of {task.id} dropped (infrastructure): {exc}")
                    continue
                for trajectory in grown:
                    trajectory.group_id = group_id  # a task's rollouts (and a tree's branches) form one group
                    trajectory.info["family"] = task.family
                    trajectories.append(trajectory)
        return trajectories, infra_errors

    metrics_path = run_dir / "metrics.jsonl"
    if config.warm_start_steps and not config.resume:
        demonstrations = [
            run_episode(
                ToolEnv(task, sandbox_factory=sandbox_factory),
                ScriptedEngine(gold_actions(task), chat.encode, chat.end_id),
                chat,
                max_new_tokens=config.max_total_tokens,
                max_total_tokens=1 << 20,
            )
            for task in tasks
            if task.gold_patch
        ]
        losses = learner.warm_start(demonstrations, config.warm_start_steps, config.warm_start_lr)
        engine.load_weights(learner.engine_weights(), learner.version)
        solved = sum(t.reward for t in demonstrations)
        print(
            f"warm start on {len(demonstrations)} gold trajectories ({solved:.0f} resolved): "
            f"loss {losses[0]:.3f} -> {losses[-1]:.4f} in {len(losses)} steps"
        )
    if config.critic_pretrain_steps and learner.critic is not None and not config.resume:
        losses = learner.pretrain_critic(collect(-1)[0], config.critic_pretrain_steps)
        print(f"critic pre-training: value loss {losses[0]:.4f} -> {losses[-1]:.4f} in {len(losses)} steps")
    checkpoint = None
    progress = tqdm(
        range(start_step, config.steps), desc="train-swe", unit="step", initial=start_step, total=config.steps
    )
    metrics = MetricsWriter(run_dir)
    try:
        for step in progress:
            started = time.monotonic()
            trajectories, infra_errors = collect(step)
            rollout_seconds = time.monotonic() - started
            record: dict = {"step": step + 1, "episodes": len(trajectories), "infra_errors": infra_errors}
            if trajectories:
                record.update(learner.step(trajectories))
                if pac is not None:
                    for family in sorted({t.info["family"] for t in trajectories}):
                        mine = [t for t in trajectories if t.info["family"] == family]
                        pac.update(family, [t.info.get("advantage", 0.0) for t in mine], [t.reward for t in mine])
                    record["curriculum"] = {f: round(pac.posterior(f)[0], 4) for f in pac.families}
                engine.load_weights(learner.engine_weights(), learner.version)
                rewards = [t.reward for t in trajectories]
                record.update(
                    reward_mean=sum(rewards) / len(rewards),
                    success_rate=sum(t.info["resolved"] for t in trajectories) / len(trajectories),
                    turns_mean=sum(t.info["turns"] for t in trajectories) / len(trajectories),
                    format_errors=sum(t.info["format_errors"] for t in trajectories),
                    tokens=sum(len(t) for t in trajectories),
                )
            step_seconds = time.monotonic() - started
            record.update(rollout_seconds=round(rollout_seconds, 3), step_seconds=round(step_seconds, 3))
            if "tokens" in record:
                record["tokens_per_s"] = round(record["tokens"] / max(step_seconds, 1e-9), 1)
            metrics.write(record)
            progress.set_postfix(
                reward=f"{record.get('reward_mean', 0.0):.2f}", vloss=f"{record.get('value_loss', 0.0):.3f}"
            )
            last = step + 1 == config.steps
            if last or (config.checkpoint_every and (step + 1) % config.checkpoint_every == 0):
                checkpoint = learner.save(
                    run_dir / "checkpoints" / f"step_{step + 1:06d}",
                    extra={"step": step + 1, **({"curriculum": pac.state_dict()} if pac else {})},
                    tokenizer=tokenizer,
                )
    finally:
        metrics.close()
    chart = plot(metrics_path, run_dir / "metrics.png")
    print(f"run folder: {run_dir}  metrics: {metrics_path} (+ tensorboard/, {chart.name})  checkpoint: {checkpoint}")
    return run_dir


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv and "=" not in argv[0] else None
    overrides = argv[1:] if path else argv
    train(load_config(path, overrides))


if __name__ == "__main__":
    main()
