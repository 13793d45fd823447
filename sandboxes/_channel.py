"""The host's side of the supervisor's line protocol, shared by every backend.

A backend supplies a `Transport` (how bytes reach the supervisor: pipes to bubblewrap, an
attached Docker socket) and a `close`; `SupervisedSandbox` supplies `exec`, `read_file`,
`write_file` and the context manager on top of it, so the backends differ only in how a
sandbox is started, forked and torn down.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from abc import ABC, abstractmethod
from typing import Protocol

from sandboxes.base import ExecResult, SandboxError, SandboxSpec

# How long past a command's own timeout the supervisor may take to answer (killing a
# process tree, draining output) before the sandbox is declared dead.
PROTOCOL_SLACK_S = 10.0
FILE_OP_TIMEOUT_S = 60.0


class Transport(Protocol):
    """A byte stream to and from one supervisor."""

    def send(self, data: bytes) -> None:
        """Write all of `data`; raise `SandboxError` if the other end is gone."""
        ...

    def recv(self, timeout: float) -> bytes | None:
        """Some bytes; b"" at end of stream; None if nothing came within `timeout`."""
        ...

    def diagnostics(self) -> str:
        """What the backend knows about why the supervisor is gone (stderr, exit status)."""
        ...


class SupervisorChannel:
    """Requests and responses, one JSON object per line."""

    def __init__(self, transport: Transport, name: str) -> None:
        self.transport = transport
        self.name = name
        self._buffer = b""

    def receive(self, deadline: float) -> dict:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.name}: supervisor stopped answering")
            chunk = self.transport.recv(remaining)
            if chunk is None:
                continue
            if chunk == b"":
                raise SandboxError(f"{self.name}: sandbox shell exited{self.transport.diagnostics()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError as exc:
            raise SandboxError(f"{self.name}: garbled reply from the supervisor: {line[:200]!r}") from exc

    def call(self, request: dict, deadline: float) -> dict:
        """The raw reply (see `check`); `SandboxError` if the supervisor is gone."""
        self.transport.send(json.dumps(request).encode() + b"\n")
        return self.receive(deadline)


def check(response: dict, name: str) -> dict:
    """Turn a supervisor error reply into the exception a caller expects."""
    if "error" not in response:
        return response
    kind = response.get("kind")
    if kind == "os":
        # Errors of the caller's own making (a missing file) are plain OSErrors, subclassed
        # by errno (FileNotFoundError, IsADirectoryError, ...).
        raise OSError(response.get("errno") or 0, response["error"])
    raise SandboxError(f"{name}: {response['error']}")


class SupervisedSandbox(ABC):
    """`exec`, `read_file`, `write_file` over a `SupervisorChannel`; one request at a time.

    Subclasses set `spec` and call `_init_channel`, and implement `close`, `closed`, `fork`.
    """

    spec: SandboxSpec
    _channel: SupervisorChannel
    _name: str

    def _init_channel(self, transport: Transport, name: str, ready_timeout: float) -> dict:
        self._lock = threading.Lock()
        self._name = name
        self._channel = SupervisorChannel(transport, name)
        try:
            return check(self._channel.receive(time.monotonic() + ready_timeout), name)
        except TimeoutError as exc:
            raise SandboxError(f"{name}: the supervisor did not start within {ready_timeout:.0f} s") from exc

    @property
    @abstractmethod
    def closed(self) -> bool: ...

    @abstractmethod
    def close(self) -> None:
        """Kill every process and release the sandbox's storage. Idempotent."""

    @abstractmethod
    def fork(self) -> SupervisedSandbox:
        """An independent sandbox with a copy of this one's filesystem, cwd and exports."""

    def prefork(self, count: int) -> None:
        """Start `count` sandboxes ahead of as many `fork()`s, where the backend can (the
        local one); none here. A hint: a fork works the same with or without it."""
        return None  # the default: this backend starts nothing ahead

    def _call(self, request: dict, timeout: float) -> dict:
        with self._lock:
            return self._call_locked(request, timeout)

    def _call_locked(self, request: dict, timeout: float) -> dict:
        if self.closed:
            raise SandboxError(f"{self._name}: sandbox is closed")
        try:
            response = self._channel.call(request, time.monotonic() + timeout)
        except TimeoutError as exc:
            # A supervisor that misses its own deadline by this much is wedged; a sandbox in
            # an unknown state must not be reused.
            self.close()
            raise SandboxError(f"{exc}; the sandbox was killed") from exc
        except SandboxError:
            self.close()  # the supervisor is gone: release what is left of the sandbox
            raise
        return check(response, self._name)

    def exec(self, command: str, timeout: float | None = None, *, fresh: bool = False) -> ExecResult:
        """See `Sandbox.exec`; `fresh` runs the command in a new bash, not the persistent one."""
        timeout = self.spec.limits.timeout_s if timeout is None else timeout
        request = {"op": "exec", "command": command, "timeout": timeout}
        if fresh:
            request["fresh"] = True
        response = self._call(request, timeout + PROTOCOL_SLACK_S)
        return ExecResult(
            exit_code=response["exit_code"],
            output=base64.b64decode(response["output"]).decode("utf-8", errors="replace"),
            truncated=response["truncated"],
            timed_out=response["timed_out"],
            seconds=response["seconds"],
            cause=response.get("cause"),
        )

    def read_file(self, path: str) -> bytes:
        return base64.b64decode(self._call({"op": "read", "path": path}, FILE_OP_TIMEOUT_S)["data"])

    def write_file(self, path: str, data: bytes | str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self._call({"op": "write", "path": path, "data": base64.b64encode(raw).decode()}, FILE_OP_TIMEOUT_S)

    def _state(self) -> dict:
        """The shell's cwd and exports, for a fork to start from (caller holds the lock)."""
        return self._call_locked({"op": "state"}, FILE_OP_TIMEOUT_S)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
