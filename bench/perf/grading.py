"""What grading costs against a plain run of a task's tests, per task, in one run.

The grader (`agent_env.grading`) decides from exit statuses: the required tests run once as a
fresh process, and when that run passes, each FAIL_TO_PASS test's canary twins run in forks
of the untouched sandbox. The baseline is what SWE-bench's harness does for a patch: start a
sandbox over the task's workspace, apply the patch and the test patch, run the task's test
command once. Each repetition times the two back to back in alternating order, for the gold
patch (a passing verdict: every twin runs) and the empty patch (a failing one: no twin runs);
the figures are medians and their ratio, so a busy machine slows both alike. Each grading's
time is also split by phase (start, setup, the verdict run, the canaries, teardown), and
`share.<gold|empty>.<phase>` says which part of the bill to cut next.

    python -m bench.perf.grading                 # local sandboxes, 5 repetitions
    python -m bench.perf.grading --backend docker --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench.common import RESULTS, report

# Where a grading's time goes (`agent_env.grading.runs.PHASES`; a literal here so that
# `--help` needs no import of the grader).
PHASES = ("start", "setup", "tests", "canaries", "teardown")

# One task per built-in family (graphs: pytest; the others: unittest), and the pytest
# task of the red-team suite.
TASKS = (
    "text-slugify-custom-separator",
    "collections-ringbuffer-negative-index",
    "config-env-prefix-strip",
    "numeric-histogram-upper-edge",
    "datetime-add-months-clamp",
    "parsing-querystring-plus",
    "graphs-toposort-missed-cycle",
)
PYTEST_FIXTURE = Path(__file__).parents[2] / "tests" / "fixtures" / "hack_tasks" / "pytest-clamp-upper"


def plain_run(task, patch: str, factory) -> float:
    """Seconds for a sandbox, `git apply` of the patch and the test patch, and one run of the
    task's test command: the baseline."""
    from agent_env.grading import sandbox_spec_for

    started = time.perf_counter()
    with factory(sandbox_spec_for(task)) as sandbox:
        for name, text in (("agent", patch), ("test", task.test_patch)):
            if text:
                sandbox.write_file(f"/tmp/plain/{name}.patch", text)
                sandbox.exec(f"git apply /tmp/plain/{name}.patch", timeout=60, fresh=True)
        sandbox.exec(task.grading.test_command, timeout=task.limits.grading_timeout_s, fresh=True)
    return time.perf_counter() - started


def graded(task, patch: str, factory) -> tuple[float, int, bool, dict[str, float]]:
    """Seconds, runs (the verdict run and each canary twin), the verdict of one grading, and
    where its time went (`GradeResult.seconds`: start, setup, tests, canaries, teardown)."""
    from agent_env.grading import grade_patch

    started = time.perf_counter()
    result = grade_patch(task, patch, sandbox_factory=factory)
    return time.perf_counter() - started, 1 + len(result.canaries), result.resolved, result.seconds


def measure(task, factory, repeat: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    for label, patch, want in (("gold", task.gold_patch, True), ("empty", "", False)):
        plain, grade, runs = [], [], 0
        phases: dict[str, list[float]] = {name: [] for name in PHASES}
        for i in range(repeat):
            # Alternate which goes first, so a warming cache favours neither.
            if i % 2:
                grade_s, runs, resolved, seconds = graded(task, patch, factory)
                plain.append(plain_run(task, patch, factory))
            else:
                plain.append(plain_run(task, patch, factory))
                grade_s, runs, resolved, seconds = graded(task, patch, factory)
            grade.append(grade_s)
            for name in PHASES:
                phases[name].append(seconds.get(name, 0.0))
            if resolved is not want:
                raise SystemExit(f"bench.perf.grading: task {task.id}: the {label} patch graded resolved={resolved}")
        figures[f"{task.id}.{label}.plain_s"] = statistics.median(plain)
        figures[f"{task.id}.{label}.grade_s"] = statistics.median(grade)
        figures[f"{task.id}.{label}.runs"] = runs
        figures[f"{task.id}.{label}.ratio"] = statistics.median(g / p for g, p in zip(grade, plain, strict=True))
        for name in PHASES:
            figures[f"{task.id}.{label}.{name}_s"] = statistics.median(phases[name])
    return figures


def phase_shares(figures: dict[str, float], task_ids: list[str], label: str) -> dict[str, float]:
    """Each phase's share of grading's time over all tasks (`label`: gold or empty): the sum
    of the tasks' median seconds in the phase over the sum of their median gradings."""
    total = sum(figures[f"{task}.{label}.grade_s"] for task in task_ids)
    return {
        f"share.{label}.{name}": (
            sum(figures[f"{task}.{label}.{name}_s"] for task in task_ids) / total if total else 0.0
        )
        for name in PHASES
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.perf.grading",
        description="Grading's cost per task as a ratio to a plain run of the task's tests (gold and empty patch).",
        epilog="example: python -m bench.perf.grading --backend docker --repeat 3",
    )
    parser.add_argument("--backend", choices=("local", "docker"), default="local", help="sandbox backend")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per task and patch (median)")
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated built-in task ids")
    parser.add_argument("--json", type=Path, default=None, help="where to write the figures")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: give at least 1 repetition")
    from agent_env import prepare_environments
    from sandboxes import make_sandbox
    from tasks import builtin_tasks, load_task

    wanted = [t for t in args.tasks.split(",") if t]
    known = {task.id for task in builtin_tasks()}
    if unknown := [t for t in wanted if t not in known]:
        parser.error(f"--tasks: no built-in task {', '.join(unknown)} (`python -m tasks list` shows them)")
    tasks = builtin_tasks(wanted) + [load_task(PYTEST_FIXTURE)]
    prepare_environments(tasks, args.backend)

    def factory(spec):
        return make_sandbox(spec, args.backend)

    figures: dict[str, float] = {"repeat": args.repeat}
    ratios: dict[str, list[float]] = {"gold": [], "empty": []}
    for n, task in enumerate(tasks, 1):
        print(f"[{n}/{len(tasks)}] {task.id}", flush=True)
        measured = measure(task, factory, args.repeat)
        figures.update(measured)
        for label in ratios:
            ratios[label].append(measured[f"{task.id}.{label}.ratio"])
    figures["median_ratio.gold"] = statistics.median(ratios["gold"])
    figures["median_ratio.empty"] = statistics.median(ratios["empty"])
    figures["max_ratio.gold"] = max(ratios["gold"])
    for label in ratios:
        figures.update(phase_shares(figures, [task.id for task in tasks], label))
    report(f"grading ({args.backend})", figures, args.json or RESULTS / f"grading_{args.backend}.json")


if __name__ == "__main__":
    main()
