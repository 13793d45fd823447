"""Reading a test run's log: for reports and to downgrade a verdict, never to pass a test.

The log is the tested code's output, so every reader here takes any text: lines are cut to
`MAX_LOG_LINE` before a parser sees them (`parseable`), and a parser that raises reads as
"nothing to say" (`log_statuses`). `network_failure` tells a row that needs the network
(which sandboxes never have) from one the patch failed.
"""

from __future__ import annotations

import re

from tasks import Task
from tasks.log_parsers import ERROR, FAILED, PASSED, log_parser

MAX_LOG_LINE = 1024
"""Longest log line the parsers read (`parseable`); the rest of a longer line is not read."""

# What a test run prints when a test reached for the network, which sandboxes never have:
# such a test fails whatever the patch (SWE-bench's requests rows call httpbin.org).
NETWORK_ERRORS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname provided",
    "Network is unreachable",
    "Failed to establish a new connection",
    "getaddrinfo failed",
    "Could not resolve host",
    "No route to host",
)


def network_error(log: str) -> str | None:
    """The first line of a test log that shows a test reaching for the network, if any."""
    for line in log.splitlines():
        if any(sign in line for sign in NETWORK_ERRORS):
            return line.strip()[:300]
    return None


# Failure reports in a test log: pytest's `____ Class.test ____` blocks (outside its PASSES
# section, which shows what passing tests printed), unittest's and django's
# `FAIL: test (module.Class)` blocks, and pytest's `FAILED id - message` summary lines.
_SECTION = re.compile(r"^={3,}(?: (.*?) )?={3,}$")
_BLOCK_HEADER = re.compile(r"^_{2,} (?:(?:ERROR|FAILURE) at (?:setup|teardown|call) of )?(.+?) _{2,}$")
_UNITTEST_HEADER = re.compile(r"^(?:FAIL|ERROR): (.+)$")
_SUMMARY_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAN = re.compile(r"^Ran \d+ tests? in ")


def failure_reports(log: str) -> list[tuple[str, str]]:
    """(header, text) of each test's failure report in `log`, in order. The header is what
    names the test: pytest's `Class.test[param]`, or unittest's `test (module.Class)` line
    and, for a test with a docstring, that line and the docstring's first line."""
    reports: list[tuple[str, str]] = []
    header: list[str] | None = None
    body: list[str] = []
    in_header = False  # unittest: the header lasts until its dashed line
    section = ""

    def close() -> None:
        if header is not None:
            reports.append(("\n".join(header), "\n".join(body)))

    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        if (section_match := _SECTION.match(line)) or _RAN.match(line):
            close()
            header, body, in_header = None, [], False
            section = (section_match[1] or "") if section_match else section
            continue
        block = _BLOCK_HEADER.match(line)
        if block and section != "PASSES":
            close()
            header, body, in_header = [block[1]], [], False
            continue
        unittest = _UNITTEST_HEADER.match(line)
        if unittest and header is None:
            header, body, in_header = [unittest[1]], [], True
            continue
        if header is None:
            continue
        if in_header:
            if re.match(r"^-{3,}$", line):
                in_header = False
            else:
                header.append(line.strip())
            continue
        body.append(line)
    close()
    return reports


def _names_of(test: str) -> set[str]:
    """How failure reports may name `test`: pytest's `Class.test` for `path::Class::test`,
    unittest's `test (module.Class)` and `test (module.Class.test)` (Python 3.11+) for
    `test (module.Class)` (SWE-bench's django ids) or `module.Class.test` (built-in tasks')."""
    names = {test}
    if "::" in test:
        names.add(".".join(test.split("::")[1:]))
    if unittest := re.match(r"^(\w+) \(([\w.]+)\)$", test):
        names |= {f"{unittest[1]} ({unittest[2]})", f"{unittest[1]} ({unittest[2]}.{unittest[1]})"}
    elif re.match(r"^[\w.]+\.\w+$", test):
        where, _, name = test.rpartition(".")
        names |= {f"{name} ({where})", f"{name} ({test})"}
    return names


def failure_text(log: str, test: str) -> str:
    """What `log` says about `test`'s failure: its failure reports and summary lines."""
    names = _names_of(test)
    texts = [
        body
        for header, body in failure_reports(log)
        if names.intersection(h.strip() for h in header.split("\n")) or header.endswith(f":{test}")
    ]
    for raw in log.splitlines():
        summary = _SUMMARY_LINE.match(_ANSI.sub("", raw).strip())
        if summary and summary[1] == test:
            texts.append(summary[2] or "")
    return "\n".join(texts)


def network_failure(log: str, statuses: dict[str, str], required: list[str] | tuple[str, ...]) -> str | None:
    """`test: line` for the first required test that failed (FAILED or ERROR) with a network
    error in its own failure report, else None. Only that makes a row not gradable offline:
    a passing test may log a refused connection, and a test nobody requires may need the
    network, without saying anything about the tests that decide the verdict."""
    for test in required:
        if statuses.get(test) in (FAILED, ERROR) and (line := network_error(failure_text(log, test))):
            return f"{test}: {line}"
    return None


_PYTEST_ERROR = re.compile(r"^E\s+(\S.*)$")
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Warning|Failure|Exit))\b:? ?(.*)$")
MAX_CAUSE = 200


def failure_cause(log: str, test: str) -> str | None:
    """What `test` failed with, in one line, from its failure report in `log`: pytest's first
    `E   ` line (the exception and its message), else the last `SomeError: message` line of a
    unittest or Django traceback; None when the log has no report for it."""
    text = _ANSI.sub("", failure_text(log, test))
    for line in text.splitlines():
        if match := _PYTEST_ERROR.match(line):
            return match[1].strip()[:MAX_CAUSE]
    causes = [m[0].strip() for line in text.splitlines() if (m := _EXCEPTION_LINE.match(line.strip()))]
    return causes[-1][:MAX_CAUSE] if causes else None


_SKIPPED_FOR_IMPORT = re.compile(r"^SKIPPED \[\d+\] ([^\s:]+):\d+: could not import '([\w.]+)'", re.M)


def missing_modules(log: str, unreported: list[str] | tuple[str, ...]) -> dict[str, str]:
    """{test: X} for each required test the run did not report whose test file had a test
    skipped because `pytest.importorskip("X")` failed.

    pytest's short summary names a skip by the file and line of the test, not its id, so
    the file is what ties them: the required test was collected and skipped, for want of an
    optional dependency this environment lacks (cdms2 for xarray's `test_to_and_from_cdms2_*`:
    conda-only, on no index pip reads), not missing from the run."""
    skipped: dict[str, str] = {}
    for match in _SKIPPED_FOR_IMPORT.finditer(_ANSI.sub("", log)):
        skipped.setdefault(match.group(1), match.group(2))
    found = {test: skipped.get(test.split("::", 1)[0], "") for test in unreported}
    return {test: module for test, module in found.items() if module}


def parseable(log: str) -> str:
    """`log` with every line cut to `MAX_LOG_LINE` characters. Some SWE-bench parsers are
    quadratic in a line's length (psf/requests': 35 s for one 100 KB line, 211 s for 256 KB),
    and the tested code writes the log; a cut line keeps its start, where the test id is,
    and the longest id in Verified has 374 characters."""
    lines = log.split("\n")
    if all(len(line) <= MAX_LOG_LINE for line in lines):
        return log
    return "\n".join(line[:MAX_LOG_LINE] for line in lines)


def with_cut_ids(statuses: dict[str, str], wanted: list[str]) -> dict[str, str]:
    """`statuses`, plus a status for each wanted id that an older parser cut at a space
    (`test_x[ceci` of `test_x[ceci n'est pas un meta]`, astropy 13236) and that today's
    parser reports whole: passed only if every test it stands for passed."""
    out = dict(statuses)
    for test in wanted:
        if test in out or "[" not in test or test.endswith("]"):
            continue
        found = [
            status
            for name, status in statuses.items()
            if name.startswith(test) and name[len(test) : len(test) + 1].isspace()
        ]
        if found:
            out[test] = next((status for status in found if status != PASSED), PASSED)
    return out


def log_statuses(task: Task, log: str) -> tuple[dict[str, str], str]:
    """What the verdict run's log says of each test, for reports and to downgrade a verdict
    (never to pass a test): the task's own parser, which must not raise on any log."""
    try:
        statuses = log_parser(task.grading.log_parser, task.repo)(parseable(log))
        return {str(k): str(v) for k, v in statuses.items()}, ""
    except Exception as exc:  # noqa: BLE001 - the log is the tested code's output: any text
        return {}, f"the log could not be parsed ({type(exc).__name__}), so it downgrades nothing"
