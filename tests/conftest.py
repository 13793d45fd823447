"""Shared fixtures. Sandbox tests need bubblewrap; without it they are skipped with the reason.

Tests marked `docker` run whenever an engine answers and the base image is built, and are
skipped with the reason otherwise. CI sets SANDBOX_REQUIRE_DOCKER=1, which turns that skip
into a failure, so that the docker tier is never skipped silently there.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from sandboxes.local import bwrap_available

# Hypothesis's own clocks are off for the whole suite: its per-example deadline (200 ms) and
# its "too slow" health check fail a correct test on a loaded machine (a reward-file parser's
# example took 449 ms once, 14 ms on the retry, under `stress-ng` beside `make test-fast`,
# 2026-12-07). Timing is measured in benchmarks, never in tests (issue #38).
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

BWRAP_PROBLEM = bwrap_available()
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"local sandbox unavailable: {BWRAP_PROBLEM}")


STALL_S = 600.0
"""How long a long-running subprocess may go without visible progress before a test calls it
hung: the clock bounds a stall, never the whole run, so a slow (loaded) machine passes."""


def output_progress(*paths: Path) -> Callable[[], object]:
    """A progress measure for `wait_progressing`: the sizes of files a run keeps writing (its
    log, its metrics)."""
    return lambda: tuple(p.stat().st_size if p.exists() else -1 for p in paths)


def wait_progressing(
    condition: Callable[[], object], progress: Callable[[], object], what: str, *, stall_s: float = STALL_S,
    interval: float = 0.2,
):  # fmt: skip
    """Wait for `condition()` to hold and return its value, failing the test naming `what`
    only when `progress()` (e.g. `output_progress(log)`) stays the same for `stall_s`
    seconds: a hang, not a slow machine, fails it."""
    last, stalled_since = progress(), time.monotonic()
    while True:
        value = condition()
        if value:
            return value
        now = progress()
        if now != last:
            last, stalled_since = now, time.monotonic()
        elif time.monotonic() - stalled_since > stall_s:
            pytest.fail(f"no progress for {stall_s:.0f} s while waiting for {what}")
        time.sleep(interval)


def wait_exit(process, progress: Callable[[], object], what: str, *, stall_s: float = STALL_S) -> int:
    """`process.wait()` that fails the test only when `progress()` stalls for `stall_s` s."""
    wait_progressing(lambda: process.poll() is not None, progress, what, stall_s=stall_s)
    return process.returncode


def wait_until(condition: Callable[[], object], deadline: float, what: str, *, interval: float = 0.05):
    """Wait for `condition()` to hold (polled every `interval` s) and return its value; fail
    the test naming `what` once `deadline` (a `time.monotonic()` value) passes. For events
    another process signals only through the file system or its state."""
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval)


# Not `trylast`: this must run before pytest's own `-m` selection (`make test-fast` leaves the
# `ray` tier out by the marker added here); tests/*/conftest.py's hooks run before it anyway.
def pytest_collection_modifyitems(items):
    # A test on the shared Ray cluster takes a minute or more on 2 cores: the `ray` tier,
    # which `make test-fast` leaves out (tests that start Ray in a subprocess say so themselves).
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
    # The long tests first: `ray` (training runs, one to several minutes each), then `slow`,
    # then the rest (a stable sort: each group keeps its order). The two are 109 of ~2400
    # tests and half of the suite's time; collected in file order, the longest
    # (tests/trainer/test_orchestrator.py's kill-and-resume run: 2-7 minutes) came near the
    # end and ran alone while the other worker idled. `make test` hands tests out one at a
    # time (`--maxschedchunk 1`), so each worker takes the next long test as it frees up.
    items.sort(key=lambda item: 0 if item.get_closest_marker("ray") else 1 if item.get_closest_marker("slow") else 2)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # Prepared task workspaces are cached by content; one cache per test session.
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def docker_problem() -> str | None:
    try:
        from sandboxes.docker_backend import docker_available
    except ImportError as exc:  # the docker extra is not installed
        return f"the docker SDK is not installed: {exc}"
    return docker_available()


@pytest.fixture(autouse=True)
def _docker_available(request):
    if request.node.get_closest_marker("docker") and (problem := docker_problem()):
        if os.environ.get("SANDBOX_REQUIRE_DOCKER") == "1":
            pytest.fail(f"docker tier required (SANDBOX_REQUIRE_DOCKER=1) but unavailable: {problem}")
        pytest.skip(f"docker sandbox unavailable: {problem}")


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """One local Ray per test process, shared by the tests that train (starting Ray takes
    seconds). Actors see this session's task cache."""
    import ray

    from trainer.orchestrator.loop import start_ray

    os.environ["AGENTIC_RL_CACHE"] = str(tmp_path_factory.getbasetemp() / "cache")
    started = start_ray(workers=4)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(autouse=True)
def _dev_null_stays_a_device():
    """The host's /dev/null must survive every test (grading runs `git` with it as a hooks
    path and a config file): a test that turns it into a plain file fails here, by name,
    and the device is put back so that the tests after it are not blamed."""
    yield
    if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        os.unlink("/dev/null")
        os.mknod("/dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod("/dev/null", 0o666)
        pytest.fail("this test replaced the host's /dev/null with a plain file")


@pytest.fixture(autouse=True)
def _drop_console_handlers():
    """An entry point's `setup_logging()` binds a handler to the stderr of the moment (a
    test's capture): take it off after the test, so later tests do not log into a closed
    stream."""
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_agentic_rl", False)]:
        root.removeHandler(handler)


@pytest.fixture(autouse=True)
def _signal_handlers_are_put_back():
    """A test that leaves SIGINT's or SIGTERM's handler changed makes a later test of the
    same worker that relies on it fail for no reason of its own (a full run at load 22:
    `test_a_clean_up_cut_by_ctrl_c_...` "DID NOT RAISE"). The handlers are put back after
    every test, and a `SIGNAL-LEAK` warning names the test in the run's warnings summary.
    It warns rather than fails: on 2026-12-06 the fast, docker and ray tiers leaked none,
    and the slow tier one: `test_multinode`'s second Ray node leaves Ray's SIGTERM handler
    (`Node._register_shutdown_hooks`), which is Ray's to set."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = {number: now for number in before if (now := signal.getsignal(number)) is not before[number]}
    for number in changed:
        signal.signal(number, before[number] if before[number] is not None else signal.SIG_DFL)
    if changed:
        warnings.warn(f"SIGNAL-LEAK {', '.join(signal.Signals(n).name for n in changed)}: {changed}", stacklevel=1)
