"""`agent_env.grading.parallel`: a stop during a grading's parallel runs closes their
sandboxes and cancels the queued runs, instead of waiting for every run to end."""

from __future__ import annotations

import threading

import pytest

from agent_env.grading.parallel import parallel_runs
from sandboxes import SandboxError


class BlockingSandbox:
    """Stands in for a sandbox whose command runs until the sandbox is closed (a canary
    twin's test run): only its close ends `exec`."""

    def __init__(self, started: threading.Semaphore) -> None:
        self.closed = threading.Event()
        self.started = started

    def exec(self) -> str:
        self.started.release()
        if not self.closed.wait(120):
            return "ran to the end"
        raise SandboxError("sandbox shell exited")

    def close(self) -> None:
        self.closed.set()


@pytest.mark.signals
def test_a_stop_closes_the_running_sandboxes_and_cancels_the_queued_runs():
    started = threading.Semaphore(0)
    made: list[BlockingSandbox] = []
    ran: list[int] = []

    def run(index: int, tracked) -> str:
        ran.append(index)
        sandbox = tracked.track(BlockingSandbox(started))
        made.append(sandbox)
        return sandbox.exec()

    with pytest.raises(KeyboardInterrupt), parallel_runs(2) as (pool, tracked):
        futures = [pool.submit(run, index, tracked) for index in range(5)]
        for _ in range(2):  # both workers are inside a run's command
            assert started.acquire(timeout=60)
        raise KeyboardInterrupt  # Ctrl-C while they run
    assert sorted(ran) == [0, 1] and all(sandbox.closed.is_set() for sandbox in made)
    assert [f.cancelled() for f in futures] == [False, False, True, True, True]
    for future in futures[:2]:
        with pytest.raises(SandboxError):  # ended by the close, not run to the end
            future.result()


@pytest.mark.signals
def test_a_sandbox_that_starts_after_the_stop_is_closed_at_once():
    started = threading.Semaphore(0)
    with pytest.raises(KeyboardInterrupt), parallel_runs(1) as (_, tracked):
        raise KeyboardInterrupt
    late = BlockingSandbox(started)
    with pytest.raises(SandboxError, match="stopped"):
        tracked.track(late)
    assert late.closed.is_set()


def test_without_a_stop_every_run_ends_on_its_own():
    with parallel_runs(2) as (pool, tracked):
        results = list(pool.map(lambda n: n * n, range(5)))
    assert results == [0, 1, 4, 9, 16]
