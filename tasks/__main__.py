"""`python -m tasks list|validate [PATH ...]`: see what tasks exist, and prove they work.

`validate` checks each definition's schema (errors name the file and the field), then
grades it for real: the gold patch must resolve the task and the empty patch must not.
PATH is a task folder, a `task.yaml`, a folder of tasks, or SWE-bench rows (a `.jsonl`);
the built-in suite by default. SWE-bench rows run from a repository cache
(`--repo-cache DIR`, a folder of git clones) in an environment built for `--sandbox`
(`local` or `docker`); `--instances` picks rows. A task that cannot run here (no clone, an
environment that cannot be built, tests that need the network) is reported as not
runnable here, with the reason, apart from tasks that fail.

This entry point composes layers: the grading is `agent_env.validate`'s; here are the
arguments and the printing. The `tasks` library itself stays plain data.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent_env.validate import validate_tasks
from sandboxes.console import setup_logging
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
    results = []
    for result in validate_tasks(_load(paths, repo_cache, instances), sandbox):
        results.append(result)
        if result.status == "ok":
            print(f"ok    {result.task_id}")
        elif result.status == "failed":
            print(f"FAIL  {result.task_id}: " + "; ".join(result.problems))
        else:
            print(f"n/a   {result.task_id}: {result.reason}")
    valid = sum(r.ok for r in results)
    unavailable = sum(r.status == "unavailable" for r in results)
    print(f"{valid}/{len(results)} tasks valid" + (f", {unavailable} not runnable here" if unavailable else ""))
    return 0 if valid == len(results) else 1


def main(argv: list[str] | None = None) -> int:
    setup_logging()
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
