"""The grading sandbox's runs: prepare it (the patches applied and the tree judged by
`agent_env.grading.applying`, the runs planned), run the verdict command and the canary twins,
and time each phase (`agent_env.grading.verdict` states the contract)."""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent_env.grading.applying import GRADING_DIR, run_fresh
from agent_env.grading.canaries import Twin
from agent_env.grading.logs import log_statuses, with_cut_ids
from agent_env.grading.once import OncePerKey
from agent_env.grading.parallel import parallel_runs
from agent_env.grading.plan import Prepared, build_twins, prepare
from agent_env.grading.result import GradingError
from sandboxes import ExecResult, Sandbox, SandboxError, SandboxSpec
from sandboxes.group import SandboxGroup, fork_in_groups
from tasks import Task, prepare_workspace

log = logging.getLogger(__name__)


def sandbox_spec_for(task: Task) -> SandboxSpec:
    """The sandbox a task's agent works in: its prepared workspace at the workdir, in the
    image and with the env, network and limits of the task's sandbox definition (if any);
    a command's timeout is the task's `limits.command_timeout_s`."""
    if task.sandbox:
        from sandboxes.images import parse_definition  # lazy: it needs yaml and more

        spec = parse_definition(task.sandbox, Path(task.source or "task.yaml")).spec()
    else:
        spec = SandboxSpec()
    limits = dataclasses.replace(spec.limits, timeout_s=task.limits.command_timeout_s)
    return dataclasses.replace(spec, workspace=prepare_workspace(task), limits=limits)


GRADING_OUTPUT_BYTES = 16 * 1024 * 1024
"""The output a grading run keeps (the agent's commands keep `SandboxLimits.output_bytes`).
The log decides each required test's status, and a verdict run of a large row prints more
than an agent's cap: matplotlib__matplotlib-25122's 2,488 required tests print about
260 KB under `-rA`, and with 256 KiB kept the middle of its summary was dropped and 220
passing tests read as missing."""


def grading_spec_for(task: Task) -> SandboxSpec:
    """The sandbox a grading run uses: the agent's (`sandbox_spec_for`) keeping up to
    `GRADING_OUTPUT_BYTES` of a command's output."""
    spec = sandbox_spec_for(task)
    output = max(spec.limits.output_bytes, GRADING_OUTPUT_BYTES)
    return dataclasses.replace(spec, limits=dataclasses.replace(spec.limits, output_bytes=output))


PARALLEL_RUNS = max(1, min(4, len(os.sched_getaffinity(0))))
"""How many of one grading's canary twins run at once: four, or as many as this process has
cores. The verdict run has a core of its own; twins that shared cores would each get less,
and tested code that times its own share of the CPU would tell them from it (honest under
80% of a core, a forged pass elsewhere: it earned 1.0 on a calm 2-core machine with four
twins at once; docs/grading.md, "What still tells the runs apart")."""


class Crash(Exception):
    """The verdict run ended without an exit status that means anything: a timeout, a dead
    sandbox, a full disk."""


LONG_COMMAND = 100_000
"""Bytes past which a command reaches bash through a file: Linux refuses any one argument over
128 KiB (MAX_ARG_STRLEN), and `bash -c COMMAND` is one argument, while a narrowed command
names every required test (pydata__xarray-3993's: over a thousand node ids)."""
COMMAND_FILE = f"{GRADING_DIR}/command.sh"


def run_command(sandbox: Sandbox, command: str, timeout: float) -> ExecResult:
    """`command` as a fresh process; past `LONG_COMMAND` bytes, written to `COMMAND_FILE` and
    run by `eval "$(< FILE)"`: bash reads the whole file before it runs any of it, so tested
    code that rewrites the file while the tests run changes nothing (`bash FILE` would read
    the rest of the file only when it gets there). The exit status is the command's."""
    if len(command.encode()) <= LONG_COMMAND:
        return run_fresh(sandbox, command, timeout)
    sandbox.write_file(COMMAND_FILE, command)
    return run_fresh(sandbox, f'eval "$(< {COMMAND_FILE})"', timeout)


def _run_in_fork(
    files: dict[str, str],
    command: str,
    timeout: float,
    fork: Sandbox,
    marks: tuple[tuple[str, str], ...] = (),
    after_any_exit: bool = False,
) -> tuple[ExecResult, frozenset[str]]:
    """A run (the verdict's or a twin's) in `fork`, a fork of the prepared grading sandbox:
    `files` written in order, then the command; then which of `marks` (path, text) it left,
    read back from it after a run that exited 0 (a failed verdict run earns nothing: unread)
    or, `after_any_exit`, after any run that did not time out (a twin's). Every run is made the same way, so the tested
    code sees the same sandbox in each: its layers, which files were written after the fork
    and in what order (a verdict run in the grading sandbox itself was told apart from the
    twins by the layers /proc/self/mountinfo lists: rt5_canary_aware_by_mounts). None is
    started ahead (`sandboxes.prefork`): a sandbox that waited is older than one that did
    not (its /tmp's times, its pid 1's start), and that too would tell the runs apart."""
    with fork:
        for path, text in files.items():
            fork.write_file(path, text)
        result = run_command(fork, command, timeout)
        left: set[str] = set()
        ended = not result.timed_out and (after_any_exit or result.exit_code == 0)
        for path, text in dict(marks if ended else ()).items():
            try:
                if fork.read_file(path) == text.encode():
                    left.add(path)
            except (SandboxError, OSError):  # not written, or a sandbox the run broke: no mark either way
                pass
        return result, frozenset(left)


@dataclass(frozen=True)
class TwinRun:
    """How one canary twin's run ended."""

    twin: Twin
    result: ExecResult | None
    """None: its sandbox failed (a failure, as a canary must)."""
    unmarked: tuple[str, ...] = ()
    """The paths of `Twin.marks` its run did not leave (all of them where its sandbox failed)."""


def _run_twin(sandbox: Sandbox, twin: Twin, prepared: Prepared, timeout: float, group: SandboxGroup) -> TwinRun:
    """One canary twin in a fork of the prepared sandbox: its own processes, its own files
    (the fork is closed at once if the grading is stopped: `parallel`)."""
    assert twin.source is not None
    files = {path: twin.source if path == twin.path else text for path, text in prepared.twin_files}
    fork = group.track(fork_in_groups(sandbox))
    result, left = _run_in_fork(files, prepared.command, timeout, fork, twin.marks, after_any_exit=True)
    return TwinRun(twin, result, tuple(path for path, _ in twin.marks if path not in left))


PHASES = ("start", "setup", "tests", "canaries", "teardown")
"""Where a grading's time goes (`Runs.seconds`): starting the grading sandbox; applying the
patches, judging the tree and planning the runs; the verdict run (and its fork, where the task
has twins); the canary twins' forks and runs; closing the sandboxes."""


@dataclass(frozen=True)
class Runs:
    prepared: Prepared
    verdict: ExecResult
    twins: tuple[TwinRun, ...]
    """How each twin's run ended. Empty when the verdict run failed: no twin ran."""
    unmarked: tuple[str, ...] = ()
    """The FAIL_TO_PASS tests whose mark the verdict run did not leave (`Prepared.marks`)."""
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    """Seconds in each of `PHASES`, by the host's monotonic clock."""


class _Phases:
    """Consecutive intervals of one clock, each charged to the phase named when it ended."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.clock = clock
        self._last = clock()

    def end(self, phase: str) -> None:
        now = self.clock()
        self.seconds[phase] += now - self._last
        self._last = now


def run_tests(
    task: Task,
    patch: str,
    factory: Callable[[SandboxSpec], Sandbox],
    rng: random.Random,
    clock: Callable[[], float] = time.monotonic,
) -> Runs | str:
    """Prepare the grading sandbox, then run the tests in forks of it, so that it stays as
    prepared: no tested code ever runs in it. The verdict run first (in a fork too where the
    task has twins or marks: every run is made alike, `_run_in_fork`), its marks read back;
    when it exits 0, each twin in a fork of its own, `PARALLEL_RUNS` at once. A failed
    verdict run needs no canary: it is reward 0 whatever they would say, so a failing patch
    costs one fork and one run, and a passing one a run per required test function more.
    `clock` times the phases (`Runs.seconds`)."""
    timeout = task.limits.grading_timeout_s
    ended: list[TwinRun] = []
    phases = _Phases(clock)
    try:
        with factory(grading_spec_for(task)) as sandbox:
            phases.end("start")
            prepared = prepare(task, patch, sandbox, rng)
            phases.end("setup")
            if isinstance(prepared, str):
                return prepared
            unmarked: tuple[str, ...] = ()
            if prepared.functions:
                # A fork in the groups of the grading sandbox (an evaluation's run: its stop
                # closes the forks too, not only the grading sandbox).
                files = dict(prepared.twin_files)
                fork = fork_in_groups(sandbox)
                verdict, left = _run_in_fork(
                    files, prepared.command, timeout, fork, tuple(m for _, m in prepared.marks)
                )
                unmarked = tuple(test for test, (path, _) in prepared.marks if path not in left)
            else:
                verdict = run_command(sandbox, prepared.command, timeout)
            phases.end("tests")
            if prepared.functions and verdict.exit_code == 0 and not verdict.timed_out:
                twins, skipped = build_twins(task, prepared, rng)
                prepared = dataclasses.replace(
                    prepared, twins=tuple(twins), skipped_twins=(*prepared.skipped_twins, *skipped)
                )
                ended = _run_twins(task, sandbox, prepared, timeout)
                phases.end("canaries")
        phases.end("teardown")
    except SandboxError as exc:
        raise Crash(f"the sandbox failed during the test run: {exc}") from exc
    if verdict.timed_out:
        raise Crash(f"the test run timed out after {timeout:g} s")
    if verdict.cause in ("disk", "pids", "memory"):
        raise Crash(f"the test run hit the sandbox's {verdict.cause} limit")
    seconds = {name: round(value, 4) for name, value in phases.seconds.items()}
    return Runs(prepared, verdict, tuple(ended), unmarked=unmarked, seconds=seconds)


def _run_twins(task: Task, sandbox: Sandbox, prepared: Prepared, timeout: float) -> list[TwinRun]:
    ended: list[TwinRun] = []
    with parallel_runs(PARALLEL_RUNS) as (pool, group):
        futures = [pool.submit(_run_twin, sandbox, twin, prepared, timeout, group) for twin in prepared.twins]
        for twin, future in zip(prepared.twins, futures, strict=True):
            try:
                ended.append(future.result())
            except SandboxError as exc:
                log.warning("task %s: a canary's sandbox failed (%s): counted as a failing canary", task.id, exc)
                ended.append(TwinRun(twin, None, tuple(path for path, _ in twin.marks)))
    return ended


@dataclass(frozen=True)
class Control:
    """A run of the pristine workspace (the test patch, no agent patch): what no agent can
    write. `failure` says how it failed to reach a verdict (None: it completed); `statuses`
    are its required tests' statuses as its log reads."""

    failure: str | None
    statuses: dict[str, str]


_controls: OncePerKey[Control] = OncePerKey()


def control_run(task: Task, factory: Callable[[SandboxSpec], Sandbox]) -> Control:
    """The control run of `task`, once per task, workspace and test command for the
    process (concurrent gradings of one task wait for one run): it decides who broke a
    crashed run, and which required tests the repository itself expects to fail
    (`agent_env.grading.verdict`)."""

    def run() -> Control:
        try:
            runs = run_tests(task, "", factory, random.Random(0))
        except Crash as exc:
            return Control(str(exc), {})
        if isinstance(runs, str):  # the empty patch always applies; kept for the type
            raise GradingError(f"task {task.id}: the pristine workspace refused an empty patch: {runs[:300]}")
        statuses, _ = log_statuses(task, runs.verdict.output)
        wanted = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
        return Control(None, with_cut_ids(statuses, wanted))

    return _controls.get((task.id, task.workspace, task.grading.test_command), run)


def control_failure(task: Task, factory: Callable[[SandboxSpec], Sandbox]) -> str | None:
    """How the control run fails to reach a verdict, or None when it completes."""
    return control_run(task, factory).failure
