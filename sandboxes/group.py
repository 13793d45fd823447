"""Sandboxes that a stop closes together: a run's or a grading's, used from worker threads.

Closing a sandbox ends the command running in it (its call returns with a `SandboxError`),
so a caller interrupted while threads wait on long commands (an evaluation's instances, a
grading's canary twins) closes the group and need not wait for them. A sandbox started after
the stop is closed at once. A fork made by `fork_in_groups` joins every group its parent is in: a
run's stop then closes the copies its sandboxes made too (a grading's untouched copy and its
canary twins), whose commands would otherwise run on after the stop.
"""

from __future__ import annotations

import contextlib
import threading
import weakref

from sandboxes.base import Sandbox, SandboxError

_groups_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Each tracked sandbox's groups (a `weakref.WeakSet`), for `fork_in_groups`."""
_groups_lock = threading.Lock()


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
                with _groups_lock:
                    _groups_of.setdefault(sandbox, weakref.WeakSet()).add(self)
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


def fork_in_groups(sandbox: Sandbox) -> Sandbox:
    """`sandbox.fork()`, joined to every group `sandbox` is in, so that the stop of any of
    them closes the fork too. A group stopped before the fork joins it closes the fork at
    once (`SandboxError`); a fork of a sandbox in no group is a plain fork."""
    child = sandbox.fork()
    with _groups_lock:
        groups = list(_groups_of.get(sandbox, ()))
    try:
        for group in groups:
            group.track(child)
    except BaseException:
        child.close()
        raise
    return child
