"""The one logging configuration every command-line entry point uses.

Library code logs through `logging.getLogger(__name__)` and never prints; an entry point
(`python -m trainer.train`, `evals.swe`, `tasks`, `sandboxes`, `bench.*`) calls
`setup_logging()` once, first thing. It lives in the lowest layer so every layer's entry
point can share it.

User-facing output stays concise: INFO lines are the bare message, as a print would be;
warnings and errors carry their level; `AGENTIC_RL_LOG=debug` (or `verbose=True`) shows
debug lines with the logger's name. Progress bars (tqdm) write to stderr beside it.

`interrupts()` makes Ctrl-C and SIGTERM stop every entry point the same way: see below.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {message}"
        if record.levelno < logging.INFO:
            return f"[{record.name}] {message}"
        return message


def setup_logging(verbose: bool = False) -> None:
    """Send log records of this project (and warnings of others) to stderr, one line each."""
    debug = verbose or os.environ.get("AGENTIC_RL_LOG", "").lower() == "debug"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Format("%(message)s"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_agentic_rl", False)]:
        root.removeHandler(old)
    handler._agentic_rl = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in ("agent_env", "sandboxes", "tasks", "trainer", "evals", "bench", "__main__"):
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.INFO)


# -- stopping on Ctrl-C and SIGTERM --------------------------------------------------------------
# Every entry point runs its work inside `interrupts()`: the first SIGINT or SIGTERM raises
# `Interrupted` (a KeyboardInterrupt) in the main thread, so one `except KeyboardInterrupt`
# path keeps what finished, stops what runs, and `interrupted()` prints the one line and gives
# the exit status (130 for SIGINT, 143 for SIGTERM). While the command stops, further signals
# are noted and ignored; `deferred()` holds the first one back while a result is written.

STOPPING = "already stopping: finished work is kept"


class Interrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM, raised in the main thread inside `interrupts()`."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


class _State:
    active = 0
    """How many `interrupts()` blocks are open (nested ones share the first's handlers)."""
    raised: int | None = None
    """The signal already raised as `Interrupted` (later ones are ignored)."""
    signals: tuple[int, ...] = ()
    deferring = 0
    pending: int | None = None
    """A signal that arrived inside `deferred()`, raised when it ends."""


def _handler(signum: int, frame: object) -> None:
    if _State.raised is not None:
        print(f"{signal.Signals(signum).name}: {STOPPING}", file=sys.stderr, flush=True)
        return
    if _State.deferring:
        _State.pending = _State.pending or signum
        return
    _State.raised = signum
    raise Interrupted(signum)


@contextlib.contextmanager
def interrupts(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Within the block, the first of `signals` raises `Interrupted` in the main thread; later
    ones print a line and are otherwise ignored, so a second Ctrl-C cannot cut the clean-up
    short. The previous handlers come back when the block ends. Outside the main thread (where
    handlers cannot be set), the block changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _State.active:
        _State.active += 1
        try:
            yield
        finally:
            _State.active -= 1
        return
    previous = {number: signal.getsignal(number) for number in signals}
    _State.active, _State.raised, _State.pending, _State.signals = 1, None, None, signals
    for number in signals:
        signal.signal(number, _handler)
    try:
        yield
    finally:
        _State.active, _State.raised = 0, None
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def rearm() -> None:
    """Inside `interrupts()`, take SIGINT and SIGTERM back from a library that set its own
    handlers since (Ray's core does, at `ray.init`: it dumps stacks on SIGTERM)."""
    if _State.active and threading.current_thread() is threading.main_thread():
        for number in _State.signals:
            signal.signal(number, _handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold back an interrupt while the block runs (writing a finished result: it is written
    whole), then raise it. Only the main thread is ever interrupted, so other threads need
    no such block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _State.deferring += 1
    try:
        yield
    finally:
        _State.deferring -= 1
        if not _State.deferring and _State.pending is not None and _State.raised is None:
            _State.raised, signum = _State.pending, _State.pending
            _State.pending = None
            raise Interrupted(signum)


def exit_status(exc: BaseException) -> int:
    """128 + the signal: 130 for Ctrl-C (a plain KeyboardInterrupt too), 143 for SIGTERM.
    A library may turn our `Interrupted` into a plain KeyboardInterrupt (Ray's `ray.get`
    does, when the signal arrives while it waits): inside `interrupts()`, the signal it
    raised still decides, so SIGTERM stays 143."""
    return 128 + (getattr(exc, "signum", None) or _State.raised or signal.SIGINT)


def interrupted(exc: BaseException, kept: str) -> int:
    """Print the one line an interrupted command ends with (`kept`: what was kept and how
    to continue) and return its exit status."""
    print(f"interrupted: {kept}", file=sys.stderr, flush=True)
    return exit_status(exc)
