import re
import shutil
from pathlib import Path

import pytest
import yaml

from agent_env.__main__ import default_log_dir, format_validation
from agent_env.__main__ import main as validate_main
from agent_env.validate import TaskValidation
from tasks import BUILTIN_DIR
from tasks.__main__ import main
from tests.conftest import needs_bwrap


def test_list_shows_every_builtin_task(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "parsing-querystring-plus" in out and "tasks in" in out


def test_tasks_validate_says_in_one_line_where_validation_lives(capsys):
    # Validating grades tasks, the agent layer's work: the tasks package names the command.
    with pytest.raises(SystemExit) as stop:
        main(["validate", "tasks/builtin"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m tasks: error: validate grades tasks, the agent layer's work: "
        "run `python -m agent_env validate` with the same arguments"
    )


@needs_bwrap
def test_validate_accepts_a_good_task_and_rejects_a_broken_one(tmp_path, capsys):
    good = BUILTIN_DIR / "parsing-querystring-plus"
    assert validate_main(["validate", str(good)]) == 0
    ok_line = capsys.readouterr().out.splitlines()[0]
    assert re.fullmatch(
        r"ok    parsing-querystring-plus: gold patch resolves it \(3 FAIL_TO_PASS and 9 PASS_TO_PASS pass\); "
        r"empty patch does not \(3 FAIL_TO_PASS fail\); \d+\.\d s; log: (\S+)",
        ok_line,
    ), ok_line
    log = Path(ok_line.rsplit("log: ", 1)[1])
    assert log == default_log_dir() / "parsing-querystring-plus.log"
    assert log.read_text().startswith("=== gold patch ===\n") and "\n=== empty patch ===\n" in log.read_text()

    # The same task with its FAIL_TO_PASS pointing at a test that passes without a fix.
    broken = tmp_path / "broken"
    shutil.copytree(good, broken)
    data = yaml.safe_load((broken / "task.yaml").read_text())
    data["id"] = "broken-task"
    data["grading"]["fail_to_pass"] = [data["grading"]["pass_to_pass"][0]]
    (broken / "task.yaml").write_text(yaml.safe_dump(data))
    assert validate_main(["validate", str(broken)]) == 1
    assert "FAIL_TO_PASS tests pass without a fix" in capsys.readouterr().out


def test_schema_errors_name_the_file_and_field(tmp_path, capsys):
    (tmp_path / "repo").mkdir()
    (tmp_path / "task.yaml").write_text("id: x\nworkspace: repo\nproblem_statement: p\ngrading: {test_command: t}\n")
    assert validate_main(["validate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "task.yaml") in err and "'grading.fail_to_pass'" in err


def test_each_verdict_says_its_time_log_warnings_and_the_tests_that_failed_or_are_missing():
    ok = TaskValidation(
        "django__django-16429", "ok", checked="gold patch resolves it", seconds=41.26, log="/logs/d.log",
        warnings=("FAIL_TO_PASS test t1 passes without the fix (valid by the dataset's rule)",),
    )  # fmt: skip
    assert format_validation(ok) == [
        "ok    django__django-16429: gold patch resolves it; 41.3 s; log: /logs/d.log",
        "      warning: FAIL_TO_PASS test t1 passes without the fix (valid by the dataset's rule)",
    ]
    failed = TaskValidation(
        "x", "failed", problems=("gold patch does not resolve it (failing: a; missing: c)",), seconds=3.0,
        log="/logs/x.log", failed_tests=(("a", "ERROR"), ("b", "FAILED")), missing_tests=("c",),
    )  # fmt: skip
    assert format_validation(failed) == [
        "FAIL  x: gold patch does not resolve it (failing: a; missing: c); 3.0 s; log: /logs/x.log",
        "      failed (2): a (ERROR), b (FAILED)",
        "      missing (not in the log) (1): c",
    ]
    assert format_validation(TaskValidation("y", "unavailable", reason="not runnable here: no clone")) == [
        "n/a   y: not runnable here: no clone"
    ]
    offline = TaskValidation("z", "unavailable", reason="not gradable offline: ...", seconds=9.0, log="/logs/z.log")
    assert format_validation(offline) == ["n/a   z: not gradable offline: ...; 9.0 s; log: /logs/z.log"]


def test_a_long_cause_or_test_list_is_cut_with_what_is_left_and_where():
    tests = tuple((f"tests/test_big.py::test_case_{i:04d}", "FAILED") for i in range(500))
    failed = TaskValidation(
        "pytest-dev__pytest-5103", "failed", seconds=2.0, log="/logs/p.log", failed_tests=tests,
        problems=("gold patch does not resolve it (failing: " + ", ".join(t for t, _ in tests) + ")",),
    )  # fmt: skip
    verdict, listed = format_validation(failed)
    assert verdict.startswith("FAIL  pytest-dev__pytest-5103: gold patch does not resolve it (failing: tests/test_big")
    cause = "gold patch does not resolve it (failing: " + ", ".join(t for t, _ in tests) + ")"
    assert verdict.endswith(
        f" ... ({len(cause) - 400} more characters; all of it in /logs/p.log); 2.0 s; log: /logs/p.log"
    )
    assert len(verdict) < 600 and listed.startswith("      failed (500): tests/test_big.py::test_case_0000 (FAILED)")
    assert len(listed) < 500 and listed.endswith("more characters; all of it in /logs/p.log)")
    # Many short problems (45 ids not found, say) make one long line too: cut as a whole.
    many = TaskValidation("r", "failed", problems=tuple(f"test id t{i} not found" for i in range(45)), log="/l")
    (line,) = format_validation(many)
    assert line.startswith("FAIL  r: test id t0 not found; test id t1 not found;") and len(line) < 520


def test_the_exit_status_tells_failed_from_not_runnable():
    from agent_env.__main__ import EXIT_FAILED, EXIT_NOT_RUNNABLE, EXIT_OK, exit_status

    ok = TaskValidation("a", "ok", checked="fine")
    na = TaskValidation("b", "unavailable", reason="no clone")
    bad = TaskValidation("c", "failed", problems=("broken",))
    assert (EXIT_OK, EXIT_FAILED, EXIT_NOT_RUNNABLE) == (0, 1, 3)
    assert exit_status([ok]) == EXIT_OK and exit_status([]) == EXIT_OK
    assert exit_status([ok, na]) == EXIT_NOT_RUNNABLE
    assert exit_status([ok, na, bad]) == EXIT_FAILED
