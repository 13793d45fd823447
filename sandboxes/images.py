"""Sandbox definitions (YAML) and the images they name or build.

A definition says what a sandbox starts from and how it is limited:

    name: pytest-box                  # optional; default: the file's stem
    image: agentic-rl/base:bookworm   # an image to run as is (a local tag or a registry
                                      # name, e.g. a SWE-bench instance image) ...
    build:                            # ... or a recipe to build one locally
      base: agentic-rl/base:bookworm  #   FROM this image, or from a fresh Debian:
      # debootstrap: {suite: bookworm, variant: minbase, include: [python3, git]}
      setup:                          #   run as root, with the network, in order
        - apt-get update && apt-get install -y --no-install-recommends make
      copy:                           #   host files put into the image before setup
        - {source: vendor/, target: /opt/vendor, exclude: ["*.pyc"]}
      env: {PIP_NO_CACHE_DIR: "1"}    #   baked into the image
      user: sandbox                   #   the user sandboxes run as
    tag: agentic-rl/pytest-box:latest # the built image's name (default agentic-rl/NAME:latest)
    workspace: files/                 # copied in at `workdir`; relative to this file
    workdir: /workspace
    env: {PYTHONDONTWRITEBYTECODE: "1"}
    network: false
    limits: {timeout_s: 60, pids: 256, memory_bytes: 2G, tmp_bytes: 256M}
    mounts:                           # host folders bound in, read-only unless writable
      - {source: /srv/data, target: /data, writable: false}
    python:                           # a CPython virtualenv at /opt/venv (sandboxes.pyenv)
      version: "3.9"
      setup: [python -m pip install pytest==8.3.5]

`python -m sandboxes build DEF` builds the recipe. Built images are cached by the content
hash of the recipe (and of the base image's id, and of what `copy` puts in: the names,
modes, sizes and modification times of its files): the hash is a label on the image, and
building an unchanged definition finds it and does nothing. A `python:` environment is
built per backend by `sandboxes.pyenv.prepare` (a definition with one must be prepared
before `spec()`). The shipped `images/base.yaml` is the local base image: debootstrap +
`docker import`, because no registry is reachable here; where one is, `image:` can name
any published image instead.

Over 450 lines on purpose: the definition schema and the image builds it names are read
together: each build step (debootstrap, Dockerfile, copied files) is checked where its field
is parsed, and the content hash covers exactly what the builds read.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import typing
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic.dataclasses import dataclass
from pydantic_core import PydanticCustomError, core_schema

from sandboxes.base import DEFAULT_IMAGE, Mount, SandboxError, SandboxLimits, SandboxSpec
from sandboxes.yaml_files import field_problems, load_mapping

logger = logging.getLogger(__name__)

RECIPE_FORMAT = 1
"""Bumped when the way a recipe becomes an image changes, so old builds are not reused."""
HASH_LABEL = "io.agentic-rl.definition-hash"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
# Every section of a definition file: unknown fields are errors (a typo must not be
# ignored), and numbers are read as text where text is expected (`env: {A: 1}`).
_STRICT = ConfigDict(extra="forbid", coerce_numbers_to_str=True)


class DefinitionError(SandboxError):
    """A sandbox definition is malformed; the message names the file and the field."""


# -- sizes ------------------------------------------------------------------------------------
def _size_bytes(value: Any) -> int | None:
    """Bytes from an int or a string such as "512M", "4G", "1.5GiB" (binary units); None if
    `value` is not a size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value))
    if not match:
        return None
    number, unit = float(match.group(1)), (match.group(2) or "B").upper()[:1]
    return int(number * {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit])


def _validate_size(value: Any) -> int:
    size = _size_bytes(value)
    if size is None:
        raise PydanticCustomError(
            "size", "expected a size such as 4096, 512M or 4G, got {value}", {"value": repr(value)}
        )
    return size


Size = Annotated[int, BeforeValidator(_validate_size)]
"""A byte count in a definition file: 4096, "512M", "4G", "1.5GiB"."""


@dataclasses.dataclass(frozen=True)
class _FieldsOf:
    """`Annotated` metadata that reads one of `sandboxes.base`'s plain dataclasses (limits,
    mounts) from a definition file: through a strict pydantic model of its fields (sizes in
    its `*_bytes` fields), so that errors name the field; an instance is taken as it is."""

    cls: type

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        hints = typing.get_type_hints(self.cls)
        fields: dict[str, Any] = {}
        for item in dataclasses.fields(self.cls):
            default = item.default if item.default is not dataclasses.MISSING else ...
            fields[item.name] = (Size if item.name.endswith("_bytes") else hints[item.name], default)
        model = create_model(self.cls.__name__, __config__=_STRICT, **fields)
        cls = self.cls

        def build(value: Any, validate: Callable[[Any], Any]) -> Any:
            return value if isinstance(value, cls) else cls(**dict(validate(value)))

        return core_schema.no_info_wrap_validator_function(build, handler(model))


_Limits = Annotated[SandboxLimits, _FieldsOf(SandboxLimits)]
_Mount = Annotated[Mount, _FieldsOf(Mount)]


# -- the definition ---------------------------------------------------------------------------
@dataclass(frozen=True, config=_STRICT)
class Debootstrap:
    """A Debian root file system from scratch (the base image where no registry is reachable)."""

    suite: str = "bookworm"
    variant: str = "minbase"
    include: tuple[str, ...] = ("python3", "git")
    mirror: str | None = None
    """The Debian mirror; None: the one apt's own sources name on this machine. Not part of
    the content hash (every mirror serves the same suite)."""


@dataclass(frozen=True, config=_STRICT)
class Copy:
    """Host files put into an image: a file, or a folder's content (less `exclude`, shell
    patterns matched against paths relative to it)."""

    source: Path
    target: str
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True, config=_STRICT)
class BuildRecipe:
    """How to build a sandbox image: a base (an image, or debootstrap), files copied in,
    then setup steps."""

    base: str | None = None
    debootstrap: Debootstrap | None = None
    copy: tuple[Copy, ...] = ()
    setup: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None


@dataclass(frozen=True, config=_STRICT)
class PythonEnv:
    """The `python:` section of a sandbox definition (built by `sandboxes.pyenv.prepare`)."""

    version: str = ""
    """A CPython version, `3.9` (the newest 3.9.x installed) or `3.9.18`."""
    packages: tuple[str, ...] = ()
    """Debian packages installed into the image first (docker; the local backend runs the
    host's own system)."""
    system: tuple[str, ...] = ()
    """Shell steps run first, as root, with the network, in one shell (docker images only)."""
    system_check: str = ""
    """A shell test that passes where the host already has what `system` makes (e.g.
    `dpkg -s graphviz`): the local backend then takes the steps as met. Empty: it cannot."""
    setup: tuple[str, ...] = ()
    """Shell steps run with the virtualenv active and the network, in order."""
    install: tuple[str, ...] = ()
    """Shell steps run the same way in the workspace (at the definition's workdir)."""
    files: tuple[Copy, ...] = ()
    """Host files the steps read at `target` (e.g. sources a build would download from a host
    this machine cannot reach): bound read-only into local builds, copied into docker ones."""


@dataclass(frozen=True, config=_STRICT)
class SandboxDefinition:
    """A parsed sandbox definition; `spec()` is what a backend starts from."""

    path: Path
    name: str
    image: str | None = None
    build: BuildRecipe | None = None
    tag: str | None = None
    workspace: Path | None = None
    workdir: str = "/workspace"
    env: dict[str, str] = field(default_factory=dict)
    network: bool = False
    user: str | None = None
    limits: _Limits = field(default_factory=SandboxLimits)
    mounts: tuple[_Mount, ...] = ()
    python: PythonEnv | None = None

    @property
    def image_name(self) -> str:
        """The image a docker sandbox of this definition runs."""
        if self.image:
            return self.image
        if self.build is not None:
            return self.tag or f"agentic-rl/{self.name}:latest"
        return DEFAULT_IMAGE

    def spec(self) -> SandboxSpec:
        if self.python is not None:
            raise DefinitionError(
                f"{self.path}: its python environment is not built yet: "
                "prepare it for a backend first (sandboxes.pyenv.prepare)"
            )
        return SandboxSpec(
            mounts=self.mounts,
            workspace=self.workspace,
            workdir=self.workdir,
            env=dict(self.env),
            limits=self.limits,
            network=self.network,
            image=self.image_name,
            user=self.user,
        )


_DEFINITION = TypeAdapter(SandboxDefinition)


# -- parsing ----------------------------------------------------------------------------------
def parse_definition(data: Any, source: Path) -> SandboxDefinition:
    """A definition from already-loaded YAML; `source` names it in errors and anchors paths."""
    source = Path(source)
    if not isinstance(data, dict):
        raise DefinitionError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    if "path" in data:  # the file's own path, not a field of it
        raise DefinitionError(f"{source}: field 'path': unknown field")
    try:
        definition = _DEFINITION.validate_python({"name": source.stem, **data, "path": source})
    except ValidationError as exc:
        raise DefinitionError(f"{source}: {field_problems(exc)}") from None
    # What the schema cannot say: exclusive fields, and paths (relative to the file) that exist.
    errors = []
    if definition.image and definition.build:
        errors.append("field 'image': give either image or build, not both")
    if definition.build is not None:
        recipe = definition.build
        if (recipe.base is None) == (recipe.debootstrap is None):
            errors.append("field 'build': give exactly one of base or debootstrap")
        copies = _anchor_sources(recipe.copy, "build.copy", source, errors)
        definition = dataclasses.replace(definition, build=dataclasses.replace(recipe, copy=copies))
    definition = dataclasses.replace(definition, mounts=_anchor_sources(definition.mounts, "mounts", source, errors))
    if definition.python is not None and definition.python.files:
        files = _anchor_sources(definition.python.files, "python.files", source, errors)
        definition = dataclasses.replace(definition, python=dataclasses.replace(definition.python, files=files))
    if definition.python is not None and not definition.python.version:
        errors.append("field 'python.version': give a CPython version such as '3.9'")
    if not definition.workdir.startswith("/"):
        errors.append(f"field 'workdir': must be an absolute path, got {definition.workdir!r}")
    if definition.workspace is not None:
        workspace = _anchored(definition.workspace, source_path=source)
        if not workspace.is_dir():
            errors.append(f"field 'workspace': {workspace} is not a directory")
        definition = dataclasses.replace(definition, workspace=workspace)
    if errors:
        raise DefinitionError(f"{source}: " + "; ".join(errors))
    return definition


def _anchored(path: Path, *, source_path: Path) -> Path:
    """A path of a definition file: relative ones are relative to the file's folder."""
    return path if path.is_absolute() else (source_path.parent / path).resolve()


def _anchor_sources(items: tuple, field: str, source_path: Path, errors: list[str]) -> tuple:
    """`items` (copies or mounts: `source` on the host, `target` inside) with their sources
    anchored to the definition file; problems are appended to `errors`, naming `field.i`."""
    anchored = []
    for i, item in enumerate(items):
        host = _anchored(item.source, source_path=source_path)
        if not host.exists():
            errors.append(f"field '{field}.{i}.source': {host} does not exist")
        if not item.target.startswith("/"):
            errors.append(f"field '{field}.{i}.target': must be an absolute path, got {item.target!r}")
        anchored.append(dataclasses.replace(item, source=host))
    return tuple(anchored)


def load_definition(path: str | Path) -> SandboxDefinition:
    """Read and validate a sandbox definition file."""
    return parse_definition(load_mapping(path, DefinitionError), Path(path))


# -- building ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BuildResult:
    image: str
    cached: bool
    seconds: float
    content_hash: str


def tree_fingerprint(root: Path, exclude: tuple[str, ...] = ()) -> str:
    """What identifies a file or folder to copy, cheaply: its files' relative names, modes,
    sizes and modification times (not their bytes)."""
    digest = hashlib.sha256()
    for path, relative in _copied_files(root, exclude):
        info = path.lstat()
        digest.update(f"{relative}\0{info.st_mode:o}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def _copied_files(root: Path, exclude: tuple[str, ...]) -> list[tuple[Path, str]]:
    """(path, path relative to root) of what a copy takes, in a stable order."""
    root = Path(root)
    if not root.is_dir():
        return [(root, root.name)]
    files = []
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in [*dirs, *sorted(names)]:
            path = Path(directory) / name
            relative = str(path.relative_to(root))
            if any(fnmatch.fnmatch(relative, pattern) for pattern in exclude):
                if name in dirs:
                    dirs.remove(name)  # nothing below an excluded folder either
                continue
            files.append((path, relative))
    return files


def content_hash(recipe: BuildRecipe, base_id: str | None) -> str:
    """What identifies a built image: the recipe (less the mirror), the base's id, and
    the fingerprints of what it copies in."""
    body = dataclasses.asdict(recipe)
    if body.get("debootstrap"):
        body["debootstrap"].pop("mirror", None)
    copies = body.pop("copy")
    if copies:  # absent for recipes without copies, so their hashes stay what they were
        body["copy"] = [
            {**{k: str(v) if isinstance(v, Path) else v for k, v in item.items()},
             "fingerprint": tree_fingerprint(Path(item["source"]), tuple(item["exclude"]))}
            for item in copies
        ]  # fmt: skip
    return hashlib.sha256(
        json.dumps({"format": RECIPE_FORMAT, "recipe": body, "base": base_id}, sort_keys=True).encode()
    ).hexdigest()


def apt_mirror(suite: str) -> str:
    """The Debian mirror apt's own sources name for `suite` (as the design notes ask)."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    for path in sources:
        for stanza in path.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line.startswith("#")
            )
            if suite in fields.get("Suites", "").split() and fields.get("URIs"):
                return fields["URIs"].split()[0]
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = re.sub(r"\[[^]]*\]", "", line).split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
                return parts[1]
    return DEFAULT_MIRROR


def build(
    definition: SandboxDefinition,
    *,
    engine: Any = None,
    force: bool = False,
    log: Callable[[str], None] = logger.info,
) -> BuildResult:
    """Build `definition`'s image, unless an image of the same content hash exists."""
    started = time.monotonic()
    if definition.build is None:
        raise DefinitionError(f"{definition.path}: nothing to build (no build: section; image: is used as is)")
    from sandboxes.docker_backend import client, ensure_image

    engine = engine or client()
    recipe = definition.build
    base_id = ensure_image(engine, recipe.base).id if recipe.base else None
    digest = content_hash(recipe, base_id)
    tag = definition.image_name
    if not force:
        try:
            existing = engine.images.get(tag)
            if (existing.labels or {}).get(HASH_LABEL) == digest:
                log(f"{tag}: up to date ({digest[:12]}), nothing to build")
                return BuildResult(existing.id, True, time.monotonic() - started, digest)
        except Exception:  # noqa: BLE001 - absent, or the engine will say so again below
            pass
    if recipe.debootstrap is not None:
        base_id = _debootstrap_image(engine, definition, recipe.debootstrap, digest, log)
    image_id = _build_on(engine, definition, base_id, digest, log)
    log(f"{tag}: built {image_id[7:19]} in {time.monotonic() - started:.0f} s")
    return BuildResult(image_id, False, time.monotonic() - started, digest)


def _debootstrap_image(engine: Any, definition: SandboxDefinition, spec: Debootstrap, digest: str, log) -> str:
    if shutil.which("debootstrap") is None:
        raise SandboxError(f"{definition.path}: build.debootstrap needs debootstrap (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise SandboxError(f"{definition.path}: build.debootstrap needs root")
    from tqdm import tqdm

    mirror = spec.mirror or apt_mirror(spec.suite)
    with tempfile.TemporaryDirectory(prefix="sandbox-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        command = ["debootstrap", f"--variant={spec.variant}"]
        if spec.include:
            command.append(f"--include={','.join(spec.include)}")
        command += [spec.suite, str(rootfs), mirror]
        log(f"debootstrap {spec.suite} ({spec.variant}) from {mirror}")
        tail: list[str] = []
        with (
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc,
            tqdm(desc=f"debootstrap {spec.suite}", unit=" steps", file=sys.stderr, mininterval=1) as bar,
        ):
            for line in proc.stdout:
                tail = (tail + [line.rstrip()])[-30:]
                if line.startswith("I: "):
                    bar.update()
                    bar.set_postfix_str(line[3:].strip()[:50])
        if proc.returncode != 0:
            raise SandboxError(f"{definition.path}: debootstrap failed (exit {proc.returncode}):\n" + "\n".join(tail))
        archive = Path(tmp) / "rootfs.tar"
        log("packing the root file system")
        result = subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "--xattrs", "-cf", str(archive), "."],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise SandboxError(f"{definition.path}: tar of the root file system failed: {result.stderr.strip()}")
        repository, tag = f"agentic-rl/rootfs-{spec.suite}", digest[:16]
        log(f"docker import {repository}:{tag} ({archive.stat().st_size >> 20} MiB)")
        engine.api.import_image_from_file(
            str(archive),
            repository=repository,
            tag=tag,
            changes=[
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "ENV LANG=C.UTF-8",
                'CMD ["/bin/bash"]',
            ],
        )
        return engine.images.get(f"{repository}:{tag}").id


def _dockerfile(definition: SandboxDefinition, base_id: str, digest: str) -> str:
    recipe = definition.build
    assert recipe is not None
    lines = [f"FROM {base_id}", "USER root"]
    for key, value in recipe.env.items():
        lines.append(f"ENV {key}={json.dumps(value)}")
    for i, item in enumerate(recipe.copy):
        lines.append(f"COPY {json.dumps([f'copy/{i}', item.target])}")
    for step in recipe.setup:
        lines.append("RUN " + json.dumps(["/bin/sh", "-c", step]))  # exec form: any text is safe
    if recipe.user:
        lines.append(f"USER {recipe.user}")
    lines.append(f"LABEL {HASH_LABEL}={digest}")
    return "\n".join(lines) + "\n"


def _context(definition: SandboxDefinition, dockerfile: str, archive: Any) -> None:
    """The build context as a tar: the Dockerfile and, under copy/N, what `copy` takes
    (owned by root, modes kept)."""

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(fileobj=archive, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for i, item in enumerate(definition.build.copy):
            root = Path(item.source)
            if not root.is_dir():
                tar.add(root, arcname=f"copy/{i}", recursive=False, filter=owned)
                continue
            tar.add(root, arcname=f"copy/{i}", recursive=False, filter=owned)
            for path, relative in _copied_files(root, item.exclude):
                tar.add(path, arcname=f"copy/{i}/{relative}", recursive=False, filter=owned)


def _build_on(engine: Any, definition: SandboxDefinition, base_id: str, digest: str, log) -> str:
    tag = definition.image_name
    dockerfile = _dockerfile(definition, base_id, digest)
    log(f"building {tag}: {len(definition.build.copy)} cop(ies), {len(definition.build.setup)} setup step(s)")
    with tempfile.TemporaryFile(prefix="sandbox-context-") as archive:
        _context(definition, dockerfile, archive)
        archive.seek(0)
        stream = engine.api.build(
            fileobj=archive,
            custom_context=True,
            tag=tag,
            network_mode="host",  # setup steps may apt-get and pip install; sandboxes never can
            rm=True,
            forcerm=True,
            decode=True,
            timeout=None,  # a setup step may take many minutes
        )
        image_id = None
        step = ""
        for chunk in stream:
            if "stream" in chunk:
                text = chunk["stream"].rstrip()
                if text.startswith("Step "):
                    step = text
                if text:
                    log(f"  {text}")
            if "error" in chunk:
                raise SandboxError(
                    f"{definition.path}: build failed at {step or 'the start'}: {chunk['error'].strip()}"
                )
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
    return image_id or engine.images.get(tag).id
