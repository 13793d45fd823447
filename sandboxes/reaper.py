"""Orphans: what sandboxes leave behind when their owning process dies without closing them.

Every container, fork image, local sandbox directory and local sandbox cgroup is marked
with its owner: pid, the pid's start time (so a recycled pid is not mistaken for the
owner), the pid namespace and the boot id (pids mean nothing across either; a cgroup's
name holds only the pid and its start time). An orphan is a thing whose owner is
certainly dead; things owned from another pid namespace are left alone, since their owner
cannot be checked from here.

`reap()` removes orphans. The docker backend calls it when a process makes its first
sandbox, at exit and on SIGTERM; `python -m sandboxes reap` runs it by hand. Local sandboxes
die with their owner (bubblewrap's --die-with-parent), so only their directories and
(emptied) pids cgroups can be left, and those are reaped too.

Stdlib only at import time: the docker SDK is imported only when docker objects are reaped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABEL = "io.agentic-rl"
OWNER_FILE = ".owner.json"
RUN_ID = os.environ.get("AGENTIC_RL_RUN_ID") or uuid.uuid4().hex[:12]
"""Groups everything one run made (set AGENTIC_RL_RUN_ID to share it across processes)."""


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


@dataclass(frozen=True)
class ImageSummary:
    """One image as the engine lists it (`GET /images/json`): all that listing needs."""

    id: str
    tags: tuple[str, ...]
    labels: Mapping[str, str]
    created: float
    """Seconds since the epoch."""


def list_images(client: Any, filters: dict | None = None) -> list[ImageSummary]:
    """The engine's images, from its one listing call.

    Not `client.images.list()`: the SDK lists, then inspects each image by id, and an image
    another process removes between the two answers 404, failing the whole listing (CI,
    stop 47: `evals.official.check_harness` beside a test that removed its images)."""
    return [
        ImageSummary(
            id=entry["Id"],
            tags=tuple(tag for tag in entry.get("RepoTags") or () if tag != "<none>:<none>"),
            labels=entry.get("Labels") or {},
            created=float(entry.get("Created") or 0),
        )
        for entry in client.api.images(filters=filters)
    ]


def owner() -> dict[str, str]:
    """This process as the owner of what it creates now."""
    pid = os.getpid()
    return {
        "pid": str(pid),
        "start": _start_time(pid) or "",
        "pidns": _pid_namespace(),
        "boot": _boot_id(),
        "run": RUN_ID,
    }


def labels(kind: str) -> dict[str, str]:
    """Docker labels for a thing of `kind` ("sandbox", "fork") owned by this process."""
    return {f"{LABEL}.kind": kind, **{f"{LABEL}.owner-{k}": v for k, v in owner().items()}}


def owner_of(docker_labels: Mapping[str, str]) -> dict[str, str]:
    prefix = f"{LABEL}.owner-"
    return {k[len(prefix) :]: v for k, v in docker_labels.items() if k.startswith(prefix)}


def is_orphan(who: Mapping[str, str]) -> bool:
    """True only when the owner is certainly dead."""
    if not who.get("pid"):
        return False
    if who.get("boot") and who["boot"] != _boot_id():
        return True  # the machine rebooted since
    if who.get("pidns") != _pid_namespace():
        return False  # cannot tell from here
    start = _start_time(int(who["pid"]))
    return start is None or (bool(who.get("start")) and start != who["start"])


def owner_tag() -> str:
    """This process as a name's prefix, `<pid>.<start time>` (where no file or label can
    carry the owner, as in a cgroup's name); `tag_is_orphan` reads it back."""
    me = os.getpid()
    return f"{me}.{_start_time(me) or 0}"


def tag_is_orphan(name: str) -> bool:
    """True only when the owner `owner_tag()` put at the start of `name` is certainly dead
    (a name from this pid namespace: cgroups are shared across them, tags are not)."""
    pid, _, rest = name.partition(".")
    start = rest.partition(".")[0]
    if not pid.isdigit() or not start.isdigit():
        return False
    return is_orphan({"pid": pid, "start": start, "pidns": _pid_namespace()})


def write_owner_file(path: Path) -> None:
    (Path(path) / OWNER_FILE).write_text(json.dumps(owner()))


@dataclass
class ReapReport:
    containers: int = 0
    images: int = 0
    directories: int = 0
    cgroups: int = 0
    """Local sandboxes' pids cgroups (`sandboxes.cgroups`)."""
    docker: str | None = None
    """Why docker objects were not looked at (no SDK, no engine), if they were not."""

    def __str__(self) -> str:
        text = (
            f"reaped {self.containers} containers, {self.images} images, {self.directories} local directories, "
            f"{self.cgroups} cgroups"
        )
        return text + (f" (docker skipped: {self.docker})" if self.docker else "")


def reap_local(root: Path | None = None) -> int:
    """Remove local sandbox directories whose owner is dead."""
    root = Path(root or tempfile.gettempdir())
    removed = 0
    for path in root.glob("sandbox-*"):
        try:
            who = json.loads((path / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if is_orphan(who):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def reap_docker(client: Any, *, everything_of_this_process: bool = False) -> tuple[int, int]:
    """Remove orphaned sandbox containers, then orphaned fork images. (containers, images)

    `everything_of_this_process`: also this process's own (its exit and SIGTERM paths).
    """
    import docker.errors

    me = os.getpid()

    def doomed(obj_labels: Mapping[str, str]) -> bool:
        who = owner_of(obj_labels)
        if everything_of_this_process and who.get("pid") == str(me) and who.get("pidns") == _pid_namespace():
            return True
        return is_orphan(who)

    containers = 0
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}.kind"}, ignore_removed=True):
        if doomed(container.labels):
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                container.remove(force=True)
                containers += 1
    images = 0
    pending = [img for img in list_images(client, {"label": f"{LABEL}.kind=fork"}) if doomed(img.labels)]
    # A fork of a fork is a child image of its parent's: remove children first, in passes.
    while pending:
        left = []
        for image in pending:
            try:
                client.images.remove(image.id, force=False, noprune=False)
                images += 1
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError:
                left.append(image)
        if len(left) == len(pending):
            break
        pending = left
    return containers, images


def prune_workspace_images(client: Any, *, min_age_s: float = 600.0, only: set[str] | None = None) -> int:
    """Remove cached workspace images that no container uses (they are rebuilt on demand).

    Images younger than `min_age_s` stay: a sandbox being started may be about to use one.
    """
    import docker.errors

    removed = 0
    for image in list_images(client, {"label": f"{LABEL}.kind=workspace"}):
        if only is not None and image.id not in only:
            continue
        age = time.time() - image.created if image.created else float("inf")
        if age < min_age_s:
            continue
        for tag in image.tags or [image.id]:
            with contextlib.suppress(docker.errors.APIError):  # in use: kept
                client.images.remove(tag, force=False, noprune=False)
                removed += 1
    return removed


def reap(*, docker_client: Any = None, local_root: Path | None = None, cache: bool = False) -> ReapReport:
    """Remove every orphan this machine can see: containers, fork images, directories;
    with `cache`, also the cached workspace images no container uses."""
    from sandboxes import cgroups

    report = ReapReport(directories=reap_local(local_root), cgroups=cgroups.reap_orphans(tag_is_orphan))
    try:
        if docker_client is None:
            import docker

            docker_client = docker.from_env(timeout=30)
            docker_client.ping()
        report.containers, report.images = reap_docker(docker_client)
        if cache:
            report.images += prune_workspace_images(docker_client)
    except ImportError:
        report.docker = "the docker SDK is not installed (pip install 'agentic-rl[docker]')"
    except Exception as exc:  # noqa: BLE001 - an absent engine is a normal state here
        report.docker = f"no Docker engine reachable: {exc}"
    return report
