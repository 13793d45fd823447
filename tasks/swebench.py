"""SWE-bench rows as tasks: from a local JSONL or the Hugging Face dataset.

A row carries its repository, `base_commit`, the issue text, the gold `patch`, the hidden
`test_patch` and FAIL_TO_PASS / PASS_TO_PASS (as lists or JSON strings). Its test command
comes from the official harness's specification for the row's repo and version (the
`swebench` extra, pinned), so grading runs exactly the tests the leaderboard runs.

The workspace of a row is its repository at `base_commit` inside the row's environment.
Neither can be had offline yet: rows load, but are marked `unavailable` with the reason,
and runs report them as errors rather than as unresolved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tasks.spec import GradingSpec, LimitsSpec, Task, TaskError

HF_DATASETS = ("princeton-nlp/SWE-bench_Verified", "SWE-bench/SWE-bench_Verified")
REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS")


def _tests(row: dict, key: str, where: str) -> list[str]:
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
    """The harness's test command for this row, or a reason it is unknown."""
    try:
        from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
        from swebench.harness.test_spec.python import get_test_directives
    except ImportError:
        return ""
    specs = MAP_REPO_VERSION_TO_SPECS.get(row["repo"], {}).get(str(row.get("version", "")))
    if not specs:
        return ""
    command = specs["test_cmd"]
    command = command[-1] if isinstance(command, list) else command
    return f"{command} {' '.join(get_test_directives(row))}".strip()


def row_to_task(row: dict, where: str = "row") -> Task:
    """One SWE-bench row as a `Task`; errors name the row and the field."""
    missing = [key for key in REQUIRED if not row.get(key)]
    if missing:
        raise TaskError(f"{where}: missing field(s) {missing}")
    command = _test_command(row)
    reason = (
        "its environment is not available here: SWE-bench rows need the row's published "
        "docker image or a locally built environment"
        if command
        else f"no test command for {row['repo']} {row.get('version')}: install the 'swebench' extra"
    )
    return Task(
        id=row["instance_id"],
        problem_statement=row["problem_statement"],
        grading=GradingSpec(
            test_command=command or "true",
            log_parser="swebench",
            fail_to_pass=_tests(row, "FAIL_TO_PASS", where),
            pass_to_pass=_tests(row, "PASS_TO_PASS", where),
        ),
        limits=LimitsSpec(max_turns=100, command_timeout_s=120, grading_timeout_s=1800),
        family=row["repo"],
        difficulty=_difficulty(row.get("difficulty", "")),
        gold_patch=row.get("patch", ""),
        test_patch=row.get("test_patch", ""),
        source=where,
        repo=row["repo"],
        unavailable=reason,
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
    (split `test` by default)."""
    path = Path(source)
    if path.suffix == ".jsonl" or path.exists():
        if not path.is_file():
            raise TaskError(f"{path}: no such file")
        with path.open() as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield f"{path}:{number}", json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise TaskError(f"{path}:{number}: not valid JSON: {exc}") from None
        return
    import datasets  # lazy: heavy, and only needed for hub datasets

    name, _, split = str(source).partition(":")
    for index, row in enumerate(datasets.load_dataset(name, split=split or "test")):
        yield f"{source}[{index}]", dict(row)


def load_swebench(source: str | Path, instances: list[str] | None = None) -> list[Task]:
    """SWE-bench rows as tasks, optionally only the named instance ids (in that order)."""
    if str(source) == "verified":
        source = HF_DATASETS[0]
    tasks = {}
    for where, row in read_rows(source):
        if instances and row.get("instance_id") not in instances:
            continue
        task = row_to_task(row, where)
        tasks[task.id] = task
    if instances:
        unknown = [i for i in instances if i not in tasks]
        if unknown:
            raise TaskError(f"{source}: instance(s) not found: {unknown}")
        return [tasks[i] for i in instances]
    return list(tasks.values())
