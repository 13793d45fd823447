"""Asynchronous vs synchronous training at equal numbers of consumed trajectories.

    python -m bench.perf.async [--json PATH] [--steps N]

Both modes run the same code (`trainer.train`, Ray actors, local sandboxes, the tiny model,
SAO with its critic) on the same generated task suite, in one run, one after the other.
Each task's hidden test run sleeps for a duration drawn heavy-tailed (lognormal quantiles,
median 1.5 s, p99/p50 >= 10: like test suites whose slowest runs dominate), so episode
durations are heavy-tailed; the measured p99/p50 of the episodes is reported.

- sync: every step generates a whole batch, then trains: the learner waits for the
  slowest episode of each batch.
- async: episodes stream to the learner as they finish (bounded staleness, new episodes
  admitted while the learner trains).

Figures: `sync_seconds`, `async_seconds` (wall time of the RL steps, from the first episode to
the last update; actors' start-up excluded), `speedup` = sync / async (target >= 2.5), `learner_idle_fraction` in async
mode (target < 0.10) and in sync mode, `max_staleness` observed, the episodes' measured
`episode_p99_over_p50`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from pathlib import Path

from bench.common import RESULTS, percentile, report, write_calc_task

TASKS = 24
MEDIAN_SECONDS = 1.5
SIGMA = 1.6  # lognormal: p99/p50 = exp(2.326 * sigma) ~ 40 (start-up overheads shrink it)


def heavy_tailed_durations(count: int, median: float = MEDIAN_SECONDS, sigma: float = SIGMA) -> list[float]:
    """`count` lognormal quantiles (evenly spaced in probability): a deterministic sample
    with the distribution's shape, shuffled so neighbouring tasks differ."""
    normal = statistics.NormalDist()
    values = [median * math.exp(sigma * normal.inv_cdf((i + 0.5) / count)) for i in range(count)]
    order = sorted(range(count), key=lambda i: (i * 7919) % count)
    return [round(values[i], 3) for i in order]


def write_suite(folder: Path, durations: list[float]) -> None:
    """One task per duration: a tiny repository whose hidden test sleeps that long."""
    for index, seconds in enumerate(durations):
        write_calc_task(folder, f"sleepy-{index:02d}", family="sleepy", sleep_seconds=seconds,
                        statement="add(2, 3) returns -1 instead of 5; fix calc.add.")  # fmt: skip


def run(mode: str, suite: Path, output: Path, steps: int, overrides: list[str]) -> dict:
    from trainer.resolve import load_config
    from trainer.train import train

    config = load_config(
        None,
        [
            f"tasks.source={suite}",
            f"run.output_dir={output}",
            f"run.name={mode}",
            f"orchestrator.mode={mode}",
            f"run.steps={steps}",
            "orchestrator.episodes_per_step=4",
            "rollout.max_turns=1",
            "rollout.max_new_tokens=4",
            "rollout.max_total_tokens=4096",
            # The workload is the sleeping tests: every episode graded, no kept verdict.
            "rollout.grading_memo=false",
            "orchestrator.rollout_workers=4",
            "orchestrator.episodes_per_worker=8",
            "orchestrator.max_staleness=6",
            "learner.lr=1e-5",
            *overrides,
        ],
    )
    run_dir = train(config)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    seconds = [s for r in records for s in r.get("episode_seconds", [])]
    # Wall time of RL: from the first episode to the last update (actors' start-up excluded).
    wall = sum(r["step_seconds"] for r in records)
    return {
        "seconds": wall,
        "idle": records[-1]["learner_idle_fraction"],
        "max_staleness": max(r.get("staleness_max", 0) for r in records),
        "trajectories": sum(r["episodes"] for r in records),
        "episode_seconds": seconds,
    }


def main() -> None:
    from sandboxes.console import setup_logging

    setup_logging()
    parser = argparse.ArgumentParser(
        prog="python -m bench.perf.async",
        description="Asynchronous against synchronous training (the baseline, `orchestrator.mode=sync`) "
        "at equal numbers of consumed trajectories, one after the other in one run: the tiny model, "
        "SAO, Ray actors, local sandboxes, 24 generated tasks whose hidden tests sleep for "
        "heavy-tailed durations (median 1.5 s). Measures the wall time of the RL steps in each "
        "mode and their ratio (`speedup`, target >= 2.5), the learner's idle fraction (target < "
        "0.10 in async mode) and the staleness observed. Takes about 10 minutes on 2 cores with "
        "the default 12 steps per mode.",
        epilog="example: python -m bench.perf.async --steps 6",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "async.json", help="where to write the figures")
    parser.add_argument("--steps", type=int, default=12, help="learner steps per mode")
    parser.add_argument("overrides", nargs="*", help="extra section.field=value settings for both modes")
    args = parser.parse_args()
    import ray

    from trainer.orchestrator.loop import start_ray

    with tempfile.TemporaryDirectory(prefix="bench-async-") as tmp:
        suite = Path(tmp) / "suite"
        durations = heavy_tailed_durations(TASKS)
        write_suite(suite, durations)
        started = start_ray(workers=8)
        try:
            sync = run("sync", suite, Path(tmp) / "runs", args.steps, args.overrides)
            asynchronous = run("async", suite, Path(tmp) / "runs", args.steps, args.overrides)
        finally:
            if started:
                ray.shutdown()
    measured = sync["episode_seconds"] + asynchronous["episode_seconds"]
    figures = {
        "trajectories_per_mode": sync["trajectories"],
        "async_trajectories": asynchronous["trajectories"],
        "sync_seconds": round(sync["seconds"], 2),
        "async_seconds": round(asynchronous["seconds"], 2),
        "speedup": round(sync["seconds"] / asynchronous["seconds"], 3),
        "learner_idle_fraction": asynchronous["idle"],
        "sync_learner_idle_fraction": sync["idle"],
        "max_staleness": asynchronous["max_staleness"],
        "episode_p50_s": round(percentile(measured, 50), 3),
        "episode_p99_s": round(percentile(measured, 99), 3),
        "episode_p99_over_p50": round(percentile(measured, 99) / percentile(measured, 50), 2),
        "test_sleep_p99_over_p50": round(percentile(durations, 99) / percentile(durations, 50), 2),
    }
    report("async", figures, args.json)


if __name__ == "__main__":
    main()
