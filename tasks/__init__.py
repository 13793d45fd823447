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


def builtin_tasks(ids: list[str] | None = None) -> list[Task]:
    """The built-in suite shipped in `tasks/builtin/`, optionally only the named ids."""
    tasks = load_tasks([BUILTIN_DIR])
    if ids:
        by_id = {t.id: t for t in tasks}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise TaskError(f"unknown built-in task ids {unknown}; known: {sorted(by_id)}")
        tasks = [by_id[i] for i in ids]
    return tasks


def load_task_set(source: str, ids: list[str] | None = None) -> list[Task]:
    """Tasks by source: `builtin`, a folder or YAML of task definitions, or SWE-bench rows
    (a `.jsonl` path, `verified`, or a Hugging Face dataset name)."""
    if source == "builtin":
        return builtin_tasks(ids)
    path = Path(source)
    if path.is_dir() or path.suffix in (".yaml", ".yml"):
        tasks = load_tasks([path])
        if ids:
            by_id = {t.id: t for t in tasks}
            unknown = [i for i in ids if i not in by_id]
            if unknown:
                raise TaskError(f"{source}: unknown task ids {unknown}")
            tasks = [by_id[i] for i in ids]
        return tasks
    from tasks.swebench import load_swebench

    return load_swebench(source, ids)
