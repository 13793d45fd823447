"""Python environments for sandboxes: a CPython of a chosen version and a virtualenv built
for it, in either backend, without a registry.

A sandbox definition's `python:` section asks for one:

    python:
      version: "3.9"                  # a CPython from pyenv: the newest installed 3.9.x
      packages: [graphviz]            # Debian packages (docker images only)
      system: [locale-gen]            # as root, with the network (docker images only) ...
      system_check: locale -a | grep -q en_US   # ... met on a local host where this passes
      setup: [python -m pip install pytest]   # the virtualenv active, with the network
      install: [python -m pip install -e .]   # the same, in the workspace (at workdir)
      files: [{source: /srv/dl/qhull.tgz, target: /opt/downloads/qhull.tgz}]  # host files the steps read

(`sandboxes.images.PythonEnv`: the section is part of the definition's schema, and this
module stands above `sandboxes.images`, whose definitions and image builds it uses.)
The virtualenv is at `/opt/venv` in the sandbox, the interpreter at its own prefix, and
`PATH` and `VIRTUAL_ENV` point at the virtualenv (`PYTHONUSERBASE` too, for a tool that
runs the interpreter through a link of its own, as `tox --current-env` does).
`prepare(definition, backend)` builds it and says how a sandbox runs it (`PreparedEnv`);
builds are cached by content, in two levels, so that definitions that differ only in their
workspace share the slow part:
- the environment: the interpreter, `system` and `setup` steps (keyed by them);
- over it, the workspace: `install` steps run in a copy of the workspace at `workdir`
  (an editable install then points at where sandboxes see the workspace), whose
  results (build outputs, compiled extensions) the sandbox's workspace then holds.

Backends:
- `docker`: three images (`docker build --network host`, `sandboxes.images.build`): FROM the
  definition's image (the base image by default), the libraries the interpreter links, a C
  toolchain and `packages` (shared by every environment); FROM that, the pyenv prefix
  copied in at the same path (less its site-packages and test suite) and the steps; FROM
  that, the workspace copied in and installed. Steps run as root; the workspace is then
  given to the image's user.
- `local`: the virtualenv is built in a local sandbox given the network, under
  `$AGENTIC_RL_ENV_CACHE` (default `$AGENTIC_RL_CACHE/envs`); sandboxes then see it
  read-only at /opt/venv, and the pyenv prefix read-only at its own path. `system` steps
  need root in an image: a definition with any is refused here, unless its
  `system_check` passes on the host (the host already has what they make).
Failures raise `EnvironmentBuildError` naming the part (`python`, `system`, `setup`,
`install`), the step and the tail of its output; the whole log is kept beside the build.

Over 450 lines on purpose: one feature on both backends: find a CPython, settle pip's
settings, then cache, lock and build the environment locally or in docker; the two builds
share the cache key, the lock and the error messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandboxes.base import DEFAULT_IMAGE, Mount, SandboxError, SandboxLimits, SandboxSpec, copy_problem
from sandboxes.images import BuildRecipe, Copy, PythonEnv, SandboxDefinition, build, tree_fingerprint

logger = logging.getLogger(__name__)

VENV = "/opt/venv"
BUILD_FORMAT = 1
"""Bumped when the way an environment is built changes, so old builds are not reused."""
# What a pyenv CPython built on Debian bookworm links against, and a C toolchain for the
# packages that compile (SWE-bench's images have one too).
IMAGE_PACKAGES = (
    "build-essential pkg-config libssl3 libffi8 libsqlite3-0 zlib1g libbz2-1.0 liblzma5 "
    "libreadline8 libncursesw6 libgdbm6 libgdbm-compat4 libuuid1 libexpat1 libdb5.3"
)
# Left out of the prefix copied into images: a virtualenv never sees the interpreter's own
# site-packages, and nothing runs CPython's test suite.
PREFIX_EXCLUDE = ("lib/python*/site-packages/*", "lib/python*/test", "lib/python*/test/*")
STEP_TIMEOUT_S = 3600.0
BUILD_MEMORY_SHARE = 0.75
"""Of the host's memory, what one environment build may take in all (its sandbox's memory
cgroup, where the host has one): a build that runs away (astropy 4.0.dev's setup.py restarting
itself, 650 processes, 18 GB of 24) is killed before the host's other jobs are."""
LOG_TAIL_LINES = 30
PARTS = ("python", "system", "setup", "install")


@dataclass(frozen=True)
class PreparedEnv:
    """How a sandbox runs a built environment: the image (docker), the folders to mount
    (local), the variables to set, and the workspace to start from (local: the built one)."""

    python: Path
    """The interpreter's prefix."""
    image: str | None = None
    mounts: tuple[Mount, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    workspace: Path | None = None
    seconds: float = 0.0
    cached: bool = True
    built: tuple[str, ...] = ()
    """What this call built (the others were found built): `environment` (the interpreter,
    system and setup steps: shared by every definition with the same ones) and `workspace`
    (the install steps in this workspace)."""


class EnvironmentBuildError(SandboxError):
    """An environment could not be built; `part` says which part failed (one of `PARTS`)."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message)
        self.part = part


# -- the interpreter ---------------------------------------------------------------------------
def pyenv_root() -> Path:
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def installed_pythons() -> dict[str, Path]:
    """Installed CPython prefixes by full version (`3.9.18`), from pyenv."""
    versions = pyenv_root() / "versions"
    found = {}
    for prefix in sorted(versions.iterdir()) if versions.is_dir() else ():
        if re.fullmatch(r"\d+\.\d+\.\d+", prefix.name) and (prefix / "bin").is_dir():
            found[prefix.name] = prefix
    return found


def find_python(version: str) -> Path:
    """The prefix of the newest installed CPython `version` (`3.9` or `3.9.18`)."""
    installed = installed_pythons()
    matches = [v for v in installed if v == version or v.startswith(version + ".")]
    if not matches:
        have = ", ".join(sorted(installed, key=_version_key)) or "none"
        raise EnvironmentBuildError(
            "python",
            f"Python {version} is not installed (pyenv under {pyenv_root()} has: {have}); "
            f"`pyenv install {version}` adds it",
        )
    return installed[max(matches, key=_version_key)]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _interpreter(prefix: Path) -> str:
    major_minor = ".".join(prefix.name.split(".")[:2])
    return f"{prefix}/bin/python{major_minor}"


# -- the host's pip configuration -----------------------------------------------------------
# Variables passed on to builds as they are (proxies, and what the host's pip is told).
PASSED_VARIABLES = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
HOST_FILES_IN_IMAGE = "/opt/pip-host"
_noted: set[str] = set()


@dataclass(frozen=True)
class PipSettings:
    """What builds need of the host's pip configuration (its index, mirrors, certificate
    authority: a machine behind an intercepting proxy needs its own CA), as variables, plus
    the host paths they name: mounted at the same path (local), or copied into the image."""

    variables: dict[str, str]
    paths: tuple[Path, ...] = ()


@functools.lru_cache(maxsize=8)
def _pip_config(variables: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """`pip config list` of this interpreter's pip (once per set of PIP_ variables: it takes
    half a second, and every environment a run prepares asks)."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    return tuple(listed.stdout.splitlines())


def pip_settings(for_image: bool, log: Callable[[str], None] = lambda line: None) -> PipSettings:
    """The host pip's settings (`pip config list`: its files and PIP_ variables) as PIP_
    variables. For an image, files they name (a CA bundle, a constraints file) are copied
    in under /opt/pip-host and folders (local mirrors, find-links) are left out."""
    settings: dict[str, str] = {}
    for line in _pip_config(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_")))):
        match = re.match(r"^[^.]*\.([\w-]+)='(.*)'$", line)
        if match:  # `:env:.x` lines come last: variables win over files, as in pip
            settings[match.group(1)] = match.group(2)
    ca = settings.get("cert") or os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE")
    if ca:
        settings["cert"] = ca
    variables = {name: os.environ[name] for name in PASSED_VARIABLES if os.environ.get(name)}
    paths: list[Path] = []
    for key, value in settings.items():
        kept = []
        for token in value.split():
            local = token[len("file://") :] if token.startswith("file://") else token
            if not local.startswith("/") or not Path(local).exists():
                kept.append(token)
            elif not for_image:
                kept.append(token)
                # A local index (file://.../simple) links to its files beside it: mount its parent.
                paths.append(Path(local).parent if token.startswith("file://") else Path(local))
            elif Path(local).is_file():
                paths.append(Path(local))
                kept.append(f"{HOST_FILES_IN_IMAGE}/{len(paths) - 1}-{Path(local).name}")
            elif token not in _noted:
                _noted.add(token)  # once a process: every image build would say it again
                log(f"note: pip's {key} {token} is a folder on this host, left out of the image build")
        if kept:
            variables[f"PIP_{key.upper().replace('-', '_')}"] = " ".join(kept)
    if "PIP_CERT" in variables:  # and for whatever else a build step fetches with
        variables["SSL_CERT_FILE"] = variables["REQUESTS_CA_BUNDLE"] = variables["PIP_CERT"]
    return PipSettings(variables, tuple(dict.fromkeys(paths)))


# -- steps as scripts ----------------------------------------------------------------------
def _marker(part: str, index: int) -> str:
    # A no-op first line that names the step, so a failing docker build step can be told.
    return f": pyenv-step {part} {index}"


def _scripts(env: PythonEnv, prefix: Path, workdir: str, variables: dict[str, str]) -> list[tuple[str, int, str]]:
    """(part, index, script) of every step, as one shell runs them, in order."""
    exported = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **variables, "PIP_ROOT_USER_ACTION": "ignore"}
    # pip's cache lives for one step, on disk (not PIP_NO_CACHE_DIR: pip < 19 reads it wrongly).
    common = "\n".join(
        [
            "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in exported.items()),
            'export PIP_CACHE_DIR="${TMPDIR:-/tmp}/pyenv-pip-cache"',
            "trap 'rm -rf \"$PIP_CACHE_DIR\"' EXIT",
        ]
    )
    scripts = []
    if env.system:
        scripts.append(("system", 0, "\n".join([_marker("system", 0), "set -e", common, "cd /", *env.system])))
    create = f"{_interpreter(prefix)} -m venv {VENV}"
    scripts.append(("python", 0, "\n".join([_marker("python", 0), "set -e", create])))
    for part, steps, where in (("setup", env.setup, "/"), ("install", env.install, workdir)):
        for index, step in enumerate(steps):
            lines = [_marker(part, index), "set -e", common, f". {VENV}/bin/activate", f"cd {where}", step]
            scripts.append((part, index, "\n".join(lines)))
    return scripts


def _describe(part: str, index: int, env: PythonEnv) -> str:
    steps = {"system": env.system, "setup": env.setup, "install": env.install}.get(part)
    if not steps:
        return f"{part} (creating the virtualenv)"
    text = "; ".join(steps) if part == "system" else steps[index]
    text = text if len(text) < 300 else text[:300] + " ..."
    return f"{part} step {index + 1}/{len(steps)} ({text!r})"


# -- keys, locks, the cache ------------------------------------------------------------------
def cache_dir() -> Path:
    """Where local environments and build logs are kept: `$AGENTIC_RL_ENV_CACHE`, else
    `$AGENTIC_RL_CACHE/envs` (default `/tmp/agentic-rl/envs`)."""
    if os.environ.get("AGENTIC_RL_ENV_CACHE"):
        return Path(os.environ["AGENTIC_RL_ENV_CACHE"])
    return Path(os.environ.get("AGENTIC_RL_CACHE", Path(tempfile.gettempdir()) / "agentic-rl")) / "envs"


def _files_key(files: tuple[Copy, ...]) -> list:
    """What of `PythonEnv.files` a build's cache key covers: where each goes and
    `tree_fingerprint` (as an image's copied files are hashed), not its bytes; nothing when
    there are none, so the keys of builds without files stay as they were."""
    return [(str(file.source), file.target, tree_fingerprint(file.source)) for file in files]


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps([BUILD_FORMAT, *parts], sort_keys=True, default=str).encode()).hexdigest()


def workspace_digest(root: Path) -> str:
    """The content of a workspace: its files (not .git) and, for a git repository, its HEAD."""
    digest = hashlib.sha256()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    digest.update(head.stdout.strip().encode() if (root / ".git").exists() else b"-")
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (directory == str(root) and d == ".git"))
        for name in sorted(names):
            path = Path(directory) / name
            info = path.lstat()
            digest.update(f"\0{path.relative_to(root)}\0{info.st_mode:o}\0".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                with path.open("rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
    return digest.hexdigest()


LOCK_RETRY_S = 0.5
"""How often a build waiting for another process's lock tries it again (flock tells no one
when it is free; a stop wakes the waits at once)."""
_lock_waits = threading.Condition()
_lock_stops = 0


def stop_lock_waits() -> None:
    """End the waits for a build lock now in flight, each with a `SandboxError` (an
    interrupted command: a build thread blocked in flock would hold its exit until the other
    process's build ended, measured at over 10 minutes for a scikit-learn workspace). Waits
    that begin later are not affected."""
    global _lock_stops
    with _lock_waits:
        _lock_stops += 1
        _lock_waits.notify_all()


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` while held, across processes (released by the kernel if the
    holder dies): one builder per key, the others wait (saying so once), then find it built.
    A wait ends with a `SandboxError` when `stop_lock_waits` is called."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        with _lock_waits:
            stops = _lock_stops
        said = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            if not said:
                logger.info("waiting for %s: another process is building it", path.with_suffix("").name)
                said = True
            with _lock_waits:
                if _lock_stops != stops:
                    raise SandboxError(f"stopped while waiting for {path} (another process held it)")
                _lock_waits.wait(LOCK_RETRY_S)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# -- prepare ---------------------------------------------------------------------------------
def prepare(
    definition: SandboxDefinition,
    backend: str,
    *,
    workspace: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> PreparedEnv:
    """Build `definition`'s python environment for `backend` (`local` or `docker`), or find
    it built; `workspace` (default: the definition's) is what `install` steps install."""
    env: PythonEnv | None = definition.python
    if env is None:
        raise SandboxError(f"{definition.path}: has no python environment to prepare")
    log = log or logger.info
    started = time.monotonic()
    prefix = find_python(env.version)
    workspace = workspace or definition.workspace
    if env.install and workspace is None:
        raise EnvironmentBuildError("install", f"{definition.path}: python.install needs a workspace to install")
    if backend == "local":
        prepared = _prepare_local(definition, env, prefix, workspace, log)
    elif backend == "docker":
        prepared = _prepare_docker(definition, env, prefix, workspace, log)
    else:
        raise SandboxError(f"unknown sandbox backend {backend!r} for a python environment")
    variables = {
        "VIRTUAL_ENV": VENV,
        "PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        # A tool that links the interpreter elsewhere (tox --current-env, the sphinx rows' test
        # command, links `.tox/py39/bin/python` to sys.executable) starts it outside the
        # virtualenv: it finds no pyvenv.cfg there and runs as the bare interpreter. Its user
        # site is then the virtualenv's site-packages (.pth files included); the virtualenv's
        # own interpreter never reads a user site, so nothing else changes.
        "PYTHONUSERBASE": VENV,
    }
    return dataclasses.replace(prepared, env=variables, seconds=time.monotonic() - started)


# -- local -----------------------------------------------------------------------------------
def build_memory_bytes() -> int:
    """The memory an environment build may use: 32 GiB, or `BUILD_MEMORY_SHARE` of a smaller
    host's memory (the limit is each process's address space, and their total where the
    sandbox has a memory cgroup)."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(32 << 30, int(physical * BUILD_MEMORY_SHARE))


def _prepare_local(
    definition: SandboxDefinition, env: PythonEnv, prefix: Path, workspace: Path | None, log
) -> PreparedEnv:
    if env.system:
        met = bool(env.system_check) and subprocess.run(["bash", "-c", env.system_check]).returncode == 0
        if not met:
            why = (
                f"and this host lacks what they make (`{env.system_check}` fails)"
                if env.system_check
                else "and the local backend runs the host's own system"
            )
            raise EnvironmentBuildError(
                "system",
                f"{definition.path}: system step(s) {list(env.system)!r} need root in an image, {why}: "
                "use the docker backend",
            )
        log(f"system step(s) met on this host (`{env.system_check}` passes)")
    pip = pip_settings(for_image=False)
    scripts = _scripts(env, prefix, definition.workdir, pip.variables)
    base_key = _key("local", str(prefix), env.version, env.setup)
    base = cache_dir() / f"env-{base_key[:20]}"
    built: list[str] = []
    with exclusive_lock(cache_dir() / f"env-{base_key[:20]}.lock"):
        if not base.is_dir():
            built.append("environment")
            started = time.monotonic()
            log(f"building python environment {base.name} (Python {prefix.name}, {len(env.setup)} setup step(s))")
            _build_local(
                base, prefix, [s for s in scripts if s[0] in ("python", "setup")], env, None, definition.workdir, pip
            )
            log(f"built python environment {base.name} in {time.monotonic() - started:.1f} s")
    mounts = [Mount(prefix, str(prefix))]
    if not env.install:
        venv = Mount(base / "venv", VENV)
        return PreparedEnv(python=prefix, mounts=(*mounts, venv), cached=not built, built=tuple(built))
    key = _key(base_key, workspace_digest(workspace), env.install, definition.workdir, *_files_key(env.files))
    installed = cache_dir() / f"ws-{key[:20]}"
    with exclusive_lock(cache_dir() / f"ws-{key[:20]}.lock"):
        if not installed.is_dir():
            built.append("workspace")
            log(f"installing {workspace} into {installed.name} ({len(env.install)} step(s))")
            _build_local(
                installed, prefix, [s for s in scripts if s[0] == "install"], env, (base / "venv", workspace),
                definition.workdir, pip,
            )  # fmt: skip
    return PreparedEnv(
        python=prefix, mounts=(*mounts, Mount(installed / "venv", VENV)), workspace=installed / "workspace",
        cached=not built, built=tuple(built),
    )  # fmt: skip


def _copy(source: Path, target: Path) -> None:
    result = subprocess.run(["cp", "-a", "--reflink=auto", f"{source}/.", str(target)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SandboxError(copy_problem(source, target, result.stderr))


def _remove_dead_stagings(target: Path) -> None:
    """Remove the staging folders of `target` that a killed build left (SIGKILL skips the
    `finally` that removes them: up to a gigabyte each, measured on scikit-learn's). The caller
    holds `target`'s lock, which every build of `target` holds, so none of them is in use."""
    for stale in target.parent.glob(f".{target.name}-*"):
        if stale.is_dir():
            logger.info("removing %s, left by a build that was killed", stale)
            shutil.rmtree(stale, ignore_errors=True)


def _build_local(
    target: Path,
    prefix: Path,
    scripts: list[tuple[str, int, str]],
    env: PythonEnv,
    start_from: tuple[Path, Path] | None,
    workdir: str,
    pip: PipSettings,
) -> None:
    """Run `scripts` in a local sandbox with the network, the virtualenv at /opt/venv and
    (for install steps) a copy of the workspace at `workdir`, both writable and kept in
    `target` once every step passed."""
    from sandboxes.local import LocalSandbox  # lazy: bubblewrap is only needed here

    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_stagings(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        (staging / "venv").mkdir()
        (staging / "build").mkdir()
        (staging / "build" / "tmp").mkdir()
        mounts = [Mount(prefix, str(prefix)), Mount(staging / "venv", VENV, writable=True)]
        mounts.append(Mount(staging / "build", "/opt/build", writable=True))
        mounts += [Mount(path, str(path)) for path in pip.paths]
        mounts += [Mount(file.source, file.target) for file in env.files]
        if start_from is not None:
            venv, workspace = start_from
            _copy(venv, staging / "venv")
            (staging / "workspace").mkdir()
            _copy(workspace, staging / "workspace")
            mounts.append(Mount(staging / "workspace", workdir, writable=True))
        spec = SandboxSpec(
            workdir="/opt/home",  # the sandbox's own (throwaway) folder; the workspace is mounted
            network=True,
            env={"TMPDIR": "/opt/build/tmp", "HOME": "/opt/build/tmp"},
            limits=SandboxLimits(
                timeout_s=STEP_TIMEOUT_S, memory_bytes=build_memory_bytes(), file_bytes=8 << 30, pids=2048
            ),
            mounts=tuple(mounts),
        )
        log_path = staging / "build" / "build.log"
        log_path.touch()  # before the chown below: the steps append to it
        with LocalSandbox(spec) as sandbox:
            # The sandbox runs as a uid of its own: it must own what it writes into.
            subprocess.run(["chown", "-R", f"{sandbox.uid}:{sandbox.uid}", str(staging)], check=True)
            for part, index, script in scripts:
                sandbox.write_file(f"/opt/build/step-{part}-{index}.sh", script + "\n")
                with log_path.open("a") as f:
                    f.write(f"\n### {_describe(part, index, env)}\n")
                result = sandbox.exec(
                    f"bash /opt/build/step-{part}-{index}.sh >>/opt/build/build.log 2>&1", timeout=STEP_TIMEOUT_S
                )
                with log_path.open("a") as f:
                    f.write(f"### exit status {result.exit_code} after {result.seconds:.1f} s\n")
                if not result.ok:
                    kept = target.with_suffix(".failed.log")
                    shutil.copy(log_path, kept)
                    why = "timed out" if result.timed_out else f"exit status {result.exit_code}"
                    tail = _tail(log_path.read_text() + result.output)
                    raise EnvironmentBuildError(
                        part, f"{_describe(part, index, env)} failed ({why}); log: {kept}\n{tail}"
                    )
        subprocess.run(["chmod", "-R", "a+rX", str(staging)], check=True)  # read by other sandboxes' uids
        shutil.move(staging / "build" / "build.log", staging / "build.log")
        shutil.rmtree(staging / "build")
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# -- docker ----------------------------------------------------------------------------------
def _prepare_docker(
    definition: SandboxDefinition, env: PythonEnv, prefix: Path, workspace: Path | None, log
) -> PreparedEnv:
    from sandboxes.docker_backend import client, ensure_image  # lazy: the docker SDK

    engine = client()
    if definition.build is not None:
        base_tag = definition.image_name
        build(dataclasses.replace(definition, python=None), engine=engine, log=log)
    else:
        base_tag = definition.image or DEFAULT_IMAGE
    base = ensure_image(engine, base_tag)
    user = definition.user or base.attrs["Config"].get("User") or "root"
    path = Path(definition.path)
    pip = pip_settings(for_image=True, log=log)
    scripts = _scripts(env, prefix, definition.workdir, pip.variables)

    def image(tag: str, recipe: BuildRecipe, key: str) -> bool:
        return _docker_build(SandboxDefinition(path=path, name=path.stem, build=recipe, tag=tag), env, engine, log, key)

    # 1. The system packages (shared by every environment on this base with these packages).
    packages = " ".join([IMAGE_PACKAGES, *map(shlex.quote, env.packages)])
    apt = (
        f"{_marker('python', 'packages')}\nset -e\napt-get update -qq\n"
        f"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {packages}\n"
        "rm -rf /var/lib/apt/lists/*"
    )
    system_key = _key("docker-system", base.id, packages)
    system_tag = f"agentic-rl/pyenv-system:{system_key[:20]}"
    cached = image(system_tag, BuildRecipe(base=base.id, setup=(apt,), user=user), system_key)
    # 2. The interpreter at its own prefix (its parents opened to the sandbox's user, e.g.
    # /root), the host's pip settings, the system and setup steps: the environment.
    ancestors = " ".join(str(p) for p in reversed(prefix.parents) if str(p) != "/")
    host_files = tuple(Copy(host, f"{HOST_FILES_IN_IMAGE}/{i}-{host.name}") for i, host in enumerate(pip.paths))
    env_key = _key("docker", system_key, str(prefix), env.version, env.system, env.setup)
    env_tag = f"agentic-rl/pyenv:{env_key[:20]}"
    recipe = BuildRecipe(
        base=system_tag,
        copy=(Copy(prefix, str(prefix), PREFIX_EXCLUDE), *host_files),
        setup=(f"chmod o+x {ancestors}" if ancestors else "true", *(s for p, _, s in scripts if p != "install")),
        user=user,
    )
    env_cached = image(env_tag, recipe, env_key)
    built = () if env_cached and cached else ("environment",)
    cached = env_cached and cached
    if not env.install:
        return PreparedEnv(python=prefix, image=env_tag, cached=cached, built=built)
    # 3. The workspace, installed, then given to the sandbox's user.
    workdir = definition.workdir
    key = _key(env_key, workspace_digest(workspace), env.install, workdir, user, *_files_key(env.files))
    tag = f"agentic-rl/pyenv-ws:{key[:20]}"
    recipe = BuildRecipe(
        base=env_tag,
        copy=(Copy(workspace, workdir), *env.files),
        setup=(*(s for p, _, s in scripts if p == "install"), f"chown -R {user}: {workdir}"),
        user=user,
    )
    ws_cached = image(tag, recipe, key)
    built = built if ws_cached else (*built, "workspace")
    return PreparedEnv(python=prefix, image=tag, cached=ws_cached and cached, built=built)


def _docker_build(definition: SandboxDefinition, env: PythonEnv, engine: Any, log, key: str) -> bool:
    """Build one image (or find it built); errors name the step that failed."""
    log_path = cache_dir() / f"image-{key[:20]}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    recent: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    with exclusive_lock(cache_dir() / f"image-{key[:20]}.lock"), log_path.open("w") as record:

        def keep(line: str) -> None:
            recent.append(line)
            record.write(line + "\n")
            if not line.startswith("  "):
                log(line)  # progress lines; the steps' output goes to the log file

        try:
            return build(definition, engine=engine, log=keep).cached
        except EnvironmentBuildError:
            raise
        except SandboxError as exc:
            found = re.search(r": pyenv-step (\w+) (\w+)", str(exc))
            part, index = (found.group(1), found.group(2)) if found else ("setup", "0")
            step = _describe(part, int(index), env) if index.isdigit() else f"system packages ({IMAGE_PACKAGES} ...)"
            raise EnvironmentBuildError(
                part, f"{step} failed in the image build; log: {log_path}\n" + "\n".join(recent)
            ) from exc
