"""The warm pool (`sandboxes.pool`) over real sandboxes: what it hands out is fresh and used
once, it refills in the background, and closing it (or the process ending on Ctrl-C) leaves
no sandbox behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sandboxes import SandboxError, SandboxPool, SandboxSpec, make_sandbox, started_warm
from sandboxes.local import bwrap_available
from sandboxes.pool import spec_key
from tests.conftest import needs_bwrap, wait_until

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("pristine\n")
    return folder


def _roots(folder: Path) -> list[str]:
    """The local sandboxes' private folders in `folder` (one per sandbox alive or left
    behind), and their workspace layers' (`sandbox-layer-*`) when `layers`."""
    return sorted(p.name for p in folder.glob("sandbox-*") if not p.name.startswith("sandbox-layer-"))


@pytest.fixture
def sandbox_dirs(tmp_path: Path, monkeypatch):
    """The local backend's folders go under a folder of this test's; the function returns
    the sandboxes' own folders (one per sandbox), and `everything=True` every folder a
    sandbox made (workspace layers included): what would be left behind."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return lambda everything=False: sorted(p.name for p in folder.iterdir()) if everything else _roots(folder)


def _containers() -> set[str]:
    """This process's docker sandboxes (by their owner label)."""
    from sandboxes import reaper
    from sandboxes.docker_backend import client

    mine = {"label": [f"{reaper.LABEL}.owner-pid={os.getpid()}", f"{reaper.LABEL}.kind=sandbox"]}
    return {c.id for c in client().containers.list(all=True, filters=mine)}


def _live(backend: str, sandbox_dirs) -> set[str]:
    return _containers() if backend == "docker" else set(sandbox_dirs())


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    if request.param == "local" and (problem := bwrap_available()):
        pytest.skip(f"local sandbox unavailable: {problem}")
    return request.param


def test_taken_sandboxes_are_fresh_never_reused_and_the_pool_refills(backend, workspace, sandbox_dirs):
    spec = SandboxSpec(workspace=workspace)
    with SandboxPool(lambda s: make_sandbox(s, backend), size=2) as pool:
        first = pool(spec)  # nothing ready yet: started now, and the pool starts filling
        assert not started_warm(first)
        first.exec("echo dirty > a.txt && touch left-behind && export LEFT=1")
        first.close()
        assert pool.wait_ready(spec, timeout=120)
        assert pool.ready(spec) == 2
        taken = [pool(spec), pool(spec)]
        for sandbox in taken:
            assert started_warm(sandbox) and sandbox is not first
            assert sandbox.exec("cat a.txt; ls; echo ${LEFT:-unset}").output.split() == ["pristine", "a.txt", "unset"]
        assert taken[0] is not taken[1]
        taken[0].write_file("mine.txt", "only here")
        assert taken[1].exec("ls mine.txt").exit_code != 0  # two sandboxes, nothing shared
        assert pool.wait_ready(spec, timeout=120)  # refilled after the two were taken
        assert pool.counts == {"warm_starts": 2, "cold_starts": 1, "background_starts": 4}
        for sandbox in taken:
            sandbox.close()


def test_close_leaves_no_sandbox_behind(backend, workspace, sandbox_dirs):
    spec = SandboxSpec(workspace=workspace)
    before = _live(backend, sandbox_dirs)
    pool = SandboxPool(lambda s: make_sandbox(s, backend), size=2)
    held = pool(spec)
    assert pool.wait_ready(spec, timeout=120)
    assert len(_live(backend, sandbox_dirs) - before) == 3  # the one handed out and two idle
    pool.close()
    pool.close()  # idempotent
    assert len(_live(backend, sandbox_dirs) - before) == 1  # only the one handed out: it is its user's
    held.close()
    assert _live(backend, sandbox_dirs) == before
    if backend == "local":
        assert sandbox_dirs(everything=True) == []  # no workspace layer either
    with pytest.raises(SandboxError, match="the sandbox pool is closed"):
        pool(spec)


@needs_bwrap
def test_a_start_under_way_at_close_is_closed_too(workspace, sandbox_dirs):
    """close() while the pool's thread is starting a sandbox: that sandbox is closed when its
    start ends, and nothing is left."""
    started, release = threading.Event(), threading.Event()
    calls = []

    def factory(spec):
        calls.append(spec)
        if len(calls) == 2:  # the first background start: hold it until close() has run
            started.set()
            release.wait(60)
        return make_sandbox(spec)

    spec = SandboxSpec(workspace=workspace)
    pool = SandboxPool(factory, size=1)
    held = pool(spec)
    assert started.wait(60)
    closer = threading.Thread(target=pool.close)
    closer.start()
    # Released once close() has begun (not at once: the start could end before close() ran,
    # and the test would see an idle sandbox closed instead of a start under way).
    wait_until(lambda: pool.closed, time.monotonic() + 60, "close() to begin")
    release.set()
    closer.join(60)
    assert not closer.is_alive() and len(calls) == 2
    assert len(sandbox_dirs()) == 1  # the one handed out
    held.close()
    assert sandbox_dirs(everything=True) == []


@needs_bwrap
def test_specs_past_max_specs_are_pushed_out_and_their_sandboxes_closed(tmp_path, workspace, sandbox_dirs):
    other = tmp_path / "other"
    other.mkdir()
    first, second = SandboxSpec(workspace=workspace), SandboxSpec(workspace=other)
    with SandboxPool(make_sandbox, size=1, max_specs=1) as pool:
        pool(first).close()
        assert pool.wait_ready(first, timeout=120)
        assert len(sandbox_dirs()) == 1
        pool(second).close()  # pushes `first` out: its idle sandbox is closed
        assert pool.ready(first) == 0
        assert pool.wait_ready(second, timeout=120)
        assert len(sandbox_dirs()) == 1 and pool.ready() == 1
    assert sandbox_dirs(everything=True) == []


def test_a_failing_background_start_is_not_retried_until_asked_again():
    calls = []

    class Plain:  # a stand-in sandbox: only its identity and close() matter here
        def close(self):
            pass

    def factory(spec):
        calls.append(spec)
        if len(calls) > 1:
            raise SandboxError("backend down")
        return Plain()

    spec = SandboxSpec()
    with SandboxPool(factory, size=1) as pool:
        pool(spec)
        assert pool.wait_ready(spec, timeout=60) is False  # its one background start failed
        assert len(calls) == 2
        with pytest.raises(SandboxError, match="backend down"):  # asked again: a cold start, which fails
            pool(spec)
        assert pool.wait_ready(spec, timeout=60) is False
        assert len(calls) == 4  # the cold start, and one more background try


def test_a_pooled_sandbox_serves_only_an_equal_spec():
    a = SandboxSpec(env={"A": "1", "B": "2"})
    assert spec_key(a) == spec_key(SandboxSpec(env={"B": "2", "A": "1"}))  # the env's order does not matter
    assert spec_key(a) != spec_key(SandboxSpec(env={"A": "1"}))
    assert spec_key(a) != spec_key(SandboxSpec(env={"A": "1", "B": "2"}, image="other"))


def test_size_zero_is_a_plain_factory_and_a_bad_size_is_one_line():
    made = []
    with SandboxPool(lambda spec: made.append(spec) or object(), size=0) as pool:
        sandbox = pool(SandboxSpec())
        assert not started_warm(sandbox) and len(made) == 1 and pool.counts["cold_starts"] == 1
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError) as error:
            SandboxPool(make_sandbox, size=bad)
        assert str(error.value) == f"sandbox pool size must be a whole number >= 0 (0: no pool), got {bad!r}"


@pytest.mark.signals
@needs_bwrap
def test_ctrl_c_leaves_no_sandbox_behind(workspace, tmp_path):
    """A process interrupted with its pool full (and a sandbox in use) leaves nothing: the
    pool closes at exit, as the sandbox in use does.

    The Ctrl-C goes to the main thread (`pthread_kill`), which then blocks until it breaks the
    wait: a process-directed `os.kill` as the last statement could be taken by a pool thread
    and the interpreter reach its end first (exit 0, no KeyboardInterrupt) on a busy machine.
    The script restores Python's Ctrl-C handler first: a test run started in the background
    (`cmd &` in a script, as CI and stress runs are) starts with SIGINT ignored, which
    children inherit and Python then leaves alone, where a terminal's Ctrl-C has it."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    script = textwrap.dedent(
        f"""
        import os, signal, sys, threading
        from sandboxes import SandboxPool, SandboxSpec, make_sandbox
        signal.signal(signal.SIGINT, signal.default_int_handler)
        spec = SandboxSpec(workspace={str(workspace)!r})
        pool = SandboxPool(make_sandbox, size=2)
        in_use = pool(spec)
        assert pool.wait_ready(spec, timeout=120)
        print(len([n for n in os.listdir({str(folder)!r}) if n.startswith("sandbox-") and not n.startswith("sandbox-layer-")]), flush=True)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        threading.Event().wait(120)  # the KeyboardInterrupt breaks this wait
        sys.exit("SIGINT was not handled within 120 s")
        """
    )
    env = dict(os.environ, TMPDIR=str(folder))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert "KeyboardInterrupt" in done.stderr and done.returncode != 0
    assert done.stdout.split() == ["3"]  # one in use, two ready, when Ctrl-C came
    # No sandbox folder, no workspace layer (the compiled supervisor, a cache, stays).
    assert [p.name for p in folder.iterdir() if p.name != "agentic-rl"] == []
