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


def test_a_second_grading_of_one_diff_is_the_first_verdict_without_its_seconds():
    memo, calls = GradeMemo(), []

    def grade() -> GradeResult:
        calls.append(1)
        return _verdict(True)

    first = memo.grade(TASK, "diff A", grade)
    again = memo.grade(TASK, "diff A", grade)
    assert calls == [1] and not first.from_memo and first.seconds == {"tests": 1.5}
    assert again == dataclasses.replace(first, seconds={}, from_memo=True)
    # One byte more (a trailing space, what a policy would try to dodge a cached 0 or find a
    # cached 1 with) is another diff: graded anew.
    memo.grade(TASK, "diff A ", grade)
    assert calls == [1, 1]


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
    assert memo.grade(TASK, "diff", lambda: _verdict(True)).resolved  # graded, not an old failure
    # A blocked but kept rule (a reward hack caught) is the diff's own doing: kept.
    memo.grade(TASK, "hack", lambda: _verdict(False, "canary_passed"))
    assert memo.grade(TASK, "hack", crashed).blocked == ("canary_passed",) and calls == ["crash", "crash"]


def test_the_oldest_verdicts_go_first_past_the_bound():
    memo = GradeMemo(max_entries=2)
    for diff in ("a", "b"):
        memo.grade(TASK, diff, lambda: _verdict(True))
    assert memo.grade(TASK, "a", lambda: _verdict(False)).from_memo  # "a" now the most recent
    memo.grade(TASK, "c", lambda: _verdict(True))  # pushes out "b"
    assert len(memo) == 2
    assert not memo.grade(TASK, "b", lambda: _verdict(False)).resolved  # graded again


@needs_bwrap
def test_episodes_that_end_with_one_diff_start_one_grading_and_earn_the_same_reward():
    factory, memo = CountingFactory(), GradeMemo()
    rewards, costs, starts = [], [], []
    for _ in range(2):
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
    assert rewards == [1.0, 1.0]
    # The first episode: its own sandbox and grading's (the verdict run, the clean fork and
    # canary twins fork from it); the second: its own sandbox alone.
    assert starts[0] > 1 and starts[1] == 1
    assert (costs[0].graded_from_memo, costs[1].graded_from_memo) == (False, True)
    assert costs[1].test_run_seconds == 0.0 and costs[1].canary_seconds == 0.0
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
