"""Folders that verify themselves: a manifest of every file's size and sha256.

A checkpoint (`trainer.learner.checkpoint`) and every exported model folder carry
`manifest.json`, written last and atomically (a temporary file renamed into place), by the
process that publishes the folder. A folder without a manifest, or whose files differ from
it (missing, truncated, a flipped byte, a file it does not list), is not complete: `verify`
names the first bad file and the reason. It lives in the inference layer because loading a
policy (`trainer.inference.models.load_policy`, and so evaluation) verifies it too.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "manifest.json"
FORMAT = 1
_CHUNK = 1 << 20


class ManifestError(ValueError):
    """A folder does not match its manifest; `path` is the first bad file, `reason` why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


@dataclass(frozen=True)
class Problem:
    file: str
    """The bad file, relative to the folder."""
    reason: str


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(folder: Path) -> list[str]:
    """Every file under `folder` but its own manifest, as sorted POSIX paths."""
    names = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()]
    return sorted(n for n in names if n != MANIFEST)


def write_manifest(folder: str | Path) -> Path:
    """Record the size and sha256 of every file of `folder` in `folder/manifest.json`, last
    and atomically (written beside, flushed to disk, renamed)."""
    folder = Path(folder)
    files = {name: {"size": (folder / name).stat().st_size, "sha256": sha256(folder / name)} for name in _files(folder)}
    temporary = folder / f".{MANIFEST}.tmp"
    with temporary.open("w") as f:
        f.write(json.dumps({"format": FORMAT, "files": files}, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, folder / MANIFEST)
    return folder / MANIFEST


def problems(folder: str | Path) -> list[Problem]:
    """What is wrong with `folder` against its manifest, in the manifest's order ([]: none)."""
    folder = Path(folder)
    if not folder.is_dir():
        return [Problem(".", "no such folder")]
    path = folder / MANIFEST
    if not path.is_file():
        return [
            Problem(
                MANIFEST, "missing: the folder was never completed (or was written before checkpoints had manifests)"
            )
        ]
    try:
        listed = json.loads(path.read_text())["files"]
        entries = {str(name): (int(entry["size"]), str(entry["sha256"])) for name, entry in listed.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return [Problem(MANIFEST, f"unreadable: {type(exc).__name__}: {exc}")]
    found = []
    for name, (size, digest) in sorted(entries.items()):
        file = folder / name
        if not file.is_file():
            found.append(Problem(name, "missing"))
        elif (actual := file.stat().st_size) != size:
            found.append(Problem(name, f"{actual} bytes, the manifest says {size} (truncated or rewritten)"))
        elif sha256(file) != digest:
            found.append(Problem(name, "sha256 differs from the manifest (the content changed)"))
    found += [Problem(name, "not in the manifest") for name in _files(folder) if name not in entries]
    return found


def verify(folder: str | Path) -> None:
    """Raise `ManifestError` naming the first bad file of `folder`, if any."""
    found = problems(folder)
    if found:
        raise ManifestError(Path(folder) / found[0].file, found[0].reason)
