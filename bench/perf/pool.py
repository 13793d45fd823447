"""The warm pool's effect on episode latency: the same episodes with no pool and with one.

Episodes: each built-in task's gold actions (write the patch, `git apply`, `finish`) through
`ToolEnv`, graded by the hidden tests, one after another, as a rollout slot plays them; no
model, so an episode's time is all sandbox (start, tool calls, grading). Two arms over the
same episodes, side by side in one run:
- `cold`: every sandbox (the agent's and grading's) starts when asked for (pool size 0);
- `warm`: a `SandboxPool` of `--pool-size` sandboxes per task: the agent's sandbox and
  grading's are taken ready when the pool has them, and the pool refills in the background
  while the next episodes run (its starts compete with them for the CPUs, as in training).
Rounds alternate the arms' order (cold first, then warm first, ...), each round playing
every task once per arm; before each cold episode the pool is let fill, so that its
background starts never run during the baseline. One untimed round first warms both arms
(caches, images, a full pool). Figures per backend: episode latency p50/p99 per arm and the
ratios warm / cold, the same for the sandbox's start, the share of starts that came from
the pool, and the starts the pool made in the background per episode (its extra work).
`local` always; `docker` when an engine answers (else the table says why).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tqdm import tqdm

from agent_env import ToolEnv, gold_actions, grading_spec_for, sandbox_spec_for
from bench.common import RESULTS, docker_problem, percentile, report
from sandboxes import SandboxPool, make_sandbox
from tasks import Task, builtin_tasks

TASKS = 4
ROUNDS = 8
POOL_SIZE = 2  # an episode takes two sandboxes of its task: its own and grading's


def episode(task: Task, factory) -> dict[str, float | str]:
    """Play `task`'s gold actions in a new env over `factory`; what it cost (ms), resolved or not."""
    env = ToolEnv(task, sandbox_factory=factory)
    started = time.perf_counter()
    try:
        env.reset()
        reward = 0.0
        for action in gold_actions(task):
            _, reward, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    finally:
        env.close()
    if reward != 1.0:
        raise RuntimeError(f"task {task.id}: its gold actions did not resolve it (reward {reward})")
    return {
        "episode_ms": (time.perf_counter() - started) * 1000,
        "start_ms": env.cost.start_seconds * 1000,
        "grading_ms": env.cost.grading_seconds * 1000,
        "start": env.cost.start,
    }


def bench_backend(backend: str, tasks: list[Task], rounds: int, pool_size: int) -> dict[str, float]:
    def cold(spec):
        return make_sandbox(spec, backend)

    # Each task's agent sandbox and its grading's (which keeps more output) are two specs.
    specs = [spec for task in tasks for spec in (sandbox_spec_for(task), grading_spec_for(task))]
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    with SandboxPool(cold, pool_size, max_specs=len(specs)) as pool:

        def settle() -> None:  # no background start may run during a cold episode
            for spec in specs:
                pool.wait_ready(spec, timeout=600)

        def play(arm: str, task: Task) -> dict:
            if arm == "cold":
                settle()
                return episode(task, cold)
            return episode(task, pool)

        for task in tasks:  # untimed: caches, images, and the pool filled for every task
            play("cold", task)
            play("warm", task)
        settle()
        background = pool.counts["background_starts"]
        with tqdm(total=2 * rounds * len(tasks), desc=f"{backend} episodes", leave=False) as bar:
            for number in range(rounds):
                order = ("cold", "warm") if number % 2 == 0 else ("warm", "cold")
                for task in tasks:
                    for arm in order:
                        runs[arm].append(play(arm, task))
                        bar.update()
        settle()
        background = pool.counts["background_starts"] - background

    figures: dict[str, float] = {}
    for arm, values in runs.items():
        for name in ("episode_ms", "start_ms", "grading_ms"):
            samples = [v[name] for v in values]
            figures[f"{backend}_{arm}_{name[:-3]}_p50_ms"] = percentile(samples, 50)
            figures[f"{backend}_{arm}_{name[:-3]}_p99_ms"] = percentile(samples, 99)
    for name in ("episode", "start", "grading"):
        for q in ("p50", "p99"):
            figures[f"{backend}_{name}_{q}_ratio"] = (
                figures[f"{backend}_warm_{name}_{q}_ms"] / figures[f"{backend}_cold_{name}_{q}_ms"]
            )
    figures[f"{backend}_warm_start_fraction"] = sum(v["start"] == "warm" for v in runs["warm"]) / len(runs["warm"])
    # The pool's own work: each episode takes two sandboxes, so about 2 at steady state.
    figures[f"{backend}_pool_background_starts_per_episode"] = background / len(runs["warm"])
    return figures


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.perf.pool",
        description=(
            "The warm sandbox pool's effect on episode latency: the same gold-action episodes of the "
            "built-in tasks (start, tool calls, grading; no model) with no pool and with a pool of "
            "--pool-size sandboxes per task, arms alternating round by round in one run; episode, "
            "start and grading latency p50/p99 per arm and their ratios (warm / cold), the share of "
            "warm starts, and the pool's background starts per episode. Local backend always, docker "
            "when an engine answers. Takes about 1 minute on 2 cores with the defaults (measured "
            "75 s on a loaded machine), about 2 minutes with Docker (measured 90-110 s)."
        ),
        epilog="example: python -m bench.perf.pool --rounds 4 --json /tmp/pool.json",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "pool.json", help="where to write the figures")
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"built-in tasks to play (default {TASKS})")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"episodes per task and arm (default {ROUNDS})")
    parser.add_argument("--pool-size", type=int, default=POOL_SIZE, help=f"sandboxes per task (default {POOL_SIZE})")
    parser.add_argument("--backend", choices=("auto", "local", "docker"), default="auto",
                        help="auto: local, and docker when an engine answers")  # fmt: skip
    args = parser.parse_args()
    for name in ("tasks", "rounds", "pool_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    return args


def main() -> None:
    from sandboxes.console import setup_logging

    setup_logging()
    args = arguments()
    tasks = builtin_tasks()[: args.tasks]
    figures: dict[str, float | str] = {}
    backends = ["local", "docker"] if args.backend == "auto" else [args.backend]
    for backend in backends:
        if backend == "docker":
            problem = docker_problem()
            if problem:
                figures["docker_skipped"] = problem
                continue
        figures |= bench_backend(backend, tasks, args.rounds, args.pool_size)
    figures |= {"tasks": len(tasks), "rounds": args.rounds, "pool_size": args.pool_size}
    report(f"bench.perf.pool (warm pool of {args.pool_size} per task vs none)", figures, args.json)


if __name__ == "__main__":
    main()
