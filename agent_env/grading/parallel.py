"""A grading's parallel runs (the canary twins) that stop at once when the grading is stopped.

A `ThreadPoolExecutor` left by an exception waits for its running calls; a canary twin of a
SWE-bench row runs its tests for minutes, so a Ctrl-C during the canaries waited for every
twin (measured: 21 s after SIGINT on a task whose tests take 15 s; minutes on a large row).
Here each run's sandbox is registered as it starts, and an exception in the caller (an
interrupt above all) closes them all, which ends their commands, and cancels the runs not
started, before it goes on up.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from sandboxes import Sandbox, SandboxError


class TrackedSandboxes:
    """The sandboxes of one grading's parallel runs (`track` each as it starts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: list[Sandbox] = []
        self._stopped = False

    def track(self, sandbox: Sandbox) -> Sandbox:
        """`sandbox`, to be closed if the grading stops; closed at once, with a
        `SandboxError`, if it already has."""
        with self._lock:
            if not self._stopped:
                self._open.append(sandbox)
                return sandbox
        sandbox.close()
        raise SandboxError("the grading was stopped")

    def stop(self) -> None:
        """Close every tracked sandbox (their commands end: each run's call returns)."""
        with self._lock:
            self._stopped, sandboxes = True, list(self._open)
        for sandbox in sandboxes:
            with contextlib.suppress(Exception):  # already closed, or closing in its thread
                sandbox.close()


@contextlib.contextmanager
def parallel_runs(workers: int) -> Iterator[tuple[ThreadPoolExecutor, TrackedSandboxes]]:
    """A pool of `workers` threads and the `TrackedSandboxes` they register; an exception in the block
    stops the runs and cancels the queued ones before it goes on."""
    runs = TrackedSandboxes()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grading-run")
    try:
        yield pool, runs
    except BaseException:
        runs.stop()
        pool.shutdown(wait=True, cancel_futures=True)  # the running ones end with their sandboxes
        raise
    pool.shutdown(wait=True)
