"""What to solve: task definitions (YAML + files) and their loaders.

Plain data only: no sandbox, no model. `tasks/README.md` shows how to add a task.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tasks.sets import (
    BUILTIN_DIR,
    TaskSource,
    builtin_tasks,
    load_task_set,
    load_tasks,
    looks_like_path,
    select,
    source_kind,
)
from tasks.spec import (
    GradingSpec,
    LimitsSpec,
    Task,
    TaskDefinition,
    TaskError,
    load_task,
    patch_files,
    prepare_workspace,
)

__all__ = [
    "BUILTIN_DIR",
    "GradingSpec",
    "LimitsSpec",
    "Task",
    "TaskDefinition",
    "TaskError",
    "TaskSource",
    "builtin_tasks",
    "load_task",
    "load_task_set",
    "load_tasks",
    "looks_like_path",
    "patch_files",
    "prepare_workspace",
    "select",
    "source_kind",
]


def add_source_arguments(parser) -> None:
    """The command-line sources `load_sources` reads (`paths`, `--repo-cache`, `--instances`),
    on an `argparse` parser: the same words in every entry point that takes tasks."""
    parser.add_argument(
        "paths",
        nargs="*",
        help="task folders, task.yaml files, SWE-bench .jsonl rows or stream:NAME (default: the built-in suite)",
    )
    parser.add_argument("--repo-cache", type=Path, default=None, help="folder of git clones SWE-bench rows run from")
    parser.add_argument("--instances", default="", help="comma-separated SWE-bench instance ids (default: all)")


def load_sources(
    paths: Sequence[str],
    repo_cache: str | Path | None = None,
    instances: list[str] | None = None,
    no_checkout: frozenset[str] = frozenset(),
) -> list[Task]:
    """The tasks of every command-line source (the built-in suite when none is named),
    `instances` only when given; a `stream:NAME` source gives every task its phases pick
    (variants included), once each. Rows in `no_checkout` are not checked out
    (`load_task_set`)."""
    from tasks.streams import load_stream, stream_path

    streams = [name for name in map(stream_path, paths) if name is not None]
    sources = [path for path in paths if stream_path(path) is None]
    tasks = (
        list(load_task_set(sources or "builtin", instances or None, repo_cache=repo_cache, no_checkout=no_checkout))
        if sources or not streams
        else []
    )
    for name in streams:
        tasks += [t for t in load_stream(name, repo_cache=repo_cache).tasks if not instances or t.id in instances]
    first: dict[str, Task] = {}
    for task in tasks:  # a stream's base tasks may also come from a source given beside it
        first.setdefault(task.id, task)
    return list(first.values())
