"""Where commands run: the `Sandbox` protocol and its backends.

Importing this package imports no heavy dependency (torch, ray, docker): backends are
looked up by name and imported only when a sandbox of that kind is made.
"""

from __future__ import annotations

import contextlib
import importlib
import sys

from sandboxes.base import ExecResult, Mount, Sandbox, SandboxError, SandboxLimits, SandboxSpec
from sandboxes.pool import SandboxPool, started_warm

BACKENDS = {
    "local": "sandboxes.local:LocalSandbox",
    "docker": "sandboxes.docker_backend:DockerSandbox",
}

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Mount",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxPool",
    "SandboxSpec",
    "close_all",
    "make_sandbox",
    "prefork",
    "started_warm",
]


def make_sandbox(spec: SandboxSpec, backend: str = "local") -> Sandbox:
    """Start a sandbox of the named backend over `spec`."""
    if backend not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {backend!r}; known: {', '.join(BACKENDS)}")
    module, name = BACKENDS[backend].split(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except ImportError as exc:  # e.g. the docker SDK, an optional extra
        raise SandboxError(
            f"sandbox backend {backend!r} cannot load: {exc} (pip install 'agentic-rl[{backend}]')"
        ) from exc
    return cls(spec)


def prefork(sandbox: Sandbox, count: int) -> None:
    """Start `count` sandboxes ahead of as many forks of `sandbox` where its backend can
    (`LocalSandbox.prefork`), so that the forks cost a copy of what changed and not a start;
    a no-op for any other sandbox. A caller that knows forks will follow calls it before
    doing something else (a tree rollout, before its branch point's forks; never a grading,
    whose runs must not differ in age: `agent_env/grading/runs.py`)."""
    from sandboxes._channel import SupervisedSandbox

    if count > 0 and isinstance(sandbox, SupervisedSandbox):
        sandbox.prefork(count)


def close_all() -> int:
    """Close every sandbox this process has open, on every backend already in use (none is
    imported for it): what an interrupted run calls so that a build or a command in flight on
    another thread stops at once (its `exec` then raises `SandboxError`) instead of running to
    its end; a build waiting for another process's lock stops waiting the same way. Returns
    how many were open."""
    closed = 0
    if (pyenv := sys.modules.get("sandboxes.pyenv")) is not None:
        pyenv.stop_lock_waits()  # a build waiting for another process's lock holds no sandbox
    for module in BACKENDS.values():
        backend = sys.modules.get(module.split(":")[0])
        for sandbox in list(getattr(backend, "_live", ())):
            with contextlib.suppress(Exception):  # one that fails to close must not keep the rest open
                sandbox.close()
            closed += 1
    return closed
