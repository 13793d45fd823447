"""Sandbox tests run over every backend: `local` (bubblewrap) and `docker`.

Docker tests (marked `docker`) run whenever an engine answers and the base image is built,
and are skipped with the reason otherwise. CI sets SANDBOX_REQUIRE_DOCKER=1, which turns
that skip into a failure, so that the docker tier is never skipped silently there.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes import Sandbox, SandboxSpec, make_sandbox
from sandboxes.conformance import Harness
from sandboxes.local import LocalSandbox, bwrap_available, default_layout

# "local-copy" is the local backend's layout where the host is not root (no overlay, no uid
# of its own: the process cap rests on the supervisor's watchdog alone); checked here as root.
# "local-private" is the overlay layout with a base layer of its own per sandbox (a chowned
# copy of the workspace), what the local backend falls back to where idmapped mounts are not
# available; plain "local" shares one base layer among sandboxes where they are.
BACKENDS = ["local", "local-private", "local-copy", pytest.param("docker", marks=pytest.mark.docker)]


def break_backend(sandbox: Sandbox) -> None:
    """Kill a sandbox's machinery from outside, as a crash or an engine failure would, and
    return once it is dead (a dying supervisor could otherwise still answer one request)."""
    if hasattr(sandbox, "container_id"):
        import docker.errors

        from sandboxes.docker_backend import client

        api = client().api
        api.kill(sandbox.container_id)
        with contextlib.suppress(docker.errors.NotFound):  # AutoRemove may be quicker
            api.wait(sandbox.container_id, timeout=60)
    else:
        init = sandbox._sandbox_init_pid()  # the supervisor, pid 1: killing it kills all in it
        with _pidfd(init) as handle:  # opened first: the pid cannot be reused under us
            os.kill(init, signal.SIGKILL)
            wait_for_exit(handle, timeout=60)


@contextlib.contextmanager
def _pidfd(pid: int) -> Iterator[int | None]:
    """A pidfd of `pid` (None: it is gone already), closed on leaving."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        yield None
        return
    try:
        yield handle
    finally:
        os.close(handle)


def wait_for_exit(handle: int | None, timeout: float) -> bool:
    """Wait for the process of a pidfd (`_pidfd`) to end, without polling: a pidfd becomes
    readable when its process exits (a zombie counts). True if it ended in time."""
    return handle is None or bool(select.select([handle], [], [], timeout)[0])


def wait_for_pid_exit(pid: int, timeout: float) -> bool:
    """`wait_for_exit` for a process that need not be a child of ours."""
    with _pidfd(pid) as handle:
        return wait_for_exit(handle, timeout)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def harness(backend: str, tmp_path: Path) -> Harness:
    if backend.startswith("local") and (problem := bwrap_available()) is not None:
        pytest.skip(f"local sandbox unavailable: {problem}")
    if backend == "local-private" and default_layout() != "overlay":
        pytest.skip("the overlay layout needs root")

    def make(spec: SandboxSpec) -> Sandbox:
        if backend == "local-copy":
            return LocalSandbox(spec, layout="copy")
        if backend == "local-private":
            return LocalSandbox(spec, layout="overlay", share_base=False)
        return make_sandbox(spec, backend)

    disks = []
    if backend == "docker":
        from sandboxes.docker_backend import client

        with contextlib.suppress(Exception):
            disks.append(Path(client().info()["DockerRootDir"]))
    return Harness(make=make, tmp=tmp_path, break_backend=break_backend, disks=disks)


# (attack, layouts) whose run in these layouts is `slow`: memory_split fills the sandbox's
# memory (~4.5 s a run), and the cgroup it meets is the same in every local layout, so
# `make test-fast` runs it on plain `local` only.
SLOW_IN_LAYOUTS = {"memory_split": ("local-copy", "local-private")}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        params = getattr(item, "callspec", None) and item.callspec.params
        if params and params.get("backend") in SLOW_IN_LAYOUTS.get(params.get("attack"), ()):
            item.add_marker(pytest.mark.slow)
