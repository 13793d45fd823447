"""`sandboxes.group`: a stop closes every sandbox of the group, and the forks those sandboxes
made through `fork_in_groups` (a grading's untouched copy and its canary twins), so that an
interrupted evaluation does not wait for twins whose commands run on (the CI failure of
2026-12-06: `evals.swe` still running 10 s after two SIGTERMs)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sandboxes import SandboxError, SandboxSpec, make_sandbox
from sandboxes.group import SandboxGroup, fork_in_groups
from tests.conftest import needs_bwrap, wait_until

SLEEP = "61.4142"
"""The twin's command: `sleep SLEEP`, a duration no other process uses, found in /proc."""


def sleeping() -> bool:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes() == f"sleep\0{SLEEP}\0".encode():
                return True
        except OSError:
            continue
    return False


class Recorded:
    """A sandbox that records its close and makes forks of its own kind."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False
        self.forks: list[Recorded] = []

    def fork(self) -> Recorded:
        child = Recorded(f"{self.name}.{len(self.forks)}")
        self.forks.append(child)
        return child

    def close(self) -> None:
        self.closed = True


def test_a_fork_joins_every_group_of_its_parent_and_a_stop_closes_it():
    run, grading = SandboxGroup("run stopped"), SandboxGroup("grading stopped")
    parent = run.track(Recorded("grading"))
    clean = fork_in_groups(parent)  # in `run`, as its parent is
    twin = grading.track(fork_in_groups(clean))  # in `run` through `clean`, and in `grading`
    other = grading.track(Recorded("other"))
    run.stop()
    assert [parent.closed, clean.closed, twin.closed, other.closed] == [True, True, True, False]


def test_a_fork_of_a_sandbox_in_no_group_is_a_plain_fork():
    lone = Recorded("lone")
    child = fork_in_groups(lone)
    SandboxGroup().stop()
    assert child is lone.forks[0] and not child.closed


def test_a_fork_made_after_its_groups_stop_is_closed_at_once():
    run = SandboxGroup("the run was interrupted")
    parent = run.track(Recorded("grading"))
    run.stop()
    with pytest.raises(SandboxError, match="the run was interrupted"):
        fork_in_groups(parent)
    assert parent.forks and parent.forks[0].closed


@needs_bwrap
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_stopping_a_run_ends_a_command_running_in_a_fork_of_a_fork(tmp_path, backend):
    """Real sandboxes of each backend: the twin's command (a minute's sleep, seen running) ends with a `SandboxError`
    as soon as the run's group stops, which closed only the grading sandbox by itself."""
    run = SandboxGroup("the run was interrupted")
    (tmp_path / "ws").mkdir()
    grading = run.track(make_sandbox(SandboxSpec(workspace=tmp_path / "ws"), backend))
    clean = fork_in_groups(grading)
    twin = fork_in_groups(clean)
    assert twin.exec("echo ready").output.strip() == "ready"
    outcome: list[BaseException | str] = []

    def run_twin() -> None:
        try:
            outcome.append(twin.exec(f"sleep {SLEEP}", timeout=120).output)
        except SandboxError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run_twin)
    thread.start()
    try:
        wait_until(sleeping, time.monotonic() + 60, "the twin's command to start")
        run.stop()
        thread.join(60)  # ends when the stop closes the twin; a minute if it did not
        assert not thread.is_alive() and isinstance(outcome[0], SandboxError), outcome
        assert grading.closed and clean.closed and twin.closed
    finally:
        for sandbox in (twin, clean, grading):
            sandbox.close()
        thread.join()
