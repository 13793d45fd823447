"""A task's environment, built for a backend before the task runs.

A task's sandbox definition may ask for a Python environment (a `python:` section, see
`sandboxes.pyenv`), as SWE-bench rows loaded from a repository cache do. It is built per
backend (`docker`: a local image from the base image; `local`: a virtualenv the local
sandbox mounts read-only), once per content, before any sandbox of the task starts:
`prepare_environment` returns the task with the built environment in its sandbox
definition, or, when it cannot be built, `unavailable` with the reason (which part failed:
the Python version, a system step, a setup or install step), so that runs report the task
as such and never grade it.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from sandboxes import SandboxError
from tasks import Task, TaskError, prepare_workspace

UNAVAILABLE_PREFIX = "environment cannot be built here: "


def needs_environment(task: Task) -> bool:
    """Whether the task's sandbox definition asks for an environment still to be built."""
    return bool(task.sandbox.get("python"))


def prepare_environment(task: Task, backend: str = "local", *, log: Callable[[str], None] | None = None) -> Task:
    """`task` with its environment built for `backend` (or found built); unchanged when it
    needs none or is unavailable already; `unavailable` with the reason when it cannot be built."""
    if task.unavailable or not needs_environment(task):
        return task
    from sandboxes import pyenv
    from sandboxes.images import parse_definition  # lazy: yaml parsing and more

    try:
        definition = parse_definition(task.sandbox, Path(task.source or "task.yaml"))
        prepared = pyenv.prepare(definition, backend, workspace=prepare_workspace(task), log=log)
    except (SandboxError, TaskError) as exc:
        return dataclasses.replace(task, unavailable=UNAVAILABLE_PREFIX + str(exc))
    sandbox = {k: v for k, v in task.sandbox.items() if k not in ("python", "build")}
    if prepared.image:
        sandbox["image"] = prepared.image
    sandbox["env"] = {**task.sandbox.get("env", {}), **prepared.env}
    sandbox["mounts"] = [
        *task.sandbox.get("mounts", []),
        *({"source": str(m.source), "target": m.target, "writable": m.writable} for m in prepared.mounts),
    ]
    if prepared.workspace is None:
        return dataclasses.replace(task, sandbox=sandbox)
    # The local build's copy of the workspace: the same one-commit repository, plus what the
    # install left in it (build outputs, compiled extensions).
    return dataclasses.replace(task, sandbox=sandbox, workspace=prepared.workspace, workspace_is_repo=True)


def prepare_environments(tasks: list[Task], backend: str = "local", *, progress: bool = True) -> list[Task]:
    """`prepare_environment` for each task, with a progress bar; tasks that share an
    environment build it once."""
    wanted = [t for t in tasks if needs_environment(t) and not t.unavailable]
    if not wanted:
        return tasks
    bar = tqdm(total=len(wanted), desc=f"environments ({backend})", unit="task", disable=not progress)

    def log(line: str) -> None:
        bar.write(line, file=sys.stderr)

    prepared = {}
    try:
        for task in wanted:
            bar.set_postfix_str(task.id[:40])
            prepared[task.id] = prepare_environment(task, backend, log=log)
            bar.update()
    finally:
        bar.close()
    return [prepared.get(t.id, t) for t in tasks]
