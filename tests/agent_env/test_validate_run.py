"""`agent_env.validate_run`: a resumable validation run in a folder (results.jsonl, shards,
the per-task table and the summary by repository and version)."""

import json
import multiprocessing
import subprocess
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from agent_env import validate_run
from agent_env.validate_run import (
    RowRecord,
    append_record,
    eta,
    parse_shard,
    read_records,
    render_summary,
    render_table,
    shard,
    spec_order,
)
from tasks import GradingSpec, Task, builtin_tasks
from tests.conftest import needs_bwrap


def _row(task_id: str, version: str) -> Task:
    return Task(
        id=task_id,
        problem_statement="x",
        grading=GradingSpec(test_command="true", fail_to_pass=["t"]),
        sandbox={"python": {"version": version, "install": [f"echo {task_id}"]}},
        harness_spec={"repo": "owner/repo", "version": version},
        repo="owner/repo",
    )


def _record(task_id: str, status: str = "ok", **changes) -> RowRecord:
    base = RowRecord(
        task_id=task_id, repo="psf/requests", version="2.0", status=status, fail_to_pass=1, pass_to_pass=2,
        env_seconds=10.0, env_built=False, test_seconds=8.0,
    )  # fmt: skip
    return replace(base, **changes)


def test_a_shard_is_written_i_of_n_and_anything_else_says_how():
    assert parse_shard("2/4") == (2, 4)
    with pytest.raises(ValueError, match=r"^--shard '2-4': write I/N, e\.g\. 2/4 for the second of four slices$"):
        parse_shard("2-4")
    with pytest.raises(ValueError, match=r"^--shard 5/4: I must be between 1 and N, e\.g\. 1/4$"):
        parse_shard("5/4")
    with pytest.raises(ValueError, match=r"^--shard 0/0: I must be between 1 and N, e\.g\. 1/1$"):
        parse_shard("0/0")


@pytest.mark.parametrize("total", [0, 1, 7, 500])
@pytest.mark.parametrize("count", [1, 2, 3, 8])
def test_shards_cover_every_task_once_in_near_equal_contiguous_slices(total, count):
    tasks = [_row(f"t{i}", "1.0") for i in range(total)]
    slices = [shard(tasks, i, count) for i in range(1, count + 1)]
    assert [t.id for part in slices for t in part] == [t.id for t in tasks]
    assert max(map(len, slices)) - min(map(len, slices)) <= 1


def test_spec_order_groups_tasks_by_their_environment_in_first_appearance_order():
    tasks = [_row("a1", "1.0"), _row("b1", "2.0"), _row("a2", "1.0"), _row("c1", "3.0"), _row("b2", "2.0")]
    assert [t.id for t in spec_order(tasks, "local")] == ["a1", "a2", "b1", "b2", "c1"]
    # The same spec on another backend is another environment, but the order is the same.
    assert [t.id for t in spec_order(tasks, "docker")] == ["a1", "a2", "b1", "b2", "c1"]


def test_a_torn_or_foreign_line_is_skipped_and_the_last_verdict_of_a_task_counts(tmp_path, caplog):
    path = tmp_path / "results.jsonl"
    append_record(path, _record("a", "failed", reason="gold patch does not apply"))
    append_record(path, _record("b"))
    append_record(path, _record("a"))
    with path.open("a") as f:
        f.write('{"task_id": "c", "repo": "x"}\n')  # a line without a verdict's fields
        f.write(json.dumps({**asdict(_record("d")), "added_later": 1}) + "\n")  # a newer field: ignored
        f.write('{"task_id": "e", "status": "o')  # torn by a crash
    records = read_records(path)
    assert [(r.task_id, r.status) for r in records] == [("a", "ok"), ("b", "ok"), ("d", "ok")]
    skipped = [r.getMessage() for r in caplog.records if "not a verdict line" in r.getMessage()]
    assert [line.split(": not")[0] for line in skipped] == [f"{path}:4", f"{path}:6"]


def _append_many(path, prefix: str) -> None:
    for i in range(200):
        append_record(path, _record(f"{prefix}{i}", reason="x" * 2000))


def test_shards_appending_to_one_file_at_once_leave_whole_lines(tmp_path):
    path = tmp_path / "results.jsonl"
    procs = [multiprocessing.get_context("spawn").Process(target=_append_many, args=(path, p)) for p in "ab"]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    lines = path.read_text().splitlines()
    assert len(lines) == 400 and all(json.loads(line)["reason"] == "x" * 2000 for line in lines)
    assert len(read_records(path)) == 400


def test_eta_is_the_pace_so_far_times_what_is_left():
    assert eta(0, 10, 0.0) == "?"
    assert eta(4, 6, 100.0) == "2m30s"
    assert eta(1, 499, 30.0) == "4h09m"


def test_the_summary_counts_by_repository_and_version_and_rows_per_hour_cold_and_warm():
    records = [
        _record("r1", env_built=True, env_seconds=600.0, test_seconds=120.0),  # built 2.0's environment
        _record("r2", env_seconds=20.0, test_seconds=100.0),
        _record("r3", "failed", env_seconds=20.0, test_seconds=140.0, reason="gold patch does not resolve it"),
        _record("d1", repo="django/django", version="3.0", env_seconds=30.0, test_seconds=30.0),
        _record("d2", "unavailable", repo="django/django", version="3.0", env_seconds=0.0, test_seconds=0.0),
        _record("d3", repo="django/django", version="3.1", env_seconds=30.0, test_seconds=30.0),
    ]
    records = [replace(r, graded_by="abc123" if r.repo == "django/django" else "") for r in records]
    text = render_summary(records, {"environment cache (/c/envs)": 3 * 2**30, "workspace cache (/c/ws)": None})
    assert text.splitlines() == [
        "# Validation run",
        "",
        "6 tasks graded (gold and empty patch).",
        "",
        "## By repository",
        "",
        "| repository | rows | ok | FAIL | n/a | env min | test min |",
        "|---|---|---|---|---|---|---|",
        "| psf/requests | 3 | 2 | 1 | 0 | 10.7 | 6.0 |",
        "| django/django | 3 | 2 | 0 | 1 | 1.0 | 1.0 |",
        "| **all** | 6 | 4 | 1 | 1 | 11.7 | 7.0 |",
        "",
        "## By repository and version",
        "",
        "| spec | rows | ok | FAIL | n/a | env min | test min |",
        "|---|---|---|---|---|---|---|",
        "| psf/requests 2.0 | 3 | 2 | 1 | 0 | 10.7 | 6.0 |",
        "| django/django 3.0 | 2 | 1 | 0 | 1 | 0.5 | 0.5 |",
        "| django/django 3.1 | 1 | 1 | 0 | 0 | 0.5 | 0.5 |",
        "",
        "Graded by: not recorded (3 rows), abc123 (3 rows)",
        "",
        "## Pace and disk",
        "",
        # cold: the 3 rows of the spec built in the run, in 1000 s; warm: the 3 others, in 120 s
        "- rows per hour, environments built in this run (cold): 11 (3 rows)",
        "- rows per hour, environments built before (warm): 90 (3 rows)",
        "- environment cache (/c/envs): 3.0 GiB",
        "- workspace cache (/c/ws): cannot be read",
    ]
    assert render_summary([], {}).splitlines()[-3:] == [
        "- rows per hour, environments built in this run (cold): -",
        "- rows per hour, environments built before (warm): -",
        "- the caches' disk use: not measured (measured when a run ends, unless stopped)",
    ]


def test_the_table_has_a_row_per_task_with_its_reason_on_one_line():
    long = "gold patch does not resolve it (failing: " + ", ".join(f"t{i}" for i in range(200)) + ")"
    table = render_table(
        [_record("a", env_built=True), _record("b", "failed", reason=f"x | y\nz; {long}", log="/run/logs/b.log")]
    ).splitlines()
    assert table[2] == "| a | psf/requests | 2.0 | ok | 1 | 2 | 10.0 (built) | 8.0 |  |"
    assert table[3].startswith("| b | psf/requests | 2.0 | FAIL | 1 | 2 | 10.0 | 8.0 | x \\| y z; gold patch ")
    assert table[3].endswith(" ... (log: /run/logs/b.log) |") and len(table) == 4


@pytest.mark.signals
@needs_bwrap
def test_a_stopped_run_keeps_its_verdicts_and_a_rerun_does_only_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path / "cache"))
    tasks = builtin_tasks(["parsing-querystring-plus", "text-slugify-custom-separator", "config-env-prefix-strip"])
    out = tmp_path / "run"
    told: list[str] = []

    def stop_after_first(result, progress):
        told.append(f"{progress} {result.task_id} {result.status}")
        raise KeyboardInterrupt  # Ctrl-C right after the first verdict

    with pytest.raises(KeyboardInterrupt):
        validate_run.run(tasks, out, on_result=stop_after_first)
    assert [r.task_id for r in read_records(out / "results.jsonl")] == ["parsing-querystring-plus"]
    assert told[0].startswith("[1/3, ETA ") and told[0].endswith("] parsing-querystring-plus ok")
    assert "| parsing-querystring-plus | (authored) |  | ok | 3 | 9 | 0.0 |" in (out / "table.md").read_text()
    assert "- the caches' disk use: not measured (" in (out / "summary.md").read_text()

    again = validate_run.run(tasks, out, on_result=lambda result, progress: told.append(progress))
    assert [r.task_id for r in again] == ["text-slugify-custom-separator", "config-env-prefix-strip"]
    assert [t.split(",")[0] for t in told[1:]] == ["[1/2", "[2/2"]
    records = read_records(out / "results.jsonl")
    assert [(r.task_id, r.status) for r in records] == [(t.id, "ok") for t in tasks]
    assert all(r.log == str(out / "logs" / f"{r.task_id}.log") for r in records)
    # Each verdict names the grader's code that gave it: this checkout's commit.
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent)
    assert {r.graded_by.removesuffix("-dirty") for r in records} == {head.stdout.strip()[:12]}
    summary = (out / "summary.md").read_text()
    assert "| **all** | 3 | 3 | 0 | 0 |" in summary and "- workspace cache (" in summary
    # Nothing left: a rerun grades nothing and only rewrites the tables.
    (out / "table.md").unlink()
    assert validate_run.run(tasks, out) == [] and (out / "table.md").exists()


@needs_bwrap
def test_redo_grades_the_named_verdicts_again_and_the_new_one_counts(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path / "cache"))
    tasks = builtin_tasks(["parsing-querystring-plus", "config-env-prefix-strip"])
    out = tmp_path / "run"
    out.mkdir()
    append_record(out / "results.jsonl", _record("parsing-querystring-plus", "failed", reason="was broken"))
    append_record(out / "results.jsonl", _record("config-env-prefix-strip", "unavailable", reason="no clone"))
    again = validate_run.run(tasks, out, redo=frozenset({"failed"}))
    assert [(r.task_id, r.status) for r in again] == [("parsing-querystring-plus", "ok")]
    records = {r.task_id: r.status for r in read_records(out / "results.jsonl")}
    assert records == {"parsing-querystring-plus": "ok", "config-env-prefix-strip": "unavailable"}


def test_redo_names_only_failed_or_unavailable_and_needs_a_run_folder(capsys):
    from agent_env.__main__ import main

    for argv, said in (
        (["validate", "--out", "x", "--redo", "ok"], "--redo ok: give failed, unavailable or both"),
        (["validate", "--redo", "failed"], "--redo goes with --out (a resumable run)"),
    ):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2 and said in capsys.readouterr().err


def test_pruning_takes_a_tasks_own_folders_and_never_its_specs_shared_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path))
    monkeypatch.delenv("AGENTIC_RL_ENV_CACHE", raising=False)
    envs, git = tmp_path / "envs", tmp_path / "workspaces" / "git"
    loaded = replace(_row("psf__requests-1142", "1.1"), workspace=git / "psf__requests-abc-e3b0")
    mounts = [
        {"source": str(envs / "ws-1234" / "venv"), "target": "/opt/venv", "writable": False},
        {"source": str(envs / "env-5678" / "venv"), "target": "/opt/shared", "writable": False},  # the spec's
        {"source": "/root/.pyenv/versions/3.9.18", "target": "/root/.pyenv/versions/3.9.18", "writable": False},
    ]
    prepared = replace(loaded, workspace=envs / "ws-1234" / "workspace", sandbox={"mounts": mounts})
    assert validate_run.owned_paths(loaded, prepared) == [git / "psf__requests-abc-e3b0", envs / "ws-1234"]
    (authored,) = builtin_tasks(["parsing-querystring-plus"])
    assert validate_run.owned_paths(authored, authored) == []


def test_a_folder_two_rows_share_is_pruned_after_the_last_of_them(tmp_path, monkeypatch):
    # django__django-15268 and -15278 have one base commit, so one workspace and one
    # environment copy: pruning after the first took the second's venv away mid-run.
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path))
    monkeypatch.delenv("AGENTIC_RL_ENV_CACHE", raising=False)
    envs, git = tmp_path / "envs", tmp_path / "workspaces" / "git"

    def pair(task_id: str, commit: str) -> tuple[Task, Task]:
        loaded = replace(_row(task_id, "4.1"), workspace=git / f"django__django-{commit}")
        mounts = [{"source": str(envs / f"ws-{commit}" / "venv"), "target": "/opt/venv", "writable": False}]
        return loaded, replace(loaded, workspace=envs / f"ws-{commit}" / "workspace", sandbox={"mounts": mounts})

    first, second, other = pair("django__django-15268", "0ab5"), pair("django__django-15278", "0ab5"), pair("x", "9f")
    assert validate_run.prunable(first, [other, second], []) == []
    assert validate_run.prunable(first, [other], []) == [git / "django__django-0ab5", envs / "ws-0ab5"]
    # A spec not yet prepared still needs the workspace (its environment copy is its own).
    assert validate_run.prunable(first, [], [second[0]]) == [envs / "ws-0ab5"]


def test_prune_without_a_resumable_run_is_refused(capsys):
    from agent_env.__main__ import main

    with pytest.raises(SystemExit) as stopped:
        main(["validate", "--prune"])
    assert stopped.value.code == 2
    assert "--prune goes with --out (a resumable run)" in capsys.readouterr().err
