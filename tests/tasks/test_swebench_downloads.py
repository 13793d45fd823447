"""The downloads folder's filler (`tasks.swebench_downloads`): each file from the first
source that gives the release's bytes, in the layout the builds unpack. The network is the
one thing replaced here (CI has none): `_get` serves recorded bytes by URL."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
import zipfile

import pytest

from tasks import swebench_downloads as dl


def _tgz(files: dict[str, bytes]) -> bytes:
    return dl._tar_gz(files)


@pytest.fixture
def web(monkeypatch):
    served: dict[str, bytes] = {}

    def get(url: str) -> bytes:
        if url not in served:
            raise dl.Unavailable(f"{url}: Temporary failure in name resolution")
        return served[url]

    monkeypatch.setattr(dl, "_get", get)
    return served


def test_each_file_comes_from_the_first_source_with_the_releases_bytes(web, tmp_path, monkeypatch):
    qhull = b"qhull release bytes"
    npm = _tgz({"package/package.json": b"{}", "package/jquery-ui.min.js": b"js", "package/images/a.png": b"png"})
    monkeypatch.setattr(dl, "QHULL_SHA256", hashlib.sha256(qhull).hexdigest())
    monkeypatch.setattr(dl, "JQUERY_NPM_SHA1", hashlib.sha1(npm).hexdigest())
    web["http://www.qhull.org/download/qhull-2020-src-8.0.2.tgz"] = b"a tampered copy"
    web["http://deb.debian.org/debian/pool/main/q/qhull/qhull_2020.2.orig.tar.gz"] = qhull
    web["https://registry.npmjs.org/jquery-ui-dist/-/jquery-ui-dist-1.12.1.tgz"] = npm
    lines: list[str] = []
    missing = dl.fill(tmp_path, freetype_git=str(tmp_path / "no-such-repo"), log=lines.append)
    assert (tmp_path / dl.QHULL).read_bytes() == qhull  # the upstream copy's hash was wrong: refused
    with tarfile.open(tmp_path / dl.JQUERY) as tar:
        assert sorted(tar.getnames()) == ["jquery-ui-1.12.1/images/a.png", "jquery-ui-1.12.1/jquery-ui.min.js"]
    assert missing == 1 and not (tmp_path / dl.FREETYPE).exists()
    assert lines[0] == "qhull-2020-src-8.0.2.tgz: from deb.debian.org (the same file) (0.0 MB)"
    assert lines[1].startswith("freetype-2.6.1.tar.gz: not fetched (https://downloads.sourceforge.net/")
    assert "is not the release's" not in lines[1] and lines[2].startswith("jquery-ui-1.12.1.tar.gz: from npm's")
    again: list[str] = []
    dl.fill(tmp_path, freetype_git=str(tmp_path / "no-such-repo"), log=again.append)
    assert again[0] == f"qhull-2020-src-8.0.2.tgz: already in {tmp_path}"  # kept, not fetched again
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("git", "autoconf", "automake", "libtoolize")),
    reason="needs git and autotools (apt-get install autoconf automake libtool)",
)
def test_freetype_is_made_from_the_release_tag_as_make_dist_makes_it(web, tmp_path):
    repo = tmp_path / "freetype"
    (repo / "builds" / "unix").mkdir(parents=True)
    (repo / "autogen.sh").write_text("echo generated > builds/unix/configure; mkdir -p builds/unix/autom4te.cache\n")
    (repo / ".gitignore").write_text("*.o\n")
    (repo / "builds" / "unix" / "configure.ac").write_text("AC_INIT\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "Version 2.6.1 released"], check=True)
    subprocess.run([*git, "tag", "VER-2-6-1"], check=True)
    out = tmp_path / "dl"
    dl.fill(out, freetype_git=str(repo), log=lambda line: None)
    with tarfile.open(out / dl.FREETYPE) as tar:
        names = set(tar.getnames())
        configure = tar.extractfile("freetype-2.6.1/builds/unix/configure").read()
    assert configure == b"generated\n" and "freetype-2.6.1/builds/unix/configure.ac" in names
    assert not {n for n in names if n.endswith((".gitignore", "autom4te.cache"))}


def test_help_says_what_it_does_with_an_example(capsys):
    with pytest.raises(SystemExit):
        dl.main(["--help"])
    out = capsys.readouterr().out
    assert "downloads folder" in out and "example: python -m tasks.swebench_downloads ~/swe-repos/downloads" in out


def test_the_jqueryui_zip_is_repacked_with_its_folder(web, monkeypatch):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("jquery-ui-1.12.1/", "")
        archive.writestr("jquery-ui-1.12.1/jquery-ui.css", "css")
    web["https://jqueryui.com/resources/download/jquery-ui-1.12.1.zip"] = buffer.getvalue()
    monkeypatch.setattr(dl, "JQUERY_ZIP_SHA256", hashlib.sha256(buffer.getvalue()).hexdigest())
    with tarfile.open(fileobj=io.BytesIO(dl._jquery_from_zip())) as tar:
        assert tar.getnames() == ["jquery-ui-1.12.1/jquery-ui.css"]
        assert tar.extractfile("jquery-ui-1.12.1/jquery-ui.css").read() == b"css"
