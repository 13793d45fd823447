"""Sandboxes that a stop closes together: a run's or a grading's, used from worker threads.

Closing a sandbox ends the command running in it (its call returns with a `SandboxError`),
so a caller interrupted while threads wait on long commands (an evaluation's instances, a
grading's canary twins) closes the group and need not wait for them. A sandbox started after
the stop is closed at once.
"""

from __future__ import annotations

import contextlib
import threading
import weakref

from sandboxes.base import Sandbox, SandboxError


class SandboxGroup:
    """`track` each sandbox as it starts; `stop` closes every live one. `stopped_message`
    is the error a sandbox tracked after the stop raises."""

    def __init__(self, stopped_message: str = "stopped") -> None:
        self.stopped_message = stopped_message
        self.stopped = False
        self._live: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()

    def track(self, sandbox: Sandbox) -> Sandbox:
        """`sandbox`, closed by a later `stop`; closed at once, with a `SandboxError`, if the
        group is stopped already."""
        with self._lock:
            if not self.stopped:
                self._live.add(sandbox)
                return sandbox
        sandbox.close()
        raise SandboxError(self.stopped_message)

    def stop(self) -> None:
        """Close every live sandbox of the group; later ones are closed as they start."""
        with self._lock:
            self.stopped = True
            live = list(self._live)
        for sandbox in live:
            with contextlib.suppress(Exception):  # already closed, or closing in its thread
                sandbox.close()
