"""Verdicts already given in this process, by task and patch: the same patch of the same task
is graded once.

In RL most episodes end with a diff some earlier episode already submitted: the empty diff
of an episode that never edited, the gold-like edit once the policy has learned it. In a
`make train-swe` run, 307 of the 320 episodes its samples.jsonl kept ended with a (task,
diff) pair seen before (docs/grading.md, "In training, a diff is graded once"). Grading is a
function of the task and the diff: the verdict run, the canary twins and the control runs
all start from the task's workspace with that diff applied, and nothing of the episode's
sandbox reaches them. So a second grading of one diff can only repeat the first, unless
the diff or a test passes at random, and costs the sandbox time of a whole grading.

What is never kept: a verdict `grading_crashed_by_patch` (a test run that timed out or hit a
limit may do so only under load), and anything that raised (`GradingError`, `SandboxError`).
The key is the diff's bytes and everything of the task that grading reads, so a variant of a
task (another workspace, other tests) is graded anew. What is kept, and when, is chosen so
that no diff earns more with the memo than without it (`GradeMemo`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable

from agent_env.grading.once import OncePerKey
from agent_env.grading.result import GradeResult
from tasks import Task

UNKEPT_RULES = frozenset({"grading_crashed_by_patch"})
"""Verdicts with these rules are not kept: the crash may be the machine's load, not the diff."""


def memo_key(task: Task, patch: str) -> tuple[str, ...]:
    """What a verdict depends on: the task's id, workspace, test patch, grading and verifier
    definitions (as their reprs: dataclasses with lists), and the diff, by content."""

    def digest(text: str) -> str:
        return hashlib.sha256(text.encode(errors="surrogateescape")).hexdigest()

    return (
        task.id,
        str(task.workspace),
        digest(task.test_patch),
        digest(repr(task.grading)),
        digest(repr(task.verifier)),
        digest(patch),
    )


class GradeMemo:
    """A process's verdicts by (task, diff), the `max_entries` most recently used kept;
    concurrent gradings of one diff wait for the first (`OncePerKey`).

    The memo never pays a diff more, on average, than grading it every time would, even a
    diff that passes at random (a hack that beats the canaries now and then, a flaky test):
    - a verdict that pays nothing, when no grading of that diff paid before, is kept at once;
    - one that pays (score > 0) is kept once `confirmations` gradings in a row gave it;
    - a diff graded both ways is unsteady: never kept, graded every time, as without a memo.
    With 2 confirmations, a diff that passes with probability p is kept paying with
    probability p ** 2 and graded afresh with p * (1 - p), so later episodes earn
    p ** 2 * (2 - p) <= p on average; a diff that always passes is graded twice."""

    def __init__(self, max_entries: int = 1024, confirmations: int = 2) -> None:
        self.confirmations = confirmations
        self._verdicts: OncePerKey[GradeResult] = OncePerKey(max_entries)
        self._history: OrderedDict[tuple[str, ...], tuple[float, int]] = OrderedDict()
        """Per diff graded but not kept: (the score its gradings gave so far, how many), or
        (nan, 0) once it was graded both ways (unsteady)."""
        self._max_history = max_entries

    def grade(self, task: Task, patch: str, grade: Callable[[], GradeResult]) -> GradeResult:
        """`grade()`'s verdict for this task and diff, or the one kept for them, as
        `from_memo` with no sandbox seconds (no sandbox ran for it)."""
        key = memo_key(task, patch)
        computed: list[GradeResult] = []

        def run() -> GradeResult:
            computed.append(grade())
            return computed[0]

        result = self._verdicts.get(key, run, keep=lambda verdict: self._keep(key, verdict))
        if computed:
            return result
        return dataclasses.replace(result, seconds={}, from_memo=True)

    def _keep(self, key: tuple[str, ...], verdict: GradeResult) -> bool:
        # Called by OncePerKey under its lock, one grading of a key at a time.
        if UNKEPT_RULES.intersection(verdict.blocked):
            return False  # says nothing of the diff either way
        score, count = self._history.pop(key, (verdict.score, 0))
        if score != verdict.score or math.isnan(score):
            self._remember(key, (math.nan, 0))  # graded both ways: unsteady for good
            return False
        if verdict.score <= 0 or count + 1 >= self.confirmations:
            return True
        self._remember(key, (score, count + 1))
        return False

    def _remember(self, key: tuple[str, ...], entry: tuple[float, int]) -> None:
        self._history[key] = entry
        while len(self._history) > self._max_history:
            self._history.popitem(last=False)

    def __len__(self) -> int:
        return len(self._verdicts)
