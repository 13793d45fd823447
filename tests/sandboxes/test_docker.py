"""What is particular to the docker backend: hardening, labels and the reaper, images.
Shared behaviour is in test_conformance.py. All tests here need an engine (marker `docker`)."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sandboxes import SandboxError, SandboxLimits, SandboxSpec, make_sandbox, reaper
from sandboxes.base import DEFAULT_IMAGE
from tests.conftest import wait_until

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def engine():
    from sandboxes.docker_backend import client

    return client()


def _container(engine, sandbox) -> dict:
    return engine.api.inspect_container(sandbox.container_id)


def test_hardened_by_default(engine):
    with make_sandbox(SandboxSpec(), "docker") as sb:
        info = _container(engine, sb)
        host, config = info["HostConfig"], info["Config"]
        limits = SandboxLimits()
        assert host["NetworkMode"] == "none"
        # The supervisor (pid 1, root) keeps these; commands run as the image's USER with none.
        assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETPCAP", "SETUID"]
        assert config["User"] == "0"
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == limits.pids
        assert host["Memory"] == host["MemorySwap"] == limits.memory_bytes
        assert host["NanoCpus"] == int(limits.cpus * 1e9)
        assert host["Tmpfs"]["/tmp"].startswith(f"size={limits.tmp_bytes}")
        assert host["LogConfig"]["Type"] == "none" and not host["Privileged"]
        assert config["Labels"][f"{reaper.LABEL}.owner-pid"] == str(os.getpid())
        assert config["Labels"][f"{reaper.LABEL}.owner-run"] == reaper.RUN_ID
        assert sb.exec("id -un").output == "sandbox\n"  # the base image's non-root user


def test_every_limit_is_overridable(engine, tmp_path):
    limits = SandboxLimits(pids=100, memory_bytes=1 << 30, cpus=0.5, tmp_bytes=64 << 20)
    with make_sandbox(SandboxSpec(limits=limits, user="root"), "docker") as sb:
        host = _container(engine, sb)["HostConfig"]
        assert (host["PidsLimit"], host["Memory"], host["NanoCpus"]) == (100, 1 << 30, 500_000_000)
        assert sb.exec("df -B1 --output=size /tmp | tail -1").output.strip() == str(64 << 20)
        assert sb.exec("id -u").output == "0\n"
        assert int(sb.exec("grep CapEff /proc/self/status").output.split()[1], 16) == 0  # root without powers


def test_missing_own_image_names_the_image_and_the_fix():
    with pytest.raises(SandboxError, match=r"agentic-rl/nope:1 is not built.*python -m sandboxes build"):
        make_sandbox(SandboxSpec(image="agentic-rl/nope:1"), "docker")


def test_unreachable_engine_is_a_sandbox_error(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError, match="no Docker engine at unix:///nonexistent/docker.sock"):
        make_sandbox(SandboxSpec(), "docker")


def test_workspace_images_are_shared_by_content(engine, tmp_path):
    spaces = []
    for name in ("a", "b"):
        ws = tmp_path / name
        ws.mkdir()
        (ws / "f.txt").write_text("same\n")
        spaces.append(ws)
    with (
        make_sandbox(SandboxSpec(workspace=spaces[0]), "docker") as one,
        make_sandbox(SandboxSpec(workspace=spaces[1]), "docker") as two,
    ):
        assert _container(engine, one)["Image"] == _container(engine, two)["Image"]
        assert two.exec("stat -c %U f.txt; cat f.txt").output == "sandbox\nsame\n"


def test_a_fork_runs_its_parents_image_with_a_copy_of_its_layer_and_makes_no_image(engine):
    mine = {"label": [f"{reaper.LABEL}.kind=fork", f"{reaper.LABEL}.owner-pid={os.getpid()}"]}
    before = {image.id for image in reaper.list_images(engine, mine)}
    with make_sandbox(SandboxSpec(), "docker") as sb:
        sb.exec("echo 1 > /workspace/a && mkdir -p /workspace/d && echo 2 > /workspace/d/b && rm -rf /workspace/d")
        with sb.fork() as child, child.fork() as grandchild:
            assert {image.id for image in reaper.list_images(engine, mine)} == before
            assert _container(engine, grandchild)["Image"] == _container(engine, sb)["Image"]
            assert grandchild.exec("cat /workspace/a; test -e /workspace/d || echo gone").output == "1\ngone\n"


def test_where_layers_are_not_on_this_host_a_fork_commits_and_its_image_goes_with_it(engine, monkeypatch):
    from sandboxes import docker_backend

    monkeypatch.setattr(docker_backend, "_upper_dir", lambda info: None)  # as with a remote engine
    mine = {"label": [f"{reaper.LABEL}.kind=fork", f"{reaper.LABEL}.owner-pid={os.getpid()}"]}
    before = {image.id for image in reaper.list_images(engine, mine)}
    with make_sandbox(SandboxSpec(), "docker") as sb:
        sb.exec("echo 1 > /workspace/a")
        child = sb.fork()
        grandchild = child.fork()
        assert len({image.id for image in reaper.list_images(engine, mine)} - before) == 2
        child.close()  # its image is the parent of the grandchild's: it waits for that one
        grandchild.close()
    assert {image.id for image in reaper.list_images(engine, mine)} == before


def test_listing_images_survives_an_image_removed_as_it_is_listed(engine):
    """The SDK's `images.list()` lists, then inspects each image by id: an image another
    process removed in between failed the whole listing with 404 (CI, stop 47). Here one is
    removed right after the engine listed it; `list_images` still answers, from the listing."""
    container = engine.containers.create(DEFAULT_IMAGE, command="true")
    try:
        image = engine.api.commit(container.id, repository="agentic-rl/test-listed", tag=os.urandom(4).hex())
    finally:
        container.remove(force=True)
    real = engine.api.images

    class RemovingAfterListing:  # the engine's own listing, then the other process's removal
        def images(self, filters=None):
            listed = real(filters=filters)
            engine.api.remove_image(image["Id"], force=True)
            return listed

    class Client:
        api = RemovingAfterListing()

    listed = {found.id for found in reaper.list_images(Client())}
    assert image["Id"] in listed and image["Id"] not in {i.id for i in reaper.list_images(engine)}


def _owner_process(body: str) -> tuple[subprocess.Popen, str]:
    """A process that starts a docker sandbox, prints its container's id (its only output),
    then runs `body`; and that id."""
    script = textwrap.dedent(
        """
        from sandboxes import make_sandbox, SandboxSpec
        sb = make_sandbox(SandboxSpec(), "docker")
        print(sb.container_id, flush=True)
        """
    ) + textwrap.dedent(body)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    with owner.stdout:
        return owner, owner.stdout.readline().strip()


def _runs(engine, container_id: str, command: str) -> bool:
    """Whether a process of the container runs `command` (as `ps` shows it)."""
    import docker.errors

    try:
        top = engine.api.top(container_id, ps_args="-o pid,args")
    except docker.errors.APIError:  # not running (yet, or any more)
        return False
    return any(process[-1] == command for process in top.get("Processes") or [])


def _exists(engine, container_id: str) -> bool:
    return bool(engine.containers.list(all=True, filters={"id": container_id}))


@pytest.mark.signals
def test_reaper_removes_containers_of_a_killed_owner(engine):
    owner, container_id = _owner_process("sb.exec('sleep 300', timeout=600)\n")
    # Mid-command: the supervisor is busy and will not notice its owner go.
    wait_until(lambda: _runs(engine, container_id, "sleep 300"), time.monotonic() + 120, "the command to start")
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert _exists(engine, container_id)
    report = reaper.reap()
    assert report.docker is None and report.containers >= 1
    assert not _exists(engine, container_id)


@pytest.mark.signals
def test_sigterm_removes_the_owners_containers(engine):
    owner, container_id = _owner_process("import time\ntime.sleep(300)\n")
    assert _exists(engine, container_id)
    owner.send_signal(signal.SIGTERM)
    assert owner.wait(timeout=120) == -signal.SIGTERM  # the default action still happens
    assert not _exists(engine, container_id)


@pytest.mark.signals
def test_an_idle_sandbox_goes_when_its_owner_dies(engine):
    """Without the reaper: stdin closes with the owner, the supervisor exits, AutoRemove."""
    owner, container_id = _owner_process("import time\ntime.sleep(300)\n")
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):  # gone already
        engine.api.wait(container_id, timeout=120, condition="removed")
    assert not _exists(engine, container_id)


def test_build_is_cached_by_content(engine, tmp_path):
    from sandboxes.images import build, load_definition

    marker = f"built-{os.getpid()}"
    definition = tmp_path / "box.yaml"
    definition.write_text(
        textwrap.dedent(
            f"""
            name: test-box
            tag: agentic-rl/test-box:{marker}
            build:
              base: agentic-rl/base:bookworm
              setup:
                - echo {marker} > /etc/marker
              user: sandbox
            limits: {{timeout_s: 10}}
            """
        )
    )
    try:
        first = build(load_definition(definition), log=lambda *_: None)
        again = build(load_definition(definition), log=lambda *_: None)
        assert not first.cached and again.cached and again.image == first.image
        with make_sandbox(load_definition(definition).spec(), "docker") as sb:
            assert sb.exec("cat /etc/marker; id -un").output == f"{marker}\nsandbox\n"
            assert sb.spec.limits.timeout_s == 10
        definition.write_text(definition.read_text().replace("> /etc/marker", ">> /etc/marker"))
        changed = build(load_definition(definition), log=lambda *_: None)
        assert not changed.cached and changed.content_hash != first.content_hash
    finally:
        engine.images.remove(f"agentic-rl/test-box:{marker}", force=True)


def test_out_of_memory_kills_are_named():
    """Processes each under RLIMIT_AS can still exhaust the container's memory together."""
    with make_sandbox(SandboxSpec(limits=SandboxLimits(memory_bytes=256 << 20)), "docker") as sb:
        # Each hog holds its memory until it is killed (not for a while: on a busy machine the
        # first could be gone before the last starts); the first death ends the command.
        hog = "python3 -c 'x = bytearray(120 << 20); import time; time.sleep(600)'"
        result = sb.exec(f"for i in 1 2 3 4; do {hog} & done; wait -n; kill $(jobs -p); wait", timeout=300)
        assert result.cause == "memory" and "Killed" in result.output
        assert sb.exec("echo fine").output == "fine\n"  # the supervisor was not the victim


def test_workspace_image_cache_can_be_pruned(engine, tmp_path):
    import docker.errors

    (tmp_path / "unique.txt").write_text(f"{os.getpid()} {time.time()}\n")
    with make_sandbox(SandboxSpec(workspace=tmp_path), "docker") as sb:
        image = _container(engine, sb)["Image"]
        assert reaper.prune_workspace_images(engine, min_age_s=0, only={image}) == 0  # in use
    assert reaper.prune_workspace_images(engine, min_age_s=3600, only={image}) == 0  # too young
    assert reaper.prune_workspace_images(engine, min_age_s=0, only={image}) == 1
    with pytest.raises(docker.errors.ImageNotFound):
        engine.images.get(image)
