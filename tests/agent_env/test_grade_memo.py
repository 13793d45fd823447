"""`agent_env.grading.memo`: a diff graded once per process, and only what grading that same
diff returned given back."""

from __future__ import annotations

import dataclasses

import pytest

from agent_env import GradeMemo, GradeResult, ToolEnv, gold_actions, grade_patch
from agent_env.tools import ToolCall, format_tool_call
from sandboxes import make_sandbox
from tasks import builtin_tasks
from tests.conftest import needs_bwrap

TASK = builtin_tasks(["parsing-querystring-plus"])[0]


class CountingFactory:
    """The real sandbox factory, counting the sandboxes grading starts."""

    def __init__(self) -> None:
        self.starts = 0

    def __call__(self, spec):
        self.starts += 1
        return make_sandbox(spec)


def _verdict(resolved: bool, *blocked: str) -> GradeResult:
    return GradeResult(resolved=resolved, patch_applied=True, blocked=blocked, seconds={"tests": 1.5})


def _sequence(*scores: bool) -> tuple[list[int], object]:
    """A grader that gives these verdicts in turn, and the list of its calls."""
    calls: list[int] = []

    def grade() -> GradeResult:
        calls.append(1)
        return _verdict(scores[len(calls) - 1])

    return calls, grade


def test_a_diff_that_pays_is_kept_once_two_gradings_agree_and_given_back_without_seconds():
    memo = GradeMemo()
    calls, grade = _sequence(True, True)
    first, second, third = (memo.grade(TASK, "diff A", grade) for _ in range(3))
    assert len(calls) == 2 and not first.from_memo and not second.from_memo
    assert third == dataclasses.replace(second, seconds={}, from_memo=True) and third.resolved
    # One byte more (a trailing space, what a policy would try to find a kept 1 with) is
    # another diff: graded anew.
    memo.grade(TASK, "diff A ", lambda: _verdict(False))
    assert not memo.grade(TASK, "diff A ", lambda: _verdict(True)).resolved  # its 0 was kept
    assert len(calls) == 2


def test_a_diff_that_pays_nothing_is_kept_at_once():
    memo = GradeMemo()
    calls, grade = _sequence(False)
    assert not memo.grade(TASK, "", grade).from_memo
    again = memo.grade(TASK, "", grade)
    assert again.from_memo and not again.resolved and len(calls) == 1


def test_a_diff_graded_both_ways_is_graded_every_time_and_never_pays_more_than_without_a_memo():
    """A hack that beats the canaries now and then: its lucky pass is never kept."""
    memo = GradeMemo()
    calls, grade = _sequence(True, False, True, True, True, True)
    verdicts = [memo.grade(TASK, "random hack", grade).resolved for _ in range(6)]
    assert verdicts == [True, False, True, True, True, True] and len(calls) == 6  # all graded
    assert not any(memo.grade(TASK, "random hack", lambda: _verdict(False)).from_memo for _ in range(2))
    # Its first grading failed, then it passed: kept at 0 from the first (it never paid more
    # than grading it every time would, on average: docstring of GradeMemo).
    calls, grade = _sequence(False, True)
    assert [memo.grade(TASK, "unlucky", grade).resolved for _ in range(2)] == [False, False] and len(calls) == 1


def test_what_grading_reads_of_the_task_is_part_of_the_key():
    memo, calls = GradeMemo(), []

    def grade() -> GradeResult:
        calls.append(1)
        return _verdict(False)

    memo.grade(TASK, "diff", grade)
    variants = [
        dataclasses.replace(TASK, grading=TASK.grading.model_copy(update={"fail_to_pass": ["tests/x.py::t"]})),
        dataclasses.replace(TASK, grading=TASK.grading.model_copy(update={"test_command": "pytest -x"})),
        dataclasses.replace(TASK, test_patch="diff --git a/t b/t\n"),
        dataclasses.replace(TASK, id="other-task"),
    ]
    for variant in variants:
        memo.grade(variant, "diff", grade)
    assert len(calls) == 1 + len(variants)
    memo.grade(dataclasses.replace(TASK), "diff", grade)  # an equal task: the same verdict
    assert len(calls) == 1 + len(variants)


def test_a_crash_blamed_on_the_diff_and_an_error_are_never_kept():
    memo, calls = GradeMemo(), []

    def crashed() -> GradeResult:
        calls.append("crash")
        return _verdict(False, "grading_crashed_by_patch")  # e.g. a timeout, maybe the load's

    assert not memo.grade(TASK, "slow diff", crashed).from_memo
    assert not memo.grade(TASK, "slow diff", crashed).from_memo
    assert calls == ["crash", "crash"] and len(memo) == 0

    def infra() -> GradeResult:
        raise RuntimeError("the sandbox could not start")

    with pytest.raises(RuntimeError, match="could not start"):
        memo.grade(TASK, "diff", infra)
    assert memo.grade(TASK, "diff", lambda: _verdict(True)).resolved  # graded: nothing was kept
    # A blocked but kept rule (a reward hack caught) is the diff's own doing: kept.
    memo.grade(TASK, "hack", lambda: _verdict(False, "canary_passed"))
    assert memo.grade(TASK, "hack", crashed).blocked == ("canary_passed",) and calls == ["crash", "crash"]


def test_the_oldest_verdicts_go_first_past_the_bound():
    memo = GradeMemo(max_entries=2)
    for diff in ("a", "b"):
        memo.grade(TASK, diff, lambda: _verdict(False))
    assert memo.grade(TASK, "a", lambda: _verdict(True)).from_memo  # "a" now the most recent
    memo.grade(TASK, "c", lambda: _verdict(False))  # pushes out "b"
    assert len(memo) == 2
    assert memo.grade(TASK, "b", lambda: _verdict(True)).resolved  # graded again


@needs_bwrap
def test_episodes_that_end_with_one_paying_diff_grade_it_twice_then_earn_the_same_reward_without_a_sandbox():
    factory, memo = CountingFactory(), GradeMemo()
    rewards, costs, starts = [], [], []
    for _ in range(3):
        before = factory.starts
        with ToolEnv(TASK, sandbox_factory=factory, grade_memo=memo) as env:
            env.reset()
            for action in gold_actions(TASK):
                _, reward, terminated, _, info = env.step(action)
            assert terminated and info["resolved"]
            rewards.append(reward)
            costs.append(env.cost)
        starts.append(factory.starts - before)
    graded_once = factory.starts
    assert rewards == [1.0, 1.0, 1.0]
    # The first two episodes: their own sandbox and grading's (the verdict run, the clean
    # fork and the canary twins forked from it), a paying verdict being kept once two
    # gradings agree; the third: its own sandbox alone.
    assert starts[0] > 1 and starts[1] == starts[0] and starts[2] == 1
    assert [cost.graded_from_memo for cost in costs] == [False, False, True]
    assert costs[2].test_run_seconds == 0.0 and costs[2].canary_seconds == 0.0
    # The memo's verdict is what grading gives that diff: grading it again without the memo
    # agrees.
    patch = info["patch"]
    fresh = grade_patch(TASK, patch, sandbox_factory=factory)
    assert fresh.resolved and factory.starts > graded_once
    # Another diff (nothing edited) is graded, and fails.
    with ToolEnv(TASK, sandbox_factory=factory, grade_memo=memo) as env:
        env.reset()
        _, reward, _, _, info = env.step(format_tool_call(ToolCall("finish")))
        assert reward == 0.0 and not env.cost.graded_from_memo and info["patch"] == ""
