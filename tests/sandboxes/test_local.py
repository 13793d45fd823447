import time
from pathlib import Path

import pytest

from sandboxes import SandboxError, SandboxLimits, SandboxSpec, make_sandbox
from tests.conftest import needs_bwrap

pytestmark = needs_bwrap


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.txt").write_text("hello\n")
    return root


@pytest.fixture
def sandbox(workspace):
    with make_sandbox(SandboxSpec(workspace=workspace, limits=SandboxLimits(output_bytes=4096))) as sb:
        yield sb


def test_exec_reports_output_and_exit_code(sandbox):
    result = sandbox.exec("cat hello.txt; echo oops >&2; exit 3")
    assert result.exit_code == 3
    assert result.output == "hello\noops\n"
    assert not result.timed_out and not result.truncated


def test_cwd_and_exports_carry_over(sandbox):
    assert sandbox.exec("mkdir -p sub && cd sub && export COLOR=blue").exit_code == 0
    assert sandbox.exec("pwd; echo $COLOR").output == "/workspace/sub\nblue\n"


def test_workspace_is_a_private_copy(sandbox, workspace):
    sandbox.exec("echo changed > hello.txt; touch new.txt")
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert not (workspace / "new.txt").exists()
    assert sandbox.read_file("hello.txt") == b"changed\n"


def test_timeout_kills_the_whole_process_tree(sandbox):
    started = time.monotonic()
    result = sandbox.exec("(trap '' TERM; sleep 100) & sleep 100", timeout=1)
    assert result.timed_out
    assert time.monotonic() - started < 3
    # Nothing the command started is still alive.
    assert "sleep" not in sandbox.exec("ps -eo comm").output


def test_background_process_does_not_outlive_its_command(sandbox):
    result = sandbox.exec("sleep 60 & echo started")
    assert result.output == "started\n" and result.seconds < 2
    assert "sleep" not in sandbox.exec("ps -eo comm").output


def test_endless_output_is_capped_and_marked(sandbox):
    result = sandbox.exec("yes", timeout=1)
    assert result.truncated and result.timed_out
    assert len(result.output) == 4096


def test_no_network(sandbox):
    result = sandbox.exec(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)\" 2>&1 | tail -1"
    )
    assert "Network is unreachable" in result.output


def test_host_files_are_not_visible(sandbox):
    assert sandbox.exec("ls /root /home /work 2>&1").exit_code != 0
    assert sandbox.exec("test -e /etc/shadow").exit_code != 0


def test_non_utf8_output_is_replaced_not_fatal(sandbox):
    result = sandbox.exec(r"printf '\xff\xfeok'")
    assert result.output.endswith("ok") and "\ufffd" in result.output


def test_write_and_read_files(sandbox):
    sandbox.write_file("/workspace/a/b.txt", "text")
    assert sandbox.exec("cat a/b.txt").output == "text"
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("missing.txt")


def test_fork_is_independent(sandbox):
    sandbox.exec("cd /tmp && export X=1")
    child = sandbox.fork()
    try:
        assert child.exec("pwd; echo $X").output == "/tmp\n1\n"
        child.write_file("/workspace/hello.txt", "child")
        assert sandbox.read_file("hello.txt") == b"hello\n"
        sandbox.write_file("/workspace/hello.txt", "parent")
        assert child.read_file("hello.txt") == b"child"
    finally:
        child.close()


def test_dead_or_closed_sandbox_raises_sandbox_error(sandbox):
    with pytest.raises(SandboxError, match="exited|dead|gone"):
        sandbox.exec("kill -9 $PPID")  # the parent of a command is the sandbox's shell
    with pytest.raises(SandboxError):
        sandbox.exec("true")
    sandbox.close()
    with pytest.raises(SandboxError, match="closed"):
        sandbox.exec("true")


def test_missing_workspace_is_a_clear_error(tmp_path):
    with pytest.raises(SandboxError, match="not a directory"):
        make_sandbox(SandboxSpec(workspace=tmp_path / "nope"))


def test_unknown_backend():
    with pytest.raises(SandboxError, match="unknown sandbox backend"):
        make_sandbox(SandboxSpec(), backend="nope")
