"""What to solve: task definitions (YAML + files) and their loaders.

Plain data only: no sandbox, no model. `tasks/README.md` shows how to add a task.
"""

from __future__ import annotations

from pathlib import Path

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

BUILTIN_DIR = Path(__file__).with_name("builtin")

__all__ = [
    "BUILTIN_DIR",
    "GradingSpec",
    "LimitsSpec",
    "Task",
    "TaskDefinition",
    "TaskError",
    "builtin_tasks",
    "load_task",
    "load_task_set",
    "load_tasks",
    "patch_files",
    "prepare_workspace",
    "select",
]


def load_tasks(paths: list[str | Path]) -> list[Task]:
    """Tasks from YAML files or folders (a folder is searched for `*/task.yaml` and `task.yaml`)."""
    tasks: list[Task] = []
    for path in map(Path, paths):
        if path.is_dir() and not (path / "task.yaml").is_file():
            files = sorted(path.glob("*/task.yaml"))
            if not files:
                raise TaskError(f"{path}: no task.yaml found in it or its sub-folders")
            tasks += [load_task(f) for f in files]
        else:
            tasks.append(load_task(path))
    seen: dict[str, str] = {}
    for task in tasks:
        if task.id in seen:
            raise TaskError(f"{task.source}: field 'id': {task.id!r} is already used by {seen[task.id]}")
        seen[task.id] = task.source
    return tasks


def select(tasks: list[Task], ids: list[str] | None, where: str) -> list[Task]:
    """The tasks named by `ids`, in that order (all when `ids` is empty); unknown ids are an
    error naming `where` and the known ids."""
    if not ids:
        return tasks
    by_id = {t.id: t for t in tasks}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise TaskError(f"{where}: unknown task ids {unknown}; known: {sorted(by_id)}")
    return [by_id[i] for i in ids]


def builtin_tasks(ids: list[str] | None = None) -> list[Task]:
    """The built-in suite shipped in `tasks/builtin/`, optionally only the named ids."""
    return select(load_tasks([BUILTIN_DIR]), ids, "built-in suite")


def load_task_set(source: str, ids: list[str] | None = None, repo_cache: str | Path | None = None) -> list[Task]:
    """Tasks by source: `builtin`, a folder or YAML of task definitions, or SWE-bench rows
    (a `.jsonl` path, `verified`, or a Hugging Face dataset name). `repo_cache` is a folder
    of git clones that SWE-bench rows' workspaces are made from (see `tasks.repos`); their
    environments are then built per backend by `agent_env.prepare_environment`."""
    if source == "builtin":
        return builtin_tasks(ids)
    path = Path(source)
    if path.is_dir() or path.suffix in (".yaml", ".yml"):
        return select(load_tasks([path]), ids, source)
    from tasks.swebench import load_swebench

    return load_swebench(source, ids, repo_cache)
