"""Python environments for sandboxes (`sandboxes.pyenv`), mounts, and build copies: the parts
that need no package index. A full build is exercised by tests/tasks/test_swebench_envs.py."""

import dataclasses
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sandboxes import Mount, SandboxError, SandboxSpec, close_all, make_sandbox
from sandboxes.images import BuildRecipe, Copy, DefinitionError, content_hash, load_definition, tree_fingerprint
from sandboxes.pyenv import EnvironmentBuildError, exclusive_lock, find_python, installed_pythons, pip_settings, prepare
from tests.conftest import needs_bwrap


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "box.yaml"
    path.write_text(text)
    return path


def test_recipes_without_copies_keep_their_hash():
    """Built images are found by this hash: adding `copy` must not rebuild the base image."""
    recipe = BuildRecipe(base="img", setup=("echo a",), user="sandbox")
    old_body = {"base": "img", "debootstrap": None, "setup": ["echo a"], "env": {}, "user": "sandbox"}
    old = hashlib.sha256(json.dumps({"format": 1, "recipe": old_body, "base": "sha256:1"}, sort_keys=True).encode())
    assert content_hash(recipe, "sha256:1") == old.hexdigest()


def test_copies_are_hashed_by_what_they_copy(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a")
    (tmp_path / "src" / "skip.pyc").write_text("x")
    recipe = BuildRecipe(base="img", copy=(Copy(tmp_path / "src", "/opt/src", ("*.pyc",)),))
    before = content_hash(recipe, "sha256:1")
    (tmp_path / "src" / "skip.pyc").write_text("changed, but excluded")
    assert content_hash(recipe, "sha256:1") == before
    (tmp_path / "src" / "a.txt").write_text("a longer a")
    assert content_hash(recipe, "sha256:1") != before
    assert tree_fingerprint(tmp_path / "src") != tree_fingerprint(tmp_path / "src", ("*.pyc",))


def test_python_mounts_and_copies_parse_with_paths_anchored(tmp_path):
    (tmp_path / "data").mkdir()
    path = write(
        tmp_path,
        "mounts: [{source: data, target: /data}]\n"
        "build: {base: agentic-rl/base:bookworm, copy: [{source: data, target: /opt/data}]}\n"
        "python: {version: '3.9', setup: [python -m pip install x], install: [python -m pip install -e .]}\n",
    )
    definition = load_definition(path)
    assert definition.mounts == (Mount(tmp_path / "data", "/data"),)
    assert definition.build.copy[0].source == tmp_path / "data"
    assert definition.python.version == "3.9" and definition.python.install == ("python -m pip install -e .",)
    with pytest.raises(DefinitionError, match="python environment is not built yet"):
        definition.spec()
    assert dataclasses.replace(definition, python=None).spec().mounts == definition.mounts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mounts: [{source: nope, target: /x}]\n", r"field 'mounts\.0\.source': .*nope does not exist"),
        ("mounts: [{source: ., target: x}]\n", r"field 'mounts\.0\.target': must be an absolute path"),
        ("python: {setup: [x]}\n", r"field 'python\.version': give a CPython version"),
        ("python: {version: '3.9', conda: [x]}\n", r"field 'python\.conda': unknown field"),
    ],
)
def test_bad_python_and_mount_fields_name_the_field(tmp_path, text, message):
    with pytest.raises(DefinitionError, match=message):
        load_definition(write(tmp_path, text))


def test_interpreters_come_from_pyenv_and_a_missing_one_is_named(tmp_path, monkeypatch):
    installed = installed_pythons()
    if not installed:
        pytest.skip("pyenv has no CPython here")
    newest = max(installed, key=lambda v: tuple(map(int, v.split("."))))
    major_minor = ".".join(newest.split(".")[:2])
    assert find_python(major_minor) == installed[newest] and find_python(newest) == installed[newest]
    with pytest.raises(EnvironmentBuildError, match=r"Python 2\.5 is not installed") as error:
        find_python("2.5")
    assert error.value.part == "python"
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    with pytest.raises(EnvironmentBuildError, match="has: none"):
        find_python(major_minor)


def test_the_hosts_pip_settings_follow_builds(tmp_path, monkeypatch):
    """A CA bundle and a local wheel folder the host's pip uses: mounted as they are for a
    local build; for an image, the file is copied in and the folder left out."""
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_CERT", str(ca))
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    local = pip_settings(for_image=False)
    assert local.variables["PIP_CERT"] == str(ca) and local.variables["SSL_CERT_FILE"] == str(ca)
    assert local.variables["PIP_FIND_LINKS"] == str(wheels) and {ca, wheels} <= set(local.paths)
    image = pip_settings(for_image=True)
    index = image.paths.index(ca)
    assert image.variables["PIP_CERT"] == f"/opt/pip-host/{index}-ca.pem"
    assert "PIP_FIND_LINKS" not in image.variables and wheels not in image.paths


def test_local_refuses_system_steps_unless_the_host_has_what_they_make(tmp_path):
    if not installed_pythons():
        pytest.skip("pyenv has no CPython here")
    version = ".".join(next(iter(installed_pythons())).split(".")[:2])
    refused = load_definition(write(tmp_path, f"python: {{version: '{version}', system: [apt-get install -y x]}}\n"))
    with pytest.raises(EnvironmentBuildError, match="need root in an image.*use the docker backend") as error:
        prepare(refused, "local", log=lambda line: None)
    assert error.value.part == "system"
    unmet = dataclasses.replace(refused, python=dataclasses.replace(refused.python, system_check="false"))
    with pytest.raises(EnvironmentBuildError, match="this host lacks what they make"):
        prepare(unmet, "local", log=lambda line: None)


@needs_bwrap
def test_local_sandboxes_see_mounts_read_only_unless_writable(tmp_path):
    shared, scratch = tmp_path / "shared", tmp_path / "scratch"
    shared.mkdir()
    scratch.mkdir()
    (shared / "tool.txt").write_text("tool\n")
    scratch.chmod(0o777)  # the sandbox's own uid writes into it
    mounts = (Mount(shared, "/root/.pyenv/x"), Mount(scratch, "/opt/scratch", writable=True))
    with make_sandbox(SandboxSpec(mounts=mounts)) as sandbox:
        assert sandbox.exec("cat /root/.pyenv/x/tool.txt").output == "tool\n"  # parents made readable
        assert sandbox.exec("touch /root/.pyenv/x/new").exit_code != 0
        assert sandbox.exec("echo hi > /opt/scratch/out").exit_code == 0
    assert (scratch / "out").read_text() == "hi\n"


def _newest_python3() -> str:
    """The newest CPython 3 pyenv has here, as `3.X`; the test is skipped without one."""
    threes = [v for v in installed_pythons() if v.startswith("3.")]
    if not threes:
        pytest.skip("pyenv has no CPython 3 here")
    return ".".join(max(threes, key=lambda v: tuple(map(int, v.split(".")))).split(".")[:2])


@needs_bwrap
def test_install_steps_read_python_files_and_a_changed_file_rebuilds(tmp_path, monkeypatch):
    """`python.files`: host files the steps read (a source a build would download), bound
    read-only into the local build at their target; the workspace's build is keyed by them."""
    monkeypatch.setenv("AGENTIC_RL_ENV_CACHE", str(tmp_path / "envs"))
    version = _newest_python3()
    (tmp_path / "ws").mkdir()
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl" / "src.tgz").write_text("first\n")
    path = write(
        tmp_path,
        f"workspace: ws\npython: {{version: '{version}', install: ['cp /opt/downloads/src.tgz got.txt'],"
        " files: [{source: dl/src.tgz, target: /opt/downloads/src.tgz}]}\n",
    )
    definition = load_definition(path)
    assert definition.python.files == (Copy(tmp_path / "dl" / "src.tgz", "/opt/downloads/src.tgz"),)
    first = prepare(definition, "local", log=lambda line: None)
    assert (first.workspace / "got.txt").read_text() == "first\n" and "workspace" in first.built
    (tmp_path / "dl" / "src.tgz").write_text("second, longer\n")
    second = prepare(definition, "local", log=lambda line: None)
    assert second.workspace != first.workspace and (second.workspace / "got.txt").read_text() == "second, longer\n"
    with pytest.raises(DefinitionError, match=r"python.files.0.source.*does not exist"):
        load_definition(write(tmp_path, f"python: {{version: '{version}', files: [{{source: nope, target: /x}}]}}\n"))


@needs_bwrap
def test_a_build_removes_what_a_killed_build_of_its_target_left(tmp_path, monkeypatch):
    """A SIGKILL skips the `finally` that removes a build's staging folder (scikit-learn's
    left a gigabyte each): the next build of that target, holding its lock, removes them;
    another target's staging folder (a build that may be running) stays."""
    monkeypatch.setenv("AGENTIC_RL_ENV_CACHE", str(tmp_path / "envs"))
    (tmp_path / "ws").mkdir()
    path = write(tmp_path, f"workspace: ws\npython: {{version: '{_newest_python3()}', install: ['touch got.txt']}}\n")
    first = prepare(load_definition(path), "local", log=lambda line: None)
    installed = first.workspace.parent
    shutil.rmtree(installed)  # as if the build that made it had been killed before the end
    killed = installed.with_name(f".{installed.name}-k1ll3d")
    (killed / "venv").mkdir(parents=True)
    (killed / "venv" / "big").write_bytes(b"x" * 4096)
    other = installed.with_name(".ws-0000000000000000000-runs")
    other.mkdir()
    again = prepare(load_definition(path), "local", log=lambda line: None)
    assert "workspace" in again.built and (again.workspace / "got.txt").is_file()
    assert not killed.exists() and other.is_dir()
    assert sorted(p.name for p in installed.parent.glob(f".{installed.name}-*")) == []


@pytest.mark.docker
def test_docker_builds_copy_python_files_in_for_the_install_steps(tmp_path):
    version = _newest_python3()
    (tmp_path / "ws").mkdir()
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl" / "src.tgz").write_text(f"from the host {tmp_path.name}\n")
    path = write(
        tmp_path,
        f"workspace: ws\npython: {{version: '{version}', install: ['cp /opt/downloads/src.tgz got.txt'],"
        " files: [{source: dl/src.tgz, target: /opt/downloads/src.tgz}]}\n",
    )
    prepared = prepare(load_definition(path), "docker", log=lambda line: None)
    with make_sandbox(SandboxSpec(image=prepared.image), "docker") as sandbox:
        assert sandbox.exec("cat got.txt").output == f"from the host {tmp_path.name}\n"


@pytest.mark.signals
def test_a_wait_for_another_process_s_build_lock_ends_on_close_all(tmp_path, caplog):
    """An interrupted command's build thread blocked on a lock another process holds (the
    other's build running for minutes) must not hold the exit: `close_all` ends the wait with
    a `SandboxError`; a wait that starts after it waits as before."""
    lock = tmp_path / "ws-key.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import fcntl,sys; f=open({str(lock)!r},'a'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "held\n"
        waiting = threading.Event()

        class Said(logging.Handler):
            def emit(self, record):
                if "another process is building it" in record.getMessage():
                    waiting.set()

        said = Said()
        logging.getLogger("sandboxes.pyenv").addHandler(said)
        outcome: list[object] = []

        def build() -> None:
            try:
                with exclusive_lock(lock):
                    outcome.append("held it")
            except SandboxError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=build)
        try:
            with caplog.at_level(logging.INFO, logger="sandboxes.pyenv"):
                thread.start()
                assert waiting.wait(60), "the build never said it waits"
                close_all()
                thread.join(60)
        finally:  # a failed wait must not leave the handler on the logger for later tests
            logging.getLogger("sandboxes.pyenv").removeHandler(said)
        assert not thread.is_alive() and isinstance(outcome[0], SandboxError), outcome
        assert "another process held it" in str(outcome[0])
        later: list[str] = []

        def build_later() -> None:
            with exclusive_lock(lock):
                later.append("held it")

        thread = threading.Thread(target=build_later)
        thread.start()
        holder.stdin.close()  # the other process ends: its lock is released
        thread.join(60)
        assert later == ["held it"]
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # else a ResourceWarning names its pipe
