"""Training sets by file: SWE-Gym, SWE-smith and R2E-Gym rows from local files, as tasks.

Each set is read from a JSONL file, a parquet file, or a folder in the Hugging Face hub's
layout (`data/<split>-00000-of-00001.parquet`, split `train` unless `PATH:split`), named by
its form: `swe-gym:PATH`, `swe-smith:PATH`, `r2e-gym:PATH` (a hub name in place of PATH
loads through `datasets`, where the hub is reachable). Each row becomes a SWE-bench-form row
(`instance_id`, `repo`, `base_commit`, `patch`, `test_patch`, FAIL_TO_PASS, PASS_TO_PASS,
`problem_statement`), then a task graded as SWE-bench rows are (`tasks.swebench`): the stock
runner on exactly the required tests, with canary twins.

What maps, per set (tasks/README.md, "Training sets by file", has the table):

- **SWE-Gym** (`SWE-Gym/SWE-Gym`, `-Lite`): SWE-bench's own columns (no
  `environment_setup_commit`: requirements are read at `base_commit`). Its repositories'
  test commands, install steps and log parsers come from SWE-Gym's fork of the harness
  (`tasks/data/swegym_specs.json`); environments are built from a repository cache exactly
  as Verified rows' are, where that specification is pip's (moto, mypy, MONAI, conan, dvc,
  hydra); the conda ones (`environment.yml`: pandas, dask, modin, bokeh) and pydantic's pdm
  need the published image (`xingyaoww/sweb.eval.x86_64.<id, __ as _s_>`).
- **SWE-smith** (`SWE-bench/SWE-smith`): `patch` *introduces* the bug, so the workspace is
  the repository at the mirror's commit (`swesmith/<owner>__<name>.<commit8>`) with that
  patch applied, and the gold patch is its reverse (`reverse_patch`). No `base_commit`,
  `test_patch` or `version`: the test command is SWE-smith's default Python profile's
  (`pytest --disable-warnings --color=no --tb=no --verbose`, with `-rA` for the log
  parser) on the FAIL_TO_PASS files; a test missing from the log fails here (SWE-smith
  counts it passed). Installs live in SWE-smith's per-repository profiles, not the row:
  every row needs its published image (`image_name`).
- **R2E-Gym** (`R2E-Gym/R2E-Gym-Subset`, `-Lite`): `parsed_commit_content` gives the base
  commit (`old_commit_hash`) and the gold patch (its non-test file diffs, rendered as
  R2E-Gym's `ParsedCommit.get_patch` does); the hidden tests (`execution_result_content`'s
  `test_file_names` / `test_file_codes`) become a test patch adding `r2e_tests/`, run as
  R2E-Gym runs them (`python -m pytest -rA r2e_tests`); FAIL_TO_PASS / PASS_TO_PASS are the
  tests the row's own runs at the old and new commits read as failing then passing / passing
  both times. R2E-Gym's reward asks the whole log to equal `expected_output_json`, tests
  expected to fail included; here those are not required. Every row needs its published
  image (`docker_image`): the environment is in no specification.

A row whose environment cannot be made here is `unavailable` with the reason (which image
it needs), never unresolved, as SWE-bench rows are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from tasks.log_parsers import parse_pytest
from tasks.spec import GradingSpec, Task, TaskError
from tasks.swebench import ROW_LIMITS, read_rows, required_tests, row_to_task

FORMS = ("swe-gym", "swe-smith", "r2e-gym")
SWESMITH_TEST_COMMAND = "pytest --disable-warnings --color=no --tb=no --verbose -rA"
R2E_TEST_COMMAND = "python -m pytest -rA r2e_tests"
# R2E-Gym's `repo_name` is the repository's short name; its owners, for a repository cache.
R2E_REPOSITORIES = {
    "aiohttp": "aio-libs/aiohttp",
    "coveragepy": "nedbat/coveragepy",
    "datalad": "datalad/datalad",
    "numpy": "numpy/numpy",
    "orange3": "biolab/orange3",
    "pandas": "pandas-dev/pandas",
    "pillow": "python-pillow/Pillow",
    "pyramid": "Pylons/pyramid",
    "scrapy": "scrapy/scrapy",
    "sympy": "sympy/sympy",
    "tornado": "tornadoweb/tornado",
}


def split_source(source: str) -> tuple[str, str] | None:
    """(form, path) of `swe-gym:PATH`-style sources, None for any other source."""
    form, sep, rest = source.partition(":")
    return (form, rest) if sep and form in FORMS else None


def read_table(path: str) -> Iterator[tuple[str, dict]]:
    """(where, row) pairs from a JSONL file, a parquet file, or a hub-layout folder
    (`data/<split>-*.parquet` or `*.jsonl`; `PATH:split`, split `train` by default); a hub
    name (`owner/name[:split]`) that is no local path loads through `datasets`."""
    base, _, split = path.partition(":") if not Path(path).expanduser().exists() else (path, "", "")
    local = Path(base).expanduser()
    if local.is_dir():
        files = _split_files(local, split or "train")
    elif local.is_file():
        files = [local]
    elif base.count("/") == 1 and not base.startswith((".", "/", "~")):
        # A hub name: the same loader and errors as SWE-bench's.
        yield from read_rows(f"{base}:{split or 'train'}")
        return
    else:
        raise TaskError(f"{path}: no such file or folder; give a .jsonl, a .parquet, or a folder with data/*.parquet")
    for file in files:
        yield from _file_rows(file)


def _split_files(folder: Path, split: str) -> list[Path]:
    found = []
    for pattern in (f"data/{split}-*.parquet", f"{split}-*.parquet", f"data/{split}*.jsonl", f"{split}*.jsonl"):
        found = sorted(folder.glob(pattern))
        if found:
            return found
    raise TaskError(
        f"{folder}: no rows of split {split!r} (looked for data/{split}-*.parquet and {split}*.jsonl); "
        "give the folder of a dataset in the Hugging Face hub's layout, or a file"
    )


def _file_rows(file: Path) -> Iterator[tuple[str, dict]]:
    if file.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq  # lazy: heavy, only for parquet files

            table = pq.read_table(file)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is one line naming it
            raise TaskError(f"{file}: not a readable parquet file ({type(exc).__name__}: {exc})") from None
        for index, row in enumerate(table.to_pylist()):
            yield f"{file}[{index}]", row
        return
    with file.open() as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TaskError(f"{file}:{number}: not valid JSON: {exc}") from None
                if not isinstance(row, dict):
                    raise TaskError(f"{file}:{number}: a row must be a JSON object")
                yield f"{file}:{number}", row


def _need(row: dict, where: str, *fields: str) -> None:
    missing = [f for f in fields if row.get(f) in (None, "")]
    if missing:
        raise TaskError(f"{where}: missing field(s) {missing}")


def _json_field(row: dict, key: str, where: str) -> dict:
    value = row.get(key)
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value or "")
    except (TypeError, json.JSONDecodeError) as exc:
        raise TaskError(f"{where}: field '{key}': not a JSON object: {exc}") from None
    if not isinstance(parsed, dict):
        raise TaskError(f"{where}: field '{key}': not a JSON object")
    return parsed


# --- SWE-Gym -----------------------------------------------------------------------------


def swe_gym_image(instance_id: str) -> str:
    """SWE-Gym's published image of a row (OpenHands' `get_instance_docker_image`)."""
    return f"xingyaoww/sweb.eval.x86_64.{instance_id.replace('__', '_s_')}".lower()


def swe_gym_row(row: dict, where: str) -> dict:
    """A SWE-Gym row is a SWE-bench row; its image is named for the reason of a row that
    needs it."""
    _need(row, where, "instance_id", "repo", "base_commit", "patch", "test_patch", "version")
    return {**row, "image": swe_gym_image(row["instance_id"])}


# --- SWE-smith ---------------------------------------------------------------------------


def reverse_patch(patch: str) -> str:
    """The unified diff that undoes `patch` (what `git apply --reverse` applies): sides,
    hunk ranges, file modes and line signs swapped. SWE-smith's `patch` introduces the bug,
    so its reverse is the fix."""
    out: list[str] = []
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            match = re.match(r"diff --git a/(\S+) b/(\S+)(\r?\n?)$", line)
            out.append(f"diff --git a/{match[2]} b/{match[1]}{match[3]}" if match else line)
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = line[4:], lines[i + 1][4:]
            out += ["--- " + _side(new, "a/"), "+++ " + _side(old, "b/")]
            i += 1
        elif line.startswith("new file mode "):
            out.append("deleted file mode " + line[len("new file mode ") :])
        elif line.startswith("deleted file mode "):
            out.append("new file mode " + line[len("deleted file mode ") :])
        elif line.startswith(("old mode ", "new mode ")):
            out.append(("new mode " if line.startswith("old") else "old mode ") + line[len("old mode ") :])
        elif line.startswith("rename from ") or line.startswith("rename to "):
            out.append(("rename to " if line.startswith("rename from") else "rename from ") + line.split(" ", 2)[2])
        elif line.startswith("index "):
            match = re.match(r"index (\w+)\.\.(\w+)(.*)$", line, re.S)
            out.append(f"index {match[2]}..{match[1]}{match[3]}" if match else line)
        elif line.startswith("@@ "):
            match = re.match(r"@@ -(\S+) \+(\S+) @@(.*)$", line, re.S)
            out.append(f"@@ -{match[2]} +{match[1]} @@{match[3]}" if match else line)
        elif line.startswith("+") and not line.startswith("+++ "):
            out.append("-" + line[1:])
        elif line.startswith("-") and not line.startswith("--- "):
            out.append("+" + line[1:])
        else:
            out.append(line)
        i += 1
    return "".join(out)


def _side(path_line: str, prefix: str) -> str:
    """A `---`/`+++` path moved to the other side: `a/x` <-> `b/x`, /dev/null kept."""
    if path_line.startswith(("a/", "b/")):
        return prefix + path_line[2:]
    return path_line


def swe_smith_row(row: dict, where: str) -> dict:
    """A SWE-smith row in SWE-bench form: the upstream repository and the mirror's commit
    (8 hex digits, resolved in the clone), the bug as a workspace edit, the fix as gold."""
    _need(row, where, "instance_id", "repo", "patch", "FAIL_TO_PASS")
    mirror = str(row["repo"]).split("/", 1)[-1]
    match = re.fullmatch(r"([\w.-]+?)__([\w.-]+)\.([0-9a-f]{7,40})", mirror)
    if not match:
        raise TaskError(
            f"{where}: field 'repo': {row['repo']!r} is not a SWE-smith mirror name (swesmith/<owner>__<name>.<commit>)"
        )
    owner, name, commit = match.groups()
    failing = required_tests(row, "FAIL_TO_PASS", where)
    files = list(dict.fromkeys(test.split("::")[0] for test in failing))
    return {
        "instance_id": row["instance_id"],
        "repo": f"{owner}/{name}",
        "base_commit": row.get("base_commit") or commit,
        "bug_patch": row["patch"],
        "patch": reverse_patch(row["patch"]),
        "test_patch": "",
        "problem_statement": row.get("problem_statement") or "",
        "FAIL_TO_PASS": failing,
        "PASS_TO_PASS": required_tests(row, "PASS_TO_PASS", where),
        "test_command": f"{SWESMITH_TEST_COMMAND} {' '.join(files)}".strip(),
        "image": row.get("image_name") or "",
    }


# --- R2E-Gym -----------------------------------------------------------------------------


def _is_r2e_test_file(path: str) -> bool:
    """R2E-Gym's `FileDiff.is_test_file`."""
    parts = path.split("/")
    return (
        path.endswith("_test.py")
        or path.startswith("test_")
        or parts[-1].startswith("test_")
        or any(p in parts for p in ("tests", "Tests", "test", "Test"))
    )


def render_file_diff(diff: dict) -> str:
    """One `FileDiff` of a parsed commit as unified diff text (R2E-Gym's
    `FileDiff.get_patch`)."""
    header = diff["header"]
    patch = f"diff --git a/{header['file']['path']} b/{header['file']['path']}\n"
    if header.get("misc_line"):
        patch += header["misc_line"] + "\n"
    if index := diff.get("index_line"):
        mode = index.get("mode") or ""
        patch += f"index {index['old_commit_hash']}..{index['new_commit_hash']}{' ' if mode else ''}{mode}\n"
    if diff.get("is_binary_file"):
        patch += (diff.get("binary_line") or "") + "\n"
    if diff.get("minus_file") and diff.get("plus_file"):
        patch += f"--- {diff['minus_file']['path']}\n+++ {diff['plus_file']['path']}\n"
    signs = {"context": " ", "added": "+", "deleted": "-", "note": "\\ "}
    for hunk in diff.get("hunks", []):
        d = hunk["descriptor"]
        ranges = [
            f"{r['start']}" if r.get("length") is None else f"{r['start']},{r['length']}"
            for r in (d["old_range"], d["new_range"])
        ]
        patch += f"@@ -{ranges[0]} +{ranges[1]} @@" + (f" {d['section']}" if d.get("section") else "") + "\n"
        for line in hunk["line_group"]["all_lines"]:
            patch += f"{signs[line['type']]}{line['content']}\n"
    return patch


def new_files_patch(files: Iterable[tuple[str, str]]) -> str:
    """A diff that adds each (path, text) as a new file."""
    out = []
    for path, text in files:
        lines = text.splitlines()
        body = "".join(f"+{line}\n" for line in lines)
        if text and not text.endswith("\n"):
            body += "\\ No newline at end of file\n"
        out.append(
            f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            + (f"@@ -0,0 +1,{len(lines)} @@\n{body}" if lines else "")
        )
    return "".join(out)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def r2e_gym_row(row: dict, where: str) -> dict:
    """An R2E-Gym row in SWE-bench form (see the module docstring)."""
    _need(row, where, "repo_name", "commit_hash", "parsed_commit_content", "execution_result_content")
    commit = _json_field(row, "parsed_commit_content", where)
    runs = _json_field(row, "execution_result_content", where)
    if not commit.get("old_commit_hash") or not isinstance(commit.get("file_diffs"), list):
        raise TaskError(f"{where}: field 'parsed_commit_content': no old_commit_hash or file_diffs")
    names, codes = runs.get("test_file_names") or [], runs.get("test_file_codes") or []
    if not names or len(names) != len(codes):
        raise TaskError(f"{where}: field 'execution_result_content': test_file_names and test_file_codes must pair up")
    # R2E-Gym ran pytest with colours on (its parser strips them, as this does).
    before = parse_pytest(_ANSI.sub("", runs.get("old_commit_res_stdout") or ""))
    after = parse_pytest(_ANSI.sub("", runs.get("new_commit_res_stdout") or ""))
    repo = R2E_REPOSITORIES.get(str(row["repo_name"]).lower(), "")
    statement = str(row.get("problem_statement") or "")
    inside = re.search(r"\[ISSUE\](.*)\[/ISSUE\]", statement, re.S)
    return {
        "instance_id": f"{row['repo_name']}__{row['commit_hash'][:12]}",
        "repo": repo or f"r2e-gym/{row['repo_name']}",
        "base_commit": commit["old_commit_hash"],
        "patch": "".join(
            render_file_diff(d) for d in commit["file_diffs"] if not _is_r2e_test_file(d["header"]["file"]["path"])
        ),
        "test_patch": new_files_patch((f"r2e_tests/{Path(n).name}", c) for n, c in zip(names, codes, strict=True)),
        "problem_statement": (inside[1] if inside else statement).strip(),
        "FAIL_TO_PASS": sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED"),
        "PASS_TO_PASS": sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED"),
        "test_command": R2E_TEST_COMMAND,
        "image": row.get("docker_image") or "",
    }


# --- rows to tasks ------------------------------------------------------------------------


def training_tasks(
    source: str,
    wanted: set[str] | None = None,
    repo_cache: str | Path | None = None,
    no_checkout: frozenset[str] = frozenset(),
) -> tuple[list[tuple[str, str]], list[Task]]:
    """Every row's (instance id, where) in `source` (`swe-gym:PATH` ...), and the rows as
    tasks (only those in `wanted`, when given; those in `no_checkout` without their
    workspace's checkout, `tasks.swebench.row_to_task`)."""
    split = split_source(source)
    if split is None:
        raise TaskError(f"{source}: not a training set source; write {', '.join(f'{f}:PATH' for f in FORMS)}")
    form, path = split
    convert = {"swe-gym": swe_gym_row, "swe-smith": swe_smith_row, "r2e-gym": r2e_gym_row}[form]
    entries: dict[str, str] = {}
    tasks: dict[str, Task] = {}
    for where, raw in read_table(path):
        row = convert(raw, where)
        entries.setdefault(row["instance_id"], where)
        if (not wanted or row["instance_id"] in wanted) and row["instance_id"] not in tasks:
            tasks[row["instance_id"]] = _task(form, row, where, repo_cache, row["instance_id"] not in no_checkout)
    return list(entries.items()), list(tasks.values())


def _task(form: str, row: dict, where: str, repo_cache: str | Path | None, checkout: bool = True) -> Task:
    if form == "swe-gym":
        task = row_to_task(row, where, repo_cache, checkout)
        if task.unavailable and row.get("image"):
            return replace(task, unavailable=f"{task.unavailable}; or run it in its published image {row['image']}")
        return task
    return Task(
        id=row["instance_id"],
        problem_statement=row["problem_statement"] or f"Fix the failing tests: {', '.join(row['FAIL_TO_PASS'][:5])}",
        grading=GradingSpec(
            test_command=row["test_command"],
            log_parser="pytest",
            fail_to_pass=row["FAIL_TO_PASS"],
            pass_to_pass=row["PASS_TO_PASS"],
        ),
        limits=ROW_LIMITS,
        family=row["repo"],
        gold_patch=row["patch"],
        test_patch=row["test_patch"],
        source=where,
        repo=row["repo"],
        unavailable=_image_reason(form, row),
    )


def _image_reason(form: str, row: dict) -> str:
    """Why the row cannot run here: its environment is only in its published image."""
    image = row.get("image") or "(the row names none)"
    what = "SWE-smith's per-repository profile" if form == "swe-smith" else "R2E-Gym's per-repository Dockerfile"
    return (
        f"its environment is only in its published image {image} ({what} installs it; the row carries no "
        "specification to build it from), and no registry is reachable here"
    )
