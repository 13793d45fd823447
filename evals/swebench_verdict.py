"""The verdict on a test log, as pure functions: per-test statuses in, resolved or not out.

This is SWE-bench's rule, written to agree with `swebench.harness.grading` 5.0.2
(`_resolve_case`, `test_passed`, `test_maintained`, `test_failed`,
`get_eval_tests_report`, `get_resolution_status`), which
`tests/evals/test_grader_agreement.py` checks on real instances' test names:

- a test *succeeds* when the log gives it PASSED or XFAIL; a PASS_TO_PASS test also when
  SKIPPED (a skip is not a regression);
- a test *fails* when the log gives it FAILED or ERROR, or does not mention it at all
  (a syntax error that stops collection must never pass); a FAIL_TO_PASS test also when
  SKIPPED (since 5.0: a patch that makes the new tests skip resolves nothing);
- any other status is *ignored*: it is counted neither way;
- a test id truncated inside its parameters (more `[` than `]`, as 676 Verified ids are)
  is read from the log's ids it prefixes, when those agree on pass or fail;
- an instance is resolved when no FAIL_TO_PASS and no PASS_TO_PASS test fails.

`agent_env.grading.grade_patch`, which gives the RL reward, is deliberately stricter in one
case: any SKIPPED or XFAIL required test fails the instance there (code under test could
raise SkipTest, or fail on purpose under an expected-failure mark, to collect a reward).
Evals recompute the verdict from the statuses it returns with `verdict()`, so reports
follow the leaderboard's rule; the agreement test pins the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tasks.log_parsers import ERROR, FAILED, PASSED, SKIPPED, XFAIL, log_parser

FAIL_TO_PASS, PASS_TO_PASS = "FAIL_TO_PASS", "PASS_TO_PASS"
SUCCEEDS = frozenset({PASSED, XFAIL})
FAILS = frozenset({FAILED, ERROR})

Outcome = Literal["success", "failure", "ignored"]


def resolve_test(test: str, statuses: Mapping[str, str]) -> str | None:
    """The log's id for `test`: itself, or for an id truncated inside its parameters the
    first id it prefixes when all of those agree on passing; None when the log has none."""
    if test in statuses:
        return test
    if test.count("[") > test.count("]"):
        matches = [name for name in statuses if name.startswith(test)]
        if matches and len({statuses[name] in SUCCEEDS for name in matches}) == 1:
            return matches[0]
    return None


def outcome_of(test: str, statuses: Mapping[str, str], group: str = FAIL_TO_PASS) -> Outcome:
    """One test's outcome under SWE-bench's rule, for a test of `group` (FAIL_TO_PASS or
    PASS_TO_PASS); a test the log does not name fails."""
    key = resolve_test(test, statuses)
    status = statuses[key] if key is not None else None
    if status in SUCCEEDS or (status == SKIPPED and group == PASS_TO_PASS):
        return "success"
    if status is None or status in FAILS or status == SKIPPED:
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
    """Tests with a status that counts neither way (none of SWE-bench's five statuses)."""
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
            outcome = outcome_of(test, statuses, key)
            if outcome == "ignored":
                ignored.append(test)
            else:
                report[key][outcome].append(test)
    # get_resolution_status: FULL iff both success rates are 1 (a group with no counted
    # tests has rate 1), i.e. iff nothing failed.
    resolved = not report[FAIL_TO_PASS]["failure"] and not report[PASS_TO_PASS]["failure"]
    missing = tuple(t for t in (*fail_to_pass, *pass_to_pass) if resolve_test(t, statuses) is None)
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
