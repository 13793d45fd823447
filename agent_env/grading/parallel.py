"""A grading's parallel runs (the canary twins) that stop at once when the grading is stopped.

A `ThreadPoolExecutor` left by an exception waits for its running calls; a canary twin of a
SWE-bench row runs its tests for minutes, so a Ctrl-C during the canaries waited for every
twin (measured: 21 s after SIGINT on a task whose tests take 15 s; minutes on a large row).
Here each run's sandbox joins a `sandboxes.group.SandboxGroup` as it starts, and an
exception in the caller (an interrupt above all) closes them all, which ends their
commands, and cancels the runs not started, before it goes on up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from sandboxes.group import SandboxGroup


@contextlib.contextmanager
def parallel_runs(workers: int) -> Iterator[tuple[ThreadPoolExecutor, SandboxGroup]]:
    """A pool of `workers` threads and the `SandboxGroup` their runs' sandboxes join; an
    exception in the block stops the runs and cancels the queued ones before it goes on."""
    runs = SandboxGroup("the grading was stopped")
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grading-run")
    try:
        yield pool, runs
    except BaseException:
        runs.stop()
        pool.shutdown(wait=True, cancel_futures=True)  # the running ones end with their sandboxes
        raise
    pool.shutdown(wait=True)
