"""What grading returns, and the one error it raises."""

from __future__ import annotations

from dataclasses import dataclass, field


class GradingError(RuntimeError):
    """Grading could not reach a verdict for reasons outside the agent's patch
    (infrastructure, or a broken task); the message names the task."""


@dataclass(frozen=True)
class GradeResult:
    resolved: bool
    patch_applied: bool
    statuses: dict[str, str] = field(default_factory=dict)
    failed: tuple[str, ...] = ()
    """FAIL_TO_PASS / PASS_TO_PASS tests that did not pass (missing ones included)."""
    missing: tuple[str, ...] = ()
    """FAIL_TO_PASS / PASS_TO_PASS tests the log does not mention at all."""
    log: str = ""
    blocked: tuple[str, ...] = ()
    """Rules of the grading contract that tripped (the module docstring), e.g.
    `protected_files`, `incomplete_report`, `runner_tampered`: what a reward hack ran into."""
    dropped: tuple[tuple[str, str], ...] = ()
    """(path, reason) of each file of the agent's diff that never reached the grader."""
    exit_code: int | None = None
    """The verdict run's exit status, from the kernel."""
    problems: tuple[str, ...] = ()
    """Why each failing rule tripped, in words (for logs and reports)."""
    canaries: tuple[tuple[str, str, int | None], ...] = ()
    """(test, kind, exit status) of each canary twin run (None: its sandbox failed); empty
    when the verdict run failed (no twin runs then)."""
    marks: tuple[tuple[str, bool], ...] = ()
    """(test, left) for each FAIL_TO_PASS test the verdict run carried a mark for: whether
    the run left it (the test's body completed, and no equality of it held against a
    changed expectation)."""
    notes: tuple[str, ...] = ()
    """What the grader could not check, in words: a canary it could not build, a log it
    could not parse."""
    command: str = ""
    """The verdict run's command line (the task's, narrowed to the required tests)."""
    reward: float | None = None
    """The reward when the task's verifier gives a number (a Harbor verifier's reward file,
    `agent_env.grading.script_verifier`; 0 when a rule tripped); None: 1.0 if resolved, else 0."""
    rewards: dict[str, float] = field(default_factory=dict)
    """Every named reward the verifier left (Harbor's reward.json), for reports."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Where the grading's time went: seconds in each of `agent_env.grading.runs.PHASES`
    (start, setup, tests, canaries, teardown); empty when no sandbox ran."""
    from_memo: bool = False
    """The verdict given earlier in this process to the same diff of the same task
    (`agent_env.grading.memo`): no sandbox ran for this one."""

    @property
    def score(self) -> float:
        """The reward this result earns: `reward` when the verifier gave one, else 1.0 when
        resolved and 0.0 when not."""
        return self.reward if self.reward is not None else float(self.resolved)
