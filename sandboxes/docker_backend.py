"""The `docker` backend: one container per sandbox, driven through the docker SDK.

One persistent process per container: the container's main process is the supervisor
(`_supervisor.py`, passed as `python3 -c SOURCE`, so nothing is bound from the host and a
remote engine works too), and the host talks to it over the container's attach socket
(stdin, and stdout/stderr multiplexed in 8-byte-header frames). A round trip is a socket
write and read through dockerd, ~0.2 ms, where `docker exec` per command costs ~100 ms.

Hardened by default (each knob comes from `SandboxSpec`/`SandboxLimits`): no network,
no-new-privileges, a pids limit, a memory limit without swap, a CPU quota, a size-capped
/tmp and /dev/shm, a size-capped writable layer (`disk_bytes`: `storage_opt size` where the
engine's storage driver supports it, probed once per engine (on btrfs the size counts the
image too, so the image's size is added); elsewhere, as with overlay2 on ext4, the host
watches the container's upper directory while a command runs and stops the command that
grows it past the cap, `_DiskWatch`), no logging of the protocol. The container starts as root with every capability
dropped but CAP_KILL/SETUID/SETGID/SETPCAP: that is the supervisor (pid 1, not dumpable),
which runs commands as the spec's user or the image's USER (resolved inside the container,
from its /etc/passwd) with no capability at all, so they cannot signal, trace or write to
it; a root USER (SWE-bench images) still gets uid 0 but an empty bounding set. A fork
passes the user along (its commit's USER is the supervisor's root). Every container is labelled with its owner (pid, start time, pid
namespace, boot id) and run id; `sandboxes.reaper` removes those whose owner died. The
container also dies by itself when its owner does: stdin is closed when the attaching
process goes away (StdinOnce), the supervisor exits on end of input, and AutoRemove
deletes the container.

Workspaces: a `spec.workspace` is baked into an image layer once (cached by the content
hash of the workspace, the base image and the owner), so that a container's writable layer
holds only what the sandbox changed. `fork()` creates a container of the same image,
copies the parent's writable layer (its overlay upper directory, on this host) into the new
one's before it starts, and starts it with the same cwd and exports; where the engine's
layers are not on this host, it commits the running container instead (the supervisor is
idle between commands and nothing else survives a command, so no pause is needed) and
starts a new container from that image. The copy measured 0.59x the commit (paired, 5 MB
changed, docs/sandboxes.md).

Over 450 lines on purpose: one backend, whole: the engine client, the image and workspace
layers, the disk watch, the attach transport and the sandbox class share docker-only state
(labels, cleanup hooks, the quota driver) that no other module uses; the contract every
backend meets is `base.py`.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import logging
import os
import select
import signal
import socket
import stat
import struct
import subprocess
import tarfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from sandboxes import reaper
from sandboxes._channel import SupervisedSandbox
from sandboxes.base import DEFAULT_IMAGE, OFFLINE_HOSTS, ExecResult, SandboxError, SandboxSpec, copy_problem

SUPERVISOR_SOURCE = Path(__file__).with_name("_supervisor.py").read_text()
BASE_DEFINITION = Path(__file__).with_name("images") / "base.yaml"
WORKSPACE_REPO = "agentic-rl/workspace"
FORK_REPO = "agentic-rl/fork"
READY_TIMEOUT_S = 60.0
API_TIMEOUT_S = 120
# Connections to the engine the process keeps open for reuse (the SDK's default is 10): one
# per thread that starts, drives or closes a sandbox at once. Past it, every call of one
# more thread opens a connection, uses it once and drops it with a warning.
API_POOL_SIZE = 128
# Errors that mean the engine, not the sandbox's command, failed.
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)

# What the supervisor (the container's pid 1, root) keeps; commands run under the image's
# USER with no capability at all (for a root USER the supervisor empties their bounding set).
SUPERVISOR_CAPS = ["KILL", "SETUID", "SETGID", "SETPCAP"]

_client_lock = threading.Lock()
_clients: dict[str, docker.DockerClient] = {}
_quota_lock = threading.Lock()
_quota: dict[str, str | None] = {}  # engine key -> its storage driver if it caps a container's disk
_quota_warned = False
logger = logging.getLogger(__name__)


def client() -> docker.DockerClient:
    """The process's docker client for the engine DOCKER_HOST names (or the default)."""
    key = os.environ.get("DOCKER_HOST", "")
    with _client_lock:
        if key not in _clients:
            try:
                made = docker.from_env(timeout=API_TIMEOUT_S, max_pool_size=API_POOL_SIZE)
                made.ping()
            except ENGINE_ERRORS as exc:
                raise SandboxError(f"no Docker engine at {key or 'the default socket'}: {exc}") from exc
            _clients[key] = made
            _install_hooks(made)
        return _clients[key]


def disk_quota_driver(engine: docker.DockerClient) -> str | None:
    """The engine's storage driver if it caps a container's writable layer
    (`storage_opt size`), else None (probed once per engine: a container created with it)."""
    global _quota_warned
    key = os.environ.get("DOCKER_HOST", "")
    with _quota_lock:
        if key in _quota:
            return _quota[key]
    try:
        driver = engine.info().get("Driver", "")
        probe = engine.api.create_container(
            DEFAULT_IMAGE if _image_present(engine, DEFAULT_IMAGE) else "hello-world",
            command=["true"],
            entrypoint=[],
            labels=reaper.labels("probe"),
            host_config=engine.api.create_host_config(storage_opt={"size": "1G"}),
        )
        engine.api.remove_container(probe["Id"], force=True)
        found: str | None = driver
        reason = ""
    except ENGINE_ERRORS as exc:
        found = None
        reason = str(exc)
    with _quota_lock:
        _quota[key] = found
        if found is None and not _quota_warned:
            _quota_warned = True
            logger.info(
                "the Docker engine's storage cannot cap a container's disk (%s): the host watches "
                "each sandbox's writable layer instead",
                reason[:200],
            )
    return found


def _image_present(engine: docker.DockerClient, name: str) -> bool:
    try:
        engine.images.get(name)
        return True
    except ENGINE_ERRORS:
        return False


def docker_available(image: str | None = DEFAULT_IMAGE) -> str | None:
    """Why a docker sandbox cannot start here (no engine, image not built), or None."""
    try:
        engine = client()
    except SandboxError as exc:
        return str(exc)
    if image is not None:
        try:
            engine.images.get(image)
        except docker.errors.ImageNotFound:
            return f"image {image} is not built (python -m sandboxes build {BASE_DEFINITION})"
        except ENGINE_ERRORS as exc:
            return f"the Docker engine failed: {exc}"
    return None


# -- orphans: at start, at exit, on SIGTERM ------------------------------------------------
_live: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
_pending_images: set[str] = set()
_hooks_lock = threading.Lock()
_hooks_installed = False


def _install_hooks(engine: docker.DockerClient) -> None:
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        _hooks_installed = True
    with contextlib.suppress(*ENGINE_ERRORS):
        reaper.reap_docker(engine)  # what dead processes left behind
    atexit.register(_cleanup, engine)
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_IGN:

            def on_sigterm(signum: int, frame: Any) -> None:
                _cleanup(engine)
                if callable(previous):
                    previous(signum, frame)
                else:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    os.kill(os.getpid(), signal.SIGTERM)

            signal.signal(signal.SIGTERM, on_sigterm)


def _cleanup(engine: docker.DockerClient) -> None:
    """Close this process's sandboxes, drop its fork images, and reap other orphans."""
    for sandbox in list(_live):
        with contextlib.suppress(Exception):
            sandbox.close()
    _remove_pending_images(engine)
    with contextlib.suppress(*ENGINE_ERRORS):
        reaper.reap_docker(engine)


def _remove_pending_images(engine: docker.DockerClient) -> None:
    # A fork of a fork is a child image of its parent's, and the parent image cannot go
    # before it; so retry in passes, and keep what still cannot go for the next close.
    progress = True
    while progress and _pending_images:
        progress = False
        for image in list(_pending_images):
            try:
                engine.images.remove(image, force=False, noprune=False)
            except docker.errors.ImageNotFound:
                pass
            except ENGINE_ERRORS:
                continue
            _pending_images.discard(image)
            progress = True


# -- images ---------------------------------------------------------------------------------
def ensure_image(engine: docker.DockerClient, name: str) -> Any:
    """The image `name`: present locally, or pulled (never for this repo's own images)."""
    try:
        return engine.images.get(name)
    except docker.errors.ImageNotFound:
        pass
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"Docker engine failed looking up image {name}: {exc}") from exc
    if name.startswith("agentic-rl/"):
        raise SandboxError(
            f"docker image {name} is not built; build it with `python -m sandboxes build {BASE_DEFINITION}`"
            if name == DEFAULT_IMAGE
            else f"docker image {name} is not built; build its sandbox definition with `python -m sandboxes build DEF`"
        )
    logger.info("pulling docker image %s ...", name)
    try:
        return engine.images.pull(name)
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"docker image {name} is not present and could not be pulled: {exc}") from exc


_ids_cache: dict[tuple[str, str], tuple[int, int]] = {}


def _user_ids(engine: docker.DockerClient, image: Any, user: str) -> tuple[int, int]:
    """Numeric uid and gid of `user` ("name", "uid", "uid:gid", "" for root) in `image`."""
    name, _, group = user.partition(":")
    if not name or name == "root":
        return 0, 0
    if name.isdigit() and (not group or group.isdigit()):
        return int(name), int(group or name)
    key = (image.id, user)
    if key not in _ids_cache:
        probe = engine.api.create_container(image.id, command=["true"], entrypoint=[], labels=reaper.labels("probe"))
        try:
            stream, _ = engine.api.get_archive(probe["Id"], "/etc/passwd")
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
                member = archive.next()
                text = archive.extractfile(member).read().decode() if member else ""
        finally:
            engine.api.remove_container(probe["Id"], force=True)
        for line in text.splitlines():
            fields = line.split(":")
            if len(fields) >= 4 and fields[0] == name:
                _ids_cache[key] = (int(fields[2]), int(group) if group.isdigit() else int(fields[3]))
                break
        else:
            raise SandboxError(f"user {name!r} does not exist in image {image.tags or image.id}")
    return _ids_cache[key]


def workspace_key(root: Path, *parts: str) -> str:
    """Content hash of a workspace (names, modes, bytes, link targets) plus `parts`."""
    digest = hashlib.sha256("\0".join(parts).encode())
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        digest.update(f"\0{path.relative_to(root)}\0{info.st_mode:o}\0".encode())
        if stat.S_ISLNK(info.st_mode):
            digest.update(os.readlink(path).encode())
        elif stat.S_ISREG(info.st_mode):
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def _tar_chunks(root: Path, workdir: str, uid: int, gid: int) -> Iterator[bytes]:
    """The workspace as a tar stream rooted at `workdir`, owned by uid:gid, in chunks."""
    buffer = io.BytesIO()
    arcroot = workdir.strip("/")

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
        return info

    with tarfile.open(fileobj=buffer, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        archive.add(root, arcname=arcroot, recursive=False, filter=owned)
        for path in sorted(root.rglob("*")):
            archive.add(path, arcname=f"{arcroot}/{path.relative_to(root)}", recursive=False, filter=owned)
            if buffer.tell() > 1 << 20:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
    yield buffer.getvalue()


def workspace_image(engine: docker.DockerClient, base: Any, workspace: Path, workdir: str, user: str) -> str:
    """An image of `base` with `workspace` at `workdir` owned by `user`; built once per content."""
    uid, gid = _user_ids(engine, base, user)
    key = workspace_key(workspace, base.id, workdir, f"{uid}:{gid}")[:24]
    tag = f"{WORKSPACE_REPO}:{key}"
    with contextlib.suppress(docker.errors.ImageNotFound):
        return engine.images.get(tag).id
    scratch = engine.api.create_container(base.id, command=["true"], entrypoint=[], labels=reaper.labels("probe"))
    try:
        if not engine.api.put_archive(scratch["Id"], "/", _tar_chunks(workspace, workdir, uid, gid)):
            raise SandboxError(f"could not copy workspace {workspace} into image {base.tags or base.id}")
        engine.api.commit(
            scratch["Id"],
            repository=WORKSPACE_REPO,
            tag=key,
            conf={"Labels": {f"{reaper.LABEL}.kind": "workspace", f"{reaper.LABEL}.workspace": str(workspace)}},
        )
    finally:
        engine.api.remove_container(scratch["Id"], force=True)
    return engine.images.get(tag).id


# -- a disk cap where the engine has none ---------------------------------------------------
DISK_WATCH_EVERY_S = 0.05
DISK_WATCH_MAX_ENTRIES = 200_000
"""More files than this in the writable layer count as a full disk (inodes are disk too)."""


def _layer_usage(root: str, max_entries: int) -> tuple[int, int]:
    """Bytes allocated (st_blocks) and entries under `root`, stopping past `max_entries`."""
    total = count = 0
    stack = [root]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                count += 1
                if count > max_entries:
                    return total, count
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
    return total, count


class _DiskWatch:
    """`SandboxLimits.disk_bytes` for a container whose storage driver cannot cap it
    (overlay2 on ext4, the common case): while a command runs, the host measures the
    container's writable layer (its overlay upper directory) every 50 ms, and when the
    command grows it past the cap, kills every process of the container but the supervisor
    (through the container's cgroup), so the command ends with `cause="disk"`. What it
    overshoots by is what a command writes in 50 ms. Needs the engine on this host (the
    upper directory readable); else the sandbox runs uncapped, with one warning."""

    def __init__(self, upper: str, cgroup_procs: str, supervisor_pid: int, limit: int) -> None:
        self.upper, self.cgroup_procs, self.supervisor_pid, self.limit = upper, cgroup_procs, supervisor_pid, limit
        self.fired = False

    @classmethod
    def attach(cls, info: dict, limit: int) -> _DiskWatch | None:
        upper = _upper_dir(info)
        pid = int((info.get("State") or {}).get("Pid") or 0)
        if upper is None or not pid:
            return None
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                lines = [line.strip().split(":", 2) for line in f if line.count(":") >= 2]
        except OSError:
            return None
        # The container's process list: the unified hierarchy (cgroup v2, or v2 beside v1),
        # else v1's pids controller.
        candidates = [f"/sys/fs/cgroup{path}" for hid, _, path in lines if hid == "0"]
        candidates += [f"/sys/fs/cgroup/unified{path}" for hid, _, path in lines if hid == "0"]
        candidates += [f"/sys/fs/cgroup/pids{path}" for _, names, path in lines if "pids" in names.split(",")]
        for folder in candidates:
            if os.path.exists(f"{folder}/cgroup.procs"):
                return cls(upper, f"{folder}/cgroup.procs", pid, limit)
        return None

    def _over(self, baseline: int) -> bool:
        used, entries = _layer_usage(self.upper, DISK_WATCH_MAX_ENTRIES)
        return (used > self.limit and used > baseline) or entries > DISK_WATCH_MAX_ENTRIES

    def _kill_commands(self) -> None:
        try:
            with open(self.cgroup_procs) as f:
                pids = [int(line) for line in f if line.strip()]
        except OSError:
            return
        for pid in pids:
            if pid != self.supervisor_pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Watch the layer while the block runs; `fired` says whether a command was stopped."""
        self.fired = False
        baseline, _ = _layer_usage(self.upper, DISK_WATCH_MAX_ENTRIES)
        done = threading.Event()

        def watch() -> None:
            while not done.wait(DISK_WATCH_EVERY_S):
                if self._over(baseline):
                    self.fired = True
                    self._kill_commands()

        thread = threading.Thread(target=watch, name="sandbox-disk-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()


_watch_warned = False


# -- the transport ----------------------------------------------------------------------
class _AttachTransport:
    """The container's attach socket: stdin in; stdout and stderr out, in framed chunks."""

    HEADER = struct.Struct(">BxxxL")

    def __init__(self, sock: Any, describe: Any) -> None:
        self.sock = getattr(sock, "_sock", sock)
        self.handle = sock  # keeps the HTTP response (and so the connection) alive
        self.sock.setblocking(True)
        self.poller = select.poll()  # not select(): fds past 1024 in a busy process
        self.poller.register(self.sock.fileno(), select.POLLIN)
        self.buffer = b""
        self.stderr = b""
        self.describe = describe

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise SandboxError(f"sandbox container is gone: {exc}{self.diagnostics()}") from exc

    def recv(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buffer) >= self.HEADER.size:
                kind, size = self.HEADER.unpack_from(self.buffer)
                end = self.HEADER.size + size
                if len(self.buffer) >= end:
                    payload, self.buffer = self.buffer[self.HEADER.size : end], self.buffer[end:]
                    if kind == 1:
                        return payload
                    self.stderr = (self.stderr + payload)[-4000:]
                    continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self.poller.poll(remaining * 1000):
                return None
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                return b""
            self.buffer += chunk

    def diagnostics(self) -> str:
        parts = [self.describe()]
        if self.stderr.strip():
            parts.append(self.stderr.decode(errors="replace").strip())
        text = "; ".join(p for p in parts if p)
        return f" ({text})" if text else ""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self.handle.close()


def _teardown(
    engine: docker.DockerClient, container_id: str, transport: Any, fork_image: str | None, owner: int
) -> None:
    if os.getpid() != owner:
        return  # a forked child of the owner must not tear down the owner's containers
    if container_id:
        with contextlib.suppress(*ENGINE_ERRORS):
            engine.api.remove_container(container_id, force=True)
    if transport is not None:
        transport.close()
    if fork_image is not None:
        _pending_images.add(fork_image)
    _remove_pending_images(engine)


def _upper_dir(info: dict) -> str | None:
    """A container's overlay upper directory, where this host can see it."""
    upper = (info.get("GraphDriver") or {}).get("Data", {}).get("UpperDir")
    return upper if upper and os.path.isdir(upper) else None


class DockerSandbox(SupervisedSandbox):
    """A sandbox in a Docker container. See the module docstring for what is isolated."""

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        _image: str | None = None,
        _state: dict | None = None,
        _user: str | None = None,
        _parent: DockerSandbox | None = None,
        _layer: str = "",
    ) -> None:
        """`_image`, `_state`, `_user`: a fork from a commit (its image, removed at close).
        `_parent`, `_layer`, `_state`: a fork that runs the parent's image and gets a copy
        of its writable layer (`_layer`, the parent's upper directory) before it starts."""
        self.spec = spec
        self._engine = client()
        image_name = _image or spec.image or DEFAULT_IMAGE
        self._fork_image = _image
        self._transport: _AttachTransport | None = None
        self.container_id = ""
        self._finalizer = weakref.finalize(self, _teardown, self._engine, "", None, _image, os.getpid())
        try:
            if _parent is not None:
                self._start_fork_of(_parent, _layer, image_name, _state)
            else:
                self._start_from(image_name, _image, _user, _state)
        except ENGINE_ERRORS as exc:
            self.close()
            raise SandboxError(f"Docker engine failed starting a sandbox from image {image_name}: {exc}") from exc
        except BaseException:
            self.close()
            raise
        _live.add(self)

    def _start_fork_of(self, parent: DockerSandbox, layer: str, image_name: str, state: dict | None) -> None:
        """Start as a fork of `parent` by layer copy (`fork`): its image and user, and its
        writable layer copied in before the start."""
        self.image, self.user, self._run_image = parent.image, parent.user, parent._run_image
        self._start(self._run_image, image_name, state, seed=functools.partial(parent._copy_layer_into, layer))

    def _start_from(self, image_name: str, fork_image: str | None, user: str | None, state: dict | None) -> None:
        """Start from `image_name`, with the spec's workspace baked in (a fork's commit
        already holds it)."""
        spec = self.spec
        image = ensure_image(self._engine, image_name)
        self.image = image.id
        run_image = image.id
        # The command user: the spec's, else the image's USER. A fork's image is a commit
        # of a container that ran as root (the supervisor): the parent's user goes along.
        if user is not None:
            self.user = user
        else:
            self.user = spec.user if spec.user is not None else image.attrs["Config"].get("User") or ""
        if spec.workspace is not None and fork_image is None:
            if not Path(spec.workspace).is_dir():
                raise SandboxError(f"workspace {spec.workspace} is not a directory")
            run_image = workspace_image(self._engine, image, Path(spec.workspace), spec.workdir, self.user)
        self._run_image = run_image
        self._start(run_image, image_name, state)

    def _start(
        self, image: str, image_name: str, state: dict | None, seed: Callable[[str], None] | None = None
    ) -> None:
        """Create the container, then (`seed`, a fork's) fill its writable layer, then start
        it and wait for its supervisor."""
        spec, limits = self.spec, self.spec.limits
        api = self._engine.api
        config = {
            "workdir": spec.workdir,
            "inherit_env": True,  # the image's ENV (conda paths in SWE-bench images, ...)
            "env": {"LANG": "C.UTF-8", **spec.env},
            "limits": {
                "output_bytes": limits.output_bytes,
                "memory_bytes": limits.memory_bytes,
                "file_bytes": limits.file_bytes,
                "open_files": limits.open_files,
                "pids": limits.pids,
                "nproc": False,  # the pids cgroup counts per container, RLIMIT_NPROC per host uid
            },
            "state": state,
            "user": {"name": self.user},
            # The engine leaves /etc/hosts empty without a network: the supervisor fills it.
            "hosts": None if spec.network else OFFLINE_HOSTS,
        }
        storage_opt = None
        if disk_quota_driver(self._engine) is not None:
            size = limits.disk_bytes
            if disk_quota_driver(self._engine) == "btrfs":
                # btrfs counts what the container's snapshot references, the image included.
                size += int(self._engine.api.inspect_image(image).get("Size") or 0)
            storage_opt = {"size": str(size)}
            config["probe_disk"] = True  # a qgroup does not show in statvfs
        host_config = api.create_host_config(
            network_mode="bridge" if spec.network else "none",
            cap_drop=["ALL"],
            cap_add=SUPERVISOR_CAPS,
            storage_opt=storage_opt,
            security_opt=["no-new-privileges"],
            pids_limit=limits.pids,
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,
            nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None,
            tmpfs={"/tmp": f"size={limits.tmp_bytes},mode=1777"},
            binds={str(m.source): {"bind": m.target, "mode": "rw" if m.writable else "ro"} for m in spec.mounts}
            or None,
            shm_size=limits.tmp_bytes,
            auto_remove=True,
            log_config=docker.types.LogConfig(type="none"),
        )
        create = functools.partial(
            api.create_container,
            image,
            command=["python3", "-S", "-c", SUPERVISOR_SOURCE, json.dumps(config)],
            entrypoint=[],
            user="0",  # the supervisor; it runs commands as `self.user`
            working_dir="/",
            hostname="sandbox",
            stdin_open=True,  # with attach, also StdinOnce: stdin closes when we go away
            labels={**reaper.labels("sandbox"), f"{reaper.LABEL}.image": image_name},
            network_disabled=not spec.network,
            host_config=host_config,
        )
        try:
            created = create()
        except docker.errors.APIError as exc:
            if "qgroup" not in str(exc):
                raise
            time.sleep(0.5)  # btrfs sometimes refuses a qgroup limit while it settles one
            created = create()
        self.container_id = created["Id"]
        self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, _teardown, self._engine, self.container_id, None, self._fork_image, os.getpid()
        )
        if seed is not None:
            upper = _upper_dir(api.inspect_container(self.container_id))
            if upper is None:
                raise SandboxError(f"{image_name}: a fork's new container has no writable layer on this host")
            seed(upper)
        sock = api.attach_socket(self.container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._transport = _AttachTransport(sock, self._describe)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, _teardown, self._engine, self.container_id, self._transport, self._fork_image, os.getpid()
        )
        try:
            api.start(self.container_id)
        except docker.errors.APIError as exc:
            raise SandboxError(
                f"image {image_name} cannot run the sandbox supervisor (it needs python3 >= 3.8 and bash "
                f"on PATH): {exc.explanation or exc}"
            ) from exc
        self._init_channel(self._transport, f"docker sandbox {self.container_id[:12]}", READY_TIMEOUT_S)
        self._disk_watch = None
        if storage_opt is None:
            self._disk_watch = _DiskWatch.attach(api.inspect_container(self.container_id), limits.disk_bytes)
            if self._disk_watch is None:
                global _watch_warned
                if not _watch_warned:
                    _watch_warned = True
                    logger.warning(
                        "docker sandboxes run without a disk cap: the engine's storage cannot cap a "
                        "container and its layers are not on this host to be watched"
                    )

    def exec(self, command: str, timeout: float | None = None, *, fresh: bool = False) -> ExecResult:
        """See `Sandbox.exec`; where the engine cannot cap the container's disk, the host
        watches the writable layer while the command runs (`_DiskWatch`)."""
        watch = getattr(self, "_disk_watch", None)
        if watch is None:
            return super().exec(command, timeout, fresh=fresh)
        with watch.watching():
            result = super().exec(command, timeout, fresh=fresh)
        return dataclasses.replace(result, cause="disk") if watch.fired else result

    def _describe(self) -> str:
        try:
            info = self._engine.api.inspect_container(self.container_id)
        except docker.errors.NotFound:
            return "the container no longer exists"
        except ENGINE_ERRORS as exc:
            return f"the Docker engine failed: {exc}"
        state = info.get("State", {})
        if state.get("OOMKilled"):
            return "the container was killed for lack of memory"
        return f"container {state.get('Status')}, exit code {state.get('ExitCode')} {state.get('Error') or ''}".strip()

    def fork(self) -> DockerSandbox:
        """A new container with this one's files, cwd and exports; /tmp (a tmpfs) is not
        carried over.

        Where the engine keeps containers' layers on this host (overlay2, the normal case),
        the new container runs this one's image, and this one's writable layer (its overlay
        upper directory: changed files, whiteouts of deleted ones) is copied into the new
        one's before it starts: a create, a copy of what changed, a start (0.59x a commit,
        paired in one run, docs/sandboxes.md; a commit also makes an image to remove at
        close). Else it starts from a commit of this container.
        """
        with self._lock:
            state = self._state()
        if (layer := self._layer_dir()) is not None:
            return DockerSandbox(self.spec, _state=state, _parent=self, _layer=layer)
        with self._lock:
            try:
                image = self._engine.api.commit(
                    self.container_id,
                    repository=FORK_REPO,
                    tag=uuid.uuid4().hex[:16],
                    pause=False,
                    conf={"Labels": reaper.labels("fork")},
                )
            except ENGINE_ERRORS as exc:
                raise SandboxError(f"{self._name}: could not commit the container for a fork: {exc}") from exc
        try:
            return DockerSandbox(self.spec, _image=image["Id"], _state=state, _user=self.user)
        except BaseException:
            _pending_images.add(image["Id"])
            _remove_pending_images(self._engine)
            raise

    def _layer_dir(self) -> str | None:
        """This container's writable layer (overlay upper directory), where this host sees it."""
        try:
            return _upper_dir(self._engine.api.inspect_container(self.container_id))
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"{self._name}: the engine cannot describe the container to fork: {exc}") from exc

    def _copy_layer_into(self, layer: str, upper: str) -> None:
        """Copy this container's writable layer (`layer`) into `upper` (a created, not
        started, container's), holding the lock: the snapshot a fork starts from. cp -a
        keeps modes, owners, symlinks, xattrs (overlay's opaque marks) and device nodes (its
        whiteouts).
        The host's cp reads a tree the sandbox wrote, so nothing of the sandbox may run
        meanwhile (a symlink swapped in mid-walk would point cp at the host): the lock
        keeps commands out, and no process outlives a command."""
        with self._lock:
            result = subprocess.run(["cp", "-a", "--reflink=auto", f"{layer}/.", upper], capture_output=True, text=True)
        if result.returncode != 0:
            raise SandboxError(copy_problem(Path(layer), Path(upper), result.stderr or "cp failed"))

    def close(self) -> None:
        self._finalizer()
        _live.discard(self)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> DockerSandbox:
        return self
