"""The process that lives inside a sandbox and runs its commands (stdlib only).

It is the sandbox's one long-lived process. The host sends one JSON request per line on
stdin and reads one JSON response per line on stdout.

Commands run in one persistent bash (a "shell generation") that the supervisor started:
spawning `bash -c` per command costs a fork+exec and a bash start-up (~4 ms); evaluating
the command in a running shell costs a pipe round trip (~0.2 ms). The shell runs a small
loop (`SHELL_LOOP`): it reads a sequence number from a control pipe, sources the command
file, and writes a record (sequence number, exit status, cwd, `export -p`) to a second
control pipe. So `cd`, `export`, functions and aliases carry over as in one shell. (The
command is `eval`ed from a file, not sourced, so that errors read "bash: ..." as with
`bash -c`; the shell reads a regular file in blocks, a pipe byte by byte.)

The supervisor, not the shell, enforces the limits, because the shell itself runs
untrusted code:
- timeout: at the deadline every process in the sandbox but the supervisor is killed with
  `kill(-1, SIGKILL)`. In a pid namespace that is one atomic sweep that no forking process
  can outrun; the shell dies with it and a new generation is started from the last
  recorded cwd and environment.
- nothing outlives its command: after the record arrives, any process other than the
  shell (a `cmd &`, a daemon that double-forked) gets the same sweep. The supervisor
  first stops everything (`kill(-1, SIGSTOP)`) and only then looks: left running, a
  backgrounded bomb churns faster than /proc can be read, and one look could miss it.
- process count: the backend caps it (RLIMIT_NPROC under an unprivileged uid, or a pids
  cgroup); a watchdog here sees the cap being reached and sweeps, naming the cause "pids".
- output: the first `output_bytes` are kept; the rest is drained and dropped.
- storage: after each command a full /tmp or workdir is reported as an infrastructure
  error ("enospc"), never as a command result.
A command that kills, replaces (`exec`) or exits the shell just ends that generation.

Runs under the sandbox's own python3 (the host's for the local backend, the image's for
docker), so it must stay compatible with Python 3.8+ and import nothing outside the stdlib.
It must be pid 1 or 2 of its own pid namespace: `kill(-1)` anywhere else would hit the host.
"""

import base64
import contextlib
import errno
import json
import os
import resource
import select
import signal
import sys
import time

STATE_DIR = "/tmp/.sandbox"
COMMAND_FILE = STATE_DIR + "/command"
RESTORE_FILE = STATE_DIR + "/restore"
# The shell's view of its pipes: commands inherit them, so they sit far from 0-9 where
# scripts put their own redirections.
OUT_FD, CTL_IN_FD, CTL_OUT_FD = 61, 62, 63
# Builtins only: a subshell or external program here would cost a fork per command.
SHELL_LOOP = r"""
__sb_report() {
  { printf '%s\0%s\0%s\0%s\0' "$__sb_n" "$1" "$2" "$PWD"; export -p; printf '\0'; } >&63
}
if [ -n "$1" ]; then . "$1" >/dev/null 2>&1; fi
set --
__sb_n=0
trap '__sb_report $? exit' EXIT
while read -r __sb_n <&62; do
  IFS= read -r -d '' __sb_command < /tmp/.sandbox/command
  eval "$__sb_command"
  __sb_report $? next
  exec 0</dev/null 1>&61 2>&61
done
"""
RECORD_FIELDS = 5
WATCH_EVERY_S = 0.02
WATCH_BUSY_S = 0.002
KILL_SWEEP_S = 3.0
# Less than this free in /tmp or the workdir after a command means the sandbox's storage
# is full: the command's result cannot be trusted.
MIN_FREE_BYTES = 128 * 1024


class Shell:
    """One generation of the persistent bash and the three pipes to it."""

    def __init__(self, pid, ctl_in, ctl_out, out):
        self.pid, self.ctl_in, self.ctl_out, self.out = pid, ctl_in, ctl_out, out
        self.status = None  # waitpid status once it has exited
        self.seq = 0

    def close(self):
        for fd in (self.ctl_in, self.ctl_out, self.out):
            with contextlib.suppress(OSError):
                os.close(fd)


class Supervisor:
    def __init__(self, config):
        self.workdir = config["workdir"]
        with contextlib.suppress(OSError):  # an image without the workdir: make it, if allowed
            os.makedirs(self.workdir, exist_ok=True)
        # docker: the image's ENV (os.environ here) under the sandbox's own variables.
        self.env = dict(os.environ, **config["env"]) if config.get("inherit_env") else config["env"]
        self.limits = config["limits"]
        self.bash = _which("bash", self.env.get("PATH", "/usr/bin:/bin"))
        if self.bash is None:
            raise SystemExit("sandbox supervisor: no bash on PATH " + self.env.get("PATH", ""))
        state = config.get("state") or {}
        self.cwd = state.get("cwd") or self.workdir
        self.exports = base64.b64decode(state["env"]) if state.get("env") else None
        self.shell = None
        self.oom_kills = _oom_kills()

    # -- shell generations --------------------------------------------------------------
    def spawn(self):
        """Start a shell generation from the last recorded cwd and exports."""
        _makedirs(STATE_DIR)
        restore = ""
        if self.exports is not None:
            with open(RESTORE_FILE, "wb") as f:
                f.write(self.exports)
            restore = RESTORE_FILE
        ctl_in_r, ctl_in_w = os.pipe()
        ctl_out_r, ctl_out_w = os.pipe()
        out_r, out_w = os.pipe()
        # Restoring: start from PATH alone, so that variables unset before are not revived.
        env = {"PATH": self.env.get("PATH", "/usr/bin:/bin")} if restore else dict(self.env)
        pid = os.fork()
        if pid == 0:  # the child: becomes bash; must never return into the supervisor
            try:
                os.setsid()  # `kill 0` in a command must not reach the supervisor
                # Python ignores these, and ignored signals survive exec: commands must see
                # SIGPIPE (`yes | head`) and SIGXFSZ (the file size limit) as any shell does.
                for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ"):
                    if hasattr(signal, name):
                        signal.signal(getattr(signal, name), signal.SIG_DFL)
                devnull = os.open("/dev/null", os.O_RDONLY)
                os.dup2(devnull, 0)
                for target in (1, 2, OUT_FD):
                    os.dup2(out_w, target)
                os.dup2(ctl_in_r, CTL_IN_FD)
                os.dup2(ctl_out_w, CTL_OUT_FD)
                os.closerange(3, OUT_FD)
                os.closerange(CTL_OUT_FD + 1, 1024)
                _set_rlimits(self.limits)
                try:  # the out-of-memory killer takes a command before the supervisor
                    with open("/proc/self/oom_score_adj", "w") as f:
                        f.write("1000")
                except OSError:
                    pass
                for cwd in (self.cwd, self.workdir, "/"):
                    try:
                        os.chdir(cwd)
                        break
                    except OSError:
                        continue
                args = [self.bash, "--noprofile", "--norc", "-c", SHELL_LOOP, "bash"]
                os.execve(self.bash, args + ([restore] if restore else []), env)
            except BaseException as exc:  # noqa: BLE001 - report anything, then die
                os.write(2, (f"sandbox supervisor: cannot start bash: {exc}\n").encode())
            os._exit(127)
        for fd in (ctl_in_r, ctl_out_w, out_w):
            os.close(fd)
        os.set_blocking(out_r, False)
        os.set_blocking(ctl_out_r, False)
        self.shell = Shell(pid, ctl_in_w, ctl_out_r, out_r)

    def ensure_shell(self):
        if self.shell is not None and self.shell.status is None:
            self.reap()
        if self.shell is not None and self.shell.status is not None:
            self.shell.close()
            self.shell = None
        if self.shell is None:
            self.spawn()

    def reap(self):
        """Collect every exited child (the supervisor is their subreaper or pid 1)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.shell is not None and pid == self.shell.pid:
                self.shell.status = status

    def others(self):
        """Live processes in the sandbox other than the supervisor, pid 1 and the shell."""
        keep = {1, os.getpid()}
        if self.shell is not None and self.shell.status is None:
            keep.add(self.shell.pid)
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in keep:
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue  # already gone
            if state not in (b"Z", b"X"):
                found.append(int(name))
        return found

    def freeze(self):
        """Stop every process in the sandbox but this one, so that one look at /proc is conclusive.

        What a command leaves behind may churn: a backgrounded fork bomb's processes each fork
        and exit, so a look at /proc can list only pids that are gone by the time they are read
        and miss their children, born after the listing passed. `kill(-1)` reaches a fork in
        flight too (the fork restarts, or its child is born with the signal pending), so once it
        returns no new process can start running: the population only shrinks."""
        with contextlib.suppress(ProcessLookupError, PermissionError):  # nothing to stop
            os.kill(-1, signal.SIGSTOP)

    def thaw(self):
        """Let the shell, the only process a clean look leaves, go on after `freeze`."""
        if self.shell is not None and self.shell.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.shell.pid, signal.SIGCONT)

    def sweep(self):
        """Kill every process in the sandbox but this one (the shell included)."""
        stop = time.monotonic() + KILL_SWEEP_S
        while time.monotonic() < stop:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass  # nothing left to signal
            except PermissionError:
                pass
            self.reap()
            if not self.others() and (self.shell is None or self.shell.status is not None):
                return
            time.sleep(0.002)
        raise RuntimeError(f"processes survived {KILL_SWEEP_S:.0f} s of SIGKILL")

    # -- one command ---------------------------------------------------------------------
    def run(self, command, timeout):
        self.ensure_shell()
        shell = self.shell
        _drain(shell.out, None)  # anything printed between commands belongs to none
        try:
            with open(COMMAND_FILE, "wb") as f:
                f.write(command.encode("utf-8", "surrogateescape") + b"\n")
        except FileNotFoundError:  # a command removed /tmp/.sandbox
            _makedirs(STATE_DIR)
            with open(COMMAND_FILE, "wb") as f:
                f.write(command.encode("utf-8", "surrogateescape") + b"\n")
        shell.seq += 1
        start = time.monotonic()
        deadline = start + timeout
        output = Output(self.limits["output_bytes"])
        record, cause, timed_out = None, None, False
        control = b""
        try:
            os.write(shell.ctl_in, b"%d\n" % shell.seq)
        except BrokenPipeError:
            self.reap()
        next_watch = start + WATCH_EVERY_S
        open_fds = [shell.out, shell.ctl_out]
        while record is None:
            now = time.monotonic()
            if now >= deadline:
                timed_out, cause = True, "timeout"
                break
            ready, _, _ = select.select(open_fds, [], [], max(0.0, min(deadline, next_watch) - now))
            if shell.out in ready and _drain(shell.out, output):
                open_fds.remove(shell.out)  # every writer is gone
            if shell.ctl_out in ready:
                chunk = _read(shell.ctl_out)
                if chunk == b"":
                    open_fds.remove(shell.ctl_out)  # the shell and all it started are gone
                control += chunk or b""
                record = _parse_record(control, shell.seq)
            if record is None and time.monotonic() >= next_watch:
                self.reap()
                if shell.status is not None:
                    break  # the shell died without a record: killed, or `exec`ed away
                count = _count_processes()
                if count >= self.limits["pids"]:
                    cause = "pids"
                    break
                # Near the cap, look often: a bomb's processes hover there while their
                # forks are refused, and a sample must catch them at it.
                busy = count * 2 >= self.limits["pids"]
                next_watch = time.monotonic() + (WATCH_BUSY_S if busy else WATCH_EVERY_S)
        if record is not None and record["kind"] == "exit":
            _wait_exit(shell.pid, self)
        if timed_out or cause == "pids":
            self.sweep()
        else:
            self.freeze()
            left = self.others()
            if left:  # something the command started is still running: it goes too
                if len(left) + 3 >= self.limits["pids"]:
                    cause = "pids"  # e.g. a fork bomb that put itself in the background
                else:
                    cause = "background"
                self.sweep()
            else:
                self.thaw()
        self.reap()
        _drain(shell.out, output)  # what the killed processes wrote before they died
        if record is not None:
            self.cwd, self.exports = record["cwd"], record["env"]
            exit_code = record["rc"]
        elif shell.status is not None and not timed_out and cause is None:
            exit_code = _exit_code(shell.status)
        else:
            exit_code = 128 + signal.SIGKILL
        if cause in (None, "background"):
            cause = self.cause_of(exit_code) or cause
        full = _full_storage([self.workdir, "/tmp"])
        result = {
            "exit_code": exit_code,
            "output": base64.b64encode(output.data()).decode(),
            "truncated": output.truncated,
            "timed_out": timed_out,
            "cause": cause,
            "seconds": time.monotonic() - start,
        }
        if full:
            return {
                "error": "sandbox storage full: {} after the command (output: {!r})".format(
                    full, output.data()[-400:].decode("utf-8", "replace")
                ),
                "kind": "enospc",
            }
        return result

    def cause_of(self, exit_code):
        if exit_code == 128 + signal.SIGXFSZ:
            return "file_size"
        if self.oom_kills is not None:
            # Any process of the command may have been the victim, not just the last one.
            kills = _oom_kills()
            if kills is not None and kills > self.oom_kills:
                self.oom_kills = kills
                return "memory"
        return None

    def state(self):
        return {
            "cwd": self.cwd,
            "env": base64.b64encode(self.exports).decode() if self.exports is not None else None,
        }


class Output:
    """The first `cap` bytes of a command's output; the rest is counted and dropped."""

    def __init__(self, cap):
        self.cap, self.kept, self.size = cap, [], 0

    def add(self, chunk):
        if self.size < self.cap:
            self.kept.append(chunk[: self.cap - self.size])
        self.size += len(chunk)

    @property
    def truncated(self):
        return self.size > self.cap

    def data(self):
        return b"".join(self.kept)


def _read(fd):
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None


def _drain(fd, output):
    """Read what the pipe holds now (non-blocking); drop it when `output` is None.

    True when the pipe is at end of file (no writer is left)."""
    while True:
        chunk = _read(fd)
        if chunk is None:
            return False
        if chunk == b"":
            return True
        if output is not None:
            output.add(chunk)


def _parse_record(buffer, seq):
    """The shell's record for command `seq`, once all of it has arrived.

    Records are NUL-separated: seq, status, kind (next|exit), cwd, `export -p` text.
    """
    while buffer.count(b"\0") >= RECORD_FIELDS:
        parts = buffer.split(b"\0", RECORD_FIELDS)
        buffer = parts[RECORD_FIELDS]
        if parts[0] != str(seq).encode():
            continue  # a stale record (e.g. the EXIT trap of an older command)
        return {
            "rc": int(parts[1] or 0),
            "kind": parts[2].decode(),
            "cwd": parts[3].decode("utf-8", "surrogateescape"),
            "env": parts[4],
        }
    return None


def _wait_exit(pid, supervisor, limit_s=1.0):
    """Let a shell that ran `exit` finish exiting (its EXIT trap already reported)."""
    stop = time.monotonic() + limit_s
    while supervisor.shell.status is None and time.monotonic() < stop:
        supervisor.reap()
        time.sleep(0.001)


def _exit_code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _count_processes():
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def _full_storage(paths):
    for path in paths:
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        if st.f_blocks and st.f_bavail * st.f_frsize < MIN_FREE_BYTES:
            return f"{path} has {st.f_bavail * st.f_frsize} bytes free (ENOSPC)"
        if st.f_files and st.f_favail == 0:
            return f"{path} has no free inodes (ENOSPC)"
    return None


def _oom_kills():
    """The cgroup's count of out-of-memory kills, where the sandbox can read it."""
    for path, key in (
        ("/sys/fs/cgroup/memory.events", "oom_kill"),
        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
    ):
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _set_rlimits(limits):
    pairs = [
        ("RLIMIT_AS", limits["memory_bytes"]),
        ("RLIMIT_FSIZE", limits["file_bytes"]),
        ("RLIMIT_NOFILE", limits["open_files"]),
        ("RLIMIT_CORE", 0),
    ]
    if limits.get("nproc"):
        # Counted per real uid on the whole host, and ignored for uid 0: the backend only
        # asks for it when the sandbox runs under a uid of its own.
        pairs.append(("RLIMIT_NPROC", limits["pids"]))
    for name, value in pairs:
        value = resource.RLIM_INFINITY if value is None else value
        resource.setrlimit(getattr(resource, name), (value, value))


def _which(name, path):
    for folder in path.split(":"):
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _makedirs(path):
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:  # a file where the directory should be
        os.unlink(path)
        os.makedirs(path)


def _path(path, workdir):
    return path if path.startswith("/") else os.path.join(workdir, path)


def _prctl(option, value):
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        return False


def _mount_overlay(spec, target):
    """Mount the sandbox's copy-on-write workspace (the local backend, before dropping root)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    # index/xino/redirect_dir/metacopy off: the upper directory must stay a self-contained
    # tree, because a fork copies it and stacks the copy as a lower layer of the child.
    data = "lowerdir={},upperdir={},workdir={},index=off,xino=off,redirect_dir=off,metacopy=off".format(
        ":".join(spec["lower"]),
        spec["upper"],
        spec["work"],
    )
    if libc.mount(b"overlay", target.encode(), b"overlay", 0, data.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount overlay on {target}: {os.strerror(err)}")


def _drop_privileges(uid, gid):
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # clears every capability


def _isolated():
    return os.getpid() in (1, 2)


def handle(supervisor, request):
    op = request["op"]
    if op == "exec":
        return supervisor.run(request["command"], request["timeout"])
    if op == "read":
        with open(_path(request["path"], supervisor.workdir), "rb") as f:
            return {"data": base64.b64encode(f.read()).decode()}
    if op == "write":
        path = _path(request["path"], supervisor.workdir)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(request["data"]))
        return {}
    if op == "state":
        return supervisor.state()
    return {"error": f"unknown op {op!r}", "kind": "protocol"}


def main():
    config = json.loads(sys.argv[1])
    out = sys.stdout
    if not _isolated():
        out.write(json.dumps({"error": "the supervisor needs its own pid namespace", "kind": "setup"}) + "\n")
        out.flush()
        return 2
    try:
        if config.get("overlay"):
            _mount_overlay(config["overlay"], config["workdir"])
        if config.get("uid") is not None:
            _drop_privileges(config["uid"], config["gid"])
        _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come here, to be swept and reaped
        # Commands see SIGPIPE as usual; the supervisor wants EPIPE instead.
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        supervisor = Supervisor(config)
        supervisor.spawn()
    except (OSError, SystemExit) as exc:
        out.write(json.dumps({"error": f"sandbox setup failed: {exc}", "kind": "setup"}) + "\n")
        out.flush()
        return 2
    out.write(json.dumps({"ready": True, "uid": os.getuid(), "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            response = handle(supervisor, request)
        except OSError as exc:
            response = {"error": f"{type(exc).__name__}: {exc}", "kind": "os", "errno": exc.errno}
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                response["kind"] = "enospc"
        except RuntimeError as exc:
            response = {"error": str(exc), "kind": "supervisor"}
        out.write(json.dumps(response) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
