"""Sandbox tests run over every backend: `local` (bubblewrap) and `docker`.

Docker tests (marked `docker`) run whenever an engine answers and the base image is built,
and are skipped with the reason otherwise. CI sets SANDBOX_REQUIRE_DOCKER=1, which turns
that skip into a failure, so that the docker tier is never skipped silently there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from sandboxes import Sandbox, SandboxSpec, make_sandbox
from sandboxes.conformance import Harness
from sandboxes.local import LocalSandbox, bwrap_available

# "local-copy" is the local backend's layout where the host is not root (no overlay, no uid
# of its own: the process cap rests on the supervisor's watchdog alone); checked here as root.
BACKENDS = ["local", "local-copy", pytest.param("docker", marks=pytest.mark.docker)]


def break_backend(sandbox: Sandbox) -> None:
    """Kill a sandbox's machinery from outside, as a crash or an engine failure would, and
    return once it is dead (a dying supervisor could otherwise still answer one request)."""
    if hasattr(sandbox, "container_id"):
        import docker.errors

        from sandboxes.docker_backend import client

        api = client().api
        api.kill(sandbox.container_id)
        with contextlib.suppress(docker.errors.NotFound):  # AutoRemove may be quicker
            api.wait(sandbox.container_id, timeout=10)
    else:
        init = sandbox._sandbox_init_pid()  # the supervisor, pid 1: killing it kills all in it
        os.kill(init, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(init) and time.monotonic() < deadline:
            time.sleep(0.005)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def harness(backend: str, tmp_path: Path) -> Harness:
    if backend.startswith("local") and (problem := bwrap_available()) is not None:
        pytest.skip(f"local sandbox unavailable: {problem}")

    def make(spec: SandboxSpec) -> Sandbox:
        if backend == "local-copy":
            return LocalSandbox(spec, layout="copy")
        return make_sandbox(spec, backend)

    disks = []
    if backend == "docker":
        from sandboxes.docker_backend import client

        with contextlib.suppress(Exception):
            disks.append(Path(client().info()["DockerRootDir"]))
    return Harness(make=make, tmp=tmp_path, break_backend=break_backend, disks=disks)
