"""The `local` backend: a bubblewrap sandbox over a private copy of the workspace.

Isolation: new user, pid, network, ipc and uts namespaces (`--unshare-all`), so no network
and no view of host processes; the host's /usr, /bin and /lib are mounted read-only for
the toolchain, the rest of the root is a throwaway tmpfs; only the sandbox's own workspace
copy is writable and visible from the host. Every command gets rlimits, a wall-clock
timeout that kills its whole process tree, and an output cap (see `_supervisor.py`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import asdict, replace
from pathlib import Path

from sandboxes.base import ExecResult, SandboxError, SandboxSpec

SUPERVISOR = Path(__file__).with_name("_supervisor.py")
SUPERVISOR_IN_SANDBOX = "/opt/sandbox/supervisor.py"
# Read-only host paths the toolchain needs; nothing else of the host is visible.
HOST_RO_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/alternatives")
HOST_RO_FILES = (
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/ssl/certs/ca-certificates.crt",
)
PROTOCOL_SLACK_S = 10.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def bwrap_available() -> str | None:
    """Why bubblewrap cannot run here, or None when it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {probe.stderr.strip()}"
    return None


def _copy_tree(src: Path, dst: Path) -> None:
    # cp -a keeps modes, symlinks and timestamps; reflinks make it copy-on-write where the
    # filesystem supports it, and a plain copy elsewhere.
    result = subprocess.run(["cp", "-a", "--reflink=auto", f"{src}/.", str(dst)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SandboxError(f"could not copy workspace {src}: {result.stderr.strip()}")


def _terminate(proc: subprocess.Popen, root: str) -> None:
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    shutil.rmtree(root, ignore_errors=True)


class LocalSandbox:
    """A sandbox on bubblewrap. See the module docstring for what is isolated."""

    def __init__(self, spec: SandboxSpec, *, _copy_from: Path | None = None) -> None:
        reason = bwrap_available()
        if reason:
            raise SandboxError(reason)
        self.spec = spec
        self._lock = threading.Lock()
        self._root = tempfile.mkdtemp(prefix="sandbox-")
        self.workspace_path = Path(self._root) / "workspace"
        self.workspace_path.mkdir()
        source = _copy_from or spec.workspace
        try:
            if source is not None:
                if not Path(source).is_dir():
                    raise SandboxError(f"workspace {source} is not a directory")
                _copy_tree(Path(source), self.workspace_path)
            self._proc = subprocess.Popen(
                self._command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except BaseException:
            shutil.rmtree(self._root, ignore_errors=True)
            raise
        self._finalizer = weakref.finalize(self, _terminate, self._proc, self._root)
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._proc.stdout, selectors.EVENT_READ)
        self._call_raw(None, deadline=time.monotonic() + 30)  # the supervisor's "ready"

    def _command(self) -> list[str]:
        spec = self.spec
        config = {
            "limits": {**asdict(spec.limits), "workdir": spec.workdir},
            "env": {"PATH": DEFAULT_PATH, "HOME": spec.workdir, "LANG": "C.UTF-8", **spec.env},
            "isolated": True,
        }
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        return self.bwrap_args() + [python, "-S", SUPERVISOR_IN_SANDBOX, json.dumps(config)]

    def bwrap_args(self) -> list[str]:
        """The bubblewrap command line (mounts and namespaces) without the program to run."""
        spec = self.spec
        args = ["bwrap"]
        for path in HOST_RO_PATHS:
            args += ["--ro-bind-try", path, path]
        for path in HOST_RO_FILES:
            args += ["--ro-bind-try", path, path]
        args += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--tmpfs", "/tmp",
            "--bind", str(self.workspace_path), spec.workdir,
            "--ro-bind", str(SUPERVISOR), SUPERVISOR_IN_SANDBOX,
            "--chdir", spec.workdir,
            "--unshare-all",
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv", "PATH", DEFAULT_PATH,
        ]  # fmt: skip
        if spec.network:
            args.append("--share-net")
        return args

    # -- the line protocol with the supervisor ------------------------------------------
    def _call_raw(self, request: dict | None, deadline: float) -> dict:
        if self._proc.poll() is not None:
            raise SandboxError(f"sandbox shell is dead (exit {self._proc.returncode}){self._stderr()}")
        if request is not None:
            try:
                self._proc.stdin.write(json.dumps(request).encode() + b"\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                raise SandboxError(f"sandbox shell is gone: {exc}{self._stderr()}") from exc
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise SandboxError("sandbox shell stopped answering; it was killed")
            if not self._selector.select(timeout=remaining):
                continue
            chunk = os.read(self._proc.stdout.fileno(), 1 << 20)
            if not chunk:
                self._proc.wait()
                raise SandboxError(f"sandbox shell exited (status {self._proc.returncode}){self._stderr()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        response = json.loads(line)
        if "error" in response:
            if response.get("kind") == "os" and response.get("errno") in (28, 122):  # ENOSPC, EDQUOT
                raise SandboxError(f"sandbox storage full: {response['error']}")
            raise OSError(response.get("errno") or 0, response["error"])
        return response

    def _stderr(self) -> str:
        if self._proc.poll() is None:
            return ""
        err = self._proc.stderr.read().decode(errors="replace").strip()
        return f": {err}" if err else ""

    def _call(self, request: dict, timeout: float) -> dict:
        with self._lock:
            if not self._finalizer.alive:
                raise SandboxError("sandbox is closed")
            return self._call_raw(request, deadline=time.monotonic() + timeout + PROTOCOL_SLACK_S)

    # -- the Sandbox protocol -----------------------------------------------------------
    def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        timeout = self.spec.limits.timeout_s if timeout is None else timeout
        response = self._call({"op": "exec", "command": command, "timeout": timeout}, timeout)
        return ExecResult(
            exit_code=response["exit_code"],
            output=base64.b64decode(response["output"]).decode("utf-8", errors="replace"),
            truncated=response["truncated"],
            timed_out=response["timed_out"],
            seconds=response["seconds"],
        )

    def read_file(self, path: str) -> bytes:
        return base64.b64decode(self._call({"op": "read", "path": path}, 30)["data"])

    def write_file(self, path: str, data: bytes | str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self._call({"op": "write", "path": path, "data": base64.b64encode(raw).decode()}, 30)

    def fork(self) -> LocalSandbox:
        """A new sandbox over a copy of this workspace, with the same cwd and exports.

        Files written outside the workspace (e.g. /tmp) are not carried over.
        """
        with self._lock:
            state = self._call_raw({"op": "state"}, deadline=time.monotonic() + 30)
            child = LocalSandbox(replace(self.spec), _copy_from=self.workspace_path)
        child._call({"op": "set_state", **state}, 30)
        return child

    def close(self) -> None:
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
