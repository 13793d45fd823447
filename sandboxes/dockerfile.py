"""Images built from a Dockerfile (Harbor tasks' `environment/`), and the workdir they hold.

`build(dockerfile)` runs `docker build` with the Dockerfile's folder as the context, once per
content (the tag is `agentic-rl/dockerfile:<digest of the context>`; an image with that tag is
reused); `copy_workdir(image, workdir, dest)` copies the image's workdir out to a host
folder, which becomes the task's workspace, so that the agent's diff is taken against the
workdir exactly as the image has it (files made by RUN steps included). The image must run
our sandbox supervisor: it needs `python3` and `bash` (the base image, or one built FROM it,
has both). No registry is reached unless the Dockerfile's FROM image is not local.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from sandboxes.base import SandboxError

logger = logging.getLogger(__name__)

TAG_PREFIX = "agentic-rl/dockerfile"


class DockerfileError(SandboxError):
    """An image could not be built from a Dockerfile; the message names it and says why."""


def context_digest(dockerfile: Path) -> str:
    """A digest of the build context (every file under the Dockerfile's folder, by path and
    content): the image's tag."""
    digest = hashlib.sha256()
    context = dockerfile.parent
    for file in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(context)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:24]


def _docker(*args: str, timeout: float = 600, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["docker", *args], capture_output=True, timeout=timeout, input=stdin)
    except FileNotFoundError:
        raise DockerfileError("the docker CLI is not installed (apt-get install docker.io)") from None
    except subprocess.TimeoutExpired:
        raise DockerfileError(f"docker {args[0]} took over {timeout:g} s") from None


def build(dockerfile: Path, *, timeout: float = 1800, log: Callable[[str], None] = logger.info) -> str:
    """The tag of an image built from `dockerfile` (its folder is the context), built now
    unless one with this content's tag exists. A failed build is a `DockerfileError` with
    docker's last lines."""
    tag = f"{TAG_PREFIX}:{context_digest(dockerfile)}"
    if _docker("image", "inspect", tag, timeout=60).returncode == 0:
        return tag
    log(f"building {tag} from {dockerfile}")
    done = _docker("build", "-q", "-t", tag, "-f", str(dockerfile), str(dockerfile.parent), timeout=timeout)
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise DockerfileError(f"{dockerfile}: docker build failed: {' | '.join(last) or 'no output'}")
    return tag


def copy_workdir(image: str, workdir: str, dest: Path) -> Path:
    """`dest` holding the contents of `workdir` in `image` (copied once: a `dest` that exists
    is kept), through a container that is created, never started, and removed."""
    if dest.is_dir():
        return dest
    created = _docker("create", image, "true", timeout=120)
    if created.returncode != 0:
        raise DockerfileError(f"{image}: docker create failed: {created.stderr.decode(errors='replace').strip()}")
    container = created.stdout.decode().strip()
    staging = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        copied = _docker("cp", f"{container}:{workdir.rstrip('/') or '/'}/.", str(staging), timeout=600)
        if copied.returncode != 0:
            raise DockerfileError(
                f"{image}: its workdir {workdir} cannot be copied out: {copied.stderr.decode().strip()}"
            )
        try:
            staging.rename(dest)
        except OSError:  # another process published it first
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        _docker("rm", "-f", container, timeout=120)
        shutil.rmtree(staging, ignore_errors=True)
    return dest
