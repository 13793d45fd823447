"""The grading contract's pure parts: the runner's account, the guard's command line and line."""

import pytest

from agent_env.grading import account_problems, guarded_command, read_guard, strip_guard
from tasks.log_parsers import parse_pytest, parse_unittest

UNITTEST_OK = """test_a (tests.test_x.T.test_a) ... ok
test_b (tests.test_x.T.test_b) ... ok

----------------------------------------------------------------------
Ran 2 tests in 0.001s

OK
"""
UNITTEST_FAILED = """test_a (tests.test_x.T.test_a) ... ok
test_b (tests.test_x.T.test_b) ... FAIL

======================================================================
FAIL: test_b (tests.test_x.T.test_b)
----------------------------------------------------------------------
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
"""
REQUIRED = ["tests.test_x.T.test_a", "tests.test_x.T.test_b"]


def problems(log, exit_code, parser="unittest"):
    statuses = (parse_unittest if parser == "unittest" else parse_pytest)(log)
    return account_problems(log, exit_code, parser, statuses, REQUIRED if parser == "unittest" else PYTEST_REQUIRED)


def test_an_honest_unittest_run_is_consistent():
    assert problems(UNITTEST_OK, 0) == {}
    assert problems(UNITTEST_FAILED, 1) == {}


def test_unittest_forgeries():
    # Printed `... ok` lines, then os._exit(0): no summary at all.
    early = "test_a (tests.test_x.T.test_a) ... ok\ntest_b (tests.test_x.T.test_b) ... ok\n"
    assert set(problems(early, 0)) == {"incomplete_report"}
    # A forged passing block printed before the real, failing run.
    assert set(problems(UNITTEST_OK + UNITTEST_FAILED, 1)) == {"incomplete_report"}
    # The log says OK, the kernel says the run failed (and the other way round).
    assert set(problems(UNITTEST_OK, 1)) == {"exit_status_mismatch"}
    assert set(problems(UNITTEST_FAILED, 0)) == {"exit_status_mismatch"}
    # A required test reported twice (a fake `ok` line beside the real FAIL).
    doubled = "test_b (tests.test_x.T.test_b) ... ok\n" + UNITTEST_FAILED
    assert problems(doubled, 1) == {"incomplete_report": ["tests.test_x.T.test_b reported 2 times"]}


PYTEST_REQUIRED = ["tests/test_x.py::test_a"]
PYTEST_OK = "PASSED tests/test_x.py::test_a\n========================= 1 passed in 0.01s =========================\n"
PYTEST_FAILED = (
    "FAILED tests/test_x.py::test_a - assert 1 == 2\n==================== 1 failed in 0.02s ====================\n"
)


def test_pytest_accounts():
    assert problems(PYTEST_OK, 0, "pytest") == {}
    assert problems(PYTEST_FAILED, 1, "pytest") == {}
    assert set(problems("PASSED tests/test_x.py::test_a\n", 0, "pytest")) == {"incomplete_report"}
    assert set(problems(PYTEST_OK, 1, "pytest")) == {"exit_status_mismatch"}
    assert set(problems(PYTEST_OK + PYTEST_FAILED, 1, "pytest")) == {"incomplete_report"}


def test_official_parsers_get_the_exit_status_check():
    statuses = {"t::a": "PASSED"}
    assert account_problems("", 1, "swebench", statuses, ["t::a"]) == {
        "exit_status_mismatch": ["the log shows no failing test but the test command exited 1"]
    }
    assert account_problems("", 0, "swebench", statuses, ["t::a"]) == {}
    assert account_problems("", 1, "swebench", {"t::a": "PASSED", "t::b": "FAILED"}, ["t::a"]) == {}


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python3 -m unittest -v tests.test_a", "python3 /g/guard.py /g/n -m unittest -v tests.test_a"),
        ("python -m pytest -rA tests/x.py", "python /g/guard.py /g/n -m pytest -rA tests/x.py"),
        ("/opt/venv/bin/python3.9 -m pytest -rA", "/opt/venv/bin/python3.9 /g/guard.py /g/n -m pytest -rA"),
        ("./tests/runtests.py --verbosity 2 x", None),
        ("python3 -m unittest a && rm -rf /", None),
        ("python3 -m unittest a; echo", None),
    ],
)
def test_guarded_command(command, expected):
    assert guarded_command(command, "/g/guard.py", "/g/n") == expected


def test_bare_pytest_runs_with_the_python_beside_it():
    command = guarded_command("pytest -rA test_requests.py", "/g/guard.py", "/g/n")
    assert command.endswith('exec "$py" /g/guard.py /g/n -m pytest -rA test_requests.py')


def test_read_guard_takes_only_lines_with_the_nonce():
    log = (
        'test output\n@@agentic-rl-guard forged {"tests": {"a": "PASSED"}, "tampered": [], "exit": 0}\n'
        '@@agentic-rl-guard n0nce {"tests": {"a": "FAILED"}, "tampered": ["x replaced"], "exit": 3}\n'
    )
    report = read_guard(log, "n0nce")
    assert report.tests == {"a": "FAILED"} and report.tampered == ("x replaced",) and report.exit == 3
    assert report.lines == 1
    assert read_guard(log, "other") is None
    assert strip_guard(log) == "test output"
