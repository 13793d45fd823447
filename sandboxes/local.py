"""The `local` backend: bubblewrap over a copy-on-write workspace, no container engine needed.

Isolation: new pid, network, ipc and uts namespaces, so no network and no view of host
processes; the host's /usr, /bin and /lib are mounted read-only for the toolchain, the rest
of the root is a throwaway tmpfs, /tmp is a private size-capped tmpfs, and the workspace is
the only other place the sandbox can write, capped at `SandboxLimits.disk_bytes`. Every
command gets rlimits, a timeout that kills every process it left, an output cap and a
process cap (see `_supervisor.py`). The supervisor is pid 1 of the sandbox's pid namespace
(bubblewrap `--as-pid-1`: no bubblewrap init above it), not dumpable, and out of the
commands' reach; `_sandbox_init_pid()` is its host pid, and `/proc/<it>/root` the
sandbox's root as seen from the host.

Two layouts:
- "overlay" (when the host runs this as root, the normal case here): bubblewrap runs without
  a user namespace; the supervisor (root, with CAP_SYS_ADMIN, CHOWN, DAC_OVERRIDE, FOWNER
  for setup) mounts the workspace as an overlay: read-only layers + an upper directory on a
  tmpfs of the sandbox's own (`disk_bytes`, mode 0700, in memory: never the host's disk),
  then keeps only CAP_KILL/SETUID/SETGID/SETPCAP and runs commands under a uid of the
  sandbox's own with no capability, so RLIMIT_NPROC holds (it is ignored for uid 0) and
  commands cannot signal, trace or prlimit the supervisor. `fork()` copies only the upper
  directory (what changed since the last fork or start), read from
  /proc/<supervisor>/root, into a new shared read-only layer; the workspace itself is
  never copied again (beyond MAX_LAYERS layers a fork flattens them into one).
  The base layer (the workspace) is shared too, by every sandbox started from the same
  workspace while any of them lives (`shared_base_available()`, the default where the
  kernel allows): one read-only copy owned by SHARED_LAYER_OWNER, which each sandbox's
  supervisor mounts idmapped, so that its files read as the sandbox's own uid's, as a
  private copy chowned to it would (`_supervisor._idmap_layers`). Where idmapped mounts
  are not available (before Linux 5.19, or a /tmp whose filesystem cannot be idmapped)
  each sandbox copies the workspace into a base layer of its own, chowned to its uid.
- "copy" (not root): bubblewrap in a user namespace, with no capability. The workspace is
  a tmpfs of `disk_bytes` at the workdir, filled by the supervisor from a read-only bind of
  the source (`spec.workspace`, or for a fork a host copy of the parent's workspace);
  `fork()` copies it whole. Commands share the supervisor's one uid: pid 1 and
  non-dumpable still keep signals, ptrace and /proc/1/fd from them, but `prlimit` on pid 1
  is not refused (there is no second uid in an unprivileged user namespace to give them).

The process cap (`process_cap`): RLIMIT_NPROC where it holds (`_nproc_holds`: the overlay
layout's own uid; the copy layout of a non-root user on Linux >= 5.14); else, where this
process may make cgroups (root, a writable pids hierarchy), a pids cgroup of the sandbox's
own (`sandboxes/cgroups.py`). The supervisor's watchdog runs in every case, and is the cap
alone only in the copy layout as root without cgroups, or of a non-root user before 5.14.
The memory cap (`memory_cap`): RLIMIT_AS on each process, and where root may make one, a
memory cgroup of the sandbox's own on their total (as docker's); the same cgroup as the
pids one where both are needed.

Over 450 lines on purpose: one backend, whole: the bubblewrap command, the copy-on-write
layers and shared bases, the pipe transport and the sandbox class share bwrap-only state;
the contract every backend meets is `base.py`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Literal

from sandboxes import cgroups, reaper
from sandboxes._channel import SupervisedSandbox, check
from sandboxes.base import OFFLINE_HOSTS, SandboxError, SandboxSpec, copy_problem

SUPERVISOR = Path(__file__).with_name("_supervisor.py")
SUPERVISOR_IN_SANDBOX = "/opt/sandbox/supervisor.py"
COMPILED_SUPERVISOR_IN_SANDBOX = "/opt/sandbox/supervisor.pyc"
LAYERS_IN_SANDBOX = "/opt/sandbox/l"
RW_IN_SANDBOX = "/opt/sandbox/rw"
SOURCE_IN_SANDBOX = "/opt/sandbox/src"
OOM_COUNTER_IN_SANDBOX = "/opt/sandbox/oom"
"""Where the sandbox's memory cgroup's `oom_kill` counter is bound (read-only) for the supervisor."""
# What the overlay layout's supervisor starts with (it keeps KILL, SETUID, SETGID, SETPCAP).
SUPERVISOR_SETUP_CAPS = (
    "CAP_SYS_ADMIN", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER",
    "CAP_KILL", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP",
)  # fmt: skip
# Read-only host paths the toolchain needs; nothing else of the host is visible.
HOST_RO_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/alternatives")
HOST_RO_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/ssl/certs/ca-certificates.crt")
# Name resolution, for sandboxes given the network (e.g. one that pip-installs an environment).
HOST_NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Sandbox uids: far above any real account's, one per sandbox family (a sandbox and its forks
# share files, so they share a uid and hence an RLIMIT_NPROC budget).
UID_BASE, UID_SPAN = 3_000_000, 1 << 24
# The owner of shared base layers on the host: no account's and no sandbox's uid (those are
# UID_BASE and up), so nothing outside the sandboxes' idmapped mounts can own their files.
SHARED_LAYER_OWNER = UID_BASE - 1
# Beyond this many stacked layers a fork flattens the workspace into one (the overlay
# mount's option string is one page).
MAX_LAYERS = 24
READY_TIMEOUT_S = 30.0
logger = logging.getLogger(__name__)

Layout = Literal["overlay", "copy"]


@functools.cache
def bwrap_available() -> str | None:
    """Why bubblewrap cannot run here, or None when it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {probe.stderr.strip()}"
    return None


@functools.cache
def _nproc_holds(layout: Layout) -> bool:
    """Whether RLIMIT_NPROC caps a sandbox's commands, and counts only the sandbox's processes.

    "overlay": yes, commands run under a uid of the sandbox's own. "copy": commands run as
    this host user's uid, in a user namespace of the sandbox's own; since Linux 5.14 the
    kernel counts RLIMIT_NPROC per user namespace (ucounts), so the cap counts the sandbox's
    processes, not the user's others. Never for host uid 0: the kernel exempts it."""
    if layout == "overlay":
        return True
    if os.geteuid() == 0:
        return False
    release = tuple(int(part) for part in re.findall(r"\d+", os.uname().release)[:2])
    return release >= (5, 14)


@functools.cache
def default_layout() -> Layout:
    """ "overlay" where this process may mount an overlay in a sandbox (root), else "copy".

    Probed once per process (a bwrap run: 8 ms at load 2, ~50 ms at load 9), on a tmpfs of
    the probe's own: nothing on the host's disk, so nothing to leave behind when a stop cuts
    the probe short (a `sandbox-probe-*` folder outlived an interrupted validation in stress
    rounds, 2026-12-06)."""
    if os.geteuid() != 0:
        return "copy"
    probe_dir = "/tmp/overlay-probe"
    script = (
        f"mkdir -p {probe_dir}/lower {probe_dir}/rw/upper {probe_dir}/rw/work {probe_dir}/mnt && "
        f"mount -t overlay overlay -o lowerdir={probe_dir}/lower,upperdir={probe_dir}/rw/upper,"
        f"workdir={probe_dir}/rw/work {probe_dir}/mnt"
    )
    probe = subprocess.run(
        ["bwrap", "--bind", "/", "/", "--tmpfs", "/tmp", "--unshare-pid", "--cap-add", "CAP_SYS_ADMIN"]
        + ["--die-with-parent", "sh", "-c", script],
        capture_output=True,
    )
    return "overlay" if probe.returncode == 0 else "copy"


def _run(args: list[str], what: str) -> None:
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise SandboxError(f"{what}: {result.stderr.strip() or f'{args[0]} exited {result.returncode}'}")


def _copy_tree(src: Path, dst: Path) -> None:
    # cp -a keeps modes, symlinks, timestamps, xattrs (overlay's opaque marks) and device
    # nodes (its whiteouts); reflinks make it copy-on-write where the filesystem can.
    result = subprocess.run(["cp", "-a", "--reflink=auto", f"{src}/.", str(dst)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SandboxError(copy_problem(src, dst, result.stderr or f"cp exited {result.returncode}"))


class _Layer:
    """A read-only directory under sandboxes' workspaces; deleted when its last user closes.
    `shared`: owned by SHARED_LAYER_OWNER, mounted idmapped (a base layer of many families)."""

    _lock = threading.Lock()

    def __init__(self, path: Path, shared: bool = False) -> None:
        self.path = path
        self.shared = shared
        self.users = 0
        # Deleted at interpreter exit at the latest, even if a sandbox was never closed.
        self._finalizer = weakref.finalize(self, _remove_dir, path, os.getpid())

    @classmethod
    def new(cls, shared: bool = False) -> _Layer:
        path = Path(tempfile.mkdtemp(prefix="sandbox-layer-"))
        # The layer (and so its finalizer, which removes the directory) exists before anything
        # else is written: a signal that interrupts the rest leaves nothing behind at exit.
        layer = cls(path, shared)
        reaper.write_owner_file(path)
        (path / "tree").mkdir()
        return layer

    @property
    def tree(self) -> Path:
        return self.path / "tree"

    def acquire(self) -> _Layer:
        with self._lock:
            self.users += 1
        return self

    def acquire_if_alive(self) -> bool:
        """Take a use of a layer that others use now; False once its last user has let go."""
        with self._lock:
            if self.users <= 0:
                return False
            self.users += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.users -= 1
            last = self.users == 0
        if last:
            self._finalizer()


class _SharedBases:
    """The shared base layers of this process, one per workspace state: built by the first
    sandbox that starts from it, reused by every sandbox started while one of them lives."""

    _lock = threading.Lock()
    _entries: dict[tuple[str, str], tuple[threading.Lock, list[_Layer]]] = {}

    @classmethod
    def acquire(cls, workspace: Path | None) -> _Layer:
        """A use of the shared base layer of `workspace` as it is now (built if needed)."""
        key = (str(Path(workspace).resolve()) if workspace is not None else "", _tree_state(workspace))
        with cls._lock:
            for stale in [k for k, (_, held) in cls._entries.items() if held and held[0].users <= 0]:
                del cls._entries[stale]
            building, held = cls._entries.setdefault(key, (threading.Lock(), []))
        with building:  # one copy per key, even when many sandboxes start at once
            if held and held[0].acquire_if_alive():
                return held[0]
            layer = _Layer.new(shared=True)
            try:
                if workspace is not None:
                    _copy_tree(Path(workspace), layer.tree)
                owner = f"{SHARED_LAYER_OWNER}:{SHARED_LAYER_OWNER}"
                _run(["chown", "-R", "--no-dereference", owner, str(layer.tree)], "chown workspace")
            except BaseException:
                layer.acquire().release()
                raise
            held[:] = [layer.acquire()]
            return layer


def _tree_state(root: Path | None) -> str:
    """What tells one state of a folder from another without reading its files: the path,
    type, mode, size, inode, mtime and ctime of everything in it (a changed file changes
    its ctime)."""
    if root is None:
        return ""
    parts = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in [".", *sorted(dirs), *sorted(files)]:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            parts.append(
                f"{os.path.relpath(path, root)}\0{info.st_mode}\0{info.st_size}\0{info.st_ino}"
                f"\0{info.st_mtime_ns}\0{info.st_ctime_ns}"
            )
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


_probe_lock = threading.Lock()
_probed: list[bool] = []


def shared_base_available() -> bool:
    """Whether sandboxes here can share one base layer per workspace (the "overlay" layout
    with idmapped lower layers): probed once, by starting such a sandbox and writing to a
    file of its workspace as its uid."""
    with _probe_lock:
        if not _probed:
            _probed.append(_probe_shared_base())
        return _probed[0]


def _probe_shared_base() -> bool:
    if bwrap_available() is not None or default_layout() != "overlay":
        return False
    with tempfile.TemporaryDirectory(prefix="sandbox-probe-") as tmp:
        reaper.write_owner_file(Path(tmp))  # if a kill cuts the probe short, the reaper knows it
        Path(tmp, "probe.txt").write_text("a\n")
        try:
            with LocalSandbox(SandboxSpec(workspace=Path(tmp)), layout="overlay", share_base=True) as probe:
                result = probe.exec("test -O probe.txt && echo b >> probe.txt && cat probe.txt", timeout=30)
        except SandboxError as exc:
            logger.info("sandboxes copy the workspace each (no shared base layer here: %s)", str(exc)[:300])
            return False
    return result.exit_code == 0 and result.output == "a\nb\n"


def _to_the_end(step: Callable[[], object]) -> None:
    """Run a clean-up step (idempotent) to its end even if Ctrl-C or SIGTERM interrupts it,
    then re-raise the interrupt. Entry points turn the first signal into an exception in the
    main thread (`console.interrupts`), wherever it is, and a close runs there too: an
    `rmtree` cut short left a `sandbox-layer-*` folder behind a stopped validation (stress
    round 7 of 20 at load 9). Later signals are ignored while a command stops, so this ends."""
    interrupted: BaseException | None = None
    while True:
        try:
            step()
            break
        except KeyboardInterrupt as exc:
            interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


def _remove_dir(path: Path, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # never from a forked child of the owner
        _to_the_end(functools.partial(shutil.rmtree, path, ignore_errors=True))


def _teardown(
    proc: subprocess.Popen, root: Path, layers: list[_Layer], caps: list[cgroups.SandboxCgroup], owner_pid: int
) -> None:
    if os.getpid() != owner_pid:
        return
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        _to_the_end(proc.wait)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            stream.close()
    _to_the_end(functools.partial(shutil.rmtree, root, ignore_errors=True))
    for layer in layers:
        layer.release()
    for cap in caps:  # the supervisor is dead, so the kernel is taking every process out
        _to_the_end(cap.remove)


def sandbox_python() -> str:
    """The interpreter the supervisor runs on inside the sandbox: the system's python3 (its
    libraries are among the host paths the sandbox sees), else this process's own."""
    return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else os.path.realpath(sys.executable)


_compiled: dict[str, Path | None] = {}
_compiled_lock = threading.Lock()


def compiled_supervisor(python: str) -> Path | None:
    """The supervisor compiled to a `.pyc` by `python` itself (so its magic number fits), cached
    on disk by the source's hash and the interpreter's path and mtime; None where it cannot be
    made (the supervisor then starts from its source). A sandbox start otherwise compiles the
    1,100-line supervisor every time: 21.6 ms against 16.8 ms for the `.pyc`, measured
    2026-12-06 (`python3 -S` of each, median of 30)."""
    with _compiled_lock:
        known = _compiled.get(python, False)
        if known is None or (known and known.is_file()):  # made (and still there), or cannot be made
            return known
        try:
            source = SUPERVISOR.read_bytes()
            stamp = os.stat(python).st_mtime_ns
            key = hashlib.sha256(source + f"\0{python}\0{stamp}".encode()).hexdigest()[:20]
            target = Path(tempfile.gettempdir()) / "agentic-rl" / "supervisor" / f"{key}.pyc"
            if not target.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.pyc")
                compile_it = (
                    "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True, "
                    "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)"
                )
                subprocess.run(
                    [python, "-S", "-c", compile_it, str(SUPERVISOR), str(partial)],
                    check=True,
                    capture_output=True,
                    timeout=60,
                )
                os.replace(partial, target)  # whole, for other processes starting sandboxes at once
            if not all(_ours(path) for path in (target.parent, target)):
                raise OSError(f"{target} or its folder is not this user's alone")  # another user could plant it
            _compiled[python] = target
        except (OSError, subprocess.SubprocessError) as exc:
            logger.debug("the sandbox supervisor runs from its source: compiling it failed (%s)", exc)
            _compiled[python] = None
        return _compiled[python]


def _ours(path: Path) -> bool:
    """Owned by this process's user and writable by no one else."""
    info = path.stat()
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def supervisor_file() -> tuple[Path, str]:
    """(the host file, its path inside the sandbox) the supervisor starts from: its `.pyc`
    where there is one (`compiled_supervisor`), else its source."""
    compiled = compiled_supervisor(sandbox_python())
    return (compiled, COMPILED_SUPERVISOR_IN_SANDBOX) if compiled is not None else (SUPERVISOR, SUPERVISOR_IN_SANDBOX)


_live: weakref.WeakSet[LocalSandbox] = weakref.WeakSet()
"""This process's open sandboxes (`sandboxes.close_all`)."""

_spawners: dict[int, ThreadPoolExecutor] = {}
_spawners_lock = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    """The threads that start bubblewrap, alive as long as this process. Its
    --die-with-parent (PR_SET_PDEATHSIG) fires when the thread that forked it ends, not
    the process: started from a passing thread (a pool's worker, shut down after the
    start), a sandbox would be killed with it."""
    with _spawners_lock:
        pid = os.getpid()  # a forked child has the executor but not its threads: a new one
        if pid not in _spawners:
            _spawners.clear()
            _spawners[pid] = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sandbox-spawner")
        return _spawners[pid]


def _abandon(info_w: int, root: Path, caps: list[cgroups.SandboxCgroup], spawned: Future) -> None:
    """A bubblewrap started for a caller that gave up waiting (interrupted): killed, and its
    folder removed again (the caller's removal may have raced the sandbox writing into it),
    and its cgroup."""
    os.close(info_w)
    if spawned.exception() is None:
        proc = spawned.result()
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    shutil.rmtree(root, ignore_errors=True)
    for cap in caps:
        cap.remove()


class _PipeTransport:
    """The supervisor's stdin and stdout, through bubblewrap."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        # poll, not select (fds past 1024 in a busy process) nor epoll (an fd of its own).
        self.poller = select.poll()
        self.poller.register(proc.stdout.fileno(), select.POLLIN)

    def send(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise SandboxError(f"sandbox shell is gone: {exc}{self.diagnostics()}") from exc

    def recv(self, timeout: float) -> bytes | None:
        # A close from another thread (a run's stop) kills the supervisor, then closes this
        # pipe: the reader sees its end, or the closed file (ValueError), never a traceback.
        try:
            if not self.poller.poll(max(0.0, timeout) * 1000):
                return None
            return os.read(self.proc.stdout.fileno(), 1 << 20)
        except (OSError, ValueError) as exc:
            raise SandboxError(f"sandbox shell is gone: the sandbox was closed ({exc})") from exc

    def diagnostics(self) -> str:
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return ""
        try:  # closed already (a close from another thread): nothing more to say
            os.set_blocking(self.proc.stderr.fileno(), False)
            err = (self.proc.stderr.read() or b"").decode(errors="replace").strip()
        except (OSError, ValueError):
            err = ""
        return f" (status {self.proc.returncode}){': ' + err[-2000:] if err else ''}"


class LocalSandbox(SupervisedSandbox):
    """A sandbox on bubblewrap. See the module docstring for what is isolated and how."""

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        layout: Layout | None = None,
        share_base: bool | None = None,
        _fork: dict | None = None,
    ) -> None:
        """`share_base` (the "overlay" layout): start over the shared base layer of the
        workspace (True) or a private copy (False); None: shared where the kernel allows."""
        reason = bwrap_available()
        if reason:
            raise SandboxError(reason)
        self.spec = spec
        self.layout: Layout = layout or default_layout()
        self._root = Path(tempfile.mkdtemp(prefix="sandbox-"))
        reaper.write_owner_file(self._root)
        self._layers: list[_Layer] = []
        self._caps: list[cgroups.SandboxCgroup] = []
        self._source: Path | None = None  # the "copy" layout's read-only source
        self._spares: list[LocalSandbox] | None = []  # started ahead of forks (`prefork`); None once closed
        self._spares_lock = threading.Lock()
        standby = bool(_fork and _fork.get("standby"))
        self._standby: _PipeTransport | None = None  # a spare's pipes until a fork takes it over
        state = None
        try:
            if self.layout == "overlay":
                if _fork is not None:
                    self.uid, state = _fork["uid"], _fork["state"]
                    self._layers = [layer.acquire() for layer in _fork["layers"]]
                else:
                    self.uid = UID_BASE + secrets.randbelow(UID_SPAN)
                    if share_base is None:
                        share_base = shared_base_available()
                    self._checked_workspace(spec.workspace)
                    if share_base:
                        self._layers = [_SharedBases.acquire(spec.workspace)]  # a use taken for us
                    else:
                        self._layers = [self._base_layer(spec.workspace).acquire()]
            else:
                self.uid = os.getuid()
                state = _fork["state"] if _fork is not None else None
                if _fork is not None:
                    # The parent's workspace lives on its own tmpfs: a host copy of it, for
                    # the child to copy in (it is bound read-only, as `spec.workspace` is).
                    workspace = self._root / "workspace"
                    workspace.mkdir()
                    _copy_tree(_fork["workspace"], workspace)
                    self._source = workspace
                else:
                    self._source = self._checked_workspace(spec.workspace)
            self._write_identity()
            self._supervisor = supervisor_file()  # decided once: the bind and the command agree
            self._cap_processes()
            info_r, info_w = os.pipe()
            command = self.bwrap_args(info_fd=info_w) + self._program(state, standby=standby)
            for cap in self._caps:
                command = cap.wrap(command)
            spawned = _spawner().submit(
                subprocess.Popen,
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(info_w,),
            )
            try:
                self._proc = spawned.result()
            except BaseException:
                os.close(info_r)
                # It may still start: killed when it does, then its folder and cgroup go.
                abandoned, self._caps[:] = list(self._caps), []
                spawned.add_done_callback(functools.partial(_abandon, info_w, self._root, abandoned))
                raise
            os.close(info_w)
        except BaseException:
            shutil.rmtree(self._root, ignore_errors=True)
            for layer in self._layers:
                layer.release()
            for cap in self._caps:
                cap.remove()
            raise
        self._info_fd = info_r
        self._finalizer = weakref.finalize(
            self, _teardown, self._proc, self._root, self._layers, self._caps, os.getpid()
        )
        self._finalizer_info = weakref.finalize(self, os.close, info_r)
        if standby:  # started ahead of a fork: `_take_over` makes it the fork
            self._standby = _PipeTransport(self._proc)
            return
        self._init_channel(_PipeTransport(self._proc), f"local sandbox {self._root.name}", READY_TIMEOUT_S)
        _live.add(self)

    def _cap_processes(self) -> None:
        """A cgroup of the sandbox's own where this host lets us make one (root, a writable
        hierarchy: `cgroups.available()`), bubblewrap started inside it: a memory cap on the
        sandbox's total (RLIMIT_AS caps each process, not their sum), and, where RLIMIT_NPROC
        does not hold (`_nproc_holds`), a pids cap, so every process of the sandbox is born
        there and the kernel refuses each fork past `pids`, however busy the host (the
        supervisor's watchdog samples, and a starved sampler looks too late). Moving a process
        into a cgroup waits for an RCU grace period (+9 ms on a 30-40 ms start here, v1): the
        price of a kernel cap on memory, which nothing else gives the local backend."""
        pids = None if _nproc_holds(self.layout) else self.spec.limits.pids
        name = f"{reaper.owner_tag()}.{self._root.name}"
        try:
            cap = cgroups.SandboxCgroup(name, pids=pids, memory=self.spec.limits.memory_bytes)
        except OSError as exc:
            raise SandboxError(f"local sandbox {self._root.name}: cannot make its cgroup {name}: {exc}") from exc
        if cap.caps:  # none where this host lets us make no cgroup
            self._caps.append(cap)

    @property
    def process_cap(self) -> Literal["cgroup", "rlimit", "watchdog"]:
        """What holds this sandbox to `limits.pids`: the kernel, through RLIMIT_NPROC or a pids
        cgroup of its own (see the module docstring for where each applies), or else the
        supervisor's watchdog alone (it samples: a bomb may overshoot before it is swept)."""
        if _nproc_holds(self.layout):
            return "rlimit"
        return "cgroup" if any("pids" in cap.caps for cap in self._caps) else "watchdog"

    @property
    def memory_cap(self) -> Literal["cgroup", "rlimit"]:
        """What holds this sandbox to `limits.memory_bytes`: a memory cgroup of its own (the
        total of its processes, as docker's), or else RLIMIT_AS alone (each process by itself:
        many processes may together take more)."""
        return "cgroup" if any("memory" in cap.caps for cap in self._caps) else "rlimit"

    def _oom_counter(self) -> Path | None:
        """The host file counting this sandbox's out-of-memory kills (its memory cgroup's)."""
        return next((cap.oom_counter for cap in self._caps if cap.oom_counter is not None), None)

    @staticmethod
    def _checked_workspace(workspace: Path | None) -> Path | None:
        if workspace is not None and not Path(workspace).is_dir():
            raise SandboxError(f"workspace {workspace} is not a directory")
        return Path(workspace) if workspace is not None else None

    def _base_layer(self, workspace: Path | None) -> _Layer:
        source = self._checked_workspace(workspace)
        layer = _Layer.new()
        try:
            if source is not None:
                _copy_tree(source, layer.tree)
            # Files keep their modes; the owner becomes the sandbox's uid, so that its
            # commands may change what they could change before.
            _run(["chown", "-R", "--no-dereference", f"{self.uid}:{self.uid}", str(layer.tree)], "chown workspace")
        except BaseException:
            layer.acquire().release()
            raise
        return layer

    def _write_identity(self) -> None:
        # The sandbox sees only its own accounts, not the host's.
        workdir = self.spec.workdir
        (self._root / "passwd").write_text(
            "root:x:0:0:root:/root:/bin/sh\n"
            f"sandbox:x:{self.uid}:{self.uid}:sandbox:{workdir}:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        )
        (self._root / "group").write_text(f"root:x:0:\nsandbox:x:{self.uid}:\nnogroup:x:65534:\n")
        (self._root / "hosts").write_text(OFFLINE_HOSTS)
        (self._root / "host.conf").write_text("multi on\n")

    def _program(self, state: dict | None, standby: bool = False) -> list[str]:
        spec = self.spec
        limits = spec.limits
        config: dict = {
            "workdir": spec.workdir,
            "env": {
                "PATH": DEFAULT_PATH,
                "HOME": spec.workdir,
                "LANG": "C.UTF-8",
                "USER": "sandbox",
                **spec.env,
            },
            "limits": {
                "output_bytes": limits.output_bytes,
                "memory_bytes": limits.memory_bytes,
                "file_bytes": limits.file_bytes,
                "open_files": limits.open_files,
                "pids": limits.pids,
                "nproc": _nproc_holds(self.layout),
            },
            "state": state,
        }
        if standby:
            config["standby"] = True
        if self._oom_counter() is not None:
            config["oom_counter"] = OOM_COUNTER_IN_SANDBOX
        if self.layout == "overlay":
            config["overlay"] = {
                "lower": [f"{LAYERS_IN_SANDBOX}/{i}" for i in range(len(self._layers))],
                "rw": RW_IN_SANDBOX,
            }
            shared = [i for i, layer in enumerate(self._layers) if layer.shared]
            if shared:  # mounted idmapped: SHARED_LAYER_OWNER's files read as the sandbox's uid's
                config["overlay"]["idmap"] = {"owner": SHARED_LAYER_OWNER, "layers": shared}
            config["user"] = {"uid": self.uid, "gid": self.uid}
        elif self._source is not None:
            config["copy_in"] = SOURCE_IN_SANDBOX
        return [sandbox_python(), "-S", self._supervisor[1], json.dumps(config)]

    def bwrap_args(self, info_fd: int | None = None) -> list[str]:
        """The bubblewrap command line (mounts and namespaces) without the program to run."""
        spec = self.spec
        args = ["bwrap"]
        # bubblewrap makes the parents of a file it binds mode 0700: readable only by root.
        for folder in ("/etc", "/etc/ssl", "/etc/ssl/certs", "/opt", "/opt/sandbox"):
            args += ["--perms", "0755", "--dir", folder]
        for path in HOST_RO_PATHS + HOST_RO_FILES:
            args += ["--ro-bind-try", path, path]
        args += [
            "--ro-bind", str(self._root / "passwd"), "/etc/passwd",
            "--ro-bind", str(self._root / "group"), "/etc/group",
            "--proc", "/proc",
            "--dev", "/dev",
            "--perms", "1777", "--size", str(spec.limits.tmp_bytes), "--tmpfs", "/tmp",
            "--perms", "1777", "--size", str(spec.limits.tmp_bytes), "--tmpfs", "/dev/shm",
            "--ro-bind", str(self._supervisor[0]), self._supervisor[1],
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv", "PATH", DEFAULT_PATH,
            "--chdir", "/",
        ]  # fmt: skip
        if self.layout == "overlay":
            for i, layer in enumerate(self._layers):  # top-most first, as overlayfs stacks them
                args += ["--ro-bind", str(layer.tree), f"{LAYERS_IN_SANDBOX}/{i}"]
            # The upper directory: on a tmpfs of the sandbox's own, capped at `disk_bytes`
            # and reachable by root only (the supervisor), never on the host's disk.
            args += ["--perms", "0700", "--size", str(spec.limits.disk_bytes), "--tmpfs", RW_IN_SANDBOX]
            args += ["--dir", spec.workdir]
            # No user namespace: the supervisor (pid 1, root) mounts the overlay with these
            # capabilities (and DAC ones to reach the layers), keeps only KILL, SETUID, SETGID
            # and SETPCAP, and runs commands as the sandbox's uid with none.
            args += ["--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
            args += ["--cap-drop", "ALL"]
            for cap in SUPERVISOR_SETUP_CAPS:
                args += ["--cap-add", cap]
            if not spec.network:
                args.append("--unshare-net")
        else:
            # Root of a user namespace, but with no capability even there. The workspace: a
            # tmpfs capped at `disk_bytes`, filled by the supervisor from a read-only bind.
            args += ["--size", str(spec.limits.disk_bytes), "--tmpfs", spec.workdir]
            if self._source is not None:
                args += ["--ro-bind", str(self._source), SOURCE_IN_SANDBOX]
            args += ["--unshare-all", "--as-pid-1", "--cap-drop", "ALL"]
            if spec.network:
                args.append("--share-net")
        if spec.network:
            for path in HOST_NETWORK_FILES:
                args += ["--ro-bind-try", path, path]
        else:  # the host's would name hosts the sandbox cannot reach; loopback names must resolve
            # `multi on`: a name listed twice (localhost: IPv4 and IPv6) gives every address.
            args += ["--ro-bind", str(self._root / "hosts"), "/etc/hosts"]
            args += ["--ro-bind", str(self._root / "host.conf"), "/etc/host.conf"]
        if (counter := self._oom_counter()) is not None:  # the supervisor reads its kills here (cause "memory")
            args += ["--ro-bind", str(counter), OOM_COUNTER_IN_SANDBOX]
        args += self._mount_args()
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        return args

    def _mount_args(self) -> list[str]:
        """Bind mounts of `spec.mounts`, after everything else so that they may sit inside
        /tmp or /opt; their missing parents are made world-readable (bubblewrap's own are 0700)."""
        args: list[str] = []
        made = {"/", "/etc", "/etc/ssl", "/etc/ssl/certs", "/opt", "/opt/sandbox", "/tmp", "/dev", "/proc"}
        for mount in self.spec.mounts:
            if not mount.target.startswith("/"):
                raise SandboxError(f"mount target {mount.target!r} is not an absolute path")
            if not Path(mount.source).exists():
                raise SandboxError(f"mount source {mount.source} does not exist")
            for parent in reversed(Path(mount.target).parents):
                # Inside the host's read-only /usr etc. it is there already, and cannot be made.
                under_host = any(str(parent) == p or str(parent).startswith(p + "/") for p in HOST_RO_PATHS)
                if str(parent) not in made and not under_host:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(str(parent))
            args += ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]
        return args

    # -- fork and close -------------------------------------------------------------------
    def fork(self) -> LocalSandbox:
        """A new sandbox over a snapshot of this workspace, with the same cwd and exports.

        Files written outside the workspace (/tmp) are not carried over. Overlay layout:
        costs a copy of what changed since this sandbox started or last forked, and the
        start of a sandbox unless `prefork` started one ahead. Only the snapshot holds this
        sandbox's lock: forks started from several threads start their bubblewraps at once.
        """
        spare = self._spare()
        if spare is not None:
            state = self._fill(spare)
            try:
                spare._take_over(state)
                return spare
            except SandboxError as exc:  # a spare that died waiting: the fork starts anew
                logger.warning(
                    "%s: a sandbox started ahead of this fork failed (%s); starting one now", self._name, exc
                )
        with self._lock:
            state = self._state()
            if self.layout == "copy":
                return LocalSandbox(
                    replace(self.spec), layout="copy", _fork={"workspace": self._merged(), "state": state}
                )
            if len(self._layers) >= MAX_LAYERS:
                # Deep fork chains: one layer holding the whole merged workspace.
                flat = _Layer.new()
                try:
                    _copy_tree(self._merged(), flat.tree)
                except BaseException:
                    flat.acquire().release()
                    raise
                layers = [flat]
            else:
                upper = Path(f"/proc/{self._sandbox_init_pid()}/root{RW_IN_SANDBOX}/upper")
                snapshot = _Layer.new()
                try:
                    if any(upper.iterdir()):
                        _copy_tree(upper, snapshot.tree)
                    os.chown(snapshot.tree, self.uid, self.uid)
                except BaseException:
                    snapshot.acquire().release()
                    raise
                # The parent goes on writing into its upper directory; the child sees the
                # snapshot, so neither sees the other's later writes. Stacked even when
                # empty: every fork of one sandbox has the same layers, started ahead
                # (`prefork`) or not, so a grading's runs cannot be told apart by them.
                layers = [snapshot, *self._layers]
            # A use of each layer held for the child until it holds its own: the parent may
            # close (and let go of its layers) while the child starts.
            held = [layer.acquire() for layer in layers]
        try:
            return LocalSandbox(
                replace(self.spec), layout="overlay", _fork={"uid": self.uid, "layers": layers, "state": state}
            )
        finally:
            for layer in held:
                layer.release()

    def prefork(self, count: int) -> None:
        """Start `count` sandboxes ahead of as many `fork()`s (the "overlay" layout; a no-op
        in the "copy" one): each is bubblewrap and its supervisor over this sandbox's layers
        and an empty snapshot layer, started and waiting, with nothing mounted. A fork then
        takes one: it copies what changed into the snapshot layer and sends the shell's state,
        and the supervisor mounts the overlay; the start's cost (processes, a cgroup, the
        supervisor's imports: ~40 ms, most of it waiting) was paid while the caller did
        something else. Spares not taken close with this sandbox. A tree rollout starts its
        branches' sandboxes this way; a grading does not (a sandbox that waited is older, and
        a run must not be told from another: `agent_env/grading/runs.py`)."""
        if self.layout != "overlay" or len(self._layers) >= MAX_LAYERS or self.closed:
            return  # a fork flattens the layers then: a different child
        for _ in range(count):
            slot = _Layer.new()
            try:
                os.chown(slot.tree, self.uid, self.uid)
                spare = LocalSandbox(
                    replace(self.spec),
                    layout="overlay",
                    _fork={"uid": self.uid, "layers": [slot, *self._layers], "state": None, "standby": True},
                )
            except BaseException:
                slot.acquire().release()
                raise
            with self._spares_lock:
                if self._spares is not None:
                    self._spares.append(spare)
                    continue
            spare.close()  # this sandbox was closed meanwhile (another thread)
            return

    def _spare(self) -> LocalSandbox | None:
        with self._spares_lock:
            return self._spares.pop(0) if self._spares else None  # None: none, or closed

    def _fill(self, spare: LocalSandbox) -> dict:
        """Give a spare (`prefork`) what a fork gives a new sandbox: this workspace's changes,
        copied into its empty snapshot layer before the overlay that stacks it is mounted;
        returns this shell's state, for `_take_over`. Raises as `fork()` would (the spare
        closed)."""
        try:
            with self._lock:
                state = self._state()
                upper = Path(f"/proc/{self._sandbox_init_pid()}/root{RW_IN_SANDBOX}/upper")
                if any(upper.iterdir()):
                    slot = spare._layers[0].tree
                    _copy_tree(upper, slot)
                    os.chown(slot, self.uid, self.uid)
        except BaseException:
            spare.close()
            raise
        return state

    def _take_over(self, state: dict) -> None:
        """Start a spare's supervisor (waiting since `prefork`) from its parent's state; a
        spare that does not start is closed (`SandboxError`)."""
        name = f"local sandbox {self._root.name}"
        transport, self._standby = self._standby, None
        try:
            self._init_channel(transport, name, READY_TIMEOUT_S)  # its standby line: it is up
            check(self._channel.call({"state": state}, time.monotonic() + READY_TIMEOUT_S), name)
        except TimeoutError as exc:
            self.close()
            raise SandboxError(f"{name}: the supervisor did not start within {READY_TIMEOUT_S:.0f} s") from exc
        except BaseException:
            self.close()
            raise
        _live.add(self)

    def _merged(self) -> Path:
        """The workspace as the sandbox sees it, from the host (through its init's root)."""
        pid = self._sandbox_init_pid()
        return Path(f"/proc/{pid}/root{self.spec.workdir}")

    @functools.cached_property
    def _init_info(self) -> dict:
        os.set_blocking(self._info_fd, False)
        try:
            data = os.read(self._info_fd, 4096)
        except BlockingIOError:
            data = b""
        try:
            return json.loads(data)
        except ValueError as exc:
            raise SandboxError(f"{self._name}: bubblewrap gave no child pid ({data!r})") from exc

    def _sandbox_init_pid(self) -> int:
        """The host pid of the sandbox's pid 1: its supervisor (bubblewrap `--as-pid-1`)."""
        return int(self._init_info["child-pid"])

    @property
    def host_pid(self) -> int:
        """The host pid of this sandbox's bubblewrap: the root of its process tree on the host."""
        return self._proc.pid

    def footprint(self) -> tuple[list[Path], Path]:
        """Where this sandbox's files live, seen from the host (for measuring them, as
        bench.perf.density does): the read-only layer folders it stacks (shared with its forks;
        none in the "copy" layout) and its writable tmpfs (the overlay's upper directory's,
        or the "copy" layout's workspace)."""
        writable = RW_IN_SANDBOX if self.layout == "overlay" else self.spec.workdir
        return [layer.path for layer in self._layers], Path(f"/proc/{self._sandbox_init_pid()}/root{writable}")

    def close(self) -> None:
        with self._spares_lock:
            spares, self._spares = self._spares or [], None
        for spare in spares:
            spare.close()
        self._finalizer()
        self._finalizer_info()
        _live.discard(self)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> LocalSandbox:
        return self
