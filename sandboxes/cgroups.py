"""A kernel cap on a local sandbox's process count: a pids cgroup of its own.

The local backend's other caps leave holes a fork bomb finds. RLIMIT_NPROC is ignored for
host uid 0, and a supervisor's watchdog is a sampler: on a loaded host it can be starved
for seconds while a bomb grows to the host's own limit (CI, stop 47: a held bomb in the
"copy" layout, run as root, reached 32,405 processes before the watchdog's first look, and
the sweep took 3.7 s more). A pids cgroup is what docker uses (`PidsLimit`): the kernel
refuses the fork past `pids.max`, whoever asks and however busy the host is.

Where a process may make one (root, with a writable pids hierarchy: cgroup v1's `pids`
mount, or cgroup v2 with the pids controller), each local sandbox gets
`<hierarchy>/agentic-rl/<owner>.<sandbox dir>` (`reaper.owner_tag()`), and bubblewrap is
started inside it (`wrap`), so every process of the sandbox is born inside. `pids.max` is
the sandbox's `pids` limit plus one for bubblewrap's own process outside the sandbox: the
sandbox's processes, its supervisor (pid 1) included, number `pids` at most, as in docker's
`PidsLimit`. Elsewhere (not root; a read-only /sys/fs/cgroup, as in most containers)
`available()` is None and the backend relies on RLIMIT_NPROC and the watchdog, as
`local.py` says.

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
EMPTY_WAIT_S = 5.0
"""How long `remove` waits for a closed sandbox's processes to leave its cgroup (the kernel
takes them out as they are reaped, moments after the kill)."""


@dataclass(frozen=True)
class Hierarchy:
    """Where this host's pids controller is mounted, and which cgroup version it is."""

    mount: Path
    version: int

    @property
    def parent(self) -> Path:
        return self.mount / GROUP


def _pids_mount() -> Hierarchy | None:
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
        if kind == "cgroup" and "pids" in options:
            return Hierarchy(where, 1)  # a v1 pids hierarchy is the one pids lives on
        if kind == "cgroup2" and v2 is None:
            with contextlib.suppress(OSError):
                if "pids" in (where / "cgroup.controllers").read_text().split():
                    v2 = Hierarchy(where, 2)
    return v2


@functools.cache
def available() -> Hierarchy | None:
    """The hierarchy local sandboxes' cgroups go in, made ready once; None where this process
    cannot make cgroups (not root, no pids controller, a read-only cgroupfs)."""
    if os.geteuid() != 0:
        return None
    hierarchy = _pids_mount()
    if hierarchy is None:
        return None
    try:
        if hierarchy.version == 2:
            # A child gets pids.max only once every ancestor enables the controller for
            # its children; the mount's root may, and agentic-rl/ holds no process itself.
            (hierarchy.mount / "cgroup.subtree_control").write_text("+pids")
        hierarchy.parent.mkdir(exist_ok=True)
        if hierarchy.version == 2:
            (hierarchy.parent / "cgroup.subtree_control").write_text("+pids")
    except OSError as exc:
        logger.debug("no pids cgroups for local sandboxes here (%s): the process cap is RLIMIT_NPROC", exc)
        return None
    return hierarchy


class PidsCgroup:
    """One sandbox's cgroup: made with its cap, a process moved in, removed when emptied."""

    def __init__(self, hierarchy: Hierarchy, name: str, limit: int) -> None:
        self.path = hierarchy.parent / name
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(limit + 1))  # + bubblewrap's own process
        except OSError:
            self.path.rmdir()
            raise

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, started inside this cgroup: a shell moves itself in, then execs it (same
        pid), so nothing the command forks is ever born outside. Moving a started process in
        instead would leave out what it forked first (the supervisor starts its shell before
        it reports ready)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *command]

    def refused(self) -> int:
        """How many forks the kernel refused here for the cap (`pids.events`' max)."""
        for line in (self.path / "pids.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "max":
                return int(value)
        return 0

    def remove(self) -> bool:
        """Remove the cgroup once its processes are gone; False if some outlived the wait
        (it is left to `reap_orphans`)."""
        return _remove_when_empty(self.path, time.monotonic() + EMPTY_WAIT_S)


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
    hierarchy = _pids_mount() if os.geteuid() == 0 else None  # looked at, not made ready
    if hierarchy is None:
        return 0
    removed = 0
    with contextlib.suppress(FileNotFoundError):
        for path in hierarchy.parent.iterdir():
            if path.is_dir() and owner_is_dead(path.name):
                with contextlib.suppress(OSError):  # still has processes, or gone already
                    path.rmdir()
                    removed += 1
    return removed
