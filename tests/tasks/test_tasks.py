import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tasks import TaskError, builtin_tasks, load_task, load_task_set, load_tasks, patch_files, prepare_workspace
from tasks.log_parsers import parse_pytest, parse_unittest
from tasks.swebench import load_swebench

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_builtin_suite_has_at_least_three_valid_tasks():
    tasks = builtin_tasks()
    assert len(tasks) >= 3
    assert len({t.family for t in tasks}) >= 2
    for task in tasks:
        assert task.problem_statement and task.gold_patch and task.test_patch
        assert task.grading.fail_to_pass
        # The gold patch fixes source only; hidden tests live in the test patch.
        assert not any(p.startswith("tests/") for p in patch_files(task.gold_patch)), task.id
        assert all(p.startswith("tests/") for p in task.test_files()), task.id


def test_prepared_workspace_is_one_commit_with_no_history(tmp_path):
    task = builtin_tasks()[0]
    root = prepare_workspace(task)
    git = lambda *a: subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, check=True).stdout  # noqa: E731
    assert git("log", "--all", "--oneline").count("\n") == 1
    assert git("tag") == "" and git("remote") == ""
    assert git("status", "--porcelain") == ""
    assert prepare_workspace(task) == root  # cached by content


def write_task(tmp_path: Path, **changes) -> Path:
    (tmp_path / "repo").mkdir(exist_ok=True)
    data = {
        "id": "demo",
        "problem_statement": "fix it",
        "workspace": "repo",
        "grading": {"test_command": "true", "fail_to_pass": ["t.T.test_a"]},
        **changes,
    }
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_minimal_definition_loads_with_defaults(tmp_path):
    task = load_task(write_task(tmp_path))
    assert task.limits.max_turns == 30 and task.tools == ("execute_bash", "str_replace_editor", "finish")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"grading": {"test_command": "true", "fail_to_pass": []}}, "grading.fail_to_pass"),
        ({"grading": {"fail_to_pass": ["x"]}}, "grading.test_command"),
        ({"limits": {"max_turns": 0}}, "limits.max_turns"),
        ({"tools": ["execute_bash"]}, "tools"),
        ({"workspace": "missing"}, "workspace"),
        ({"gold_patch": "nope.patch"}, "gold_patch"),
        ({"id": "has space"}, "id"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_definitions_name_the_file_and_field(tmp_path, changes, field):
    path = write_task(tmp_path, **changes)
    with pytest.raises(TaskError) as error:
        load_task(path)
    assert str(path) in str(error.value) and f"'{field}'" in str(error.value)


def test_broken_yaml_names_the_file(tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text("id: [unclosed")
    with pytest.raises(TaskError, match="not valid YAML"):
        load_task(path)


def test_duplicate_ids_are_rejected(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        write_task(tmp_path / name)
    with pytest.raises(TaskError, match="already used"):
        load_tasks([tmp_path])


def test_unittest_parser_reads_311_and_older_formats_and_docstrings():
    log = (
        "test_a (t.m.C.test_a) ... ok\n"
        "test_b (t.m.C.test_b)\nDoc line ... FAIL\n"
        "test_c (t.m.C) ... skipped 'no'\n"
        "test_d (t.m.C.test_d) ... printed\nERROR\n"
        "test_e (t.m.C.test_e) ... expected failure\n"
    )
    assert parse_unittest(log) == {
        "t.m.C.test_a": "PASSED",
        "t.m.C.test_b": "FAILED",
        "t.m.C.test_c": "SKIPPED",
        "t.m.C.test_d": "ERROR",
        "t.m.C.test_e": "XFAIL",
    }


def test_pytest_parser_reads_short_summary():
    log = "PASSED tests/test_x.py::test_a\nFAILED tests/test_x.py::test_b - assert 1\nXPASS tests/t.py::c\n"
    assert parse_pytest(log) == {
        "tests/test_x.py::test_a": "PASSED",
        "tests/test_x.py::test_b": "FAILED",
        "tests/t.py::c": "FAILED",
    }


def test_swebench_rows_load_with_official_test_commands():
    tasks = load_swebench(FIXTURES / "swebench_verified_sample.jsonl")
    by_repo = {t.repo: t for t in tasks}
    assert set(by_repo) == {"django/django", "sympy/sympy", "pytest-dev/pytest", "astropy/astropy"}
    django = by_repo["django/django"]
    assert django.grading.test_command.startswith("./tests/runtests.py")
    assert django.grading.fail_to_pass and isinstance(django.grading.fail_to_pass, list)
    assert django.grading.log_parser == "swebench"
    assert django.workspace is None and "environment" in django.unavailable
    assert by_repo["pytest-dev/pytest"].grading.test_command.startswith("pytest -rA")


def test_swebench_loader_filters_and_reports_bad_rows(tmp_path):
    rows = [json.loads(line) for line in (FIXTURES / "swebench_verified_sample.jsonl").read_text().splitlines()]
    wanted = rows[1]["instance_id"]
    assert [t.id for t in load_swebench(FIXTURES / "swebench_verified_sample.jsonl", [wanted])] == [wanted]
    with pytest.raises(TaskError, match="not found"):
        load_swebench(FIXTURES / "swebench_verified_sample.jsonl", ["nope__nope-1"])
    broken = tmp_path / "rows.jsonl"
    broken.write_text(json.dumps({**rows[0], "FAIL_TO_PASS": "[not json"}) + "\n")
    with pytest.raises(TaskError, match=r"rows.jsonl:1: field 'FAIL_TO_PASS'"):
        load_swebench(broken)
    broken.write_text(json.dumps({k: v for k, v in rows[0].items() if k != "base_commit"}) + "\n")
    with pytest.raises(TaskError, match="base_commit"):
        load_swebench(broken)


def test_load_task_set_dispatches_by_source():
    assert [t.id for t in load_task_set("builtin")] == [t.id for t in builtin_tasks()]
    assert len(load_task_set(str(FIXTURES / "swebench_verified_sample.jsonl"))) == 4


def test_readme_lists_every_builtin_task():
    readme = (Path(__file__).parents[2] / "tasks" / "README.md").read_text()
    missing = [t.id for t in builtin_tasks() if f"`{t.id}`" not in readme]
    assert not missing
