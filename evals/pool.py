"""The pool: a run's instances on worker threads, each record written whole as it
finishes, and the run's sandboxes, which an interrupt closes so that the run stops within
seconds and keeps what finished."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from tqdm import tqdm

from evals.instance import attempt_instance
from evals.plan import GradePlan
from evals.runner import SandboxFactory
from sandboxes import SandboxError, make_sandbox
from sandboxes.console import deferred
from sandboxes.group import SandboxGroup
from tasks import Task

POLL_S = 0.2
STOP_WAIT_S = 5.0
"""On an interrupt, how long the running instances get to end once their sandboxes are closed."""


def progress_postfix(records: dict[str, dict]) -> dict[str, int]:
    counts = Counter(r["status"] for r in records.values())
    return {"resolved": counts["resolved"], "unresolved": counts["unresolved"], "errors": counts["error"]}


def run_pool(
    work: list[tuple[int, Task]],
    *,
    solver_factory,
    plans: dict[str, GradePlan],
    model: str,
    workers: int,
    on_done,
    progress: tqdm | None = None,
    stop=None,
) -> None:
    """Run `work` on `workers` threads; `on_done(record, trajectory)` is called in this
    thread as each instance finishes, so files are written by one thread, in finish order,
    each one whole (`deferred`). On an interrupt (KeyboardInterrupt), what finished before it
    is written, `stop()` ends the running instances (closes their sandboxes), the queue is
    dropped, and the interrupt goes on once the threads are gone (or after `STOP_WAIT_S`);
    what the stopped instances return is not written: a rerun runs them."""
    if not work:
        return
    solver = solver_factory()
    executor = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="eval-swe")
    futures: set[Future] = {
        executor.submit(attempt_instance, task, index, solver, plans[task.id], model) for index, task in work
    }

    def finish(future: Future) -> None:
        futures.discard(future)
        with deferred():  # a record is written whole, or not at all
            on_done(*future.result())
        if progress is not None:
            progress.update()

    try:
        while futures:
            # A timeout, so that this thread runs a signal's handler at once (the kernel may
            # deliver the signal to a worker thread, which cannot wake this one).
            finished, _ = wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in finished:
                finish(future)
    except KeyboardInterrupt:
        running = [f for f in futures if not f.cancel()]
        for future in [f for f in running if f.done() and f.exception() is None]:
            finish(future)  # finished before the interrupt reached this thread
        if stop is not None:
            stop()
        executor.shutdown(wait=False, cancel_futures=True)
        wait(running, timeout=STOP_WAIT_S)
        raise
    finally:
        # On an exception, do not wait for the queue: what finished is already written.
        executor.shutdown(wait=not futures, cancel_futures=True)


class RunSandboxes(SandboxGroup):
    """The sandbox factory of a run's instances, a `SandboxGroup`, so that `stop()` (on an
    interrupt) closes them: the instances running in them then end at once with an error
    nobody records, and no new sandbox starts."""

    def __init__(self, factory: SandboxFactory | None = None) -> None:
        super().__init__("the run was interrupted")
        self.factory = factory or make_sandbox

    def __call__(self, spec):
        if self.stopped:
            raise SandboxError(self.stopped_message)
        return self.track(self.factory(spec))


def sandbox_factory(backend: str) -> SandboxFactory | None:
    """How sandboxes are made: None is the default (local) backend."""
    return None if backend == "local" else (lambda spec: make_sandbox(spec, backend))


def run_sandboxes(backend: str) -> RunSandboxes:
    """The run's sandbox factory for `backend`, able to stop every sandbox on an interrupt."""
    return RunSandboxes(sandbox_factory(backend))
