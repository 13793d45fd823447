"""`OncePerKey`: the control runs' cache. One computation per key, however many threads ask."""

from __future__ import annotations

import inspect
import sys
import threading
import time

import pytest

from agent_env.grading.once import OncePerKey


def _waiting_line() -> int:
    source, first = inspect.getsourcelines(OncePerKey.get)
    return first + next(i for i, line in enumerate(source) if line.strip() == "with key_lock:")


def _wait_until_blocked(thread: threading.Thread, line: int) -> None:
    """Wait (on the thread's state, not a guess of time) until `thread` stands at `line` of
    `OncePerKey.get`: the wait for the key that another thread computes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(thread.ident)
        if frame is not None and frame.f_code is OncePerKey.get.__code__ and frame.f_lineno == line:
            return
        time.sleep(0.001)
    raise AssertionError(f"{thread.name} never reached the wait at line {line}")


def test_concurrent_callers_of_one_key_wait_for_one_computation() -> None:
    once: OncePerKey[str] = OncePerKey()
    calls: list[str] = []
    entered, release = threading.Event(), threading.Event()
    results: dict[str, str] = {}

    def slow() -> str:
        calls.append("first")
        entered.set()
        release.wait(60)
        return "control"

    def second() -> str:
        calls.append("second")
        return "again"

    first = threading.Thread(target=lambda: results.update(a=once.get("task", slow)), name="first")
    first.start()
    assert entered.wait(60)
    waiter = threading.Thread(target=lambda: results.update(b=once.get("task", second)), name="waiter")
    waiter.start()
    _wait_until_blocked(waiter, _waiting_line())
    release.set()
    first.join(60)
    waiter.join(60)
    assert calls == ["first"]
    assert results == {"a": "control", "b": "control"}
    assert len(once) == 1


def test_other_keys_are_not_held_up_by_a_computation() -> None:
    once: OncePerKey[int] = OncePerKey()
    inner: list[int] = []

    def outer() -> int:
        # Computing "b" from another thread while "a" is being computed: were keys
        # serialised, the join would time out.
        other = threading.Thread(target=lambda: inner.append(once.get("b", lambda: 2)))
        other.start()
        other.join(60)
        assert not other.is_alive()
        return 1

    assert once.get("a", outer) == 1
    assert inner == [2]
    assert once.get("b", lambda: 99) == 2


def test_a_computation_that_raises_is_not_kept() -> None:
    once: OncePerKey[int] = OncePerKey()

    def fails() -> int:
        raise RuntimeError("control sandbox died")

    with pytest.raises(RuntimeError, match="control sandbox died"):
        once.get("task", fails)
    assert len(once) == 0
    assert once.get("task", lambda: 7) == 7
    assert once.get("task", fails) == 7
