"""SWE-bench rows as tasks: from a local JSONL or the Hugging Face dataset.

A row carries its repository, `base_commit`, the issue text, the gold `patch`, the hidden
`test_patch` and FAIL_TO_PASS / PASS_TO_PASS (as lists or JSON strings). Its test command
comes from the official harness's specification for the row's repo and version
(`tasks.swebench_specs`: swebench 4.1.0's table, kept as data since swebench 5 moved it into
the dataset), so grading runs exactly the tests the leaderboard runs, read by the pinned
harness's log parser for the repository.

Where no published instance image can be pulled (no registry, or no Docker at all), a row
still runs from a local clone of its repository: given a repository cache (`repo_cache`, a
folder of clones, `tasks.repos`), the workspace is the repository at `base_commit` as a
one-commit git repository (nothing after it is reachable), and the sandbox definition asks
for the row's environment as the harness specifies it, made with pip (`tasks.swebench_env`),
which `agent_env.prepare_environment` builds for a backend: a local image from the base
image (docker) or a virtualenv (local). Rows whose environment cannot be met this way
(no clone, a clone without the commit, a missing requirements or environment file, no
specification; and, when built, a Python that pyenv lacks or a step that fails) carry an
`unavailable` reason that says which part failed, and runs report them as such, never as
unresolved. Without a repository cache every row is unavailable: the reason says to give one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from tasks.repos import checkout_workspace, find_clone
from tasks.spec import GradingSpec, LimitsSpec, Task, TaskError
from tasks.swebench_env import check_specification, row_environment
from tasks.swebench_specs import get_test_directives, mypy_selection, repo_version_specs, specs_source, test_command

HF_DATASETS = ("princeton-nlp/SWE-bench_Verified", "SWE-bench/SWE-bench_Verified")
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS")
ROW_LIMITS = LimitsSpec(max_turns=100, command_timeout_s=120, grading_timeout_s=1800)
"""The limits of a task made from a SWE-bench-form row (Verified's and the training sets')."""


def required_tests(row: dict, key: str, where: str) -> list[str]:
    """A row's FAIL_TO_PASS or PASS_TO_PASS: a list, or a JSON string of one (as the hub
    stores them); anything else is a one-line error naming the row and the field."""
    value = row.get(key) or []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{where}: field '{key}': not a JSON list: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskError(f"{where}: field '{key}': expected a list of test names")
    return value


def _test_command(row: dict) -> str:
    """The harness's test command for this row (its repo/version spec and the test files its
    test patch touches), or "" when the spec table has none."""
    specs = repo_version_specs(row["repo"], row.get("version", ""))
    if not specs:
        return ""
    if row["repo"] == "python/mypy":
        return f"{test_command(specs)} {mypy_selection(row)}"
    return f"{test_command(specs)} {' '.join(get_test_directives(row))}".strip()


def harness_spec(row: dict) -> dict:
    """What of the row's repo/version specification its task uses, and where it comes from
    (empty when the table has none)."""
    specs = repo_version_specs(row["repo"], row.get("version", ""))
    if not specs:
        return {}
    return {
        "repo": row["repo"],
        "version": str(row.get("version", "")),
        "python": str(specs["python"]),
        "install": specs.get("install", ""),
        "test_cmd": test_command(specs),
        "source": specs_source(row["repo"]),
    }


def row_to_task(row: dict, where: str = "row", repo_cache: str | Path | None = None, checkout: bool = True) -> Task:
    """One SWE-bench row as a `Task`; errors name the row and the field. With a
    `repo_cache`, the workspace is made from the row's clone in it and the sandbox
    definition asks for the row's environment (see the module docstring). `checkout=False`:
    the workspace is named, not made (a row a resumable run has graded already)."""
    missing = [key for key in REQUIRED if not row.get(key)]
    if missing:
        raise TaskError(f"{where}: missing field(s) {missing}")
    command = _test_command(row)
    row_name = f"{where} ({row['instance_id']})"
    workspace, sandbox, reason = None, {}, ""
    if not command:
        reason = f"no test command for {row['repo']} {row.get('version')!r}: the harness's spec table has none"
    elif repo_cache is None:
        reason = (
            "its environment is not available here: no repository given; a SWE-bench row needs its "
            "published instance image, or a local clone of its repository (a repository cache: "
            "--repo-cache DIR, see tasks/README.md)"
        )
    else:
        try:
            check_specification(row, row_name)  # what no clone would change, first
            clone = find_clone(Path(repo_cache), row["repo"], row["base_commit"], row_name)
            sandbox, edits = row_environment(row, clone, row_name, downloads=Path(repo_cache) / "downloads")
            name = row["repo"].replace("/", "__")
            workspace = checkout_workspace(
                clone, row["base_commit"], name=name, edits=edits, where=row_name, make=checkout
            )
        except TaskError as exc:  # the row is reported as unavailable, with why; the rest still run
            workspace, sandbox, reason = None, {}, str(exc)
    return Task(
        id=row["instance_id"],
        problem_statement=row["problem_statement"],
        grading=GradingSpec(
            test_command=command or "true",
            log_parser="swebench",
            fail_to_pass=required_tests(row, "FAIL_TO_PASS", where),
            pass_to_pass=required_tests(row, "PASS_TO_PASS", where),
        ),
        limits=ROW_LIMITS,
        family=row["repo"],
        difficulty=_difficulty(row.get("difficulty", "")),
        workspace=workspace,
        gold_patch=row.get("patch", ""),
        test_patch=row.get("test_patch", ""),
        source=where,
        repo=row["repo"],
        unavailable=reason,
        sandbox=sandbox,
        workspace_is_repo=workspace is not None,
        harness_spec=harness_spec(row),
    )


def _difficulty(label: str) -> str:
    # Verified's annotation buckets: "<15 min fix", "15 min - 1 hour", "1-4 hours", ">4 hours".
    if label.startswith("<15"):
        return "easy"
    if label.startswith("15 min"):
        return "medium"
    return "hard" if label else "medium"


def read_rows(source: str | Path) -> Iterable[tuple[str, dict]]:
    """(where, row) pairs from a JSONL path or a Hugging Face dataset `name[:split]`
    (split `test` by default). A missing file, or a dataset the hub cannot give (no network,
    no such dataset), is a one-line `TaskError`."""
    path = Path(source).expanduser()
    if path.suffix == ".jsonl" or path.exists():
        if not path.is_file():
            raise TaskError(f"{path}: no such file; give an existing SWE-bench .jsonl (one row per line)")
        with path.open() as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield f"{path}:{number}", json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise TaskError(f"{path}:{number}: not valid JSON: {exc}") from None
        return
    yield from _hub_rows(str(source))


def _hub_rows(source: str) -> Iterable[tuple[str, dict]]:
    name, _, split = source.partition(":")
    hub_log = logging.getLogger("huggingface_hub")  # offline it logs every retry: the error says it once
    level = hub_log.level
    try:
        import datasets  # lazy: heavy, and only needed for hub datasets

        hub_log.setLevel(logging.ERROR)
        rows = datasets.load_dataset(name, split=split or "test")
    except Exception as exc:  # noqa: BLE001 - any failure of the hub is the same one line for the user
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        why = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        raise TaskError(
            f"dataset {source}: not a local path, and the Hugging Face hub could not give it ({why[:200]}); "
            "pass a local SWE-bench .jsonl instead (its rows, one per line)"
        ) from None
    finally:
        hub_log.setLevel(level)
    for index, row in enumerate(rows):
        yield f"{source}[{index}]", dict(row)


def swebench_tasks(
    source: str | Path,
    wanted: set[str] | None = None,
    repo_cache: str | Path | None = None,
    no_checkout: frozenset[str] = frozenset(),
) -> tuple[list[tuple[str, str]], list[Task]]:
    """Every row's (instance id, where) in `source`, and the rows as tasks (only those in
    `wanted`, when given; ids not there are no error: `tasks.load_task_set` decides). Rows
    in `no_checkout` get their workspace's path, not its checkout (`row_to_task`)."""
    if str(source) == "verified":
        source = HF_DATASETS[0]
    if repo_cache is not None and not Path(repo_cache).is_dir():
        raise TaskError(f"repository cache {repo_cache}: no such folder")
    entries: dict[str, str] = {}
    rows = {}
    for where, row in read_rows(source):
        instance = row.get("instance_id")
        entries.setdefault(instance, where)  # a row given twice in one source counts once
        if not wanted or instance in wanted:
            rows[instance] = (where, row)
    # Making a workspace from a clone takes a second or two the first time (cached after).
    progress = tqdm(rows.values(), desc="swe-bench rows", unit="row", disable=repo_cache is None or len(rows) < 5)
    tasks = [row_to_task(row, where, repo_cache, row["instance_id"] not in no_checkout) for where, row in progress]
    return list(entries.items()), list({task.id: task for task in tasks}.values())


def load_swebench(
    source: str | Path, instances: list[str] | None = None, repo_cache: str | Path | None = None
) -> list[Task]:
    """SWE-bench rows as tasks, optionally only the named instance ids (in that order);
    `repo_cache` is a folder of clones that rows' workspaces are made from."""
    _, tasks = swebench_tasks(source, set(instances or ()) or None, repo_cache)
    if instances:
        unknown = [i for i in instances if i not in {t.id for t in tasks}]
        if unknown:
            raise TaskError(f"{source}: instance(s) not found: {unknown}")
        by_id = {t.id: t for t in tasks}
        tasks = [by_id[i] for i in dict.fromkeys(instances)]
    return tasks
