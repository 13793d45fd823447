"""`python -m tasks list|validate [PATH ...]`: see what tasks exist, and prove they work.

`validate` checks each definition's schema (errors name the file and the field), then
grades it for real: the gold patch must resolve the task and the empty patch must not.
PATH is a task folder, a `task.yaml`, a folder of tasks, or SWE-bench rows (a `.jsonl`);
the built-in suite by default. SWE-bench rows run from a repository cache
(`--repo-cache DIR`, a folder of git clones) in an environment built for `--sandbox`
(`local` or `docker`); `--instances` picks rows. A task that cannot run here (no clone, an
environment that cannot be built, tests that need the network) is reported as not
runnable here, with the reason, apart from tasks that fail.

This entry point composes layers (grading lives in `agent_env`), so it imports them
lazily; the `tasks` library itself stays plain data.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tasks import TaskError, builtin_tasks, load_task_set, load_tasks


def _load(paths: list[str], repo_cache: Path | None = None, instances: list[str] | None = None):
    if not paths:
        return builtin_tasks()
    tasks = []
    for path in paths:
        if path.endswith(".jsonl"):
            tasks += load_task_set(path, instances, repo_cache=repo_cache)
        else:
            tasks += load_tasks([path])
    return tasks


def list_tasks(paths: list[str], repo_cache: Path | None = None, instances: list[str] | None = None) -> int:
    tasks = _load(paths, repo_cache, instances)
    width = max(len(t.id) for t in tasks)
    print(f"{'id':<{width}}  {'family':<12} {'difficulty':<10} F2P P2P  source")
    for t in tasks:
        print(
            f"{t.id:<{width}}  {t.family:<12} {t.difficulty:<10} {len(t.grading.fail_to_pass):>3} "
            f"{len(t.grading.pass_to_pass):>3}  {t.source}"
        )
        if t.unavailable:
            print(f"{'':<{width}}  not runnable here: {t.unavailable.splitlines()[0]}")
    print(f"{len(tasks)} tasks in {len({t.family for t in tasks})} families")
    return 0


def validate(
    paths: list[str], repo_cache: Path | None = None, instances: list[str] | None = None, sandbox: str = "local"
) -> int:
    from agent_env import GradingError, grade_patch, network_error, prepare_environments  # lazy: see the docstring
    from sandboxes import make_sandbox

    tasks = prepare_environments(_load(paths, repo_cache, instances), sandbox)
    factory = None if sandbox == "local" else (lambda spec: make_sandbox(spec, sandbox))
    failures = unavailable = 0
    for task in tasks:
        if task.unavailable:
            print(f"n/a   {task.id}: not runnable here: {task.unavailable}")
            unavailable += 1
            continue
        try:
            if not task.gold_patch:
                raise TaskError(f"{task.source}: field 'gold_patch': needed to prove the task can be solved")
            gold = grade_patch(task, task.gold_patch, sandbox_factory=factory)
            empty = grade_patch(task, "", sandbox_factory=factory)
        except (TaskError, GradingError) as exc:
            print(f"FAIL  {task.id}: {exc}")
            failures += 1
            continue
        if not gold.resolved and (line := network_error(gold.log)):
            print(f"n/a   {task.id}: not gradable offline: a test needs the network ({line})")
            unavailable += 1
            continue
        problems = []
        if not gold.resolved:
            why = "; ".join(gold.problems) or f"failing: {', '.join(gold.failed)}"
            problems.append(f"gold patch does not resolve it ({why})")
        if gold.dropped:
            problems.append(
                "the gold patch changes protected paths, which never reach the grader: "
                + ", ".join(f"{path} ({reason})" for path, reason in gold.dropped)
                + " (list source paths the rule mistakes for tests in grading.unprotect)"
            )
        if empty.resolved:
            problems.append("the empty patch already resolves it (FAIL_TO_PASS tests pass without a fix)")
        passing_before = [t for t in task.grading.fail_to_pass if t not in empty.failed]
        if passing_before:
            problems.append(f"FAIL_TO_PASS tests pass without a fix: {passing_before}")
        if problems:
            failures += 1
            print(f"FAIL  {task.id}: " + "; ".join(problems))
        else:
            print(f"ok    {task.id}")
    valid = len(tasks) - failures - unavailable
    print(f"{valid}/{len(tasks)} tasks valid" + (f", {unavailable} not runnable here" if unavailable else ""))
    return 1 if failures or unavailable else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["list", "validate"])
    parser.add_argument(
        "paths", nargs="*", help="task folders, task.yaml files or SWE-bench .jsonl rows (default: the built-in suite)"
    )
    parser.add_argument("--repo-cache", type=Path, default=None, help="folder of git clones SWE-bench rows run from")
    parser.add_argument("--instances", default="", help="comma-separated SWE-bench instance ids (default: all)")
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"], help="where validation runs")
    args = parser.parse_args(argv)
    instances = [i for i in args.instances.split(",") if i] or None
    try:
        if args.command == "list":
            return list_tasks(args.paths, args.repo_cache, instances)
        return validate(args.paths, args.repo_cache, instances, args.sandbox)
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
