"""`python -m tasks.swebench_downloads DIR`: fill a downloads folder with the files SWE-bench
Verified's environment builds fetch from hosts other than PyPI, so those rows build offline.

    python -m tasks.swebench_downloads ~/swe-repos/downloads

A repository cache's `downloads/` folder is where `tasks.swebench_env` looks (`PREFETCH`, and
the fetch steps of a spec's `pre_install`). Today the files are matplotlib's: qhull 2020.2 (a
`pre_install` step downloads it from qhull.org), FreeType 2.6.1 (matplotlib 3.3+'s setup.py
downloads it from SourceForge or Savannah; its image tests are drawn with that release) and
jQuery UI 1.12.1 (matplotlib 3.0-3.1's `setup.py develop` downloads it from jqueryui.com).
Each file is tried from its upstream host first, then from a mirror this machine may reach:

- qhull: Debian's `qhull_2020.2.orig.tar.gz` is the same file, byte for byte (sha256 checked).
- jQuery UI: npm's `jquery-ui-dist` 1.12.1 holds the files of the download zip (its sha1 is
  the registry's); repacked, as the zip is, under `jquery-ui-1.12.1/`.
- FreeType: no mirror reachable here holds the release tarball; `--freetype-git REPO` (a
  clone of https://github.com/freetype/freetype, default that URL) gives it from the signed
  tag `VER-2-6-1` (the release's commit, "Version 2.6.1 released"): `git archive` of the tag
  then `autogen.sh` (autoconf, automake, libtool), as the release's `make dist` does, less its
  generated HTML reference. Same sources, not the same bytes as the tarball.

Files already in DIR are kept. Exit status 0 when every file is there, 1 otherwise; each file
gets one line saying where it came from or why it could not be had.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

TIMEOUT_S = 60
QHULL = "qhull-2020-src-8.0.2.tgz"
QHULL_SHA256 = "b5c2d7eb833278881b952c8a52d20179eab87766b00b865000469a45c1838b7e"  # matplotlib's setupext.py
FREETYPE = "freetype-2.6.1.tar.gz"
FREETYPE_SHA256 = "0a3c7dfbda6da1e8fce29232e8e96d987ababbbf71ebc8c75659e4132c367014"  # matplotlib's setupext.py
JQUERY = "jquery-ui-1.12.1.tar.gz"
JQUERY_ZIP_SHA256 = "f8233674366ab36b2c34c577ec77a3d70cac75d2e387d8587f3836345c0f624d"  # matplotlib 3.0's setup.py
JQUERY_NPM_SHA1 = "5c0815d3cc6f90ff5faaf5b268a6e23b4ca904fa"  # registry.npmjs.org/jquery-ui-dist/1.12.1


class Unavailable(Exception):
    """A source could not give the file; the message says why, in a few words."""


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return response.read()
    except OSError as exc:  # URLError, timeouts, refused connections
        raise Unavailable(f"{url}: {getattr(exc, 'reason', exc)}") from None


def _checked(data: bytes, algorithm: str, expected: str, url: str) -> bytes:
    digest = hashlib.new(algorithm, data).hexdigest()
    if digest != expected:
        raise Unavailable(f"{url}: {algorithm} {digest[:12]}... is not the release's {expected[:12]}...")
    return data


def _tar_gz(files: dict[str, bytes]) -> bytes:
    """A .tar.gz of `files` (path inside -> bytes), in the given order."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _jquery_from_zip() -> bytes:
    url = "https://jqueryui.com/resources/download/jquery-ui-1.12.1.zip"
    data = _checked(_get(url), "sha256", JQUERY_ZIP_SHA256, url)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return _tar_gz({n: archive.read(n) for n in archive.namelist() if not n.endswith("/")})


def _jquery_from_npm() -> bytes:
    url = "https://registry.npmjs.org/jquery-ui-dist/-/jquery-ui-dist-1.12.1.tgz"
    data = _checked(_get(url), "sha1", JQUERY_NPM_SHA1, url)
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("package/")
            if member.isfile() and name not in ("package.json", "README.md"):  # npm's, not the zip's
                files[f"jquery-ui-1.12.1/{name}"] = tar.extractfile(member).read()
    return _tar_gz(files)


def _freetype_from_git(repo: str) -> bytes:
    missing = [tool for tool in ("git", "autoconf", "automake", "libtoolize") if shutil.which(tool) is None]
    if missing:
        raise Unavailable(
            f"git tag VER-2-6-1: {' '.join(missing)} not installed (apt-get install git autoconf automake libtool)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(repo) if Path(repo).is_dir() else Path(tmp) / "freetype"
        if clone != Path(repo):
            run = subprocess.run(["git", "clone", "-q", "--bare", "--depth", "1", "--branch", "VER-2-6-1", repo, str(clone)],
                                 capture_output=True, text=True, timeout=600)  # fmt: skip
            if run.returncode != 0:
                raise Unavailable(f"git clone {repo}: {run.stderr.strip().splitlines()[-1:]}")
        tree = Path(tmp) / "freetype-2.6.1"
        archive = subprocess.run(["git", f"--git-dir={_git_dir(clone)}", "archive", "--prefix=freetype-2.6.1/", "VER-2-6-1"],
                                 capture_output=True, timeout=300)  # fmt: skip
        if archive.returncode != 0:
            raise Unavailable(f"git archive VER-2-6-1 in {clone}: {archive.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        autogen = subprocess.run(["sh", "./autogen.sh"], cwd=tree, capture_output=True, text=True, timeout=600)
        if autogen.returncode != 0 or not (tree / "builds" / "unix" / "configure").is_file():
            raise Unavailable(f"autogen.sh in the tag's tree failed: {autogen.stderr.strip().splitlines()[-1:]}")
        # As the release's `make dist` leaves them out: git's files and autoconf's cache.
        for dropped in tree.rglob(".gitignore"):
            dropped.unlink()
        (tree / ".mailmap").unlink(missing_ok=True)
        shutil.rmtree(tree / "builds" / "unix" / "autom4te.cache", ignore_errors=True)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(tree, arcname="freetype-2.6.1")
        return buffer.getvalue()


def _git_dir(clone: Path) -> Path:
    return clone / ".git" if (clone / ".git").exists() else clone


def _url(url: str, algorithm: str, expected: str) -> Callable[[], bytes]:
    return lambda: _checked(_get(url), algorithm, expected, url)


def sources(freetype_git: str) -> dict[str, list[tuple[str, Callable[[], bytes]]]]:
    """Each file's sources, in the order they are tried: (where, how to get the bytes)."""
    sourceforge = "https://downloads.sourceforge.net/project/freetype/freetype2/2.6.1/freetype-2.6.1.tar.gz"
    return {
        QHULL: [
            ("qhull.org", _url(f"http://www.qhull.org/download/{QHULL}", "sha256", QHULL_SHA256)),
            ("deb.debian.org (the same file)",
             _url("http://deb.debian.org/debian/pool/main/q/qhull/qhull_2020.2.orig.tar.gz", "sha256", QHULL_SHA256)),
        ],
        FREETYPE: [
            ("sourceforge.net", _url(sourceforge, "sha256", FREETYPE_SHA256)),
            ("savannah.gnu.org", _url(f"https://download.savannah.gnu.org/releases/freetype/{FREETYPE}", "sha256",
                                      FREETYPE_SHA256)),
            (f"the git tag VER-2-6-1 of {freetype_git} (same sources, not the tarball's bytes)",
             lambda: _freetype_from_git(freetype_git)),
        ],
        JQUERY: [
            ("jqueryui.com (repacked)", _jquery_from_zip),
            ("npm's jquery-ui-dist 1.12.1 (the zip's files, repacked)", _jquery_from_npm),
        ],
    }  # fmt: skip


def fill(folder: Path, freetype_git: str, log: Callable[[str], None] = print) -> int:
    """Fetch what `folder` lacks; the number of files still missing."""
    folder.mkdir(parents=True, exist_ok=True)
    missing = 0
    for name, tries in sources(freetype_git).items():
        target = folder / name
        if target.is_file():
            log(f"{name}: already in {folder}")
            continue
        problems = []
        for where, get in tries:
            try:
                data = get()
            except Unavailable as exc:
                problems.append(str(exc))
                continue
            partial = target.with_suffix(".partial")
            partial.write_bytes(data)
            partial.replace(target)  # never a half-written file under the real name
            log(f"{name}: from {where} ({len(data) / 1e6:.1f} MB)")
            break
        else:
            missing += 1
            log(f"{name}: not fetched ({'; '.join(problems)})")
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tasks.swebench_downloads",
        description=__doc__.split("\n\n")[0],
        epilog="example: python -m tasks.swebench_downloads ~/swe-repos/downloads "
        "(then: make verify-verified SWE_REPO_CACHE=~/swe-repos)",
    )
    parser.add_argument("folder", type=Path, help="the downloads folder, e.g. <repository cache>/downloads")
    parser.add_argument(
        "--freetype-git",
        default="https://github.com/freetype/freetype",
        help="a FreeType git repository (URL or local clone) to make FreeType 2.6.1 from when no host has its tarball",
    )
    args = parser.parse_args(argv)
    try:
        return 1 if fill(args.folder.expanduser(), args.freetype_git) else 0
    except KeyboardInterrupt:
        print("stopped; files already written are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
