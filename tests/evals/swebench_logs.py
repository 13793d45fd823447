"""Test logs in the output formats of the runners SWE-bench's eval scripts call.

Each builder writes what the repository's real test command prints (django's
`runtests.py --verbosity 2`, sympy's `bin/test -C --verbose`, `pytest -rA`, astropy's
`pytest -rA -vv -o console_output_style=classic`, sphinx's coloured `pytest -rA` under
tox) for a chosen status of each test, so the official parsers and graders can be run on
real instances' test names without the instances' environments.

Statuses are the runner's own: `pass`, `fail`, `error`, `skip`, `xfail`, or `missing`
(the test is not in the log, as when collection stops at a syntax error). `FORMATS` says
which of them each runner can print and what each then means under SWE-bench's rule:
the outcome both graders must find.
"""

from __future__ import annotations

import re

_DJANGO_NAME = re.compile(r"^(\w+) \(([\w.]+)\)$")
_SEP = "=" * 70
_DASH = "-" * 70


def _django(statuses: dict[str, str]) -> str:
    lines = [
        "Testing against Django installed in '/testbed/django'",
        "Importing application tests",
        "Skipping setup of unused database(s): other.",
        "Operations to perform:",
        "  Apply all migrations: admin, sites",
        "System check identified no issues (0 silenced).",
    ]
    verdicts = {"pass": "ok", "fail": "FAIL", "error": "ERROR", "skip": "skipped 'Database has feature(s) X'"}
    failures = []
    for i, (test, status) in enumerate(statuses.items()):
        if status == "missing":
            continue
        if not _DJANGO_NAME.match(test):
            # A test with a docstring: the runner prints the method, then the docstring's
            # first line with the verdict (the name SWE-bench records).
            lines.append(f"test_documented_{i} (tests.test_module.DocumentedTests.test_documented_{i})")
        lines.append(f"{test} ... {verdicts[status]}")
        if status in ("fail", "error"):
            failures.append((status, test))
    for status, test in failures:
        kind = "FAIL" if status == "fail" else "ERROR"
        match = _DJANGO_NAME.match(test)
        header = test if match else "test_documented (tests.test_module.DocumentedTests.test_documented)"
        lines += [_SEP, f"{kind}: {header}", _DASH, "Traceback (most recent call last):"]
        lines += ['  File "/testbed/tests/test_module.py", line 10, in test', "    self.assertEqual(1, 2)"]
        lines += ["AssertionError: 1 != 2" if kind == "FAIL" else "TypeError: unsupported operand", ""]
    ran = sum(1 for s in statuses.values() if s != "missing")
    counts = [
        f"{k}={sum(1 for s in statuses.values() if s == v)}" for k, v in (("failures", "fail"), ("errors", "error"))
    ]
    lines += [_DASH, f"Ran {ran} tests in 0.512s", "", f"FAILED ({', '.join(counts)})" if failures else "OK"]
    return "\n".join(lines) + "\n"


def _sympy(statuses: dict[str, str], test_file: str) -> str:
    lines = [
        "============================= test process starts ==============================",
        "executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.19-final-0) [CPython]",
        "architecture:       64-bit",
        "cache:              no",
        "ground types:       python ",
        "numpy:              None",
        "random seed:        17380421",
        "hash randomization: on (PYTHONHASHSEED=3581247196)",
        "",
        f"{test_file}[{len(statuses)}] ",
    ]
    verdicts = {"pass": "ok", "fail": "F", "error": "E"}
    broken = []
    for test, status in statuses.items():
        if status == "missing":
            continue
        lines.append(f"{test} {verdicts[status]}")
        if status != "pass":
            broken.append((status, test))
    # The runner ends a file's last test line with the file's verdict, which hides that
    # test from the official parser (so SWE-bench's lists never name a file's last test):
    # a real file goes on past the listed tests.
    lines.append("test_zzz_unlisted ok" + " " * 50 + ("[FAIL]" if broken else "[OK]"))
    lines.append("")
    for status, test in broken:
        lines += ["_" * 80, f" {test_file}:{test} ".center(80, "_"), "Traceback (most recent call last):"]
        lines += [f'  File "/testbed/{test_file}", line 250, in {test}', "    assert p1.distance(p2) == sqrt(5)"]
        lines += ["AssertionError" if status == "fail" else "ZeroDivisionError: division by zero", ""]
    passed = sum(1 for s in statuses.values() if s == "pass")
    lines += [f"= tests finished: {passed} passed, {len(broken)} failed, in 0.50 seconds =", "DO *NOT* COMMIT!"]
    return "\n".join(lines) + "\n"


def _pytest_summary(statuses: dict[str, str], *, color: bool = False) -> list[str]:
    """`pytest -rA`'s short test summary: one line per test, named, except skips, which
    pytest reports by location."""
    paint = {"PASSED": 32, "FAILED": 31, "ERROR": 31, "XFAIL": 33, "SKIPPED": 33}
    lines = ["=" * 27 + " short test summary info " + "=" * 28]
    for test, status in statuses.items():
        if status == "missing":
            continue
        if status == "skip":
            word, rest = "SKIPPED", f"[1] {test.split('::')[0]}:42: needs a network"
        else:
            word = {"pass": "PASSED", "fail": "FAILED", "error": "ERROR", "xfail": "XFAIL"}[status]
            rest = test + {"fail": " - AssertionError: assert 1 == 2", "error": " - fixture 'db' not found"}.get(
                status, " - reason: known bug" if status == "xfail" else ""
            )
        lines.append(f"\x1b[{paint[word]}m{word}\x1b[0m {rest}" if color else f"{word} {rest}")
    return lines


def _pytest(statuses: dict[str, str], *, classic_verbose: bool = False, color: bool = False) -> str:
    files = sorted({t.split("::")[0] for t in statuses})
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.9.19, pytest-7.4.0, pluggy-1.3.0",
        "rootdir: /testbed",
        "configfile: setup.cfg",
        f"collected {sum(1 for s in statuses.values() if s != 'missing')} items",
        "",
    ]
    if classic_verbose:  # astropy: -vv -o console_output_style=classic: `name STATUS`
        word = {"pass": "PASSED", "fail": "FAILED", "error": "ERROR", "xfail": "XFAIL (known bug)"}
        word["skip"] = "SKIPPED (needs a network)"
        lines += [f"{t} {word[s]}" for t, s in statuses.items() if s != "missing"]
    else:
        lines += [f"{f} {'.' * 12}{' ' * 20}[100%]" for f in files]
    lines += ["", "==================================== PASSES ===================================="]
    lines += _pytest_summary(statuses, color=color)
    counts = {w: sum(1 for s in statuses.values() if s == k) for k, w in (("fail", "failed"), ("pass", "passed"))}
    lines.append(f"{'=' * 20} {counts['failed']} failed, {counts['passed']} passed in 4.21s {'=' * 20}")
    return "\n".join(lines) + "\n"


_NAMED = {"pass": "success", "fail": "failure", "error": "failure", "missing": "failure"}
# Per format: the statuses its runner can print, and what each means under SWE-bench's rule
# (`skipped`: read as SKIPPED, whose outcome depends on the test's list; see intended_outcome).
FORMATS: dict[str, dict[str, str]] = {
    "django": {**_NAMED, "skip": "skipped"},  # `name ... skipped 'why'`
    "sympy": _NAMED,
    # pytest reports a skip by location (`SKIPPED [1] file:42: why`), never by name, so a
    # skipped test reads as missing: a failure.
    "pytest": {**_NAMED, "xfail": "success", "skip": "failure"},
    # and verbose lines print the reason after SKIPPED/XFAIL (pytest >= 7), which no parser reads;
    # swebench 5's parse_log_pytest_v2 (astropy, sphinx, scikit-learn) keys a summary line by
    # all that follows the status, so `XFAIL id - reason: why` names no required test: a
    # failure (4.x took the first word, the id: a success); but a truncated id (more `[` than
    # `]`) prefixes that key, and swebench 5 reads truncated ids by prefix: a success
    "pytest_classic": {**_NAMED, "xfail": "xfail_by_prefix", "skip": "failure"},
    "pytest_color": {**_NAMED, "xfail": "xfail_by_prefix", "skip": "failure"},
    # seaborn's parser reads PASSED and FAILED lines only; an ERROR or XFAIL line reads as missing
    "seaborn": {**_NAMED, "skip": "failure", "xfail": "failure"},
}
REPO_FORMAT = {
    "django/django": "django",
    "sympy/sympy": "sympy",
    "pytest-dev/pytest": "pytest",
    "pallets/flask": "pytest",
    "psf/requests": "pytest",
    "matplotlib/matplotlib": "pytest",
    "astropy/astropy": "pytest_classic",
    "sphinx-doc/sphinx": "pytest_color",
    "scikit-learn/scikit-learn": "pytest_color",
    "mwaskom/seaborn": "seaborn",
}


def first_test_file(row: dict) -> str:
    """The first test file the row's test patch touches (sympy's log names it)."""
    return re.search(r"^diff --git a/(\S+) ", row["test_patch"], re.MULTILINE)[1]


def intended_outcome(row: dict, status: str, group: str, test: str = "") -> str:
    """What `test`, of `group` (FAIL_TO_PASS or PASS_TO_PASS), printed with `status` by this
    row's runner means: success or failure. A SKIPPED test (swebench 5) fails a
    FAIL_TO_PASS test (nothing was fixed) and keeps a PASS_TO_PASS one (nothing regressed)."""
    outcome = FORMATS[REPO_FORMAT[row["repo"]]][status]
    if outcome == "skipped":
        return "failure" if group == "FAIL_TO_PASS" else "success"
    if outcome == "xfail_by_prefix":
        return "success" if test.count("[") > test.count("]") else "failure"
    return outcome


def build_log(row: dict, statuses: dict[str, str]) -> str:
    """The test output the row's repository's runner prints for these per-test statuses."""
    kind = REPO_FORMAT[row["repo"]]
    unsupported = {s for s in statuses.values() if s not in FORMATS[kind]}
    if unsupported:
        raise ValueError(f"{row['instance_id']}: the {kind} format cannot say {sorted(unsupported)}")
    if kind == "django":
        return _django(statuses)
    if kind == "sympy":
        return _sympy(statuses, first_test_file(row))
    if kind == "seaborn":
        return _pytest(statuses)
    return _pytest(statuses, classic_verbose=kind == "pytest_classic", color=kind == "pytest_color")
