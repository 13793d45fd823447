"""`tasks.training_sets`: SWE-Gym, SWE-smith and R2E-Gym rows read from local files
(JSONL, parquet, a folder in the hub's layout) and turned into tasks, on rows recorded from
the datasets (tests/fixtures/training_sets, provenance in its README.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tasks import load_task_set
from tasks.spec import TaskError
from tasks.training_sets import (
    new_files_patch,
    r2e_gym_row,
    read_table,
    render_file_diff,
    reverse_patch,
    swe_gym_image,
    swe_smith_row,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "training_sets"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=True)
    return done.stdout


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def test_the_reverse_of_a_patch_undoes_it_with_git_apply(tmp_path):
    # Edits, a new file, a deleted file and a last line without a newline: the bug SWE-smith
    # introduces, undone by the gold patch made from it.
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "core.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    (repo / "pkg" / "gone.py").write_text("X = 1\n")
    (repo / "pkg" / "tail.py").write_text("last = True")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "clean")
    clean = _tree(repo)
    (repo / "pkg" / "core.py").write_text("def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n")
    (repo / "pkg" / "gone.py").unlink()
    (repo / "pkg" / "new.py").write_text("Y = 2\n")
    (repo / "pkg" / "tail.py").write_text("last = False")
    _git(repo, "add", "-A")
    bug = _git(repo, "diff", "--cached")
    buggy = _tree(repo)
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "bug")

    fix = reverse_patch(bug)
    assert reverse_patch(fix) == bug
    _git(repo, "apply", "-", stdin=fix)
    assert _tree(repo) == clean != buggy


def test_swe_smith_rows_map_to_the_upstream_repository_with_the_reversed_bug_as_gold():
    rows = _rows("swe_smith.jsonl")
    row = swe_smith_row(rows[0], "fixture:1")
    assert (row["repo"], row["base_commit"]) == ("oauthlib/oauthlib", "1fd52536")
    assert row["patch"] == reverse_patch(rows[0]["patch"]) and row["bug_patch"] == rows[0]["patch"]
    assert row["image"] == "jyangballin/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536"
    assert row["test_command"] == (
        "pytest --disable-warnings --color=no --tb=no --verbose -rA tests/oauth1/rfc5849/test_signatures.py"
    )
    # An older row with base_commit and created_at (SWE-smith dropped them later) maps too.
    older = swe_smith_row(rows[2], "fixture:3")
    assert (older["repo"], older["base_commit"]) == ("pandas-dev/pandas", rows[2]["base_commit"])
    with pytest.raises(TaskError, match=r"^fixture:9: field 'repo': 'oauthlib/oauthlib' is not a SWE-smith mirror"):
        swe_smith_row({**rows[0], "repo": "oauthlib/oauthlib"}, "fixture:9")


def test_swe_smith_rows_load_as_tasks_that_name_the_image_they_need():
    tasks = load_task_set(f"swe-smith:{FIXTURES / 'swe_smith.jsonl'}")
    assert [t.id for t in tasks] == [r["instance_id"] for r in _rows("swe_smith.jsonl")]
    first = tasks[0]
    assert (
        first.grading.log_parser == "pytest"
        and first.grading.fail_to_pass == _rows("swe_smith.jsonl")[0]["FAIL_TO_PASS"]
    )
    assert first.unavailable.startswith(
        "its environment is only in its published image jyangballin/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536 "
        "(SWE-smith's per-repository profile installs it"
    )


def test_a_parquet_file_and_a_hub_layout_folder_give_the_same_rows_as_jsonl(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = _rows("swe_smith.jsonl")[:2]
    (tmp_path / "data").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data" / "train-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(rows[:1]), tmp_path / "data" / "test-00000-of-00001.parquet")
    assert [r for _, r in read_table(str(tmp_path))] == rows
    assert [r for _, r in read_table(f"{tmp_path}:test")] == rows[:1]
    assert [w for w, _ in read_table(str(tmp_path / "data" / "train-00000-of-00001.parquet"))][1].endswith("[1]")
    with pytest.raises(TaskError, match=r"no rows of split 'dev' \(looked for data/dev-\*\.parquet"):
        list(read_table(f"{tmp_path}:dev"))
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(TaskError, match=r"bad\.parquet: not a readable parquet file"):
        list(read_table(str(tmp_path / "bad.parquet")))
    with pytest.raises(TaskError, match=r"nowhere\.jsonl: no such file or folder"):
        list(read_table(str(tmp_path / "nowhere.jsonl")))


def test_r2e_gym_hunks_render_as_r2e_gym_renders_them_and_new_files_apply(tmp_path):
    diff = {
        "header": {"file": {"path": "pkg/core.py"}, "misc_line": None},
        "index_line": {"old_commit_hash": "abc1234", "new_commit_hash": "def5678", "mode": "100644"},
        "minus_file": {"path": "a/pkg/core.py"},
        "plus_file": {"path": "b/pkg/core.py"},
        "hunks": [
            {
                "descriptor": {
                    "old_range": {"start": 1, "length": 2},
                    "new_range": {"start": 1, "length": 2},
                    "section": "def add",
                },
                "line_group": {
                    "all_lines": [
                        {"content": "def add(a, b):", "type": "context"},
                        {"content": "    return a - b", "type": "deleted"},
                        {"content": "    return a + b", "type": "added"},
                    ]
                },
            }
        ],
    }
    assert render_file_diff(diff) == (
        "diff --git a/pkg/core.py b/pkg/core.py\nindex abc1234..def5678 100644\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
        "@@ -1,2 +1,2 @@ def add\n def add(a, b):\n-    return a - b\n+    return a + b\n"
    )
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(
        repo,
        "apply",
        "-",
        stdin=new_files_patch([("r2e_tests/test_1.py", "def test_a():\n    pass\n"), ("r2e_tests/x.txt", "no end")]),
    )
    assert _tree(repo) == {"r2e_tests/test_1.py": "def test_a():\n    pass\n", "r2e_tests/x.txt": "no end"}


def test_r2e_gym_rows_take_base_gold_hidden_tests_and_required_tests_from_their_own_runs():
    (raw,) = _rows("r2e_gym.jsonl")
    row = r2e_gym_row(raw, "fixture:1")
    commit = json.loads(raw["parsed_commit_content"])
    assert row["base_commit"] == commit["old_commit_hash"]
    assert row["instance_id"] == f"{raw['repo_name']}__{raw['commit_hash'][:12]}"
    assert row["patch"].startswith("diff --git a/") and "r2e_tests" not in row["patch"]
    names = json.loads(raw["execution_result_content"])["test_file_names"]
    assert row["test_patch"].count("new file mode 100644") == len(names)
    # Its runs are coloured (R2E-Gym's parser strips that too): FAILED at the old commit,
    # PASSED at the new.
    assert (row["FAIL_TO_PASS"], row["PASS_TO_PASS"]) == (["r2e_tests/test_1.py::test_save"], [])
    assert (row["repo"], row["instance_id"]) == ("python-pillow/Pillow", "pillow__6e97dd5cecc0")
    assert row["test_command"] == "python -m pytest -rA r2e_tests" and row["image"] == raw["docker_image"]
    with pytest.raises(TaskError, match=r"^fixture:2: field 'parsed_commit_content': not a JSON object"):
        r2e_gym_row({**raw, "parsed_commit_content": "{"}, "fixture:2")


def test_swe_gym_rows_are_swebench_rows_with_swe_gyms_own_test_commands():
    rows = _rows("swe_gym.jsonl")
    tasks = load_task_set(f"swe-gym:{FIXTURES / 'swe_gym.jsonl'}")
    assert [t.id for t in tasks] == [r["instance_id"] for r in rows]
    for task, row in zip(tasks, rows, strict=True):
        assert task.harness_spec["source"].startswith("SWE-Gym SWE-Gym/SWE-Bench-Package@16dd480c")
        assert task.grading.log_parser == "swebench" and task.gold_patch == row["patch"]
        # No repository cache: unavailable, saying what would run it.
        assert task.unavailable.endswith(f"; or run it in its published image {swe_gym_image(row['instance_id'])}")
    assert swe_gym_image("getmoto__moto-5752") == "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752"
