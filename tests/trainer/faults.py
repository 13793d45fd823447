"""Faults for the orchestrator's tests, injected where they happen in production: inside a
rollout worker's process, when it makes a sandbox. The sandboxes themselves are real.

The Nth sandbox made during a run (counted across every worker process through a locked
file) suffers the fault planned for N, once:
- `crash`: the worker process is SIGKILLed (what an OOM kill does);
- `hang`: the worker process is SIGSTOPped (alive, never answering);
- `sandbox`: the sandbox's shell is SIGKILLed right after it starts (a dead sandbox).
"""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

from sandboxes import make_sandbox


class FaultySandboxes:
    def __init__(self, state_dir: str, faults: dict[int, str]) -> None:
        self.state_dir = state_dir
        self.faults = faults

    def _next(self) -> int:
        path = Path(self.state_dir) / "sandboxes_made"
        with open(path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            count = int(handle.read() or 0) + 1
            handle.seek(0)
            handle.truncate()
            handle.write(str(count))
        return count

    def __call__(self, spec):
        fault = self.faults.get(self._next())
        if fault:
            (Path(self.state_dir) / f"{fault}.done").touch()
        if fault == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "hang":
            os.kill(os.getpid(), signal.SIGSTOP)
        sandbox = make_sandbox(spec, "local")
        if fault == "sandbox":
            os.kill(sandbox._sandbox_init_pid(), signal.SIGKILL)
        return sandbox
