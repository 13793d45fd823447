"""Kernel caps on a local sandbox as a whole: a cgroup of its own, for its process count
(pids) and its memory.

The local backend's other caps leave holes. RLIMIT_NPROC is ignored for host uid 0, and a
supervisor's watchdog is a sampler: on a loaded host it can be starved for seconds while a
bomb grows to the host's own limit (CI, stop 47: a held bomb in the "copy" layout, run as
root, reached 32,405 processes before the watchdog's first look, and the sweep took 3.7 s
more). RLIMIT_AS caps each process, not their sum: 650 processes under it took 18 GB of a
24 GB host (a SWE-bench environment build whose setup.py restarted itself without end,
2026-12-06), and 8 of an agent's commands holding 96 MB each pass a 256 MB limit
(`conformance.attack_memory_split`). A cgroup is what docker uses (`PidsLimit`, `Memory`):
the kernel refuses the fork past `pids.max`, and its out-of-memory killer ends a process of
the sandbox past the memory limit, whoever asks and however busy the host is.

Where a process may make them (root, with a writable hierarchy for the controller: cgroup
v1's `pids` or `memory` mount, or cgroup v2 with the controller), each local sandbox gets
`<hierarchy>/agentic-rl/<owner>.<sandbox dir>` (`reaper.owner_tag()`) in each hierarchy its
controllers live on, and bubblewrap is started inside them (`wrap`), so every process of the
sandbox is born inside. `pids.max` is the sandbox's `pids` limit plus one for bubblewrap's
own process outside the sandbox: the sandbox's processes, its supervisor (pid 1) included,
number `pids` at most, as in docker's `PidsLimit`. The memory limit is `memory_bytes`, with
no swap; pages of the sandbox's own tmpfs folders count, as in docker. Elsewhere (not root; a
read-only /sys/fs/cgroup, as in most containers) `available()` is None and the backend relies
on its rlimits and the watchdog, as `local.py` says.

Stdlib only. The owner in each name lets `reap_orphans` remove what a killed owner left
(`reaper.reap` asks it, with the reaper's own test of an owner's death).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

GROUP = "agentic-rl"
CONTROLLERS = ("pids", "memory")
EMPTY_WAIT_S = 5.0
"""How long `remove` waits for a closed sandbox's processes to leave its cgroup (the kernel
takes them out as they are reaped, moments after the kill)."""


@dataclass(frozen=True)
class Hierarchy:
    """Where a controller of this host is mounted, and which cgroup version it is."""

    mount: Path
    version: int

    @property
    def parent(self) -> Path:
        return self.mount / GROUP


def _mount_of(controller: str) -> Hierarchy | None:
    """The hierarchy `controller` is on: its cgroup v1 mount, else a v2 mount that has it."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    v2 = None
    for line in mounts:
        fields = line.split()
        if len(fields) < 4:
            continue
        kind, where, options = fields[2], Path(fields[1]), fields[3].split(",")
        if kind == "cgroup" and controller in options:
            return Hierarchy(where, 1)  # a v1 controller lives on one hierarchy only
        if kind == "cgroup2" and v2 is None:
            with contextlib.suppress(OSError):
                if controller in (where / "cgroup.controllers").read_text().split():
                    v2 = Hierarchy(where, 2)
    return v2


@functools.cache
def available(controller: str = "pids") -> Hierarchy | None:
    """The hierarchy local sandboxes' cgroups for `controller` ("pids", "memory") go in, made
    ready once; None where this process cannot make them (not root, no such controller, a
    read-only cgroupfs)."""
    if os.geteuid() != 0:
        return None
    hierarchy = _mount_of(controller)
    if hierarchy is None:
        return None
    try:
        if hierarchy.version == 2:
            # A child gets the controller's files only once every ancestor enables it for
            # its children; the mount's root may, and agentic-rl/ holds no process itself.
            (hierarchy.mount / "cgroup.subtree_control").write_text(f"+{controller}")
        hierarchy.parent.mkdir(exist_ok=True)
        if hierarchy.version == 2:
            (hierarchy.parent / "cgroup.subtree_control").write_text(f"+{controller}")
    except OSError as exc:
        logger.debug("no %s cgroups for local sandboxes here (%s)", controller, exc)
        return None
    return hierarchy


def _limit_files(hierarchy: Hierarchy, pids: int | None, memory: int | None) -> list[tuple[str, str, bool]]:
    """(file, value, required) triples that set the caps asked of a cgroup in `hierarchy`, in
    order; a file not required is skipped where the host lacks it (swap not accounted: no swap
    to turn off)."""
    files = []
    if pids is not None:
        files.append(("pids.max", str(pids + 1), True))  # + bubblewrap's own process
    if memory is not None:
        if hierarchy.version == 2:
            files += [("memory.max", str(memory), True), ("memory.swap.max", "0", False)]
        else:  # memsw (memory + swap) may not be below the limit: set after it
            files += [("memory.limit_in_bytes", str(memory), True), ("memory.memsw.limit_in_bytes", str(memory), False)]
    return files


class SandboxCgroup:
    """One sandbox's cgroups (one in each hierarchy its controllers are on): made with their
    caps, a process started inside, removed when emptied. A controller with no hierarchy
    here (`available` is None) is left out: `caps` says which hold."""

    def __init__(self, name: str, pids: int | None = None, memory: int | None = None) -> None:
        wanted: dict[Hierarchy, dict[str, int | None]] = {}
        for controller, value in (("pids", pids), ("memory", memory)):
            hierarchy = available(controller) if value is not None else None
            if hierarchy is not None:
                wanted.setdefault(hierarchy, {"pids": None, "memory": None})[controller] = value
        self.paths: list[Path] = []
        self._pids: Path | None = None
        self.oom_counter: Path | None = None
        """The file whose `oom_kill` line counts this sandbox's out-of-memory kills."""
        try:
            for hierarchy, caps in wanted.items():
                path = hierarchy.parent / name
                path.mkdir()
                self.paths.append(path)
                for file, value, required in _limit_files(hierarchy, caps["pids"], caps["memory"]):
                    if required or (path / file).exists():
                        (path / file).write_text(value)
                if caps["pids"] is not None:
                    self._pids = path
                if caps["memory"] is not None:
                    self.oom_counter = path / ("memory.events" if hierarchy.version == 2 else "memory.oom_control")
        except OSError:
            for path in self.paths:
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise

    @property
    def caps(self) -> tuple[str, ...]:
        """The controllers this sandbox is capped by: "pids", "memory"."""
        return tuple(c for c, held in (("pids", self._pids), ("memory", self.oom_counter)) if held is not None)

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, started inside these cgroups: a shell moves itself into each (the
        cgroup.procs files are $0, $1, ...), then execs it (same pid), so nothing the command
        forks is ever born outside. Moving a started process in instead would leave out what
        it forked first (the supervisor starts its shell before it reports ready)."""
        moves = [f'echo $$ > "${i}"' for i in range(len(self.paths))]
        script = " && ".join([*moves, f"shift {len(self.paths) - 1}", 'exec "$@"'])
        return ["/bin/sh", "-c", script, *(str(p / "cgroup.procs") for p in self.paths), *command]

    def refused(self) -> int:
        """How many forks the kernel refused here for the pids cap (`pids.events`' max)."""
        if self._pids is None:
            return 0
        return _counter(self._pids / "pids.events", "max") or 0

    def oom_kills(self) -> int:
        """How many of the sandbox's processes the kernel killed for its memory cap."""
        counter = self.oom_counter
        return (_counter(counter, "oom_kill") or 0) if counter is not None else 0

    def remove(self) -> bool:
        """Remove the cgroups once their processes are gone; False if some outlived the wait
        (they are left to `reap_orphans`)."""
        deadline = time.monotonic() + EMPTY_WAIT_S
        return all([_remove_when_empty(path, deadline) for path in self.paths])


def _counter(path: Path, key: str) -> int | None:
    """The value of the `key value` line of a cgroup file."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return None


def _remove_when_empty(path: Path, deadline: float) -> bool:
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:  # EBUSY: killed processes not reaped yet
            if time.monotonic() >= deadline:
                logger.debug("cgroup %s still has processes; left to the reaper", path)
                return False
        time.sleep(0.005)


def reap_orphans(owner_is_dead: Callable[[str], bool]) -> int:
    """Remove the cgroups of sandboxes whose owner is dead (and whose processes are gone);
    `owner_is_dead` is asked about each name."""
    if os.geteuid() != 0:
        return 0
    hierarchies = {h for h in map(_mount_of, CONTROLLERS) if h is not None}  # looked at, not made ready
    removed = 0
    for hierarchy in hierarchies:
        with contextlib.suppress(FileNotFoundError):
            for path in hierarchy.parent.iterdir():
                if path.is_dir() and owner_is_dead(path.name):
                    with contextlib.suppress(OSError):  # still has processes, or gone already
                        path.rmdir()
                        removed += 1
    return removed
