"""What every `Sandbox` backend must do: behaviour checks and attacks, as plain functions.

Each check takes a `Harness` (how to start a sandbox of the backend under test, a scratch
directory on the host, and how to break the backend from outside) and raises
AssertionError when the backend falls short. The test suite runs every check over every
backend (tests/sandboxes/test_conformance.py); a new backend is checked the same way, or
with `run_checks(harness)`.

Attacks (the `ATTACKS` table) each end within their timeout + 2 s, leave the host as it
was (the scratch files outside the workspace, the workspace original, nothing new on the
host), leave the sandbox usable with nothing of the attack still running, and say what
stopped them (`timed_out`, `truncated`, `cause`, or `SandboxError` for infrastructure).

Over 450 lines on purpose: it is the catalogue of what a backend must do, one short function
per check or attack (about 45); a new backend's author reads it as one list, and
`run_checks` runs it whole.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandboxes.base import ExecResult, Sandbox, SandboxError, SandboxLimits, SandboxSpec

logger = logging.getLogger(__name__)

DISK_SLACK = 256 * 1024**2
"""How much more than a sandbox's disk quota the host's disks may lose in `attack_fill_disk`
(filesystem metadata, other activity on the host, the btrfs driver counting the image)."""
GRACE_S = 2.0
"""How far past its timeout an attack may run (killing, draining, restarting the shell)."""
# Builtins only, so that counting starts no process of its own.
COUNT_PROCESSES = "n=0; for p in /proc/[0-9]*; do n=$((n + 1)); done; echo $n"


# Checks fail through these, not `assert`: `python -O` strips asserts, and a check run that
# way must still fail.
def _check(condition: object, message: object) -> None:
    """Fail the check with `message` unless `condition` holds."""
    if not condition:
        raise AssertionError(message)


def _equal(actual: object, expected: object) -> None:
    """Fail the check, saying both values, unless `actual == expected`."""
    if actual != expected:
        raise AssertionError(f"got {actual!r}, expected {expected!r}")


@dataclass
class Harness:
    make: Callable[[SandboxSpec], Sandbox]
    """Start a sandbox of the backend under test."""
    tmp: Path
    """A scratch directory on the host, outside every workspace."""
    break_backend: Callable[[Sandbox], None]
    """Make the sandbox's machinery fail from outside (kill its process, remove its container)."""
    limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(output_bytes=4096, timeout_s=20))
    disks: list[Path] = field(default_factory=list)
    """Host folders whose free space a sandbox's writes could take (besides `tmp`), e.g.
    the docker engine's data root."""

    def workspace(self) -> Path:
        root = self.tmp / f"ws-{uuid.uuid4().hex[:8]}"
        root.mkdir()
        (root / "hello.txt").write_text("hello\n")
        (root / "src").mkdir()
        (root / "src" / "code.py").write_text("print('hi')\n")
        return root

    @contextlib.contextmanager
    def sandbox(self, **limits: object) -> Iterator[Sandbox]:
        spec = SandboxSpec(workspace=self.workspace(), limits=replace(self.limits, **limits))
        sandbox = self.make(spec)
        try:
            yield sandbox
        finally:
            sandbox.close()


def _timed(sandbox: Sandbox, command: str, timeout: float) -> tuple[ExecResult, float]:
    started = time.monotonic()
    result = sandbox.exec(command, timeout=timeout)
    elapsed = time.monotonic() - started
    _check(elapsed <= timeout + GRACE_S, f"{command!r} took {elapsed:.1f} s with a timeout of {timeout} s")
    return result, elapsed


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        h.update(str(path.relative_to(root)).encode())
        if path.is_file() and not path.is_symlink():
            h.update(path.read_bytes())
    return h.hexdigest()


@contextlib.contextmanager
def _host_untouched(h: Harness, sandbox: Sandbox) -> Iterator[None]:
    """The attack leaves the host's files and the sandbox's process table as they were."""
    sentinel = h.tmp / "host-sentinel"
    sentinel.mkdir(exist_ok=True)
    (sentinel / "secret.txt").write_text("host secret\n")
    before_host = _digest(h.tmp)
    before_procs = sandbox.exec(COUNT_PROCESSES).output
    yield
    _check(_digest(h.tmp) == before_host, "files on the host changed")
    after = sandbox.exec(COUNT_PROCESSES)
    _check(after.ok, f"the sandbox is not usable after the attack: {after}")
    _check(
        after.output == before_procs,
        f"processes left behind: {before_procs.strip()} before, {after.output.strip()} after",
    )


# -- behaviour --------------------------------------------------------------------------------
def check_output_and_exit_code(h: Harness) -> None:
    with h.sandbox() as sb:
        result = sb.exec("cat hello.txt; echo oops >&2; exit 3")
        _check(result.exit_code == 3 and not result.ok, "expected result.exit_code == 3 and not result.ok")
        _equal(result.output, "hello\noops\n")
        _check(
            not result.timed_out and not result.truncated and result.cause is None,
            "expected not result.timed_out and not result.truncated and result.cause is None",
        )
        _equal(sb.exec("echo still here").output, "still here\n")  # `exit` ended the command only


def check_long_output_keeps_its_start_and_end(h: Harness) -> None:
    """Past the cap, the first half and the end are kept around one line naming what was
    dropped: a test run's summary comes last."""
    with h.sandbox() as sb:
        cap = h.limits.output_bytes
        result = sb.exec(f"echo FIRST; head -c {cap * 3} /dev/zero | tr '\\0' x; echo; echo LAST")
        _check(result.ok and result.truncated, "expected result.ok and result.truncated")
        _equal(len(result.output), cap)
        _check(result.output.startswith("FIRST\nxxx"), "expected the output to start with FIRST")
        _check(result.output.endswith("xxx\nLAST\n"), "expected the output to end with LAST")
        _check("bytes of output dropped ...]" in result.output, "expected a line saying how much was dropped")


def check_cwd_and_exports_carry_over(h: Harness) -> None:
    with h.sandbox() as sb:
        _check(
            sb.exec("mkdir -p sub && cd sub && export COLOR=blue && greet() { echo hi $1; }").ok,
            'expected sb.exec("mkdir -p sub && cd sub && export COLOR=blue && greet() { echo hi $1; }").ok',
        )
        _equal(sb.exec("pwd; echo $COLOR").output, "/workspace/sub\nblue\n")
        _equal(sb.exec("greet you").output, "hi you\n")  # one shell: functions persist too
        _check(sb.exec("unset COLOR; cd ..").ok, 'expected sb.exec("unset COLOR; cd ..").ok')
        _equal(sb.exec("pwd; echo ${COLOR:-unset}").output, "/workspace\nunset\n")


def check_state_survives_a_killed_shell(h: Harness) -> None:
    with h.sandbox() as sb:
        sb.exec("cd src && export KEEP=1")
        _check(
            sb.exec("sleep 30", timeout=0.5).timed_out, 'expected sb.exec("sleep 30", timeout=0.5).timed_out'
        )  # kills the shell itself
        _equal(sb.exec("kill -9 $$").exit_code, 137)
        _equal(sb.exec("set -e; false").exit_code, 1)
        _equal(sb.exec("pwd; echo $KEEP").output, "/workspace/src\n1\n")


def check_spec_env_and_workdir(h: Harness) -> None:
    spec = SandboxSpec(workspace=h.workspace(), env={"GREETING": "hello there"}, limits=h.limits)
    with h.make(spec) as sb:
        _equal(sb.exec('pwd; echo "$GREETING"').output, "/workspace\nhello there\n")


def check_stdin_is_empty(h: Harness) -> None:
    with h.sandbox() as sb:
        result, elapsed = _timed(sb, "cat; read x; echo done", timeout=5)
        _check(result.output == "done\n" and elapsed < 2, 'expected result.output == "done\\n" and elapsed < 2')


def check_workspace_is_a_private_copy(h: Harness) -> None:
    spec = SandboxSpec(workspace=h.workspace(), limits=h.limits)
    with h.make(spec) as sb:
        sb.exec("echo changed > hello.txt; touch new.txt; rm -r src")
        _equal((spec.workspace / "hello.txt").read_text(), "hello\n")
        _check(
            not (spec.workspace / "new.txt").exists() and (spec.workspace / "src" / "code.py").exists(),
            'expected not (spec.workspace / "new.txt").exists() and (spec.workspace / "src" / "code.py").exists()',
        )
        _equal(sb.read_file("hello.txt"), b"changed\n")


def check_write_and_read_files(h: Harness) -> None:
    with h.sandbox() as sb:
        sb.write_file("/workspace/a/b.txt", "text")
        sb.write_file("bin.dat", bytes(range(256)))
        _equal(sb.exec("cat a/b.txt").output, "text")
        _equal(sb.read_file("bin.dat"), bytes(range(256)))
        _check(
            sb.exec("echo more >> a/b.txt").ok, 'expected sb.exec("echo more >> a/b.txt").ok'
        )  # the sandbox's user owns what it was given
        try:
            sb.read_file("missing.txt")
        except FileNotFoundError:
            pass
        else:
            raise AssertionError("reading a missing file did not raise FileNotFoundError")


def check_limits_are_applied(h: Harness) -> None:
    with h.sandbox(file_bytes=8 * 1024 * 1024, open_files=256, memory_bytes=1 << 30) as sb:
        out = sb.exec("ulimit -f; ulimit -n; ulimit -v").output.split()
        _check(out == [str(8 * 1024 * 1024 // 1024), "256", str((1 << 30) // 1024)], out)
        capabilities = sb.exec("grep CapEff /proc/self/status").output.split()[1]
        _check(int(capabilities, 16) == 0, f"commands hold capabilities {capabilities}")


def check_fork_is_independent(h: Harness) -> None:
    with h.sandbox() as sb:
        sb.exec("cd src && export X=1 && echo parent-before > ../state.txt")
        with sb.fork() as child:
            _equal(child.exec("pwd; echo $X; cat ../state.txt").output, "/workspace/src\n1\nparent-before\n")
            child.write_file("/workspace/hello.txt", "child")
            sb.write_file("/workspace/state.txt", "parent-after")
            child.exec("rm code.py")
            _equal(sb.read_file("hello.txt"), b"hello\n")
            _equal(child.read_file("state.txt"), b"parent-before\n")
            _check(
                sb.exec("test -f code.py").ok and not child.exec("test -f code.py").ok,
                'expected sb.exec("test -f code.py").ok and not child.exec("test -f code.py").ok',
            )
            with child.fork() as grandchild:
                grandchild.exec("echo grandchild > /workspace/hello.txt")
                _equal(child.read_file("hello.txt"), b"child")
                _equal(grandchild.read_file("state.txt"), b"parent-before\n")
                _check(not grandchild.exec("test -f code.py").ok, 'expected not grandchild.exec("test -f code.py").ok')
            _equal(sb.read_file("hello.txt"), b"hello\n")


def check_many_forks_of_one_parent(h: Harness) -> None:
    with h.sandbox() as sb:
        children = []
        try:
            for i in range(3):
                sb.exec(f"echo {i} > count.txt")
                children.append(sb.fork())
            _equal([c.read_file("count.txt") for c in children], [b"0\n", b"1\n", b"2\n"])
        finally:
            for child in children:
                child.close()
        _equal(sb.read_file("count.txt"), b"2\n")


def check_forks_started_ahead_are_the_same_forks(h: Harness) -> None:
    """`prefork` is a hint (the local backend starts sandboxes ahead; others, none): a fork
    taken after it has the parent's files, cwd and exports as they are at the fork, not at
    the prefork, as independently as any fork; more forks than started ahead still work, and
    spares never taken go with their parent."""
    from sandboxes import prefork

    with h.sandbox() as sb:
        prefork(sb, 1)
        with sb.fork() as unchanged:  # nothing changed since the start: an empty snapshot
            _equal(unchanged.exec("cat hello.txt src/code.py").output, "hello\nprint('hi')\n")
        prefork(sb, 2)
        sb.exec("cd src && export X=1 && echo before > ../state.txt")
        children = []
        try:
            for i in range(3):  # one more than started ahead
                sb.exec(f"echo {i} > ../count.txt")
                children.append(sb.fork())
            outputs = [child.exec("pwd; echo $X; cat ../count.txt ../state.txt").output for child in children]
            _equal(outputs, [f"/workspace/src\n1\n{i}\nbefore\n" for i in range(3)])
            children[0].exec("echo child > ../state.txt")
            sb.exec("echo parent > ../count.txt")
            _equal([child.read_file("state.txt") for child in children], [b"child\n", b"before\n", b"before\n"])
            _equal(children[0].read_file("count.txt"), b"0\n")
            prefork(children[0], 1)
            with children[0].fork() as grandchild:
                _equal(grandchild.read_file("state.txt"), b"child\n")
        finally:
            for child in children:
                child.close()
        _equal(sb.read_file("state.txt"), b"before\n")
        prefork(sb, 2)  # never taken: closed with `sb`


def check_close_is_idempotent_and_final(h: Harness) -> None:
    with h.sandbox() as sb:
        sb.close()
        sb.close()
        try:
            sb.exec("true")
        except SandboxError as exc:
            _check("closed" in str(exc), 'expected "closed" in str(exc)')
        else:
            raise AssertionError("a closed sandbox ran a command")


def check_missing_workspace_is_a_clear_error(h: Harness) -> None:
    try:
        h.make(SandboxSpec(workspace=h.tmp / "no-such-dir"))
    except SandboxError as exc:
        _check("no-such-dir" in str(exc), 'expected "no-such-dir" in str(exc)')
    else:
        raise AssertionError("a missing workspace was accepted")


def check_backend_failure_is_a_sandbox_error(h: Harness) -> None:
    """A sandbox whose machinery dies raises SandboxError, never returns a result."""
    with h.sandbox() as sb:
        h.break_backend(sb)
        for _ in range(2):
            try:
                result = sb.exec("echo alive")
            except SandboxError:
                continue
            raise AssertionError(f"a dead sandbox answered: {result}")


# -- attacks ------------------------------------------------------------------------------------
def attack_fork_bomb(h: Harness) -> None:
    """The classic bomb backgrounds itself: the command returns, the bomb is swept away.

    If the bomb dies out by itself before the sandbox looks, the command ends with no cause;
    either way nothing of the bomb may be left running for the next command."""
    with h.sandbox(pids=64) as sb, _host_untouched(h, sb):
        idle = sb.exec(COUNT_PROCESSES, timeout=10).output
        result, _ = _timed(sb, ":(){ :|:& };:", timeout=10)
        _check(result.cause in ("background", "pids", None), result)
        left = sb.exec(COUNT_PROCESSES, timeout=10)
        _check(left.ok and left.cause is None and left.output == idle, (result, left, idle))


def attack_relay_left_running(h: Harness) -> None:
    """A relay: each process starts the next and exits at once, so the live pids churn.

    One look at /proc can list only pids gone by the time they are read and miss their
    children; this is how a backgrounded bomb once slipped past (CI, stop 13). The sandbox
    must still see the relay, name it, and sweep it, every time."""
    with h.sandbox() as sb, _host_untouched(h, sb):
        idle = sb.exec(COUNT_PROCESSES, timeout=10).output
        for attempt in range(20):
            result, elapsed = _timed(sb, "relay() { relay & }; relay", timeout=10)
            _check(result.cause == "background" and elapsed < 2, (attempt, result))
            left = sb.exec(COUNT_PROCESSES, timeout=10)
            _check(left.ok and left.cause is None and left.output == idle, (attempt, left, idle))


def attack_fork_bomb_held(h: Harness) -> None:
    """A bomb the command waits on: the process cap is hit, and the command killed for it."""
    with h.sandbox(pids=64) as sb, _host_untouched(h, sb):
        result, _ = _timed(sb, "bomb() { bomb | bomb & }; bomb; sleep 30", timeout=10)
        _check(result.cause == "pids" and not result.ok, result)


def attack_endless_output(h: Harness) -> None:
    with h.sandbox() as sb, _host_untouched(h, sb):
        result, _ = _timed(sb, "yes", timeout=1)
        _check(
            result.timed_out and result.truncated and result.cause == "timeout",
            'expected result.timed_out and result.truncated and result.cause == "timeout"',
        )
        _equal(len(result.output), h.limits.output_bytes)


def attack_huge_file(h: Harness) -> None:
    cap = 16 * 1024 * 1024
    with h.sandbox(file_bytes=cap) as sb, _host_untouched(h, sb):
        result, _ = _timed(sb, "head -c 10G /dev/zero > big.bin", timeout=20)
        _check(result.cause == "file_size" and not result.ok, result)
        _check(
            int(sb.exec("stat -c %s big.bin").output) <= cap,
            'expected int(sb.exec("stat -c %s big.bin").output) <= cap',
        )


def attack_sleep_forever(h: Harness) -> None:
    with h.sandbox() as sb, _host_untouched(h, sb):
        result, _ = _timed(sb, "sleep infinity", timeout=1)
        _check(
            result.timed_out and result.cause == "timeout" and not result.ok,
            'expected result.timed_out and result.cause == "timeout" and not result.ok',
        )


def attack_ignores_sigterm(h: Harness) -> None:
    program = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)"
    with h.sandbox() as sb, _host_untouched(h, sb):
        result, _ = _timed(sb, f"trap '' TERM; python3 -c '{program}' & (trap '' TERM; sleep 1000)", timeout=1)
        _check(
            result.timed_out and result.cause == "timeout", 'expected result.timed_out and result.cause == "timeout"'
        )


def attack_background_left_running(h: Harness) -> None:
    with h.sandbox() as sb, _host_untouched(h, sb):
        result, elapsed = _timed(
            sb, "nohup sleep 1000 >/dev/null 2>&1 & (setsid sleep 1000 &); disown -a; echo started", timeout=10
        )
        _check(
            result.output == "started\n" and result.cause == "background" and elapsed < 2,
            'expected result.output == "started\\n" and result.cause == "background" and elapsed < 2',
        )


def attack_network(h: Harness) -> None:
    with socket.socket() as server:  # a service on the host's loopback
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        program = (
            "import socket\n"
            "for host in ('1.1.1.1', '127.0.0.1', '10.0.2.2'):\n"
            "    try:\n"
            f"        socket.create_connection((host, {port} if host == '127.0.0.1' else 80), timeout=2); print('open', host)\n"
            "    except OSError as exc:\n"
            "        print('blocked', host, exc)\n"
        )
        with h.sandbox() as sb, _host_untouched(h, sb):
            sb.write_file("/tmp/net.py", program)
            result, _ = _timed(sb, "python3 /tmp/net.py; getent hosts example.com || echo no-dns", timeout=15)
        server.setblocking(False)
        try:
            server.accept()
        except BlockingIOError:
            pass  # nobody connected
        else:
            raise AssertionError("the sandbox reached a service on the host's loopback")
    _check("open" not in result.output and "no-dns" in result.output, result.output)


def attack_read_host_files(h: Harness) -> None:
    with h.sandbox() as sb, _host_untouched(h, sb):
        secret = h.tmp / "host-sentinel" / "secret.txt"
        result, _ = _timed(sb, f"cat {secret} /etc/shadow /root/.bashrc 2>&1; ls /home /root /work 2>&1", timeout=10)
        _check("host secret" not in result.output, 'expected "host secret" not in result.output')
        _check(not sb.exec(f"test -e {h.tmp}").ok, "the host's scratch directory is visible")
        _check(not sb.exec("test -r /etc/shadow").ok, 'expected not sb.exec("test -r /etc/shadow").ok')


def attack_docker_socket(h: Harness) -> None:
    program = (
        "import socket\n"
        "for path in ('/var/run/docker.sock', '/run/docker.sock', '/run/containerd/containerd.sock'):\n"
        "    try:\n"
        "        s = socket.socket(socket.AF_UNIX); s.connect(path); print('open', path)\n"
        "    except OSError as exc:\n"
        "        print('blocked', path, exc.strerror)\n"
    )
    with h.sandbox() as sb, _host_untouched(h, sb):
        sb.write_file("/tmp/sock.py", program)
        result, _ = _timed(sb, "python3 /tmp/sock.py", timeout=10)
        _check("open" not in result.output and result.output.count("blocked") == 3, result.output)


def attack_write_outside_workdir(h: Harness) -> None:
    marker = f"escape-{uuid.uuid4().hex[:8]}"
    targets = ["/", "/etc/", "/usr/", "/usr/local/bin/", "/opt/", "/var/", f"{h.tmp}/"]
    with h.sandbox() as sb, _host_untouched(h, sb):
        for target in targets:
            result, _ = _timed(sb, f"echo x > {target}{marker} 2>&1", timeout=10)
            if result.ok:  # some roots are the sandbox's own (never the host's): gone with it
                sb.exec(f"rm -f {target}{marker}")
        _check(sb.exec(f"echo x > /tmp/{marker}").ok, "the private /tmp is not writable")
    for target in targets + ["/tmp/"]:
        _check(not Path(f"{target}{marker}").exists(), f"the sandbox wrote {target}{marker} on the host")


def attack_closes_stdout_early(h: Harness) -> None:
    with h.sandbox() as sb, _host_untouched(h, sb):
        result, elapsed = _timed(sb, "exec 1>&- 2>&-; sleep 0.3; exit 4", timeout=5)
        _check(result.exit_code == 4 and elapsed < 2, "expected result.exit_code == 4 and elapsed < 2")
        result, _ = _timed(sb, "python3 -c 'import os, time; os.close(1); os.close(2); time.sleep(0.2)'; echo after", 5)
        _equal(result.output, "after\n")
        _equal(sb.exec("echo visible").output, "visible\n")


def attack_binary_output(h: Harness) -> None:
    with h.sandbox() as sb, _host_untouched(h, sb):
        result, _ = _timed(sb, r"head -c 100000 /dev/urandom; printf '\x00\xff\xfe tail'", timeout=10)
        _check(
            isinstance(result.output, str) and result.truncated,
            "expected isinstance(result.output, str) and result.truncated",
        )
        _check(
            len(result.output.encode("utf-8", "surrogatepass")) >= 1000,
            'expected len(result.output.encode("utf-8", "surrogatepass")) >= 1000',
        )
        result = sb.exec(r"printf '\xff\xfeok\x00end'")
        _check(
            result.output.endswith("ok\x00end") and "\ufffd" in result.output,
            'expected result.output.endswith("ok\\x00end") and "\\ufffd" in result.output',
        )


def attack_memory_hog(h: Harness) -> None:
    with h.sandbox(memory_bytes=512 * 1024 * 1024) as sb, _host_untouched(h, sb):
        result, _ = _timed(sb, "python3 -c 'x = bytearray(4 * 1024**3)'", timeout=20)
        _check(not result.ok and "MemoryError" in result.output, result)


def attack_memory_split(h: Harness) -> None:
    """Memory spread over processes, each under the per-process limit (RLIMIT_AS): the cap
    is on the sandbox's total (docker: the container's memory cgroup; local: one of its own,
    `memory_cap`), so the out-of-memory killer ends the command (`cause="memory"`), and no
    more than the cap is ever held: of 8 holders of 96 MB under 256 MB, at most 2 live on."""
    hold = "import time; x = b'1' * (96 * 1024**2); time.sleep(4); print('survived', flush=True)"
    command = f'for i in 1 2 3 4 5 6 7 8; do python3 -c "{hold}" & done; s=0; for j in $(jobs -p); do wait $j || s=1; done; exit $s'
    with h.sandbox(memory_bytes=256 * 1024**2) as sb, _host_untouched(h, sb):
        if getattr(sb, "memory_cap", "cgroup") == "rlimit":
            # No total cap where the backend can make no cgroup (local, not root): it says so,
            # and each process is still held to the limit.
            result, _ = _timed(sb, "python3 -c \"x = b'1' * (300 * 1024**2)\"", timeout=20)
            _check(not result.ok and "MemoryError" in result.output, result)
            return
        result, _ = _timed(sb, command, timeout=30)
        _check(result.cause == "memory" and not result.ok and result.output.splitlines().count("survived") <= 2, result)


def attack_fill_tmp(h: Harness) -> None:
    """A full /tmp is the agent's doing: a command result with cause "disk", and `rm` frees it."""
    with h.sandbox(tmp_bytes=8 * 1024 * 1024) as sb:
        result, _ = _timed(sb, "head -c 64M /dev/zero > /tmp/fill", timeout=20)
        _check(result.cause == "disk" and not result.ok, result)
        _equal(sb.exec("echo alive").output, "alive\n")
        _check(
            sb.exec("rm -f /tmp/fill && head -c 1M /dev/zero > /tmp/small").ok,
            'expected sb.exec("rm -f /tmp/fill && head -c 1M /dev/zero > /tmp/small").ok',
        )
        sb.exec("rm -f /tmp/small")
        try:
            sb.write_file("/tmp/big.bin", b"\0" * (16 * 1024 * 1024))
        except OSError as exc:
            _check(exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space" in str(exc), exc)
        else:
            raise AssertionError("writing past a full /tmp did not fail")
        _equal(sb.exec("rm -f /tmp/big.bin; echo ok").output, "ok\n")


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def attack_fill_disk(h: Harness) -> None:
    """3 x 900 MB into a workspace capped at 256 MiB: cause "disk", the host's disks lose at
    most the quota (+ slack), the sandbox answers, and `rm` frees the space."""
    quota = 256 * 1024**2
    disks = [h.tmp, *h.disks]
    with h.sandbox(disk_bytes=quota, timeout_s=300) as sb:
        before = {d: _free(d) for d in disks}
        result = sb.exec("for i in 1 2 3; do head -c 900M /dev/zero > /workspace/f$i; done", timeout=300)
        after = {d: _free(d) for d in disks}
        for disk in disks:
            lost = before[disk] - after[disk]
            _check(lost <= quota + DISK_SLACK, f"{disk} lost {lost >> 20} MiB with a quota of {quota >> 20} MiB")
        _check(result.cause == "disk" and not result.ok and not result.timed_out, result)
        _equal(sb.exec("echo alive").output, "alive\n")
        _check(sb.exec("rm -f /workspace/f*").ok, 'expected sb.exec("rm -f /workspace/f*").ok')
        again = sb.exec("head -c 10M /dev/zero > /workspace/g && echo written", timeout=120)
        _check(again.output == "written\n" and again.cause is None, again)


# -- the supervisor is out of reach ---------------------------------------------------------
# A command's shell is a child of the supervisor: $PPID in the persistent shell (and in a
# fresh bash) is the supervisor, pid 1 or not.
FORGED = (
    '{"exit_code": 0, "output": "Zm9yZ2VkCg==", "truncated": false, "timed_out": false, "cause": null, "seconds": 0}'
)


def _supervisor_answers(sb: Sandbox) -> None:
    """The next replies are the commands' own (no forged or shifted reply)."""
    for word in ("first", "second"):
        result = sb.exec(f"echo {word}")
        _check(result.output == f"{word}\n" and result.ok, result)
    fresh = sb.exec("echo fresh", fresh=True)
    _check(fresh.output == "fresh\n" and fresh.ok, fresh)


def attack_kill_everything(h: Harness) -> None:
    """`kill -9 -1` kills the command's own processes, never the supervisor."""
    with h.sandbox() as sb, _host_untouched(h, sb):
        for command in ("kill -9 -1", "kill -9 -1; echo after", "(sleep 100 &); kill -KILL -1"):
            result, _ = _timed(sb, command, timeout=10)
            _check(not result.timed_out, (command, result))
            _supervisor_answers(sb)
        # A fresh bash's `kill -9 -1` reaches the persistent shell, which may not have died
        # yet when the fresh command is reported: the next command must still run, in a new
        # shell, every time (repeated: the window is a scheduling race).
        for _ in range(5):
            _timed(sb, "kill -9 -1", timeout=10)
            fresh = sb.exec("kill -9 -1; echo after", fresh=True)
            _check(not fresh.timed_out, fresh)
            _supervisor_answers(sb)


def attack_signal_supervisor(h: Harness) -> None:
    """STOP, TERM, INT, HUP, KILL ... to pid 1 and to the supervisor's own pid do nothing."""
    signals = "STOP TERM INT HUP QUIT USR1 USR2 ALRM SEGV ABRT PIPE KILL"
    command = f"for s in {signals}; do kill -$s 1 $PPID; done 2>/dev/null; echo survived"
    with h.sandbox() as sb, _host_untouched(h, sb):
        for fresh in (False, True):
            result, _ = _timed(sb, command, timeout=10) if not fresh else (sb.exec(command, fresh=True), 0)
            _check(result.output == "survived\n" and not result.timed_out, result)
            _supervisor_answers(sb)


PTRACE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for pid in sorted({int(a) for a in sys.argv[1:]}):
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        print('attached', pid)
        os.waitpid(pid, 0) if False else None
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
    else:
        print('denied', pid, os.strerror(ctypes.get_errno()))
    if libc.ptrace(0x4206, pid, 0, 0) == 0:  # PTRACE_SEIZE
        print('seized', pid)
        libc.ptrace(17, pid, 0, 0)
"""


def attack_ptrace_supervisor(h: Harness) -> None:
    with h.sandbox() as sb, _host_untouched(h, sb):
        sb.write_file("/tmp/pt.py", PTRACE)
        for fresh in (False, True):
            result = sb.exec("python3 /tmp/pt.py 1 $PPID", timeout=10, fresh=fresh)
            _check("attached" not in result.output and "seized" not in result.output, result)
            _check("denied" in result.output, result)
            _supervisor_answers(sb)


def attack_forge_reply(h: Harness) -> None:
    """Write a forged reply (and a forged request) to every fd of the supervisor: refused."""
    forge = (
        f"for f in /proc/1/fd/* /proc/$PPID/fd/*; do printf '%s\\n' '{FORGED}' > $f; "
        f"""printf '%s\\n' '{{"op": "write", "path": "/workspace/pwned", "data": "eA=="}}' > $f; done 2>/dev/null; """
        "echo done"
    )
    with h.sandbox() as sb, _host_untouched(h, sb):
        for fresh in (False, True):
            result = sb.exec(forge, timeout=10, fresh=fresh)
            _check(result.output == "done\n", result)
            _supervisor_answers(sb)
            _check(not sb.exec("test -e /workspace/pwned").ok, "an injected request ran")


def attack_write_supervisor_memory(h: Harness) -> None:
    program = (
        "import os\n"
        "for pid in sorted({1, os.getppid()}):\n"
        "    for name in ('mem', 'environ', 'oom_score_adj'):\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/{name}', 'r+b', buffering=0) as f:\n"
        "                f.seek(0x400000 if name == 'mem' else 0); f.write(b'-1000' if name == 'oom_score_adj' else b'x')\n"
        "            print('wrote', pid, name)\n"
        "        except OSError as exc:\n"
        "            print('refused', pid, name, exc.strerror)\n"
    )
    with h.sandbox() as sb, _host_untouched(h, sb):
        sb.write_file("/tmp/mem.py", program)
        result = sb.exec("python3 /tmp/mem.py", timeout=10)
        _check("wrote" not in result.output and "refused" in result.output, result)
        _supervisor_answers(sb)


def attack_planted_symlinks(h: Harness) -> None:
    """Symlinks where the supervisor kept its state and where the host writes: the host's
    file operations go only where the agent could write itself, never into the channel."""
    target = "/etc/planted-by-supervisor"
    with h.sandbox() as sb, _host_untouched(h, sb):
        agent_can = sb.exec(f"touch {target} 2>/dev/null && rm -f {target}").ok
        sb.exec(
            f"mkdir -p /tmp/.sandbox && ln -sf {target} /tmp/.sandbox/command && ln -sf {target} /tmp/.sandbox/restore; "
            f"ln -s {target} /workspace/link.txt; ln -s /etc /workspace/etcdir; ln -s /proc/self/fd/1 /workspace/out.txt; "
            "ln -s /proc/self/fd/0 /workspace/in.txt; mkfifo /workspace/fifo; export KEEP=1"
        )
        _check(
            sb.exec("sleep 10", timeout=0.5).timed_out, 'expected sb.exec("sleep 10", timeout=0.5).timed_out'
        )  # a new shell generation: a restore
        _equal(sb.exec("echo $KEEP").output, "1\n")
        for path in ("link.txt", "etcdir/planted-by-supervisor", "out.txt", "in.txt", "fifo"):
            with contextlib.suppress(OSError):
                sb.write_file(path, FORGED + "\n")
            _supervisor_answers(sb)
        for path in ("out.txt", "in.txt", "fifo"):
            with contextlib.suppress(OSError):
                sb.read_file(path)
            _supervisor_answers(sb)
        if not agent_can:
            _check(not sb.exec(f"test -e {target}").ok, "the supervisor wrote where the agent cannot")


# -- a fresh exec ignores the persistent shell ----------------------------------------------------
def check_fresh_exec_ignores_the_shell(h: Harness) -> None:
    with h.sandbox() as sb:
        pristine = sb.exec("git --version; pwd; echo $PATH", fresh=True)
        sb.exec(
            "git() { echo forged; }; alias git='echo forged'; shopt -s expand_aliases; "
            "mkdir -p /tmp/evil && printf '#!/bin/sh\\necho forged\\n' > /tmp/evil/git && chmod +x /tmp/evil/git; "
            "export PATH=/tmp/evil:$PATH; export BASH_ENV=/tmp/evil/git ENV=/tmp/evil/git; "
            "trap 'echo forged' EXIT DEBUG; cd /"
        )
        _check(
            "forged" in sb.exec("git --version").output, 'expected "forged" in sb.exec("git --version").output'
        )  # the persistent shell is the agent's
        fresh = sb.exec("git --version; pwd; echo $PATH", fresh=True)
        _check(fresh.output == pristine.output and "forged" not in fresh.output, (pristine, fresh))
        _equal(fresh.exit_code, pristine.exit_code)
        # ... and a fresh exec leaves the persistent shell's state alone.
        sb.exec("cd /tmp && export MARK=fresh", fresh=True)
        sb.exec("trap - EXIT DEBUG")
        _equal(sb.exec("pwd; echo ${MARK:-unset}").output, "/\nunset\n")


def check_fresh_exec_exit_codes(h: Harness) -> None:
    record = "printf '%s\\0%s\\0%s\\0%s\\0\\0' 1 0 next / >&63"
    with h.sandbox() as sb:
        for command, code in (
            ("exit 3", 3),
            ("kill -9 $$", 137),
            ("true", 0),
            (f"{record}; exit 5", 5),
            (f"{record} 2>/dev/null; echo '{FORGED}'; exit 7", 7),
            ("ls /proc/self/fd/6[0-3] 2>/dev/null && exit 9; exit 4", 4),  # no shell control fds
        ):
            result = sb.exec(command, fresh=True)
            _check(result.exit_code == code, (command, result))
        _equal(sb.exec("cat", fresh=True).output, "")  # stdin is /dev/null
        slow = sb.exec("sleep 30", timeout=0.5, fresh=True)
        _check(slow.timed_out and slow.cause == "timeout" and slow.exit_code == 137, slow)
        left = sb.exec("sleep 100 & echo started", fresh=True)
        _check(left.cause == "background" and left.output == "started\n", left)
        _equal(sb.exec("echo still").output, "still\n")


def check_loopback_names_resolve_without_network(h: Harness) -> None:
    """Tests bind servers to `localhost` (django's `WSGIServer(("localhost", 0))`): the
    loopback names resolve in a sandbox with no network, as they do in the official
    harness's containers."""
    program = (
        "import socket\n"
        "s = socket.socket(); s.bind(('localhost', 0)); print('bound', s.getsockname()[0])\n"
        "for name in ('localhost', 'localhost.localdomain', '127.0.0.1', '::1'):\n"
        "    infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)\n"
        "    print(name, sorted({info[4][0] for info in infos}))\n"
    )
    with h.sandbox() as sb:
        sb.write_file("/tmp/loopback.py", program)
        result = sb.exec("python3 /tmp/loopback.py")
    _equal(
        result.output,
        "bound 127.0.0.1\n"
        "localhost ['127.0.0.1', '::1']\n"
        "localhost.localdomain ['127.0.0.1', '::1']\n"
        "127.0.0.1 ['127.0.0.1']\n"
        "::1 ['::1']\n",
    )


CHECKS: dict[str, Callable[[Harness], None]] = {
    name.removeprefix("check_"): fn for name, fn in globals().items() if name.startswith("check_")
}
ATTACKS: dict[str, Callable[[Harness], None]] = {
    name.removeprefix("attack_"): fn for name, fn in globals().items() if name.startswith("attack_")
}


def run_checks(harness: Harness) -> dict[str, str]:
    """Run every check and attack; the failures, by name (empty: the backend conforms)."""
    failures = {}
    for name, check in {**CHECKS, **{f"attack_{k}": v for k, v in ATTACKS.items()}}.items():
        try:
            check(harness)
        except Exception as exc:  # noqa: BLE001 - report every failure, not just the first
            failures[name] = f"{type(exc).__name__}: {exc}"
            logger.warning("conformance: %s failed: %s", name, failures[name])
        else:
            logger.debug("conformance: %s passed", name)
    return failures
