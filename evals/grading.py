"""The verdict on a test log, as pure functions: per-test statuses in, resolved or not out.

This is SWE-bench's rule, written to agree with `swebench.harness.grading` 4.1.0
(`test_passed`, `test_failed`, `get_eval_tests_report`, `get_resolution_status`), which
`tests/evals/test_grader_agreement.py` checks on real instances' test names:

- a test *succeeds* when the log gives it PASSED or XFAIL;
- a test *fails* when the log gives it FAILED or ERROR, or does not mention it at all
  (a syntax error that stops collection must never pass);
- any other status (SKIPPED) is *ignored*: it is counted neither way;
- an instance is resolved when no FAIL_TO_PASS and no PASS_TO_PASS test fails.

`agent_env.grading.grade_patch`, which gives the RL reward, is deliberately stricter in one
case: a SKIPPED required test fails the instance there (code under test could raise SkipTest
to collect a reward). Evals recompute the verdict from the statuses it returns with
`verdict()`, so reports follow the leaderboard's rule; the agreement test pins the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tasks.log_parsers import ERROR, FAILED, PASSED, XFAIL, log_parser

FAIL_TO_PASS, PASS_TO_PASS = "FAIL_TO_PASS", "PASS_TO_PASS"
SUCCEEDS = frozenset({PASSED, XFAIL})
FAILS = frozenset({FAILED, ERROR})

Outcome = Literal["success", "failure", "ignored"]


def outcome_of(test: str, statuses: Mapping[str, str]) -> Outcome:
    """One test's outcome under SWE-bench's rule; a test the log does not name fails."""
    status = statuses.get(test)
    if status in SUCCEEDS:
        return "success"
    if status is None or status in FAILS:
        return "failure"
    return "ignored"


@dataclass(frozen=True)
class Verdict:
    """The grade of one test log against an instance's FAIL_TO_PASS / PASS_TO_PASS."""

    resolved: bool
    tests_status: dict[str, dict[str, list[str]]]
    """`{FAIL_TO_PASS: {success: [...], failure: [...]}, PASS_TO_PASS: {...}}`: the shape of
    the official report's `tests_status` (ignored tests are in neither list)."""
    missing: tuple[str, ...] = ()
    """Tests the log does not mention at all (they are among the failures)."""
    ignored: tuple[str, ...] = ()
    """Tests with a status that counts neither way (SKIPPED)."""
    statuses: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> tuple[str, ...]:
        """Every FAIL_TO_PASS and PASS_TO_PASS test that failed, missing ones included."""
        return (*self.tests_status[FAIL_TO_PASS]["failure"], *self.tests_status[PASS_TO_PASS]["failure"])


def verdict(statuses: Mapping[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]) -> Verdict:
    """Grade parsed per-test `statuses` (e.g. `GradeResult.statuses`) under SWE-bench's rule."""
    report: dict[str, dict[str, list[str]]] = {}
    ignored: list[str] = []
    for key, tests in ((FAIL_TO_PASS, fail_to_pass), (PASS_TO_PASS, pass_to_pass)):
        report[key] = {"success": [], "failure": []}
        for test in tests:
            outcome = outcome_of(test, statuses)
            if outcome == "ignored":
                ignored.append(test)
            else:
                report[key][outcome].append(test)
    # get_resolution_status: FULL iff both success rates are 1 (a group with no counted
    # tests has rate 1), i.e. iff nothing failed.
    resolved = not report[FAIL_TO_PASS]["failure"] and not report[PASS_TO_PASS]["failure"]
    missing = tuple(t for t in (*fail_to_pass, *pass_to_pass) if t not in statuses)
    return Verdict(resolved, report, missing, tuple(ignored), dict(statuses))


def grade_log(
    log: str,
    *,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    parser: str = "swebench",
    repo: str = "",
) -> Verdict:
    """Parse a test run's output with the task's parser (`swebench`: the official parser of
    `repo`) and grade it."""
    return verdict(log_parser(parser, repo)(log), fail_to_pass, pass_to_pass)
