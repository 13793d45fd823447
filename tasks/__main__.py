"""`python -m tasks list [PATH ...]`: see what tasks exist; `export-harbor [PATH ...] --out DIR`: write them as Harbor tasks.

`export-harbor` writes each task as a Harbor task folder (`tasks.harbor_export`); a task that
cannot be exported is named with the reason, and the others are still written. PATH is a task folder, a `task.yaml`, a folder of tasks, SWE-bench rows (a `.jsonl`), or a
task stream (`stream:online`: every task its phases pick); the built-in suite by default.
Proving that tasks work (the gold patch resolves, the empty one does not) grades them, which
is the agent layer's work: `python -m agent_env validate [PATH ...]`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sandboxes.console import interrupted, interrupts, setup_logging
from tasks import TaskError, add_source_arguments, load_sources


def list_tasks(paths: list[str], repo_cache: Path | None = None, instances: list[str] | None = None) -> int:
    tasks = load_sources(paths, repo_cache, instances)
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


def export_harbor(
    paths: list[str], out: Path, repo_cache: Path | None, instances: list[str] | None, image: str | None
) -> int:
    from tasks.harbor_export import export_task

    tasks, refused = load_sources(paths, repo_cache, instances), 0
    for task in tasks:
        try:
            folder = export_task(task, out, image)
        except TaskError as exc:
            refused += 1
            print(f"skipped {exc}", file=sys.stderr)
            continue
        print(f"exported {task.id} -> {folder}")
    print(f"{len(tasks) - refused} of {len(tasks)} tasks written to {out} (Harbor task folders)")
    return 1 if refused else 0


def main(argv: list[str] | None = None) -> int:
    setup_logging()
    parser = argparse.ArgumentParser(
        prog="python -m tasks",
        description=__doc__.split("\n")[0],
        epilog="example: python -m tasks list tasks/builtin  (no PATH: the built-in suite); "
        "python -m tasks export-harbor --out harbor-tasks  (the built-in suite as Harbor tasks); "
        "to grade them: python -m agent_env validate",
    )
    parser.add_argument("command", help="list or export-harbor")
    add_source_arguments(parser)
    parser.add_argument("--out", type=Path, default=None, help="export-harbor: the folder to write task folders in")
    parser.add_argument(
        "--image", default=None, help="export-harbor: the FROM image (default: the task's, or agentic-rl/base:bookworm)"
    )
    args, unknown = parser.parse_known_args(argv)
    if args.command == "validate":
        parser.error(
            "validate grades tasks, the agent layer's work: run `python -m agent_env validate` with the same arguments"
        )
    if args.command not in ("list", "export-harbor") or unknown:
        parser.error(
            f"unknown command or option: {' '.join([args.command, *unknown][: 1 + len(unknown)])} "
            "(use: list, export-harbor)"
        )
    if args.command == "export-harbor" and args.out is None:
        parser.error("export-harbor needs --out DIR, the folder to write the task folders in")
    instances = [i for i in args.instances.split(",") if i] or None
    with interrupts():  # Ctrl-C / SIGTERM: one line, exit 130 / 143
        try:
            if args.command == "export-harbor":
                return export_harbor(args.paths, args.out, args.repo_cache, instances, args.image)
            return list_tasks(args.paths, args.repo_cache, instances)
        except TaskError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # the reader went away (`... | head`): nothing left to say
            sys.stderr.close()
            return 0
        except KeyboardInterrupt as exc:
            return interrupted(exc, "nothing listed")


if __name__ == "__main__":
    sys.exit(main())
