"""Tree rollouts (PATR) vs independent rollouts, at equal numbers of completed trajectories.

Same tasks, same engine (the tiny model with the KV prefix cache), same turn and token
limits, measured in one run. Linear: `branches` independent episodes per task, every token
of each processed. Tree: one tree of `branches` branches per task, forking after every turn,
shared prefixes counted (and computed) once. `token_saving` = 1 - tree / linear tokens per
trajectory (target >= 0.30). `sandbox_fork_ms`: `ToolEnv.fork` of a started episode;
`sandbox_3_forks_ms` three of them at once, against `sandbox_3_forks_started_ahead_ms`, the
same after `ToolEnv.prefork(3)` (each pair interleaved, medians of 5).

The learner side (`learner.tree_packing`, `trainer.learner.tree`): SAO steps (critic
targets, the policy update, the critic's updates) on the trajectories just generated, flat
against tree-packed, from the same initial weights, interleaved `STEPS` times each:
tokens through the model per pass (`model_tokens`), seconds per step (median) and the
largest difference between the two first steps' losses (the same computation: ~1e-6).
Both the PATR trees and the independent episodes (which share only their prompts' common
system text and tool schemas) are measured.
"""

from __future__ import annotations

import statistics
import time

from agent_env import ToolEnv
from bench.common import arguments, percentile, report
from tasks import builtin_tasks
from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.engines.hf import HFEngine
from trainer.inference.models import ValueModel, load_policy, load_tokenizer
from trainer.inference.rollout import ChatFormat, HeuristicScorer, run_episode, run_tree
from trainer.resolve import resolve_algorithm

TASKS = 4
BRANCHES = 4
MAX_TURNS = 3
MAX_NEW_TOKENS = 24
STEPS = 5
"""Learner steps timed per layout (after one untimed step each)."""
EXPANSION = 3
"""Forks of one episode at a branch point, for the forks' figures: one after another (each a
start), and with `ToolEnv.prefork` first (their sandboxes started side by side, as
`run_tree` does)."""


def make_learner(tree: bool):
    from trainer.learner import Learner

    policy = load_policy("tiny", seed=0)
    optim = LearnerConfig(lr=1e-4, critic_lr=1e-4, tree_packing=tree)
    return Learner(
        policy,
        ValueModel.from_policy(policy),
        pad_id=0,
        algorithm=resolve_algorithm(AlgorithmConfig(name="sao")),
        optim=optim,
    )


def learner_figures(name: str, trajectories: list) -> dict[str, float]:
    """Flat against tree-packed SAO steps on `trajectories` (see the module docstring)."""
    learners = {"flat": make_learner(False), "tree": make_learner(True)}
    first = {layout: learner.step(trajectories).metrics for layout, learner in learners.items()}
    seconds: dict[str, list[float]] = {"flat": [], "tree": []}
    for _ in range(STEPS):  # interleaved: load on the machine hits both alike
        for layout, learner in learners.items():
            started = time.perf_counter()
            learner.step(trajectories)
            seconds[layout].append(time.perf_counter() - started)
    flat, tree = (statistics.median(seconds[layout]) for layout in ("flat", "tree"))
    return {
        f"{name}_learner_tokens_flat": first["flat"]["model_tokens"],
        f"{name}_learner_tokens_tree": first["tree"]["model_tokens"],
        f"{name}_learner_token_ratio": first["tree"]["model_tokens"] / first["flat"]["model_tokens"],
        f"{name}_learner_seconds_flat": flat,
        f"{name}_learner_seconds_tree": tree,
        f"{name}_learner_speedup": flat / tree,
        f"{name}_loss_max_abs_diff": max(
            abs(first["flat"][key] - first["tree"][key]) for key in ("policy_loss", "value_loss", "grad_norm")
        ),
    }


def main() -> None:
    from sandboxes.console import setup_logging

    setup_logging()
    args = arguments(
        "bench.perf.tree",
        "PATR tree rollouts against independent (linear) rollouts at equal numbers of completed "
        "trajectories: 4 built-in tasks, 4 branches per task, the tiny model with its KV prefix "
        "cache. Measures tokens per trajectory (shared prefixes counted once; `token_saving`, "
        "target >= 0.30), wall time and the cost of forking a started episode's sandbox; then "
        "the learner on those trajectories, flat against tree-packed (learner.tree_packing): "
        "tokens through the model, seconds per SAO step, and the loss difference. The "
        "baselines (linear rollouts, flat learner) are measured in the same run. Takes about "
        "three minutes on 2 cores.",
        "python -m bench.perf.tree",
    )
    chat = ChatFormat(load_tokenizer("tiny"))
    tasks = builtin_tasks()[:TASKS]

    engine = HFEngine(load_policy("tiny", seed=0))
    started = time.perf_counter()
    linear_tokens, linear_count, linear = 0, 0, []
    for task in tasks:
        for member in range(BRANCHES):
            trajectory = run_episode(
                ToolEnv(task, max_turns=MAX_TURNS), engine, chat,
                max_new_tokens=MAX_NEW_TOKENS, max_total_tokens=8000, seed=member,
            )  # fmt: skip
            linear_tokens += len(trajectory)
            linear_count += 1
            linear.append(trajectory)
    wall_linear = time.perf_counter() - started

    engine = HFEngine(load_policy("tiny", seed=0))
    started = time.perf_counter()
    tree_tokens, tree_count, trees = 0, 0, []
    for index, task in enumerate(tasks):
        trajectories, stats = run_tree(
            ToolEnv(task, max_turns=MAX_TURNS), engine, chat, HeuristicScorer(), tree_id=f"tree{index}",
            max_new_tokens=MAX_NEW_TOKENS, max_episode_tokens=8000, expand_every=1, children=2,
            max_branches=BRANCHES, seed=index,
        )  # fmt: skip
        tree_tokens += stats.unique_tokens
        tree_count += len(trajectories)
        trees += trajectories
    wall_tree = time.perf_counter() - started

    forks, serial, ahead = [], [], []
    with ToolEnv(tasks[0]) as env:
        env.reset()
        for _ in range(10):
            t = time.perf_counter()
            child = env.fork()
            forks.append((time.perf_counter() - t) * 1000)
            child.close()
        for _ in range(5):  # a branch point's forks: one after another, then started side by side
            for started_ahead, times in ((False, serial), (True, ahead)):
                t = time.perf_counter()
                if started_ahead:
                    env.prefork(EXPANSION)
                children = [env.fork() for _ in range(EXPANSION)]
                times.append((time.perf_counter() - t) * 1000)
                for child in children:
                    child.close()

    per_linear = linear_tokens / linear_count
    per_tree = tree_tokens / tree_count
    report(
        "bench.perf.tree (tiny model, built-in tasks, local sandboxes)",
        {
            "trajectories_linear": linear_count,
            "trajectories_tree": tree_count,
            "tokens_per_trajectory_linear": per_linear,
            "tokens_per_trajectory_tree": per_tree,
            "token_saving": 1 - per_tree / per_linear,
            "wall_seconds_linear": wall_linear,
            "wall_seconds_tree": wall_tree,
            "sandbox_fork_ms": percentile(forks, 50),
            f"sandbox_{EXPANSION}_forks_ms": percentile(serial, 50),
            f"sandbox_{EXPANSION}_forks_started_ahead_ms": percentile(ahead, 50),
            "forks_started_ahead_speedup": percentile(serial, 50) / percentile(ahead, 50),
            **learner_figures("trees", trees),
            **learner_figures("independent", linear),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
