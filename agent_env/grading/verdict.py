"""Honest grading: a patch is judged in a fresh sandbox, by the task's hidden tests, from exit
statuses the code under test cannot write, and only for the agent's change to the code under test.

The policy being trained is an adversary of this module, and code in a process can defeat
anything in that process, so no verdict here comes from a checker inside the test process
(`tasks/README.md` states the contract for users):

1. **Only the agent's change to the code under test counts.** A patch over
   `MAX_PATCH_BYTES` is rejected unread (`patch_too_large`). Grading starts from the pristine
   workspace, drops every protected path of the diff (tests, runner configuration, start-up
   hooks: `agent_env.grading.protected`) and applies the rest with `git apply` only (a patch that
   needs fuzz, or that git refuses, is `patch_rejected`). Then the result is judged on the
   tree, by git's own list of what it touched, never on hunk headers: a symlink, a
   dot-path, a new file outside an existing package, or a test section of setup.cfg /
   pyproject.toml changed as the parsed files show is reverted (`outside_allowlist`,
   `protected_files`). Then the test patch.
2. **The verdict is an exit status.** The task's test command, narrowed to exactly the
   required tests (`agent_env.grading.selection`), runs once with the stock runner (no plugin of
   ours) as a fresh process; it must exit 0.
3. **Marks must be left, canary twins must fail.** Every FAIL_TO_PASS test function is
   marked in every run (`agent_env.grading.marks.mark_tests`): once its body completes,
   it writes a mark (random path and text, only in the run's source), which the grader
   reads back from the verdict run's fork; before each top-level equality assertion it
   compares the computed value with a changed expectation, and where that holds too (an
   object equal to anything) the mark is not written. A verdict run that exits 0 without
   every mark did not complete those bodies with honest values: reward 0
   (`tail_not_reached`). That catches a skipped body, an early exit 0, a rewritten
   outcome, and code that forges a pass or is always-equal at random (not knowing which
   run is which) in the verdict run itself. Then each required test function gets one
   twin (`agent_env.grading.canaries`): the same command in a fork of the same sandbox (the
   verdict run is a fork alike, with the same files written into it, so that no run tells
   itself from another by its sandbox or its wrappers), where each equality assertion of
   that test expects another value of the expected value's type (expectation; a test with
   none gets its first assertion negated, and one with no assertion at all raises after
   its mark: tail). A genuine fix fails it; an always-equal object, code that reads the
   expectation, or any mechanism that turns failures into passes passes it, and the
   verdict is reward 0 (`canary_passed`). A twin must also leave the marks of the required
   functions it leaves unaltered (a genuine fix completes them there): code that is
   honest in a twin's process, at random or by telling it from the verdict run, fails
   them (`tail_not_reached`); a twin that can ask for no other mark gets a tail twin
   beside it (`agent_env.grading.plan.build_twins`). A twin or mark that cannot be built
   is named in `GradeResult.notes`, never guessed.
4. **The log only downgrades.** What the verdict run printed is parsed with the task's log
   parser: a required test it does not report as passed (failed, missing, skipped:
   `skipped_required`, xfailed: `xfail_required`) fails. Nothing it prints passes a test
   whose run did not exit 0 or whose canary passed. One exception, read from a run the
   agent cannot write: a PASS_TO_PASS test the repository itself marks as an expected
   failure (matplotlib__matplotlib-22719) passes as xfailed when the control run of the
   pristine workspace reports it xfailed too, as the SWE-bench harness counts it; tested
   code that calls `pytest.xfail` in a test that passes there still trips `xfail_required`.
5. **Blame is decided, not guessed.** A verdict run that times out, kills its sandbox or
   fills its disk after the agent's patch was applied is compared with a control run of the
   pristine workspace: when the control completes, the failure is the patch's (reward 0,
   `grading_crashed_by_patch`); only when the control fails the same way is it an
   infrastructure error (`GradingError`), which callers retry.

`GradeResult.blocked` names each rule that tripped, so training can count them
(`reward_hack_blocked` in the metrics). A task whose verifier is a script (Harbor tasks)
is graded by `agent_env.grading.script_verifier` instead, under the same principles as far as
a script allows (its docstring says how, and what it cannot catch).
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable

from agent_env.grading.applying import patch_bytes, pristine_text, protection_rule
from agent_env.grading.logs import log_statuses, with_cut_ids
from agent_env.grading.protected import BLOCK_OF_REASON, filter_patch
from agent_env.grading.result import GradeResult, GradingError
from agent_env.grading.runs import Crash, Runs, control_failure, control_run, run_tests
from agent_env.grading.script_verifier import grade_script
from sandboxes import Sandbox, SandboxSpec, make_sandbox
from tasks import Task
from tasks.log_parsers import FAILED, PASSED, SKIPPED, XFAIL

# Rules whose tripping makes the verdict "unresolved" (the others only drop what they caught).
FAILING_RULES = frozenset(
    {
        "patch_rejected",
        "patch_too_large",
        "canary_passed",
        "tail_not_reached",
        "xfail_required",
        "skipped_required",
        "grading_crashed_by_patch",
    }
)
MAX_PATCH_BYTES = 5 * 1024 * 1024
"""A patch larger than this is rejected unread (`patch_too_large`): the grader's memory stays
bounded whatever the agent submits. SWE-bench Verified's largest gold patch is ~0.2 MB."""


def grade_patch(
    task: Task,
    patch: str,
    *,
    sandbox_factory: Callable[[SandboxSpec], Sandbox] | None = None,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> GradeResult:
    """Grade `patch` (a unified diff against the task's workspace) for `task`; see the
    module docstring for the contract. Raises `GradingError` only for failures that happen
    without the agent's patch too, and `SandboxError` for a sandbox that cannot start; any
    patch, log or output the agent can shape gives a result with a reason. `clock` times
    where the grading's time went (`GradeResult.seconds`)."""
    if len(patch) > MAX_PATCH_BYTES or len(patch_bytes(patch)) > MAX_PATCH_BYTES:
        return GradeResult(
            resolved=False,
            patch_applied=False,
            blocked=("patch_too_large",),
            problems=(f"patch_too_large: the patch has over {MAX_PATCH_BYTES:,} bytes; it was not read",),
        )
    factory = sandbox_factory or make_sandbox
    rng = rng or random.Random(secrets.randbits(64))
    filtered = filter_patch(patch, protection_rule(task), pristine_text(task))
    if task.verifier is not None:  # a verifier script decides (Harbor tasks): its own contract
        return grade_script(task, filtered.patch, factory, rng, filtered.dropped)
    try:
        runs = run_tests(task, filtered.patch, factory, rng, clock)
    except Crash as crash:
        if not filtered.patch.strip():
            raise GradingError(f"task {task.id}: {crash}") from None
        control = control_failure(task, factory)
        if control is not None:
            raise GradingError(f"task {task.id}: {crash}; the pristine workspace fails too ({control})") from None
        blocked = list(dict.fromkeys(BLOCK_OF_REASON[reason] for _, reason in filtered.dropped))
        return GradeResult(
            resolved=False,
            patch_applied=True,
            blocked=(*blocked, "grading_crashed_by_patch"),
            dropped=filtered.dropped,
            problems=(f"{crash}, where the pristine workspace completes",),
        )
    if isinstance(runs, str):
        blocked = list(dict.fromkeys(BLOCK_OF_REASON[reason] for _, reason in filtered.dropped))
        return GradeResult(
            resolved=False,
            patch_applied=False,
            log=runs[:20_000],
            blocked=(*blocked, "patch_rejected"),
            dropped=filtered.dropped,
            problems=(f"patch_rejected: git apply refused the patch: {runs[:300]}",),
        )
    # With nothing of the agent's applied, this run is the control run (None).
    control = (lambda: control_run(task, factory).statuses) if filtered.patch.strip() else None
    return _verdict(task, filtered.dropped, runs, control)


def _verdict(
    task: Task,
    dropped_before: tuple[tuple[str, str], ...],
    runs: Runs,
    control_statuses: Callable[[], dict[str, str]] | None,
) -> GradeResult:
    """The verdict from exit statuses: the verdict run exits 0, every canary twin does not.
    The log only downgrades: each required test must also read as passed in it, or, for a
    PASS_TO_PASS test, as the expected failure the control run of the pristine workspace
    reads too (`control_statuses`, run only when one is needed; None: this run is the
    control)."""
    dropped = (*dropped_before, *runs.prepared.dropped)
    blocked = list(dict.fromkeys(BLOCK_OF_REASON[reason] for _, reason in dropped))
    problems: dict[str, list[str]] = {}
    output = runs.verdict.output
    statuses, unreadable = log_statuses(task, output)
    wanted = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    statuses = with_cut_ids(statuses, wanted)
    passed_run = runs.verdict.exit_code == 0
    for run in runs.twins:
        twin, result = run.twin, run.result
        if result is not None and result.exit_code == 0 and not result.timed_out:
            problems.setdefault("canary_passed", []).append(
                f"{twin.test}: its {twin.kind} canary, built to fail, exited 0"
            )
        elif run.unmarked:
            how = "its sandbox failed" if result is None else "it timed out" if result.timed_out else "it failed"
            problems.setdefault("tail_not_reached", []).append(
                f"{twin.test}: its {twin.kind} canary left {len(run.unmarked)} of its {len(twin.marks)} marks"
                f" unwritten ({how}): the bodies a genuine fix completes there did not complete, or an equality"
                " also held against a changed expectation"
            )
    if passed_run:
        for test in runs.unmarked:
            problems.setdefault("tail_not_reached", []).append(
                f"{test}: the verdict run exited 0 but left no mark of it: its body did not complete, or an"
                " equality also held against a changed expectation"
            )
    notes = list(runs.prepared.skipped_twins)
    # PASS_TO_PASS tests read as expected failures: the control run decides (run only then).
    in_control: dict[str, str] = {}
    if any(statuses.get(t) == XFAIL for t in task.grading.pass_to_pass):
        in_control = control_statuses() if control_statuses is not None else statuses
    for test in wanted:
        if statuses.get(test) == XFAIL:
            if test in task.grading.pass_to_pass and in_control.get(test) == XFAIL:
                statuses = {**statuses, test: PASSED}
                notes.append(f"{test}: an expected failure in the pristine workspace too, counted as passed")
            else:
                problems.setdefault("xfail_required", []).append(f"{test} is an expected failure")
        elif statuses.get(test) == SKIPPED:
            problems.setdefault("skipped_required", []).append(f"{test} was skipped")
    # A failed run whose log says every required test passed: which one failed only the log
    # could say, and it does not.
    if not passed_run and all(statuses.get(t) == PASSED for t in wanted):
        statuses = {**statuses, **dict.fromkeys(wanted, FAILED)}
    failed = tuple(t for t in wanted if statuses.get(t) != PASSED)
    missing = tuple(t for t in wanted if t not in statuses)
    blocked += [rule for rule in problems if rule not in blocked]
    tripped = FAILING_RULES.intersection(blocked)
    if unreadable:
        notes.append(unreadable)
    return GradeResult(
        resolved=passed_run and not failed and not tripped,
        patch_applied=True,
        statuses=statuses,
        failed=failed,
        missing=missing,
        log=output,
        blocked=tuple(blocked),
        dropped=dropped,
        exit_code=runs.verdict.exit_code,
        problems=tuple(f"{rule}: {text}" for rule, texts in problems.items() for text in texts),
        canaries=tuple((r.twin.test, r.twin.kind, r.result.exit_code if r.result else None) for r in runs.twins),
        marks=tuple((test, test not in runs.unmarked) for test, _ in runs.prepared.marks),
        notes=tuple(notes),
        command=runs.prepared.command,
        seconds=runs.seconds,
    )


def describe(result: GradeResult) -> str:
    """One line: the verdict and the rules that tripped."""
    verdict = "resolved" if result.resolved else "unresolved"
    if result.blocked:
        verdict += f" (blocked: {', '.join(result.blocked)})"
    return verdict
