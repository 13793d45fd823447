"""The `Sandbox` protocol: where commands run, and what a command's run returns.

A sandbox owns a private copy of a workspace and one long-lived shell process. Commands
never share state with the host, and can never signal, trace or write to the process that
supervises them (see `_supervisor.py`); a command that misbehaves (runs forever, prints forever,
leaves children behind) is contained and reported, never allowed to hang the caller.

Failures of the sandbox itself (the shell died, the backend is missing) raise
`SandboxError`: they are infrastructure errors, never a normal command result, so that
callers (grading, rollouts) can retry instead of scoring a dead sandbox as a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

DEFAULT_IMAGE = "agentic-rl/base:bookworm"
"""The docker backend's image when a spec names none (built from sandboxes/images/base.yaml)."""


class SandboxError(RuntimeError):
    """The sandbox could not do its job (backend missing, shell died, I/O failed).

    This is an infrastructure error, distinct from a command that ran and failed.
    """


OFFLINE_HOSTS = (
    "127.0.0.1\tlocalhost localhost.localdomain\n"
    "::1\tlocalhost localhost.localdomain ip6-localhost ip6-loopback\n"
    "127.0.1.1\tsandbox\n"
)
"""/etc/hosts of a sandbox without network: the loopback names (and the sandbox's hostname)
resolve, as in the official harness's containers; tests bind servers to `localhost`."""


def copy_problem(source: Path, target: Path, stderr: str) -> str:
    """One line for a failed copy of `source` (a workspace, an environment) to `target`:
    cp's first line of complaint only (a folder changing under cp makes one line per
    file), and what to do. A cached folder that changes while it is copied is the usual
    cause (a build still writing to it), and deleting it has it built again."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    first = lines[0] if lines else "no message"
    more = f"; {len(lines) - 1} more line(s)" if len(lines) > 1 else ""
    return (
        f"could not copy {source} to {target} ({first}{more}): was it changing while copied? "
        f"Delete {source} to have it rebuilt, and run again"
    )


@dataclass(frozen=True)
class ExecResult:
    """What one command did.

    `output` is stdout and stderr interleaved, decoded as UTF-8 with invalid bytes
    replaced, and capped at the sandbox's output limit (`truncated` says so).
    `exit_code` is the shell's status: 128+N when killed by signal N.
    """

    exit_code: int
    output: str
    truncated: bool = False
    timed_out: bool = False
    seconds: float = 0.0
    cause: str | None = None
    """Why the sandbox stepped in, if it did: "timeout"; "pids" (the process cap was reached,
    e.g. by a fork bomb, and everything was killed); "file_size" (SIGXFSZ: a file grew past
    `file_bytes`); "memory" (the out-of-memory killer, where the backend can tell);
    "background" (the command returned but left processes running, which were killed);
    "disk" (after the command the workspace's disk quota, `disk_bytes`, or /tmp was full:
    the agent filled its own storage; `rm` frees it)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits applied to every command in a sandbox."""

    timeout_s: float = 30.0
    """Default wall-clock limit of one command; the whole process tree is killed at it."""
    output_bytes: int = 256 * 1024
    """Output kept per command: all of it, or its first half and its end around a line saying
    how much of the middle was dropped (a test summary comes last); `truncated` is set."""
    memory_bytes: int = 4 * 1024**3
    """Address-space limit (RLIMIT_AS) of every process a command starts, and the cap on the
    sandbox's total (a memory cgroup, no swap): docker's container, and a local sandbox's own
    where root may make one (`LocalSandbox.memory_cap`)."""
    file_bytes: int = 1024**3
    """Largest file a command may write (RLIMIT_FSIZE)."""
    open_files: int = 1024
    """RLIMIT_NOFILE of every process a command starts."""
    pids: int = 512
    """Most processes alive in the sandbox at once, its own shell included. Reaching it
    kills the running command (`cause="pids"`): the fork-bomb defence. Local: RLIMIT_NPROC
    under a uid of the sandbox's own (shared with its forks); docker: the pids cgroup."""
    cpus: float | None = 2.0
    """CPU share of the sandbox in cores (docker: a CFS quota). None: unlimited. The local
    backend has no writable cgroup to enforce it with and ignores it."""
    tmp_bytes: int = 512 * 1024**2
    """Size of the sandbox's private /tmp (a tmpfs, in memory). A command that fills it
    ends with `cause="disk"` (the agent filled its own storage: a result, not an error)."""
    disk_bytes: int = 1024**3
    """Most bytes a sandbox may add to its workspace and other writable disk (beyond /tmp).
    A command after which that storage is full ends with `cause="disk"`; writes past it
    fail with ENOSPC/EDQUOT inside the sandbox (and `write_file` raises OSError ENOSPC), the
    host's disk never gets more, and a later `rm` frees the space. Local: the overlay's
    upper directory ("overlay" layout) or the workspace copy ("copy" layout) lives on a
    tmpfs of this size (memory, or swap, never the host's disk). Docker: the container's
    writable layer is capped with `storage_opt size` where the engine's storage driver
    supports it (btrfs, zfs, overlay2 on XFS with pquota: see scripts/docker_engine.sh);
    elsewhere a warning is logged once and the sandbox runs uncapped."""


@dataclass(frozen=True)
class Mount:
    """A host directory shown inside a sandbox (a bind mount), e.g. an interpreter or a
    virtualenv built outside it. Read-only unless `writable`."""

    source: Path
    """The host directory."""
    target: str
    """Where the sandbox sees it: an absolute path."""
    writable: bool = False


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox starts from: files, image, where to run, with which limits.

    `workspace` is a host directory copied (never bound) into the sandbox at `workdir`, so
    nothing the sandbox writes reaches the original. (YAML sandbox definitions, with build
    recipes, are read by `sandboxes.images`.)
    """

    workspace: Path | None = None
    workdir: str = "/workspace"
    env: dict[str, str] = field(default_factory=dict)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    network: bool = False
    image: str | None = None
    """Docker image to run (a local tag, a built definition's image, or a registry name such
    as a SWE-bench instance image). None: the locally built base image. The local backend
    runs the host's toolchain and ignores it."""
    mounts: tuple[Mount, ...] = ()
    """Host directories bound into the sandbox (not copied: a writable one is shared with
    the host). The docker backend binds them too, so they need an engine on this host."""
    user: str | None = None
    """User to run as in a docker sandbox; None: the image's own USER (non-root in the base
    image). The local backend runs commands under an unprivileged uid of its own when the
    host runs it as root, and as the calling user otherwise."""


@runtime_checkable
class Sandbox(Protocol):
    """One isolated shell over a private workspace. Use as a context manager."""

    spec: SandboxSpec

    def exec(self, command: str, timeout: float | None = None, *, fresh: bool = False) -> ExecResult:
        """Run `command` with bash in the sandbox; the working directory and exported
        variables carry over to the next command.

        `fresh=True`: run it in a new `bash --noprofile --norc -c COMMAND` instead, with the
        sandbox's original environment (the spec's, not the persistent shell's exports), in
        the workdir, under the same user, limits and watchdogs, with stdin /dev/null and
        none of the persistent shell's fds; its exit code comes from the kernel (waitpid),
        never from anything a command could write. Nothing the agent left in its shell
        (cwd, exports, functions, aliases, traps) applies to it, and it changes none of it:
        what grading and diff extraction use."""
        ...

    def read_file(self, path: str) -> bytes:
        """Bytes of a file inside the sandbox (absolute, or relative to the workdir)."""
        ...

    def write_file(self, path: str, data: bytes | str) -> None:
        """Create or replace a file inside the sandbox, creating parent directories."""
        ...

    def fork(self) -> Sandbox:
        """An independent sandbox with a copy of this one's filesystem state."""
        ...

    def close(self) -> None:
        """Kill every process and delete the private workspace. Idempotent."""
        ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...
