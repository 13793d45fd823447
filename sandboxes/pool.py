"""A warm pool: sandboxes started ahead of time, per spec, each handed out once.

Starting a sandbox costs a copy of its workspace and a process (local), or a container
(docker); an episode waits for it before its first turn, and again for each grading
sandbox at its end. `SandboxPool` is a sandbox factory (`spec -> Sandbox`) that keeps
`size` sandboxes started for every spec it was asked for recently (the `max_specs` most
recently asked for; a spec pushed out has its idle sandboxes closed), refilled by one
background thread. A request takes a ready one (a warm start) or, when none is ready,
starts one in the caller's thread as a plain factory would (a cold start); either way the
spec is then topped up again in the background. `started_warm(sandbox)` tells which.

Correctness: a pooled sandbox is a sandbox nobody has used: started over its spec and
handed out exactly once, never returned to the pool (a used sandbox is closed by its user,
as any other). The spec must match the request field for field (`spec_key`), and the
workspace folder must not change while the pool holds sandboxes over it (the copy is taken
when the sandbox starts; task workspaces are content-addressed folders, so they do not).

Lifetime: the pool's thread starts its sandboxes, and a local sandbox dies with the thread
that started it (bubblewrap's --die-with-parent is the thread's parent-death signal), so
the thread lives until `close()`, and a pool is closed after the episodes that use its
sandboxes. `close()` (idempotent; also at interpreter exit) stops the thread and closes
every idle sandbox, including one whose start was under way; sandboxes already handed out
belong to their users. Nothing in the pool outlives it, on Ctrl-C included: a killed process
leaves what any sandbox leaves, which the reaper removes (`python -m sandboxes reap`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable

from sandboxes.base import Sandbox, SandboxError, SandboxSpec

logger = logging.getLogger(__name__)

Factory = Callable[[SandboxSpec], Sandbox]
_warm: weakref.WeakSet = weakref.WeakSet()
"""Sandboxes a pool handed out ready-started (`started_warm`)."""
_warm_lock = threading.Lock()


def started_warm(sandbox: object) -> bool:
    """Whether `sandbox` came ready-started from a `SandboxPool` (a warm start)."""
    try:
        with _warm_lock:
            return sandbox in _warm
    except TypeError:  # not weak-referenceable: never pooled
        return False


def spec_key(spec: SandboxSpec) -> Hashable:
    """What must be equal for a pooled sandbox to serve a request: every field of the spec
    (the env as a sorted tuple, so that insertion order does not matter)."""
    parts = []
    for item in dataclasses.fields(spec):
        value = getattr(spec, item.name)
        parts.append(tuple(sorted(value.items())) if isinstance(value, dict) else value)
    return tuple(parts)


@dataclasses.dataclass
class _Slot:
    spec: SandboxSpec
    ready: deque = dataclasses.field(default_factory=deque)
    starting: int = 0
    failed: str | None = None
    """Why its last background start failed: no more are tried until it is asked for again."""


class _State:
    """Everything the pool's thread and its finalizer share (never the pool itself, so that
    an unreferenced pool is still closed at exit)."""

    def __init__(self, factory: Factory, size: int, max_specs: int) -> None:
        self.factory, self.size, self.max_specs = factory, size, max_specs
        self.changed = threading.Condition()
        self.slots: OrderedDict[Hashable, _Slot] = OrderedDict()  # least recently asked for first
        self.closed = False
        self.warm_starts = 0
        self.cold_starts = 0
        self.background_starts = 0
        self.thread: threading.Thread | None = None

    def wanted(self) -> _Slot | None:
        """The most recently asked-for spec that is short of `size` (under the lock)."""
        for slot in reversed(self.slots.values()):
            if slot.failed is None and len(slot.ready) + slot.starting < self.size:
                return slot
        return None

    def refill(self) -> None:
        """The pool's thread: start sandboxes for specs short of `size`, one at a time (a
        start is mostly CPU, and episodes need the CPUs too), until closed."""
        while True:
            with self.changed:
                slot = self.wanted()
                while slot is None and not self.closed:
                    self.changed.wait()
                    slot = self.wanted()
                if self.closed:
                    return
                slot.starting += 1
            sandbox, failure = None, None
            try:
                sandbox = self.factory(slot.spec)
            except Exception as exc:  # noqa: BLE001 - reported, and the caller's cold start raises it
                failure = f"{type(exc).__name__}: {exc}"
            with self.changed:
                slot.starting -= 1
                kept = sandbox is not None and not self.closed and self.slots.get(spec_key(slot.spec)) is slot
                if kept:
                    slot.ready.append(sandbox)
                    self.background_starts += 1
                elif failure is not None:
                    slot.failed = failure
                self.changed.notify_all()
            if failure is not None:
                logger.warning("sandbox pool: a background start failed (retried when asked again): %s", failure)
            elif not kept:
                sandbox.close()  # closed, or the spec was pushed out while it started

    def take(self, spec: SandboxSpec) -> Sandbox | None:
        """A ready sandbox for `spec`, or None; the spec is (again) the most recent, and is
        topped up in the background."""
        key = spec_key(spec)
        evicted: list[Sandbox] = []
        with self.changed:
            if self.closed:
                raise SandboxError("the sandbox pool is closed")
            slot = self.slots.get(key)
            if slot is None:
                slot = self.slots[key] = _Slot(spec)
                while len(self.slots) > self.max_specs:
                    _, old = self.slots.popitem(last=False)
                    evicted += old.ready
            self.slots.move_to_end(key)
            slot.failed = None
            sandbox = slot.ready.popleft() if slot.ready else None
            if sandbox is None:
                self.cold_starts += 1
            else:
                self.warm_starts += 1
                with contextlib.suppress(TypeError), _warm_lock:  # TypeError: not weak-referenceable
                    _warm.add(sandbox)
            self.changed.notify_all()
        for old in evicted:
            with contextlib.suppress(Exception):
                old.close()
        return sandbox

    def close(self, timeout: float) -> None:
        with self.changed:
            self.closed = True
            idle = [sandbox for slot in self.slots.values() for sandbox in slot.ready]
            for slot in self.slots.values():
                slot.ready.clear()
            self.changed.notify_all()
        for sandbox in idle:
            with contextlib.suppress(Exception):
                sandbox.close()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            # A start under way finishes first; the thread then closes that sandbox itself.
            thread.join(timeout)
            if thread.is_alive():
                logger.warning("sandbox pool: a sandbox start did not end within %.0f s of close", timeout)


class SandboxPool:
    """A sandbox factory with `size` ready-started sandboxes per recently requested spec.

    `factory` makes the sandboxes (e.g. `sandboxes.make_sandbox`); `size` 0 is
    a plain pass-through (no thread, every start cold). Use as a context manager, or call
    `close()`. Thread-safe."""

    def __init__(self, factory: Factory, size: int = 1, *, max_specs: int = 8) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"sandbox pool size must be a whole number >= 0 (0: no pool), got {size!r}")
        if not isinstance(max_specs, int) or max_specs < 1:
            raise ValueError(f"sandbox pool max_specs must be >= 1, got {max_specs!r}")
        self.size, self.max_specs = size, max_specs
        self._state = _State(factory, size, max_specs)
        self._close_timeout = 60.0
        if size > 0:
            thread = threading.Thread(target=self._state.refill, name="sandbox-pool", daemon=True)
            self._state.thread = thread
            thread.start()
        self._finalizer = weakref.finalize(self, self._state.close, self._close_timeout)

    def __call__(self, spec: SandboxSpec) -> Sandbox:
        """A sandbox over `spec`: a ready one from the pool, else one started now."""
        if self.size == 0:
            with self._state.changed:
                if self._state.closed:
                    raise SandboxError("the sandbox pool is closed")
                self._state.cold_starts += 1
            return self._state.factory(spec)
        sandbox = self._state.take(spec)
        return sandbox if sandbox is not None else self._state.factory(spec)

    def ready(self, spec: SandboxSpec | None = None) -> int:
        """Sandboxes ready now (for `spec`, or in all)."""
        with self._state.changed:
            if spec is None:
                return sum(len(slot.ready) for slot in self._state.slots.values())
            slot = self._state.slots.get(spec_key(spec))
            return len(slot.ready) if slot is not None else 0

    def wait_ready(self, spec: SandboxSpec, count: int | None = None, timeout: float | None = None) -> bool:
        """Block until `count` (default `size`) sandboxes of `spec` are ready, the spec's
        background start fails, or `timeout` passes; True when they are ready. The spec must
        have been asked for (a pool fills only what it was asked for)."""
        wanted = self.size if count is None else count
        key = spec_key(spec)

        def settled() -> bool:
            slot = self._state.slots.get(key)
            return self._state.closed or slot is None or slot.failed is not None or len(slot.ready) >= wanted

        with self._state.changed:
            self._state.changed.wait_for(settled, timeout)
            slot = self._state.slots.get(key)
            return slot is not None and len(slot.ready) >= wanted

    @property
    def counts(self) -> dict[str, int]:
        """Sandboxes handed out ready (`warm_starts`), started on request (`cold_starts`),
        and started in the background (`background_starts`), since the pool was made."""
        state = self._state
        with state.changed:
            return {
                "warm_starts": state.warm_starts,
                "cold_starts": state.cold_starts,
                "background_starts": state.background_starts,
            }

    def close(self) -> None:
        """Stop refilling and close every idle sandbox. Idempotent."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._state.closed

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
