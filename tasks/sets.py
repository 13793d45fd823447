"""Task sets: the loaders behind `tasks.load_task_set` (built-in tasks, folders of task
definitions, SWE-bench rows) and the one-line errors of ids no source has.

Below `tasks.streams` (a stream loads its base tasks through `load_task_set`), so a stream
needs nothing of the package's face (`tasks/__init__.py`), which only hands these on.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tasks.spec import Task, TaskError, load_task

BUILTIN_DIR = Path(__file__).with_name("builtin")


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


TaskSource = str | Path
"""`builtin`, a folder or `task.yaml` of task definitions, SWE-bench rows (a `.jsonl`), or a
Hugging Face dataset name (`verified`, `owner/name[:split]`)."""

_PATH_SUFFIXES = (".jsonl", ".json", ".yaml", ".yml")


def looks_like_path(source: str) -> bool:
    """Whether `source` is meant as a local path rather than a Hugging Face dataset name:
    it starts with `.`, `~` or `/`, ends in `/` or a file suffix (`.jsonl`, `.json`,
    `.yaml`), has more than one `/`, or its first folder exists here (`my-tasks/typo`)."""
    if source.startswith((".", "~", "/")) or source.endswith(("/", *_PATH_SUFFIXES)) or source.count("/") > 1:
        return True
    head, sep, _ = source.partition("/")
    return bool(sep) and Path(head).is_dir()


def source_kind(source: str) -> str:
    """`builtin`, `tasks` (task YAMLs), `harbor` (`harbor:PATH`, Harbor task folders),
    `training` (`swe-gym:PATH`, `swe-smith:PATH`, `r2e-gym:PATH`: `tasks.training_sets`), `rows`
    (a local SWE-bench JSONL) or `hub` (a dataset name); a source that looks like a path and
    does not exist is a one-line `TaskError`."""
    if source == "builtin":
        return "builtin"
    if source.startswith("harbor:"):
        return "harbor"
    from tasks.training_sets import split_source  # lazy: only a source with a prefix needs it

    if ":" in source and split_source(source) is not None:
        return "training"
    path = Path(source).expanduser()
    if path.is_dir() or (path.is_file() and path.suffix in (".yaml", ".yml")):
        return "tasks"
    if path.is_file():
        return "rows"
    if looks_like_path(source):
        siblings = [p.name for p in path.parent.iterdir()] if path.parent.is_dir() else []
        close = difflib.get_close_matches(path.name, siblings, n=1)
        hint = f" (did you mean {path.parent / close[0]}?)" if close else ""
        raise TaskError(
            f"task source {source}: no such file or folder{hint}; give a folder of task YAMLs, a task.yaml, "
            "a SWE-bench .jsonl, builtin, or a Hugging Face dataset name"
        )
    return "hub"


def _sources(source: TaskSource | Sequence[TaskSource]) -> list[str]:
    sources = [str(source)] if isinstance(source, (str, Path)) else [str(s) for s in source]
    if not sources:
        raise TaskError("no task source given: builtin, a folder of task YAMLs, or SWE-bench rows (a .jsonl)")
    twice = [s for s, n in Counter(sources).items() if n > 1]
    if twice:
        raise TaskError(f"task source {twice[0]} is given twice")
    return sources


def load_task_set(
    source: TaskSource | Sequence[TaskSource],
    ids: list[str] | None = None,
    repo_cache: str | Path | None = None,
    no_checkout: frozenset[str] = frozenset(),
) -> list[Task]:
    """Tasks from one source or several, loaded together: `builtin`, a folder or YAML of task
    definitions, or SWE-bench rows (a `.jsonl` path, `verified`, or a Hugging Face dataset
    name). `ids` picks tasks across all of them, in that order (all when empty); an id no
    source has is a one-line error naming it, the sources and the closest known ids, and an
    id in two sources one naming both. `repo_cache` is a folder of git clones that SWE-bench
    rows' workspaces are made from (see `tasks.repos`); their environments are then built per
    backend by `agent_env.prepare_environment`. Rows in `no_checkout` (a resumable run's
    finished ones) are named with their workspace's path but not checked out."""
    sources = _sources(source)
    repo_cache = Path(repo_cache).expanduser() if repo_cache else None  # `~/swe-repos` in a config
    wanted = set(ids or ())
    found: dict[str, tuple[str, str]] = {}  # id -> (its source, where in it)
    tasks: list[Task] = []
    for name in sources:
        kind = source_kind(name)
        if kind in ("rows", "hub"):
            from tasks.swebench import swebench_tasks

            entries, loaded = swebench_tasks(name, wanted or None, repo_cache, no_checkout)
        elif kind == "training":
            from tasks.training_sets import training_tasks

            entries, loaded = training_tasks(name, wanted or None, repo_cache, no_checkout)
        elif kind == "harbor":
            from tasks.harbor import harbor_path, load_harbor_tasks

            loaded = load_harbor_tasks(harbor_path(name) or Path(name))
            entries = [(t.id, t.source) for t in loaded]
            loaded = [t for t in loaded if not wanted or t.id in wanted]
        else:
            loaded = load_tasks([BUILTIN_DIR if kind == "builtin" else Path(name).expanduser()])
            entries = [(t.id, t.source) for t in loaded]
            loaded = [t for t in loaded if not wanted or t.id in wanted]
        for task_id, where in entries:
            if task_id in found:
                first, first_where = found[task_id]
                raise TaskError(
                    f"task id {task_id!r} is in two sources: {first} ({first_where}) and {name} ({where}); "
                    "ids must be unique across the sources"
                )
            found[task_id] = (name, where)
        tasks += loaded
    if not ids:
        return tasks
    unknown = list(dict.fromkeys(i for i in ids if i not in found))
    if unknown:
        raise TaskError(_unknown_ids(unknown, sources, list(found)))
    by_id = {t.id: t for t in tasks}
    return [by_id[i] for i in ids]


def _unknown_ids(unknown: list[str], sources: list[str], known: list[str]) -> str:
    """One line: the ids no source has, the sources searched, the closest known ids, and what
    to do (ids given in a config file apply to whatever sources are given with them)."""
    where = ", ".join(sources)
    text = f"task id(s) {', '.join(unknown)} not found in {where}"
    close = {i: difflib.get_close_matches(i, known, n=1) or sorted(k for k in known if i in k)[:1] for i in unknown}
    if any(close.values()):
        text += f" (closest: {', '.join(f'{c[0]} for {i}' for i, c in close.items() if c)})"
    if "builtin" not in sources and set(unknown) <= {t.id for t in load_tasks([BUILTIN_DIR])}:
        text += f"; they are built-in tasks: add builtin to the sources (tasks.source=[builtin, {where}]), or"
    else:
        text += ";"
    listed = f": {', '.join(known)}" if 0 < len(known) <= 8 else f" ({len(known)} tasks)"
    return text + f" pass tasks.ids=[] (evals: no --instances) to take every task, or list ids they have{listed}"
