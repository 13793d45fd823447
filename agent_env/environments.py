"""A task's environment, built for a backend before the task runs.

A task's sandbox definition may ask for a Python environment (a `python:` section, see
`sandboxes.pyenv`), as SWE-bench rows loaded from a repository cache do. It is built per
backend (`docker`: a local image from the base image; `local`: a virtualenv the local
sandbox mounts read-only), once per content, before any sandbox of the task starts:
`prepare_environment` returns the task with the built environment in its sandbox
definition, or, when it cannot be built, `unavailable` with the reason (which part failed:
the Python version, a system step, a setup or install step), so that runs report the task
as such and never grade it.

`prepare_environments` builds many tasks' environments: the shared part of an environment
(the interpreter, system and setup steps: for SWE-bench rows, one per (repo, version)
spec, as the harness's env images are) once per content, and only the per-task part (the
`install` steps in the task's workspace) per task. Tasks are grouped by their shared
part; the groups' first tasks build on up to `workers` threads at once (different specs in
parallel), then the rest of each group, whose shared part is then built. Within one
process a group's shared part is built by one thread (the others are not started until it
is there); across processes a lock file per build does the same (`sandboxes.pyenv`).
When the shared part cannot be built, the group's other tasks get the same reason without
building it again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from tqdm import tqdm

from sandboxes import SandboxError
from tasks import Task, TaskError, prepare_workspace

logger = logging.getLogger(__name__)

UNAVAILABLE_PREFIX = "environment cannot be built here: "
SHARED_PARTS = ("python", "system", "setup")
"""The parts of an environment that tasks with the same ones share (`pyenv.PARTS`)."""


def default_build_workers() -> int:
    """How many environments build at once by default: builds mostly wait on pip and the
    network, so a few more than the cores, at most 4."""
    return max(1, min(4, (os.cpu_count() or 1) + 1))


def needs_environment(task: Task) -> bool:
    """Whether the task's sandbox definition asks for an environment still to be built (a
    `python:` section, or a Dockerfile), or its gold is a script still to be run."""
    return bool(task.sandbox.get("python")) or task.dockerfile is not None or _gold_to_run(task)


def _gold_to_run(task: Task) -> bool:
    return task.verifier is not None and task.verifier.solution_dir is not None and not task.gold_patch


def shared_key(task: Task, backend: str) -> str:
    """What the shared part of the task's environment is built from (the `python:` section
    less its per-task `install` steps, and the backend): tasks with the same key share it."""
    python = {k: v for k, v in task.sandbox.get("python", {}).items() if k != "install"}
    shared = {
        "backend": backend,
        "python": python,
        "image": task.sandbox.get("image"),
        "build": task.sandbox.get("build"),
        "dockerfile": str(task.dockerfile) if task.dockerfile else None,
    }
    return hashlib.sha256(json.dumps(shared, sort_keys=True, default=str).encode()).hexdigest()[:16]


def spec_label(task: Task) -> str:
    """The task's environment in words: the SWE-bench spec (`psf/requests 1.1`) or its Python."""
    spec = task.harness_spec or {}
    if task.dockerfile is not None:
        return f"{task.dockerfile} ({task.id})"
    if spec.get("repo"):
        return f"{spec['repo']} {spec.get('version', '')}".strip()
    return f"python {task.sandbox.get('python', {}).get('version', '?')}"


def prepare_environment(task: Task, backend: str = "local", *, log: Callable[[str], None] | None = None) -> Task:
    """`task` with its environment built for `backend` (or found built); unchanged when it
    needs none or is unavailable already; `unavailable` with the reason when it cannot be built."""
    return _prepare(task, backend, log)[0]


def _prepare(task: Task, backend: str, log: Callable[[str], None] | None) -> tuple[Task, str, tuple[str, ...]]:
    """(the task prepared, the part that failed or "", what was built)."""
    if task.unavailable or not needs_environment(task):
        return task, "", ()
    if task.dockerfile is not None or _gold_to_run(task):
        task, failed, built = _prepare_dockerfile(task, backend, log) if task.dockerfile else (task, "", ())
        return (_with_oracle_gold(task, backend, log), failed, built) if not failed else (task, failed, built)
    from sandboxes import pyenv
    from sandboxes.images import parse_definition  # lazy: yaml parsing and more

    if _workspace_gone(task):
        return _gone(task), "workspace", ()
    try:
        definition = parse_definition(task.sandbox, Path(task.source or "task.yaml"))
        prepared = pyenv.prepare(definition, backend, workspace=prepare_workspace(task), log=log)
    except (SandboxError, TaskError) as exc:
        part = getattr(exc, "part", "")
        return dataclasses.replace(task, unavailable=UNAVAILABLE_PREFIX + str(exc)), part or "definition", ()
    except FileNotFoundError:
        if not _workspace_gone(task):
            raise  # a bug, not a vanished workspace
        return _gone(task), "workspace", ()
    sandbox = {k: v for k, v in task.sandbox.items() if k not in ("python", "build")}
    if prepared.image:
        sandbox["image"] = prepared.image
    sandbox["env"] = {**task.sandbox.get("env", {}), **prepared.env}
    sandbox["mounts"] = [
        *task.sandbox.get("mounts", []),
        *({"source": str(m.source), "target": m.target, "writable": m.writable} for m in prepared.mounts),
    ]
    if prepared.workspace is None:
        return dataclasses.replace(task, sandbox=sandbox), "", prepared.built
    # The local build's copy of the workspace: the same one-commit repository, plus what the
    # install left in it (build outputs, compiled extensions).
    task = dataclasses.replace(task, sandbox=sandbox, workspace=prepared.workspace, workspace_is_repo=True)
    return task, "", prepared.built


def _workspace_gone(task: Task) -> bool:
    return task.workspace is not None and not Path(task.workspace).is_dir()


def _gone(task: Task) -> Task:
    """`task`, unavailable because its workspace vanished after it was loaded."""
    why = (
        f"its workspace {task.workspace} is gone (deleted after the task was loaded: another run with "
        "--prune sharing the cache?); run the same command again, which makes it anew"
    )
    return dataclasses.replace(task, unavailable=UNAVAILABLE_PREFIX + why)


def _prepare_dockerfile(
    task: Task, backend: str, log: Callable[[str], None] | None
) -> tuple[Task, str, tuple[str, ...]]:
    """A task whose sandbox is a Dockerfile (Harbor tasks): on docker, the image built and
    the workspace copied out of its workdir; locally, the host's toolchain, when the
    Dockerfile asks for nothing the local backend cannot do (`tasks.harbor.local_problem`)."""
    from tasks.harbor import local_problem, parse_dockerfile

    assert task.dockerfile is not None
    workdir = task.sandbox.get("workdir", "/")
    try:
        dockerfile = parse_dockerfile(task.dockerfile)
    except TaskError as exc:
        return dataclasses.replace(task, unavailable=UNAVAILABLE_PREFIX + str(exc)), "definition", ()
    if backend != "docker":
        problem = local_problem(dockerfile, workdir)
        if problem:
            reason = f"{UNAVAILABLE_PREFIX}{task.dockerfile}: on the local backend, {problem}"
            return dataclasses.replace(task, unavailable=reason), "setup", ()
        return dataclasses.replace(task, dockerfile=None), "", ()
    from sandboxes import dockerfile as images
    from tasks.spec import workspace_cache_dir

    try:
        tag = images.build(task.dockerfile, log=log or logger.info)
        workspace = images.copy_workdir(tag, workdir, workspace_cache_dir() / "harbor" / f"image-{tag.split(':')[-1]}")
    except SandboxError as exc:
        return dataclasses.replace(task, unavailable=UNAVAILABLE_PREFIX + str(exc)), "setup", ()
    sandbox = {**task.sandbox, "image": tag}
    return dataclasses.replace(task, sandbox=sandbox, workspace=workspace, dockerfile=None), "", ("environment",)


def _with_oracle_gold(task: Task, backend: str, log: Callable[[str], None] | None) -> Task:
    """`task` with its gold patch made by its solution script (`agent_env.oracle`), run in
    its now-built sandbox; unchanged (the reason logged, `validate` repeats it) when the
    script fails."""
    if not _gold_to_run(task):
        return task
    from agent_env.oracle import oracle_patch
    from sandboxes import make_sandbox

    try:
        return dataclasses.replace(task, gold_patch=oracle_patch(task, lambda spec: make_sandbox(spec, backend)))
    except (TaskError, SandboxError) as exc:
        (log or logger.warning)(f"task {task.id}: no gold patch from its solution script: {exc}")
        return task


def _stop_builds(futures: list[Future]) -> None:
    """On Ctrl-C or SIGTERM: close the sandboxes the builds in flight run in until every
    build has ended (each fails at once), so that the pool's shutdown, which waits for its
    threads, takes seconds instead of the rest of a pip install or a compile."""
    from sandboxes import close_all

    while not all(future.done() for future in futures):
        close_all()
        wait(futures, timeout=0.5)


def prepare_environments(
    tasks: list[Task],
    backend: str = "local",
    *,
    progress: bool = True,
    workers: int | None = None,
    seconds: dict[str, float] | None = None,
    built: set[str] | None = None,
) -> list[Task]:
    """`prepare_environment` for each task, on up to `workers` threads (default
    `default_build_workers()`), with a progress bar and a line per shared environment
    (which, how long); tasks that share an environment's shared part build it once.
    `seconds` gets each task's preparation time and `built` the ids of the tasks that built
    their shared part (rather than finding it built), for a caller that accounts for them."""
    wanted = [t for t in tasks if needs_environment(t) and not t.unavailable]
    if not wanted:
        return tasks
    workers = max(1, workers or default_build_workers())
    groups: dict[str, list[Task]] = {}
    for task in wanted:
        groups.setdefault(shared_key(task, backend), []).append(task)
    bar = tqdm(total=len(wanted), desc=f"environments ({backend})", unit="task", disable=not progress)

    def log(line: str) -> None:
        if progress:
            bar.write(line, file=sys.stderr)
        else:
            logger.info(line)

    def run(task: Task) -> tuple[Task, str, tuple[str, ...], float]:
        started = time.monotonic()
        return (*_prepare(task, backend, log), time.monotonic() - started)

    log(f"{len(wanted)} task(s) need {len(groups)} shared environment(s); building on up to {workers} thread(s)")
    prepared: dict[str, Task] = {}
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="env-build") as pool:
        # Each group's first task builds its shared part; the rest wait until it is there.
        pending: dict[Future, str] = {pool.submit(run, group[0]): key for key, group in groups.items()}
        firsts = set(pending)
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    key = pending.pop(future)
                    task, failed, made, took = future.result()
                    prepared[task.id] = task
                    if seconds is not None:
                        seconds[task.id] = took
                    if built is not None and "environment" in made:
                        built.add(task.id)
                    bar.update()
                    if future not in firsts:
                        continue
                    rest = groups[key][1:]
                    label = f"{spec_label(task)} ({len(groups[key])} task(s))"
                    if failed in SHARED_PARTS:
                        log(f"environment {label}: cannot be built ({failed} failed) after {took:.1f} s")
                        for other in rest:  # the same build would fail the same way: not again
                            prepared[other.id] = dataclasses.replace(other, unavailable=task.unavailable)
                            bar.update()
                        continue
                    how = "built" if "environment" in made else "found built"
                    log(f"environment {label}: shared part {how}; first task ready in {took:.1f} s")
                    pending.update({pool.submit(run, other): key for other in rest})
        except BaseException as exc:
            for future in pending:
                future.cancel()
            if isinstance(exc, KeyboardInterrupt):
                _stop_builds(list(pending))
            raise
        finally:
            bar.close()
    log(f"{len(wanted)} environment(s) ready in {time.monotonic() - started:.1f} s")
    return [prepared.get(t.id, t) for t in tasks]
