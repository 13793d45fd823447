"""A fake clock, and real sandboxes that advance it by fixed amounts, so that the times an
episode records are exact: a sandbox start costs `START_S`, a fork `FORK_S`, a command with
`#slow` in it `SLOW_S`; nothing else moves the clock."""

from __future__ import annotations

from sandboxes import Sandbox, SandboxSpec, make_sandbox

START_S = 3.0
FORK_S = 0.5
SLOW_S = 2.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ClockedSandbox:
    """A real sandbox; its slow commands and forks advance `clock`."""

    def __init__(self, inner: Sandbox, clock: Clock) -> None:
        self.inner, self.clock = inner, clock
        self.spec = inner.spec

    def exec(self, command: str, timeout: float | None = None, *, fresh: bool = False):
        if "#slow" in command:
            self.clock.now += SLOW_S
        return self.inner.exec(command, timeout, fresh=fresh)

    def read_file(self, path: str) -> bytes:
        return self.inner.read_file(path)

    def write_file(self, path: str, data: bytes | str) -> None:
        self.inner.write_file(path, data)

    def fork(self) -> ClockedSandbox:
        self.clock.now += FORK_S
        return ClockedSandbox(self.inner.fork(), self.clock)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> ClockedSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def clocked_factory(clock: Clock):
    """A sandbox factory whose every start advances `clock` by `START_S`."""

    def make(spec: SandboxSpec) -> ClockedSandbox:
        clock.now += START_S
        return ClockedSandbox(make_sandbox(spec), clock)

    return make
