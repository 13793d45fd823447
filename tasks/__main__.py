"""`python -m tasks list|validate [PATH ...]`: see what tasks exist, and prove they work.

`validate` checks each definition's schema (errors name the file and the field), then
grades it for real: the gold patch must resolve the task and the empty patch must not.
PATH is a task folder, a `task.yaml`, or a folder of tasks; the built-in suite by default.

This entry point composes layers (grading lives in `agent_env`), so it imports them
lazily; the `tasks` library itself stays plain data.
"""

from __future__ import annotations

import argparse
import sys

from tasks import TaskError, builtin_tasks, load_tasks


def _load(paths: list[str]):
    return load_tasks(paths) if paths else builtin_tasks()


def list_tasks(paths: list[str]) -> int:
    tasks = _load(paths)
    width = max(len(t.id) for t in tasks)
    print(f"{'id':<{width}}  {'family':<12} {'difficulty':<10} F2P P2P  source")
    for t in tasks:
        print(
            f"{t.id:<{width}}  {t.family:<12} {t.difficulty:<10} {len(t.grading.fail_to_pass):>3} "
            f"{len(t.grading.pass_to_pass):>3}  {t.source}"
        )
    print(f"{len(tasks)} tasks in {len({t.family for t in tasks})} families")
    return 0


def validate(paths: list[str]) -> int:
    from agent_env.grading import GradingError, grade_patch  # lazy: see the module docstring

    tasks = _load(paths)
    failures = 0
    for task in tasks:
        try:
            if not task.gold_patch:
                raise TaskError(f"{task.source}: field 'gold_patch': needed to prove the task can be solved")
            gold = grade_patch(task, task.gold_patch)
            empty = grade_patch(task, "")
        except (TaskError, GradingError) as exc:
            print(f"FAIL  {task.id}: {exc}")
            failures += 1
            continue
        problems = []
        if not gold.resolved:
            problems.append(
                f"gold patch does not resolve it (failing: {', '.join(gold.failed) or 'patch did not apply'})"
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
    print(f"{len(tasks) - failures}/{len(tasks)} tasks valid")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["list", "validate"])
    parser.add_argument("paths", nargs="*", help="task folders or task.yaml files (default: the built-in suite)")
    args = parser.parse_args(argv)
    try:
        return list_tasks(args.paths) if args.command == "list" else validate(args.paths)
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
