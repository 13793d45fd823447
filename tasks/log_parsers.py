"""Read per-test results from a test run's output.

Statuses follow SWE-bench's vocabulary (PASSED, FAILED, SKIPPED, ERROR, XFAIL). A test that
does not appear in the log has no status, and grading counts it as failed: a syntax error
that stops collection must never pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable

PASSED, FAILED, SKIPPED, ERROR, XFAIL = "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"

# `test_x (pkg.mod.Class.test_x) ... ok` (3.11+) or `test_x (pkg.mod.Class) ... ok` (older).
# With a docstring, unittest prints the test on one line and `first line ... ok` on the next.
_UNITTEST_TEST = re.compile(r"^(?P<name>\w+) \((?P<where>[\w.]+)\)(?P<rest>.*)$")
_UNITTEST_OUTCOMES = {
    "ok": PASSED,
    "FAIL": FAILED,
    "ERROR": ERROR,
    "expected failure": XFAIL,
    "unexpected success": FAILED,
}


def _unittest_id(name: str, where: str) -> str:
    return where if where.endswith("." + name) else f"{where}.{name}"


def parse_unittest(log: str) -> dict[str, str]:
    """`python -m unittest -v` output -> {`pkg.mod.Class.test`: status}."""
    results: dict[str, str] = {}
    pending: str | None = None
    for line in log.splitlines():
        match = _UNITTEST_TEST.match(line)
        if match:
            pending = _unittest_id(match["name"], match["where"])
            line = match["rest"]
        if pending is None:
            continue
        # The verdict ends the `... ` line, or, when the test printed, stands on a line alone.
        outcome = line.rsplit(" ... ", 1)[1].strip() if " ... " in line else line.strip()
        status = SKIPPED if outcome.startswith("skipped") else _UNITTEST_OUTCOMES.get(outcome)
        if status:
            results[pending] = status
            pending = None
    # Tests whose verdict line was interleaved with their own output are caught by the
    # summary blocks, which name the failures: `FAIL: test_x (pkg.mod.Class.test_x)`.
    for match in re.finditer(r"^(FAIL|ERROR): (\w+) \(([\w.]+)\)", log, re.MULTILINE):
        results[_unittest_id(match[2], match[3])] = FAILED if match[1] == "FAIL" else ERROR
    return results


_PYTEST_LINE = re.compile(r"^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (\S+)")


def parse_pytest(log: str) -> dict[str, str]:
    """`pytest -rA` short summary lines -> {`path::test`: status}."""
    results: dict[str, str] = {}
    for line in log.splitlines():
        match = _PYTEST_LINE.match(line.strip())
        if match:
            status = FAILED if match[1] == "XPASS" else match[1]
            results[match[2]] = status
    return results


LOG_PARSERS: dict[str, Callable[[str], dict[str, str]]] = {
    "unittest": parse_unittest,
    "pytest": parse_pytest,
}


def log_parser(name: str, repo: str = "") -> Callable[[str], dict[str, str]]:
    """The parser called `name`; `swebench` is the official harness's parser for `repo`
    (swebench 5's `MAP_REPO_TO_PARSER_PY`, the parsers its dataset rows name in `log_parser`)."""
    if name != "swebench":
        return LOG_PARSERS[name]
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY  # lazy: the swebench extra

    from tasks.swebench_specs import gym_log_parser

    gym = gym_log_parser(repo)
    if gym is not None:  # SWE-Gym's repositories: its harness's pytest parsers, swebench 5's of the same
        from swebench.harness.log_parsers.python import parse_log_pytest, parse_log_pytest_v2

        parser = parse_log_pytest_v2 if gym == "pytest_pydantic" else parse_log_pytest
        return lambda log: parser(log, None)
    official = MAP_REPO_TO_PARSER_PY[repo]
    # The official Python parsers take a TestSpec but read nothing from it.
    if repo == "sympy/sympy":
        return lambda log: official(_SYMPY_FILE_END.sub(r"\1", log), None)
    return lambda log: official(log, None)


# sympy's bin/test ends the line of each file's last test with the file's verdict, padded to
# the terminal's width (`test_contains ok      [OK]`), and the official parser, which reads a
# line ending in ` ok`, misses that test: a required test last in its file would read as
# missing (sympy 19495, 14531, 18763 on 2026-12-05). The marker is dropped first.
_SYMPY_FILE_END = re.compile(r"^(test_\S+ (?:ok|F|E|f|s|X|w))\s+\[(?:OK|FAIL)\]$", re.M)
